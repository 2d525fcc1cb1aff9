"""The broker's view of its clients: channels, consumer and producer groups, queue locks and
the fenced queue grants. A pure core: no I/O, no tasks, the clock passed in."""

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.broker.client.consumer_manager import (
    CHANNEL_EXPIRED_TIMEOUT_MS,
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerGroupInfo,
    ConsumerIdsChangeListener,
    ConsumerManager,
    DefaultConsumerIdsChangeListener,
)
from aiorocketmq.broker.client.producer_manager import ProducerManager
from aiorocketmq.broker.client.queue_grants import (
    AcquireResult,
    Denied,
    Granted,
    QueueGrant,
    QueueGrantManager,
)
from aiorocketmq.broker.client.rebalance_lock_manager import (
    REBALANCE_LOCK_MAX_LIVE_MS,
    LockEntry,
    RebalanceLockManager,
)
from aiorocketmq.broker.client.subscription_data import SubscriptionData

__all__ = [
    "CHANNEL_EXPIRED_TIMEOUT_MS",
    "REBALANCE_LOCK_MAX_LIVE_MS",
    "AcquireResult",
    "Channel",
    "ClientChannelInfo",
    "ConsumerGroupEvent",
    "ConsumerGroupInfo",
    "ConsumerIdsChangeListener",
    "ConsumerManager",
    "DefaultConsumerIdsChangeListener",
    "Denied",
    "Granted",
    "LockEntry",
    "ProducerManager",
    "QueueGrant",
    "QueueGrantManager",
    "RebalanceLockManager",
    "SubscriptionData",
]
