"""The consumer's vocabulary: message model, where to start, listener statuses and contexts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import common_pb2

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
    "MessageModel",
    "MessageQueueListener",
]


class MessageModel(Enum):
    """CLUSTERING: each message to one consumer of the group; BROADCASTING: to every consumer."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"

    def to_proto(self) -> common_pb2.MessageModel:
        return common_pb2.CLUSTERING if self is MessageModel.CLUSTERING else common_pb2.BROADCASTING


class ConsumeFromWhere(Enum):
    """Where a queue with no committed offset starts (spec 5.3)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    def to_proto(self) -> common_pb2.ConsumeFromWhere:
        return {
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET: common_pb2.CONSUME_FROM_LAST_OFFSET,
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET: common_pb2.CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere.CONSUME_FROM_TIMESTAMP: common_pb2.CONSUME_FROM_TIMESTAMP,
        }[self]


# Short names, as users write them.
LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
TIMESTAMP = ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
CLUSTERING = MessageModel.CLUSTERING
BROADCASTING = MessageModel.BROADCASTING


class ConsumeConcurrentlyStatus(Enum):
    """What a concurrent listener answers for a batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(Enum):
    """What an orderly listener answers for a batch."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Passed to a concurrent listener: the queue, and the retry level it may set.

    ``delay_level_when_next_consume``: 0 lets the broker choose (3 + reconsume times), -1 sends
    a failed message straight to the dead-letter queue, N > 0 picks delay level N.
    ``ack_index``: on CONSUME_SUCCESS, messages after this index still count as failed.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Passed to an orderly listener."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


MessageListenerConcurrently = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], Awaitable[ConsumeConcurrentlyStatus]
]
MessageListenerOrderly = Callable[
    [list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus]
]


class MessageQueueListener(Protocol):
    """Told whenever a rebalance changes this consumer's queues of a topic."""

    def __call__(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...
