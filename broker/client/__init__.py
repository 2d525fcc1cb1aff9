"""The broker's view of its clients: channels, consumer and producer groups, queue locks and
the fenced queue grants. A pure core: no I/O, no tasks, the clock passed in."""

from broker.client.channel import Channel
from broker.client.consumer_manager import (
    CHANNEL_EXPIRED_TIMEOUT_MS,
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerGroupInfo,
    ConsumerIdsChangeListener,
    ConsumerManager,
    DefaultConsumerIdsChangeListener,
)
from broker.client.producer_manager import ProducerManager
from broker.client.queue_grants import (
    AcquireResult,
    Denied,
    Granted,
    QueueGrant,
    QueueGrantManager,
)
from broker.client.rebalance_lock_manager import (
    REBALANCE_LOCK_MAX_LIVE_MS,
    LockEntry,
    RebalanceLockManager,
)
from broker.client.subscription_data import SubscriptionData

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
