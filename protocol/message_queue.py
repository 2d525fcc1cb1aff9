"""``MessageQueue``: the unit of allocation, named by (topic, broker name, queue id).

Rules: immutable and hashable; ordered by topic, then broker name, then queue id (RocketMQ's
``compareTo``); ``str()`` is RocketMQ's ``toString`` exactly, because the consistent-hash
strategy hashes that string and every consumer must compute the same ring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["MessageQueue"]

_STR = re.compile(r"^MessageQueue \[topic=(.+), brokerName=(.+), queueId=(-?\d+)\]$")


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """A queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int

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
