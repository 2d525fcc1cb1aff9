"""Typed, documented settings of the consumers: one dataclass each, RocketMQ's names beside ours.

Every option says its type, unit and default, and the name RocketMQ's Java client gives it
(``DefaultMQPushConsumer`` / ``DefaultLitePullConsumer``). One spelling per unit: times are in
milliseconds and end in ``_ms``. Closed sets are enums (``MessageModel``, ``ConsumeFromWhere``,
``Handoff``).

A consumer takes a settings object, keyword arguments, or both (keywords win)::

    PushConsumer("G", ns, PushConsumerSettings(pull_batch_size=64))
    PushConsumer("G", ns, pull_batch_size=64, handoff="fenced")

Keyword names used before this module existed (``broker_suspend_max_time_millis``,
``pull_time_delay_mills_when_exception``, ...) are still accepted: :data:`LEGACY_NAMES` maps
them to the current field.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from aiorocketmq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.types import ConsumeFromWhere, MessageModel, MessageQueueListener
from aiorocketmq.protocol.options import build_options, same
from aiorocketmq.protocol.validators import check_group

__all__ = [
    "LEGACY_NAMES",
    "ConsumerSettings",
    "Handoff",
    "LitePullConsumerSettings",
    "PushConsumerSettings",
    "build_settings",
    "check_group_name",
]

INT_MAX = 2**31 - 1


class Handoff(Enum):
    """How a queue moves between two consumers of a group (docs/protocol.md)."""

    #: RocketMQ's client-side rebalance: during a move two consumers may pull one queue.
    CLASSIC = "classic"
    #: Ours: the broker grants each queue to one owner at a time, with an epoch.
    FENCED = "fenced"


def _thirty_minutes_ago() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 30 * 60))


E = TypeVar("E", bound=Enum)


def _enum_option(name: str, enum: type[E], value: object) -> E:
    """``value`` as a member of ``enum``: a member, or the name or value of one."""
    if isinstance(value, enum):
        return value
    for member in enum:
        if value in (member.name, member.value):
            return member
    choices = ", ".join(repr(m.value) for m in enum)
    raise ValueError(f"{name} must be one of {choices}, got {value!r}")


@dataclass(slots=True, kw_only=True)
class ConsumerSettings:
    """What both consumers share."""

    #: CLUSTERING (queues shared by the group) or BROADCASTING (every member reads every
    #: queue). RocketMQ: ``messageModel``. Default CLUSTERING.
    message_model: MessageModel = MessageModel.CLUSTERING
    #: Which queues are ours. RocketMQ: ``allocateMessageQueueStrategy``. Default AVG.
    allocate_strategy: AllocateMessageQueueStrategy = field(
        default_factory=AllocateMessageQueueAveragely
    )
    #: Where a group with no committed offset starts. RocketMQ: ``consumeFromWhere``.
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    #: ``yyyyMMddHHmmss`` for CONSUME_FROM_TIMESTAMP. RocketMQ: ``consumeTimestamp``.
    #: Default: half an hour before the consumer was created.
    consume_timestamp: str = field(default_factory=_thirty_minutes_ago)
    #: Part of the client id (``ip@instance``). RocketMQ: ``instanceName``. Default: the pid.
    instance_name: str | None = None
    #: The ip in the client id. RocketMQ: ``clientIP``. Default: this host's address.
    client_ip: str | None = None
    #: Messages asked for per pull (1..1024). RocketMQ: ``pullBatchSize``.
    pull_batch_size: int = 32
    #: Messages cached per queue before pulling pauses (1..65535).
    #: RocketMQ: ``pullThresholdForQueue``. Default 1000.
    pull_threshold_for_queue: int = 1000
    #: MiB of message bodies cached per queue before pulling pauses (1..1024).
    #: RocketMQ: ``pullThresholdSizeForQueue``. Default 100.
    pull_threshold_size_for_queue: int = 100
    #: Fewest messages a pull waits for, once the queue has one, before the broker answers
    #: (1..1024, capped at ``pull_batch_size``): fewer, fuller answers when the consumer keeps
    #: up. Not in RocketMQ (Kafka: ``fetch.min.bytes``, in messages). Default 1: at once.
    pull_min_batch_size: int = 1
    #: The longest a pull waits for ``pull_min_batch_size`` after its first message is there
    #: (ms): the latency it may add. Not in RocketMQ (Kafka: ``fetch.max.wait.ms``). Default 5.
    pull_max_wait_ms: int = 5
    #: How long the broker may hold a pull with nothing to answer (ms).
    #: RocketMQ: ``brokerSuspendMaxTimeMillis``. Default 15000 (push), 20000 (lite pull).
    broker_suspend_max_time_ms: int = 15_000
    #: The client's deadline of a suspended pull (ms); must exceed the broker's suspend time.
    #: RocketMQ: ``consumerTimeoutMillisWhenSuspend`` / ``consumerPullTimeoutMillis``.
    consumer_pull_timeout_ms: int = 30_000
    #: Pause before pulling a queue again after a failed pull (ms).
    #: RocketMQ: ``pullTimeDelayMillsWhenException``. Default 1000.
    pull_time_delay_ms_when_exception: int = 1_000
    #: ``Handoff.CLASSIC`` (RocketMQ's behaviour) or ``Handoff.FENCED`` (ours; no two owners).
    #: The strings "classic" and "fenced" are accepted. Not in RocketMQ.
    handoff: Handoff = Handoff.CLASSIC
    #: The client instance's timings (heartbeat, rebalance, persist intervals). Default:
    #: RocketMQ's. Shared by the consumers and producers with the same client id.
    client_config: ClientConfig | None = None
    #: BROADCASTING keeps offsets in files here. RocketMQ: ``rocketmq.client.localOffsetStoreDir``.
    #: Default ``~/.rocketmq_offsets``.
    offset_store_dir: Path | None = None
    #: Called with (topic, all queues, our queues) after each change of our queues.
    #: RocketMQ: ``messageQueueListener``.
    message_queue_listener: MessageQueueListener | None = None

    def ranges(self) -> list[tuple[str, int, int, int]]:
        """``(name, value, low, high)`` of each bounded option: ``checkConfig``'s ranges."""
        return [
            ("pull_batch_size", self.pull_batch_size, 1, 1024),
            ("pull_min_batch_size", self.pull_min_batch_size, 1, 1024),
            ("pull_max_wait_ms", self.pull_max_wait_ms, 0, INT_MAX),
            ("pull_threshold_for_queue", self.pull_threshold_for_queue, 1, 65535),
            ("pull_threshold_size_for_queue", self.pull_threshold_size_for_queue, 1, 1024),
            (
                "pull_time_delay_ms_when_exception",
                self.pull_time_delay_ms_when_exception,
                0,
                INT_MAX,
            ),
            ("broker_suspend_max_time_ms", self.broker_suspend_max_time_ms, 0, INT_MAX),
        ]

    def check(self) -> None:
        """RocketMQ's ``checkConfig``: every option in range, ``ValueError`` naming the first."""
        # Closed sets may be given by their names ("fenced", "CONSUME_FROM_FIRST_OFFSET"), as
        # on the command line; anything else is refused here, not at start().
        self.handoff = _enum_option("handoff", Handoff, self.handoff)
        self.message_model = _enum_option("message_model", MessageModel, self.message_model)
        self.consume_from_where = _enum_option(
            "consume_from_where", ConsumeFromWhere, self.consume_from_where
        )
        for name, value, lo, hi in self.ranges():
            if not lo <= value <= hi:
                raise ValueError(f"{name} out of range [{lo}, {hi}]: {value}")
        if self.consumer_pull_timeout_ms <= self.broker_suspend_max_time_ms:
            raise ValueError(
                "Long polling mode, the consumer consumer_pull_timeout_ms "
                f"({self.consumer_pull_timeout_ms}) must be greater than "
                f"broker_suspend_max_time_ms ({self.broker_suspend_max_time_ms})"
            )


