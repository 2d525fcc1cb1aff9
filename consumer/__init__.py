"""The consumer client: push consumer, rebalance, strategies, offset stores."""

from consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from consumer.client_config import ClientConfig
from consumer.lite_pull_consumer import LitePullConsumer
from consumer.push_consumer import PushConsumer
from consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageModel,
    MessageQueueListener,
)
from protocol.message import MessageExt
from protocol.message_queue import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ClientConfig",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "LitePullConsumer",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueListener",
    "PushConsumer",
]
