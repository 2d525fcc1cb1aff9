"""Queue selection for producers (pure): round robin avoiding the last failed broker, and
selectors for ordered production by sharding key.

Rules: a ``TopicPublishInfo`` keeps the writable queues in RocketMQ's order and a counter that
starts at a random value; each selection takes the next queue, skipping queues of the broker
that just failed (and, with latency fault tolerance, brokers in their penalty window) when
another is available. ``SelectMessageQueueByHash`` maps a key to ``java_string_hash(key) mod
n`` so every producer process puts one key on one queue (Python's ``hash`` is salted per run).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from aiorocketmq.producer.fault import LatencyFaultTolerance
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.tags import java_string_hash

__all__ = [
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "TopicPublishInfo",
]


class MessageQueueSelector(Protocol):
    """Chooses the queue of a message (RocketMQ's ``MessageQueueSelector``)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


class SelectMessageQueueByHash:
    """Same key, same queue: ``abs(java_string_hash(str(arg))) % len(mqs)``."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[abs(java_string_hash(str(arg))) % len(mqs)]


class SelectMessageQueueByRandom:
    """Any queue."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return random.choice(list(mqs))


class TopicPublishInfo:
    """A topic's writable queues and the round-robin index over them."""

    def __init__(self, queues: list[MessageQueue], *, seed: int | None = None) -> None:
        self.message_queue_list = queues
        self._index = random.Random(seed).randrange(1 << 31)

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def _next(self) -> MessageQueue:
        self._index = (self._index + 1) & 0x7FFFFFFF
        return self.message_queue_list[self._index % len(self.message_queue_list)]

    def _first(self, accept: Callable[[MessageQueue], bool]) -> MessageQueue | None:
        for _ in range(len(self.message_queue_list)):
            mq = self._next()
            if accept(mq):
                return mq
        return None

    def select_one_message_queue(
        self,
        last_broker_name: str | None = None,
        *,
        fault: LatencyFaultTolerance | None = None,
        now_ms: int = 0,
    ) -> MessageQueue:
        """The next queue, avoiding ``last_broker_name`` (and faulty brokers) when possible."""
        if not self.message_queue_list:
            raise ValueError("the topic has no writable queue")
        if fault is not None:
            mq = self._first(
                lambda q: (
                    q.broker_name != last_broker_name and fault.is_available(q.broker_name, now_ms)
                )
            )
            if mq is not None:
                return mq
        if last_broker_name is not None:
            mq = self._first(lambda q: q.broker_name != last_broker_name)
            if mq is not None:
                return mq
        return self._next()
