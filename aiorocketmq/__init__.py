"""aiorocketmq: Apache RocketMQ's name server, broker and client protocol on asyncio.

The user API is here; the roles are subpackages (``aiorocketmq.broker``, ``.nameserver``,
``.consumer``, ``.producer``, ``.protocol``, ``.pipeline``) and the console tools live in
``aiorocketmq.cli``::

    from aiorocketmq import Message, Producer, PushConsumer

Names are loaded on first use, so ``import aiorocketmq.protocol`` does not pull in the
clients. The library logs through stdlib ``logging`` under the ``aiorocketmq`` logger and
configures nothing (see :mod:`aiorocketmq.logs`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from aiorocketmq.consumer.settings import (
        Handoff,
        LitePullConsumerSettings,
        PushConsumerSettings,
    )
    from aiorocketmq.consumer.types import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        MessageModel,
        MessageQueueListener,
    )
    from aiorocketmq.local_cluster import LocalCluster
    from aiorocketmq.producer.producer import Producer, SendResult, SendStatus
    from aiorocketmq.producer.selector import (
        MessageQueueSelector,
        SelectMessageQueueByHash,
        SelectMessageQueueByRandom,
    )
    from aiorocketmq.producer.settings import ProducerSettings
    from aiorocketmq.protocol.errors import MQError
    from aiorocketmq.protocol.message import Message, MessageExt
    from aiorocketmq.protocol.message_queue import MessageQueue

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "AllocateMachineRoomNearby",
            "AllocateMessageQueueAveragely",
            "AllocateMessageQueueAveragelyByCircle",
            "AllocateMessageQueueByConfig",
            "AllocateMessageQueueByMachineRoom",
            "AllocateMessageQueueConsistentHash",
            "AllocateMessageQueueStrategy",
        ],
        "aiorocketmq.consumer.allocate",
    ),
    "ClientConfig": "aiorocketmq.consumer.client_config",
    "LitePullConsumer": "aiorocketmq.consumer.lite_pull_consumer",
    "PushConsumer": "aiorocketmq.consumer.push_consumer",
    **dict.fromkeys(
        ["Handoff", "LitePullConsumerSettings", "PushConsumerSettings"],
        "aiorocketmq.consumer.settings",
    ),
    **dict.fromkeys(
        [
            "ConsumeConcurrentlyContext",
            "ConsumeConcurrentlyStatus",
            "ConsumeFromWhere",
            "ConsumeOrderlyContext",
            "ConsumeOrderlyStatus",
            "MessageModel",
            "MessageQueueListener",
        ],
        "aiorocketmq.consumer.types",
    ),
    "LocalCluster": "aiorocketmq.local_cluster",
    **dict.fromkeys(["Producer", "SendResult", "SendStatus"], "aiorocketmq.producer.producer"),
    "ProducerSettings": "aiorocketmq.producer.settings",
    **dict.fromkeys(
        ["MessageQueueSelector", "SelectMessageQueueByHash", "SelectMessageQueueByRandom"],
        "aiorocketmq.producer.selector",
    ),
    "MQError": "aiorocketmq.protocol.errors",
    **dict.fromkeys(["Message", "MessageExt"], "aiorocketmq.protocol.message"),
    "MessageQueue": "aiorocketmq.protocol.message_queue",
}

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
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "Handoff",
    "LitePullConsumer",
    "LitePullConsumerSettings",
    "LocalCluster",
    "MQError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueListener",
    "MessageQueueSelector",
    "Producer",
    "ProducerSettings",
    "PushConsumer",
    "PushConsumerSettings",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
]

assert sorted(_EXPORTS) == __all__


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aiorocketmq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