@dataclass(slots=True, kw_only=True)
class PushConsumerSettings(ConsumerSettings):
    """``PushConsumer``'s options (RocketMQ's ``DefaultMQPushConsumer``)."""

    #: Listener calls running at once. RocketMQ: ``consumeThreadMax``. Default 20.
    consume_thread_max: int = 20
    #: Messages per listener call (1..1024). RocketMQ: ``consumeMessageBatchMaxSize``.
    consume_message_batch_max_size: int = 1
    #: Pause between two pulls of one queue (ms). RocketMQ: ``pullInterval``. Default 0.
    pull_interval_ms: int = 0
    #: Messages cached for all queues of a topic, split across them; -1 = off.
    #: RocketMQ: ``pullThresholdForTopic``.
    pull_threshold_for_topic: int = -1
    #: MiB cached for all queues of a topic, split across them; -1 = off.
    #: RocketMQ: ``pullThresholdSizeForTopic``.
    pull_threshold_size_for_topic: int = -1
    #: Largest offset span cached in one queue before pulling pauses (concurrent consumption).
    #: RocketMQ: ``consumeConcurrentlyMaxSpan``. Default 2000.
    consume_concurrently_max_span: int = 2000
    #: Concurrent: a listener call running longer than this has its messages sent back for a
    #: retry (10 s later) and let go, checked this often, so that one hung call cannot hold
    #: its queue's committed offset back for ever (ms). RocketMQ: ``consumeTimeout`` (in
    #: minutes). Default 15 min.
    consume_timeout_ms: int = 15 * 60_000
    #: Redeliveries before a message goes to the DLQ; -1 = 16 (concurrent) or unlimited
    #: (orderly). RocketMQ: ``maxReconsumeTimes``.
    max_reconsume_times: int = -1
    #: A queue not pulled for this long is dropped and taken again (ms).
    #: RocketMQ: ``pullExpiredTime`` (``PULL_MAX_IDLE_TIME``). Default 120000.
    pull_max_idle_time_ms: int = 120_000
    #: Delay of a new queue's first pull after the rebalance that added it (ms).
    #: RocketMQ: ``rebalance dispatch`` in ``dispatchPullRequest``. Default 500. Ours to set.
    rebalance_dispatch_delay_ms: int = 500
    #: After a rebalance changed our queues, renew the subscription's version and heartbeat
    #: every broker with it. RocketMQ: ``RebalancePushImpl.messageQueueChanged`` always does
    #: (True here does the same). Ours, by default, keeps the version (a new ``subscribe()``
    #: renews it and heartbeats) and heartbeats only when a broker of the new allocation has
    #: had none on its current channel (a broker new in the routes): otherwise the heartbeat
    #: tells a broker nothing it lacks, and in a group of 1,000 under AVG it was 4,000 RPCs
    #: per join, a third of the change's CPU.
    heartbeat_on_queue_change: bool = False
    #: Orderly: how long a queue waits after SUSPEND_CURRENT_QUEUE_A_MOMENT (ms).
    #: RocketMQ: ``suspendCurrentQueueTimeMillis``. Default 1000.
    suspend_current_queue_time_ms: int = 1_000
    #: Orderly: how often held locks are renewed (ms). RocketMQ: ``REBALANCE_LOCK_INTERVAL``.
    lock_interval_ms: int = 20_000
    #: Orderly: a lock older than this is considered lost (ms).
    #: RocketMQ: ``REBALANCE_LOCK_MAX_LIVE_TIME``. Default 30000.
    lock_max_live_ms: int = 30_000
    #: Orderly: a dropped queue still consuming is force-unlocked after this (ms).
    #: RocketMQ: ``UNLOCK_DELAY_TIME_MILLS``. Default 20000.
    unlock_delay_ms: int = 20_000
    #: Fenced: how long a released queue waits for its batches in flight (ms). Ours.
    handoff_drain_timeout_ms: int = 5_000
    #: Fenced: how long an acquire waits at the broker for a queue still held by another
    #: consumer (ms, at most 2000): granted the moment its holder lets it go, where a denial
    #: costs a QueueReleased push and a second acquire. 0: denied at once. Ours. Default 1000.
    handoff_acquire_wait_ms: int = 1_000
    #: Let the broker watch an idle queue rather than pull it every
    #: ``broker_suspend_max_time_ms``: a pull held that long for nothing, or a fenced grant
    #: with nothing after its committed offset, is pulled again only once the broker pushes
    #: MessagesArrived (docs/protocol.md). Ours; RocketMQ's brokers ignore it, and remoting
    #: is unchanged. Default True.
    watch_idle_queues: bool = True
    #: A consumer's watched queues on a broker are renewed (one WatchQueues request; those
    #: with something to pull are pulled) three quarters to all of this (ms) after the last
    #: renewal, in case the broker's push was lost; at most half of ``pull_max_idle_time_ms``.
    #: Ours. Default 60000.
    watch_renew_ms: int = 60_000

    def ranges(self) -> list[tuple[str, int, int, int]]:
        return [
            *ConsumerSettings.ranges(self),
            ("consume_thread_max", self.consume_thread_max, 1, 1000),
            ("consume_message_batch_max_size", self.consume_message_batch_max_size, 1, 1024),
            ("consume_concurrently_max_span", self.consume_concurrently_max_span, 1, 65535),
            ("pull_interval_ms", self.pull_interval_ms, 0, 65535),
            ("consume_timeout_ms", self.consume_timeout_ms, 1, INT_MAX),
            ("watch_renew_ms", self.watch_renew_ms, 1, INT_MAX),
            ("handoff_acquire_wait_ms", self.handoff_acquire_wait_ms, 0, 2_000),
        ]


