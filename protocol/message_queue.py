"""``MessageQueue``: the unit of allocation, named by (topic, broker name, queue id).

Rules: immutable and hashable; ordered by topic, then broker name, then queue id (RocketMQ's
``compareTo``); ``str()`` is RocketMQ's ``toString`` exactly, because the consistent-hash
strategy hashes that string and every consumer must compute the same ring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["MessageQueue"]

_INTERNED: dict[tuple[str, str, int], MessageQueue] = {}
_STR = re.compile(r"^MessageQueue \[topic=(.+), brokerName=(.+), queueId=(-?\d+)\]$")


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """A queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int
    # The hash, computed once: queues are dict keys and set members on every rebalance pass
    # (4,096 of them per pass at the scale the benchmarks run).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.topic, self.broker_name, self.queue_id)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def interned(cls, topic: str, broker_name: str, queue_id: int) -> MessageQueue:
        """The one object of this process for that queue (routes build their queues with it):
        equal lists of queues then compare by identity, which the allocation cache relies on
        when a thousand consumers of one process ask it about the same queues."""
        key = (topic, broker_name, queue_id)
        mq = _INTERNED.get(key)
        if mq is None:
            mq = _INTERNED[key] = cls(topic, broker_name, queue_id)
        return mq

    def __str__(self) -> str:
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )

    def to_proto(self) -> common_pb2.MessageQueue:
        """The wire form."""
        return common_pb2.MessageQueue(
            topic=self.topic, broker_name=self.broker_name, queue_id=self.queue_id
        )

    @classmethod
    def from_proto(cls, mq: common_pb2.MessageQueue) -> MessageQueue:
        """Read the wire form."""
        return cls(mq.topic, mq.broker_name, mq.queue_id)

    @classmethod
    def parse(cls, text: str) -> MessageQueue | None:
        """The queue ``str()`` wrote (as traces record it), or None for anything else."""
        found = _STR.match(text)
        return None if found is None else cls(found[1], found[2], int(found[3]))
