"""The route-aware producer."""

from producer.producer import Producer, SendResult, SendStatus
from producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from protocol.message import Message

__all__ = [
    "Message",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
]