@dataclass(slots=True, kw_only=True)
class LitePullConsumerSettings(ConsumerSettings):
    """``LitePullConsumer``'s options (RocketMQ's ``DefaultLitePullConsumer``)."""

    pull_batch_size: int = 10
    broker_suspend_max_time_ms: int = 20_000
    #: Messages cached for all queues before every pull pauses.
    #: RocketMQ: ``pullThresholdForAll``. Default 10000.
    pull_threshold_for_all: int = 10_000
    #: Largest offset span cached in one queue before pulling pauses.
    #: RocketMQ: ``consumeMaxSpan``. Default 2000.
    consume_max_span: int = 2_000
    #: How long ``poll()`` waits for messages when none are buffered (ms).
    #: RocketMQ: ``pollTimeoutMillis``. Default 5000.
    poll_timeout_ms: int = 5_000
    #: Commit what ``poll()`` returned every ``auto_commit_interval_ms``.
    #: RocketMQ: ``autoCommit``. Default True.
    auto_commit: bool = True
    #: (ms, at least 1000). RocketMQ: ``autoCommitIntervalMillis``. Default 5000.
    auto_commit_interval_ms: int = 5_000

    def ranges(self) -> list[tuple[str, int, int, int]]:
        return [
            *ConsumerSettings.ranges(self),
            ("pull_threshold_for_all", self.pull_threshold_for_all, 1, INT_MAX),
            ("consume_max_span", self.consume_max_span, 1, 65535),
            ("poll_timeout_ms", self.poll_timeout_ms, 0, INT_MAX),
            ("auto_commit_interval_ms", self.auto_commit_interval_ms, 1_000, INT_MAX),
        ]


