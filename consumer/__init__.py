"""The consumer client: push consumer, rebalance, strategies, offset stores."""

from aiorocketmq.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.lite_pull_consumer import LitePullConsumer
from aiorocketmq.consumer.push_consumer import PushConsumer
from aiorocketmq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageModel,
    MessageQueueListener,
)
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue

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
