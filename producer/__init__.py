"""The route-aware producer."""

from aiorocketmq.producer.producer import Producer, SendResult, SendStatus
from aiorocketmq.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from aiorocketmq.protocol.message import Message

__all__ = [
    "Message",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
]