#: Keyword names of earlier releases -> the field that replaced them.
LEGACY_NAMES: dict[str, str] = {
    "pull_time_delay_mills_when_exception": "pull_time_delay_ms_when_exception",
    "broker_suspend_max_time_millis": "broker_suspend_max_time_ms",
    "consumer_timeout_millis_when_suspend": "consumer_pull_timeout_ms",
    "consumer_pull_timeout_millis": "consumer_pull_timeout_ms",
    "suspend_current_queue_time_millis": "suspend_current_queue_time_ms",
    "poll_timeout_millis": "poll_timeout_ms",
    "auto_commit_interval_millis": "auto_commit_interval_ms",
}

S = TypeVar("S", bound=ConsumerSettings)


def build_settings(cls: type[S], base: S | None, options: dict[str, Any]) -> S:
    """``base`` (or the defaults) with ``options`` applied, legacy names mapped, checked.

    ``None`` for ``allocate_strategy`` or ``consume_timestamp`` means the default, as before.
    """
    options = {
        k: v
        for k, v in options.items()
        if not (v is None and k in ("allocate_strategy", "consume_timestamp"))
    }
    return build_options(cls, base, options, {k: (v, same) for k, v in LEGACY_NAMES.items()})


def check_group_name(group: str) -> None:
    """A legal group name that is not DEFAULT_CONSUMER (``ValueError`` otherwise)."""
    check_group(group)
    if group == "DEFAULT_CONSUMER":
        raise ValueError(
            "consumerGroup can not equal DEFAULT_CONSUMER, please specify another one."
        )
