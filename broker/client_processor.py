"""``ClientManageProcessor``: the broker half of the rebalance protocol, over the pure core.

It keeps the channels (one per ``OpenChannel`` stream) and turns requests into calls on
``ConsumerManager`` (consumer_table / channel_info_table), ``RebalanceLockManager``
(LOCK_BATCH_MQ), ``QueueGrantManager`` (the fenced handoff) and ``ConsumerOffsetManager``.
A channel's end (client exit, cancel, lost connection) runs the channel-close path at once:
the channel leaves every group, each group it left is notified, and its grants vanish.
Also: consumer id lists, send-back for retry / dead letter, connections and consume stats.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.broker.client.consumer_manager import (
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerManager,
    DefaultConsumerIdsChangeListener,
)
from aiorocketmq.broker.client.grant_store import GrantStore
from aiorocketmq.broker.client.producer_manager import ProducerManager
from aiorocketmq.broker.client.queue_grants import QueueGrantManager
from aiorocketmq.broker.client.rebalance_lock_manager import RebalanceLockManager
from aiorocketmq.broker.client.subscription_data import SubscriptionData
from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.offset.consumer_offset_manager import (
    ConsumerOffsetManager,
)
from aiorocketmq.broker.queue_watch import QueueWatches
from aiorocketmq.broker.schedule import ScheduleMessageService
from aiorocketmq.broker.store import MessageStore
from aiorocketmq.broker.subscription_group_manager import (
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)
from aiorocketmq.broker.topic_config_manager import TopicConfigManager
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import (
    ChannelNotFound,
    InvalidArgument,
    MQError,
    QueryNotFound,
    ServiceNotAvailable,
    SubscriptionGroupNotExist,
    TopicNotFound,
)
from aiorocketmq.protocol.message import Message, MessageConst
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.tags import SubscriptionExpression, parse_expression
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import check_group, check_topic, dlq_topic, retry_topic
from aiorocketmq.trace import tracer

__all__ = ["ClientManageProcessor"]

QUEUE_GRANTS_FILE = "queueGrants.json"

log = get_logger("aiorocketmq.broker.client")


def _log_write_failure(task: asyncio.Task[None]) -> None:
    """A grant-table write nobody awaits failed: say so (the next change writes again)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("writing the queue grant table failed", error=str(task.exception()))


def _failed_answer(index: int, error: BaseException) -> broker_pb2.AcquireAnswer:
    """The answer to an acquire of a batch that failed: its response code and message (an
    unexpected error is logged, and answered as SYSTEM_ERROR: the others go on)."""
    if not isinstance(error, MQError):
        log.error("an acquire of a batch failed", error=repr(error), exc_info=error)
        error = MQError(f"AcquireQueues failed: {error!r}")
    return broker_pb2.AcquireAnswer(
        index=index, response_code=int(error.response_code), error=error.message
    )


# The longest an acquire waits for a held queue, whatever it asks; and the time it leaves
# before its call's deadline for its answer (the grant table's write, the way back).
MAX_ACQUIRE_WAIT_MS = 2_000
ACQUIRE_ANSWER_MARGIN_S = 0.5
# The most acquires one AcquireQueuesBatch may carry.
MAX_ACQUIRE_BATCH = 1024


@dataclass(eq=False, slots=True)
class _HeldAcquire:
    """An acquire waiting for queues held by others (``acquire_queues_waiting``)."""

    client_id: str
    channel_id: str  # the request's, or the channel that replaced it since (``_follow``)
    waiting: set[MessageQueue]
    deadline: float = 0.0  # the loop time its answer is due
    denied: frozenset[MessageQueue] = frozenset()  # what it waits for, from the start
    handed: list[tuple[MessageQueue, int]] = field(default_factory=list)
    wake: asyncio.Future[None] | None = None
    # Its consumer left the group (UNREGISTER_CLIENT): answered now, with no grant (they were
    # let go with the rest of the consumer's).
    ended: bool = False

    def wake_up(self) -> None:
        """Its answer is looked at again now (``held_answer`` waits on ``wake``)."""
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)


def _pushable(channel: Channel | None) -> bool:
    """Whether a watch can be kept for ``channel``: an open gRPC stream (remoting has no
    push for MessagesArrived)."""
    return channel is not None and channel.protocol == "grpc" and not channel.closed


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClientManageProcessor:
    """Channels, heartbeats, groups, locks, grants, offsets and retries of clients."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        store: MessageStore,
        schedule: ScheduleMessageService,
        store_root: Path,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.schedule = schedule
        self.channels: dict[str, Channel] = {}
        self._ids = itertools.count(1)
        self.consumer_manager = ConsumerManager(
            channel_expired_timeout_ms=config.channel_expired_timeout_ms
        )
        self.listener = DefaultConsumerIdsChangeListener(
            config.notify_consumer_ids_changed_enable,
            min_interval_ms=config.notify_consumer_ids_changed_min_interval_ms,
            ms_per_channel=config.notify_consumer_ids_changed_ms_per_channel,
            broker_name=config.broker_name,
        )
        self.consumer_manager.append_consumer_ids_change_listener(self.listener)
        self.consumer_manager.append_consumer_ids_change_listener(_TraceListener(config))
        self.producer_manager = ProducerManager()
        self.locks = RebalanceLockManager(lock_max_live_ms=config.rebalance_lock_max_live_time_ms)
        self.grants = QueueGrantManager(epoch_base=_now_ms())
        # Fenced handoff: queues granted and acquisitions denied so far (for the metrics).
        self.grants_given = 0
        self.grants_denied = 0
        # Idle queues our clients wait on without a pull held (``queue_watch``).
        self.watches = QueueWatches()
        # Acquires waiting for queues their holders are about to let go, by (group, queue).
        self._held_acquires: dict[tuple[str, MessageQueue], list[_HeldAcquire]] = {}
        # GET_CONSUMER_RUNNING_INFO questions waiting for their client's report, by request id.
        self._running_info_waiters: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._request_ids = itertools.count(1)
        self._grants_persisted = 0
        self._grants_writing: asyncio.Task[None] | None = None  # the grant table's write now
        self.groups = SubscriptionGroupManager(
            store_root,
            auto_create=config.auto_create_subscription_group,
            retry_queue_nums=config.retry_queue_nums,
            retry_max_times=config.max_reconsume_times,
        )
        self.groups.load()
        # Called with (topic, queue_id) after an offset reset: answer the pulls held there so
        # their clients come back at once (and are told to move).
        self.on_reset: Callable[[str, int], object] | None = None
        self.offsets = ConsumerOffsetManager(store_root)
        self._persist_lock = threading.Lock()
        self.offsets.load()
        # The fenced grants and epochs, persisted beside the offsets after every change.
        self.grants_file = Path(store_root) / "config" / QUEUE_GRANTS_FILE
        self.grant_store = GrantStore(self.grants_file)  # and its journal beside it
        self._load_grants()

    # ---- channels --------------------------------------------------------------------------
    def open_channel(
        self, request: broker_pb2.OpenChannelRequest, peer: str, *, protocol: str = "grpc"
    ) -> Channel:
        if not request.client_id:
            raise InvalidArgument("client_id is required to open a channel")
        channel_id = f"{self.config.broker_name}-{next(self._ids)}-{_now_ms()}"
        channel = Channel(
            channel_id,
            request.client_id,
            peer,
            language=request.language or "PYTHON",
            version=request.version,
            opened_at=_now_ms(),
            protocol=protocol,
        )
        self.channels[channel_id] = channel
        moved = self.grants.rebind(request.client_id, channel_id)
        previous = self.channels.get(request.previous_channel_id)
        if previous is not None and previous.client_id == request.client_id:
            # The client left that channel (its connection went silent: we have not seen it
            # end). Its grants are the client's: they go on with it, and the old channel's
            # close, when the keepalive finds it, gives none of them away.
            previous.replaced_by = channel_id
            moved += self.grants.supersede(request.client_id, previous.channel_id, channel_id)
            self._follow(previous.channel_id, channel_id)
        if moved:
            self._persist_grants_soon()
        log.info(
            "channel opened",
            channel_id=channel_id,
            client_id=request.client_id,
            remote_addr=peer,
            replaces=previous.channel_id if previous is not None else None,
            grants=moved,
        )
        tracer.record(
            "channel_opened",
            broker=self.config.broker_name,
            channel_id=channel_id,
            client_id=request.client_id,
        )
        return channel

    def _follow(self, old_channel_id: str, channel_id: str) -> None:
        """The acquires of ``old_channel_id`` still waiting go on for ``channel_id``, which
        replaced it: a queue let go is granted to the channel that lives on (granted to the
        old one, it would go with that channel's late close, and the client, asking again on
        its new channel, would be denied its own queue until then)."""
        for waiting in self._held_acquires.values():
            for held in waiting:
                if held.channel_id == old_channel_id:
                    held.channel_id = channel_id

    def held_grants(self, channel: Channel) -> list[broker_pb2.HeldGrant]:
        """The grants ``channel`` holds (ChannelOpened lists them), every group."""
        return [
            broker_pb2.HeldGrant(
                consumer_group=g.group, message_queue=g.mq.to_proto(), epoch=g.epoch
            )
            for g in self.grants.grants_of_channel(channel.channel_id)
        ]

    def close_channel(self, channel: Channel) -> None:
        """The channel-close path (RocketMQ's ``doChannelCloseEvent``), run when a stream ends."""
        if self.channels.pop(channel.channel_id, None) is None:
            return
        channel.close()
        groups = self.consumer_manager.do_channel_close_event(channel.remote_addr, channel)
        self.producer_manager.do_channel_close_event(channel.remote_addr, channel)
        self._channel_gone(channel.channel_id)
        # A channel its client replaced (``replaced_by``) gave no grant away here: the trace
        # says so, and its checker does not take this close for the client's end.
        tracer.record(
            "channel_closed",
            broker=self.config.broker_name,
            channel_id=channel.channel_id,
            client_id=channel.client_id,
            groups=groups,
            replaced_by=channel.replaced_by,
        )
        log.info(
            "channel closed",
            channel_id=channel.channel_id,
            client_id=channel.client_id,
            remote_addr=channel.remote_addr,
            groups=groups,
            replaced_by=channel.replaced_by or None,
        )

    def close_all_channels(self) -> None:
        for channel in list(self.channels.values()):
            channel.close()
        self.channels.clear()

    def _channel(self, channel_id: str, client_id: str = "") -> Channel:
        """The open channel ``channel_id``; a request may act only on its own client's channel."""
        channel = self.channels.get(channel_id)
        if channel is None:
            raise ChannelNotFound(
                f"channel {channel_id!r} is not open on broker {self.config.broker_name}; "
                "open one with OpenChannel first"
            )
        if client_id and client_id != channel.client_id:
            raise InvalidArgument(
                f"channel {channel_id!r} belongs to client {channel.client_id!r}, not {client_id!r}"
            )
        return channel

    def scan_not_active_channel(self) -> None:
        """Housekeeping (every 10 s): drop channels silent past the expiry (120 s)."""
        now = _now_ms()
        expired = self.consumer_manager.scan_not_active_channel(
            now, notify=self.config.notify_consumer_ids_changed_on_channel_expiry
        )
        for _, info in self.producer_manager.scan_not_active_channel(now):
            expired.append(("", info))
        for _, info in expired:
            channel = info.channel
            if channel.channel_id in self.channels and not self._channel_in_use(channel):
                self.channels.pop(channel.channel_id, None)
                channel.close()
                self._channel_gone(channel.channel_id)

    def expire_restored_grants(self) -> None:
        """Every second after a restart: release the restored grants whose client did not come
        back within ``restored_grant_expiry_ms`` (it died while the broker was down)."""
        now = _now_ms()
        expired = self.grants.expire_orphans(now, self.config.restored_grant_expiry_ms)
        by_holder: dict[tuple[str, str], list[str]] = {}
        for grant in expired:
            self._let_go(grant.group, grant.mq)
            by_holder.setdefault((grant.client_id, grant.group), []).append(str(grant.mq))
        for (client_id, group), queues in sorted(by_holder.items()):
            # The grants given away with no channel's close to say so (the trace checker ends
            # the client's holdings of these queues here).
            tracer.record(
                "grants_expired",
                broker=self.config.broker_name,
                client_id=client_id,
                group=group,
                queues=queues,
            )
        self._persist_grants_soon()

    def _channel_in_use(self, channel: Channel) -> bool:
        return any(
            channel in g.channel_info_table for g in self.consumer_manager.consumer_table.values()
        )

    # ---- heartbeat and membership ----------------------------------------------------------
    def _group_notify_enabled(self, group: str) -> bool:
        if group in self.config.groups_with_notify_disabled:
            return False
        settings = self.groups.table.get(group)
        return settings is None or settings.notify_consumer_ids_changed_enable

    def _notifies(self, group: str) -> bool:
        """Whether a membership change of ``group`` is notified here (both switches on)."""
        return self.listener.notify_consumer_ids_changed_enable and self._group_notify_enabled(
            group
        )

    def group_settings(self, group: str) -> SubscriptionGroupConfig:
        """The group's settings (created on first use when auto-creation is on), else
        SUBSCRIPTION_GROUP_NOT_EXIST naming the group."""
        settings = self.groups.find(group)
        if settings is None:
            raise SubscriptionGroupNotExist(
                f"subscription group [{group}] does not exist on broker "
                f"{self.config.broker_name} (auto creation is off: create it with mqadmin "
                "updateSubGroup)"
            )
        return settings

    def heartbeat(self, request: broker_pb2.HeartbeatRequest) -> broker_pb2.HeartbeatResponse:
        """HEART_BEAT: register or refresh every group of the client on this channel.

        Ours: ``notified_elsewhere`` says whether the client wants this broker's notifications
        (it takes them from one broker). A heartbeat that asks for them again is sent its
        groups' members at once: it may have missed a change while another broker told it.
        """
        channel = self._channel(request.channel_id, request.heartbeat.client_id)
        asks_again = channel.notified_elsewhere and not request.notified_elsewhere
        channel.notified_elsewhere = request.notified_elsewhere
        data = request.heartbeat
        client_id = data.client_id or channel.client_id
        now = _now_ms()
        for i, consumer in enumerate(data.consumer_data_set):
            check_group(consumer.group_name)
            for j, sub in enumerate(consumer.subscription_data_set):
                try:
                    check_topic(sub.topic)
                except InvalidArgument as e:
                    raise InvalidArgument(
                        f"consumer_data_set[{i}].subscription_data_set[{j}].topic: {e.message}"
                    ) from None
        for producer in data.producer_data_set:
            check_group(producer.group_name)
        info = ClientChannelInfo.for_channel(channel, client_id, now=now)
        silent: list[str] = []
        for consumer in data.consumer_data_set:
            group = consumer.group_name
            settings = self.groups.find(group)
            if settings is None:  # RocketMQ skips the group silently; we say so
                log.warning("heartbeat of a group that does not exist", group=group)
                continue
            if consumer.message_model != common_pb2.BROADCASTING:
                if not self._notifies(group):
                    silent.append(group)
                self.topics.create_topic_if_absent(
                    retry_topic(group), settings.retry_queue_nums, PermName.READ | PermName.WRITE
                )
            subs = [SubscriptionData.from_proto(s) for s in consumer.subscription_data_set]
            if tracer.enabled:
                known = self.consumer_manager.get_consumer_group_info(group)
                joining = known is None or channel not in known.channel_info_table
                tracer.record(
                    "heartbeat",
                    broker=self.config.broker_name,
                    group=group,
                    client_id=client_id,
                    joining=joining,
                )
            changed = self.consumer_manager.register_consumer(
                group,
                info,
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                subs,
                self._group_notify_enabled(group),
                now,
            )
            if changed:
                log.info(
                    "new consumer connected or subscription changed",
                    group=group,
                    client_id=client_id,
                    channel_id=channel.channel_id,
                )
            elif asks_again and self._group_notify_enabled(group):
                known = self.consumer_manager.get_consumer_group_info(group)
                if known is not None and not known.is_broadcasting:
                    self.listener.notify_again(group, known.get_all_channels(), channel)
        for producer in data.producer_data_set:
            self.producer_manager.register_producer(producer.group_name, info, now)
        return broker_pb2.HeartbeatResponse(silent_groups=silent)

    def unregister_client(
        self, request: broker_pb2.UnregisterClientRequest, peer: str = ""
    ) -> broker_pb2.UnregisterClientResponse:
        """UNREGISTER_CLIENT: a graceful leave; the group is notified.

        Ours: the releases riding along (``releases``, fenced handoff) are done first, each
        final offset committed with its release, as ReleaseQueues does.
        """
        if request.consumer_group:
            check_group(request.consumer_group)
        if request.producer_group:
            check_group(request.producer_group)
        if request.releases and not request.consumer_group:
            raise InvalidArgument("releases ride with a consumer_group's unregister only")
        channel = self._channel(request.channel_id, request.client_id)
        info = ClientChannelInfo.for_channel(
            channel, request.client_id or channel.client_id, now=_now_ms()
        )
        response = broker_pb2.UnregisterClientResponse()
        if request.producer_group:
            self.producer_manager.unregister_producer(request.producer_group, info)
        if request.consumer_group:
            if request.releases:
                released = self._release(
                    request.consumer_group, info.client_id, request.releases, peer
                )
                response.released.extend(mq.to_proto() for mq in released)
            # A graceful leave: the consumer's acquires waiting in the group end (answered with
            # nothing more), its grants there are let go, and its watches there end.
            self._end_held_acquires(channel.channel_id, request.consumer_group)
            for group, mq in self.grants.release_channel(
                channel.channel_id, request.consumer_group
            ):
                self._let_go(group, mq)
            self._persist_grants_soon()
            self.watches.forget_group(channel.channel_id, request.consumer_group)
            tracer.record(
                "client_unregistered",
                broker=self.config.broker_name,
                group=request.consumer_group,
                client_id=info.client_id,
            )
            self.consumer_manager.unregister_consumer(
                request.consumer_group, info, self._group_notify_enabled(request.consumer_group)
            )
        return response

    def registered_subscription(
        self, group: str, topic: str
    ) -> tuple[SubscriptionExpression, int] | None:
        """For pulls: the group's registered expression for ``topic`` and its version."""
        sub = self.consumer_manager.find_subscription_data(group, topic)
        if sub is None:
            return None
        return parse_expression(sub.sub_string), sub.sub_version

    def get_consumer_list_by_group(
        self, request: broker_pb2.GetConsumerListByGroupRequest
    ) -> broker_pb2.GetConsumerListByGroupResponse:
        check_group(request.consumer_group)
        info = self.consumer_manager.get_consumer_group_info(request.consumer_group)
        if info is None or not info.channel_info_table:
            raise SubscriptionGroupNotExist(f"no consumer for this group, {request.consumer_group}")
        members = info.get_all_client_id()
        # Ours: the members' version, when they are the latest notification round's; a client
        # that holds it is told they are unchanged rather than sent them again.
        version = self.listener.history.latest(request.consumer_group, members)
        if version and request.known_version == version:
            return broker_pb2.GetConsumerListByGroupResponse(version=version, unchanged=True)
        return broker_pb2.GetConsumerListByGroupResponse(consumer_id_list=members, version=version)

    # ---- locks and grants ------------------------------------------------------------------
    def _queues(self, mqs: list[common_pb2.MessageQueue]) -> list[MessageQueue]:
        result = []
        for i, m in enumerate(mqs):
            if m.broker_name != self.config.broker_name:
                check_topic(m.topic)
                raise InvalidArgument(
                    f"mq_set[{i}] is on broker {m.broker_name!r}, not {self.config.broker_name!r}"
                )
            self._check_queue(f"mq_set[{i}]", m.topic, m.queue_id)
            result.append(MessageQueue.from_proto(m))
        return result

    def _check_queue(self, field: str, topic: str, queue_id: int) -> None:
        """A queue of a request names a topic of this broker and one of its queues."""
        check_topic(topic)
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotFound(f"topic[{topic}] not exist on broker {self.config.broker_name}")
        if not 0 <= queue_id < max(config.read_queue_nums, config.write_queue_nums):
            from aiorocketmq.protocol.errors import OffsetOutOfRange

            raise OffsetOutOfRange(f"{field}.queue_id {queue_id} is out of range for topic {topic}")

    def lock_batch_mq(self, request: broker_pb2.LockBatchRequest) -> broker_pb2.LockBatchResponse:
        check_group(request.consumer_group)
        if not request.client_id:
            raise InvalidArgument("client_id is required to lock queues")
        mqs = self._queues(list(request.mq_set))
        locked = self.locks.try_lock_batch(
            request.consumer_group, mqs, request.client_id, _now_ms()
        )
        return broker_pb2.LockBatchResponse(lock_ok_mq_set=[mq.to_proto() for mq in sorted(locked)])

    def unlock_batch_mq(
        self, request: broker_pb2.UnlockBatchRequest
    ) -> broker_pb2.UnlockBatchResponse:
        check_group(request.consumer_group)
        mqs = self._queues(list(request.mq_set))
        self.locks.unlock_batch(request.consumer_group, mqs, request.client_id)
        return broker_pb2.UnlockBatchResponse()

    def acquire_queues(
        self, request: broker_pb2.AcquireQueuesRequest, peer: str = ""
    ) -> broker_pb2.AcquireQueuesResponse:
        """Grant what is free of ``mq_set``; the releases riding along (``releases``) first."""
        check_group(request.consumer_group)
        self._channel(request.channel_id, request.client_id)
        mqs = self._queues(list(request.mq_set))
        self._supersede(request.consumer_group, request.channel_id, mqs)
        released = (
            self._release(request.consumer_group, request.client_id, request.releases, peer)
            if request.releases
            else []
        )
        result = self.grants.acquire(
            request.consumer_group, request.client_id, request.channel_id, mqs
        )
        self.grants_given += len(result.granted)
        self.grants_denied += len(result.denied)
        response = broker_pb2.AcquireQueuesResponse(released=[mq.to_proto() for mq in released])
        for mq, epoch in result.granted:
            self._add_grant(response, request, mq, epoch)
        for mq, holder, epoch in result.denied:
            response.denied.add(message_queue=mq.to_proto(), holder_client_id=holder, epoch=epoch)
        return response

    def _supersede(self, group: str, channel_id: str, mqs: list[MessageQueue]) -> None:
        """A channel asks again for queues that an earlier acquire of its own still waits for:
        that one waits for them no more. Its caller gave up on it (a pass cancelled, a
        deadline: a batch goes on for the others), and a release must not hand a queue to an
        answer nobody reads while the client takes the queue as denied."""
        for mq in mqs:
            for held in list(self._held_acquires.get((group, mq), ())):
                if held.channel_id == channel_id:
                    self._unlist(group, mq, held)
                    held.waiting.discard(mq)
                    if not held.waiting:
                        held.wake_up()

    def _add_grant(
        self,
        response: broker_pb2.AcquireQueuesResponse,
        request: broker_pb2.AcquireQueuesRequest,
        mq: MessageQueue,
        epoch: int,
        channel_id: str = "",
    ) -> None:
        """A grant of the answer: the epoch, where to start, and whether it is watched (for
        ``channel_id``, the channel holding it, when not the request's)."""
        committed = self.offsets.query_offset(request.consumer_group, mq.topic, mq.queue_id)
        # Nothing to pull after the committed offset: watched, not pulled (a join at 1,000
        # consumers otherwise starts 3,600 pulls that each wait 15 s for nothing).
        watching = request.watch and self._watch(
            request.consumer_group,
            channel_id or request.channel_id,
            mq.topic,
            mq.queue_id,
            committed,
        )
        response.granted.add(
            message_queue=mq.to_proto(), epoch=epoch, committed_offset=committed, watching=watching
        )

    async def acquire_queues_waiting(
        self,
        request: broker_pb2.AcquireQueuesRequest,
        time_remaining: float | None = None,
        peer: str = "",
    ) -> broker_pb2.AcquireQueuesResponse:
        """``acquire_queues``; then, up to ``wait_millis``, each denied queue is granted to this
        request the moment its holder lets it go (``_let_go``), and the answer comes once none
        is left or the time is up.

        Ours. Without the wait, a consumer denied a queue that its holder was about to release
        (the two passes of one change run in any order) heard QueueReleased, ran a pass again
        and asked again: at 1,000 consumers under AVG a join moves 3,600 queues, and the last
        of them waited those extra hops through two busy processes. The wait is bounded, so a
        request asking under an allocation that has moved on costs its pass that much at most,
        and ends half a second before the call's deadline (``time_remaining``, s).
        """
        response, held = self.acquire_and_hold(request, time_remaining, peer)
        if held is None:
            return response
        return await self.held_answer(request, response, held)

    def acquire_and_hold(
        self,
        request: broker_pb2.AcquireQueuesRequest,
        time_remaining: float | None = None,
        peer: str = "",
    ) -> tuple[broker_pb2.AcquireQueuesResponse, _HeldAcquire | None]:
        """The first, synchronous step of ``acquire_queues_waiting``: the acquire, and its
        denied queues held for it (from now on a release hands them over) when it may wait;
        the held acquire is then answered by ``held_answer``, else None."""
        response = self.acquire_queues(request, peer)
        wait_s = min(request.wait_millis, MAX_ACQUIRE_WAIT_MS) / 1000
        if time_remaining is not None:
            wait_s = min(wait_s, time_remaining - ACQUIRE_ANSWER_MARGIN_S)
        if wait_s <= 0 or not response.denied:
            return response, None
        held = _HeldAcquire(
            request.client_id,
            request.channel_id,
            set(self._queues([d.message_queue for d in response.denied])),
            deadline=asyncio.get_running_loop().time() + wait_s,
        )
        held.denied = frozenset(held.waiting)
        for mq in held.denied:
            self._held_acquires.setdefault((request.consumer_group, mq), []).append(held)
        return response, held

    async def held_answer(
        self,
        request: broker_pb2.AcquireQueuesRequest,
        response: broker_pb2.AcquireQueuesResponse,
        held: _HeldAcquire,
    ) -> broker_pb2.AcquireQueuesResponse:
        """Wait until ``held`` has nothing left to wait for, or its time is up; its answer."""
        loop = asyncio.get_running_loop()
        try:
            while held.waiting and not held.ended and (left := held.deadline - loop.time()) > 0:
                held.wake = loop.create_future()
                try:
                    await asyncio.wait_for(held.wake, left)
                except TimeoutError:
                    break
        finally:
            self.unhold(request.consumer_group, held)
        # The channel closed meanwhile: what it was granted went with it (``_channel_gone``),
        # and nothing is granted; the releases that rode along were done, and say so. (Its
        # channel: the request's, or the one that replaced it since: ``_follow``.)
        if held.ended or held.channel_id not in self.channels:
            return broker_pb2.AcquireQueuesResponse(released=response.released)
        answer = broker_pb2.AcquireQueuesResponse(
            granted=response.granted, released=response.released
        )
        for mq, epoch in held.handed:
            self._add_grant(answer, request, mq, epoch, held.channel_id)
        # Still held (every let-go of a queue we wait for hands it to a waiting acquire, so none
        # is free here; nor one a later acquire of this channel took over): denied, naming the
        # holder now.
        handed = {mq for mq, _ in held.handed}
        for mq in sorted(held.denied - handed):
            grant = self.grants.holder(request.consumer_group, mq)
            if grant is not None:
                answer.denied.add(
                    message_queue=mq.to_proto(),
                    holder_client_id=grant.client_id,
                    epoch=grant.epoch,
                )
        return answer

    def unhold(self, group: str, held: _HeldAcquire) -> None:
        """``held`` waits no more: releases of its queues no longer hand them to it (called
        again, it does nothing)."""
        for mq in held.denied:
            self._unlist(group, mq, held)

    def _unlist(self, group: str, mq: MessageQueue, held: _HeldAcquire) -> None:
        """``held`` is no longer among the acquires waiting for ``mq`` (if it was)."""
        waiting = self._held_acquires.get((group, mq))
        if waiting is not None and held in waiting:
            waiting.remove(held)
            if not waiting:
                del self._held_acquires[(group, mq)]

    async def acquire_queues_batch(
        self,
        request: broker_pb2.AcquireQueuesBatchRequest,
        time_remaining: float | None = None,
        peer: str = "",
    ) -> AsyncGenerator[list[broker_pb2.AcquireAnswer], None]:
        """The acquires of a batch, each as ``acquire_queues_waiting``; yields the answers
        ready at each moment, the grants among them durable (as a single acquire answers).

        They are done in order, each held before the next: a release riding in one hands its
        queue to another of the batch waiting for it. One that fails is answered with its
        error; the others go on.
        """
        if len(request.acquires) > MAX_ACQUIRE_BATCH:
            raise InvalidArgument(
                f"acquires: {len(request.acquires)} in one batch, at most {MAX_ACQUIRE_BATCH}"
            )
        ready: list[broker_pb2.AcquireAnswer] = []
        waiting: dict[asyncio.Task[broker_pb2.AcquireQueuesResponse], int] = {}
        helds: list[tuple[str, _HeldAcquire]] = []
        try:
            for index, acquire in enumerate(request.acquires):
                try:
                    response, held = self.acquire_and_hold(acquire, time_remaining, peer)
                except Exception as e:
                    ready.append(_failed_answer(index, e))
                    continue
                if held is None:
                    ready.append(broker_pb2.AcquireAnswer(index=index, response=response))
                    continue
                helds.append((acquire.consumer_group, held))
                answer = asyncio.create_task(self.held_answer(acquire, response, held))
                waiting[answer] = index
            while True:
                if ready:
                    yield await self._durable_answers(ready)
                    ready = []
                if not waiting:
                    return
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for answer in done:
                    index = waiting.pop(answer)
                    error = asyncio.CancelledError() if answer.cancelled() else answer.exception()
                    ready.append(
                        _failed_answer(index, error)
                        if error is not None
                        else broker_pb2.AcquireAnswer(index=index, response=answer.result())
                    )
        finally:
            for answer in waiting:
                answer.cancel()
            for group, held in helds:
                self.unhold(group, held)

    async def _durable_answers(
        self, answers: list[broker_pb2.AcquireAnswer]
    ) -> list[broker_pb2.AcquireAnswer]:
        """``answers`` once their grants are on disk; if the write failed, those that carry a
        response fail as a single acquire would (the client asks again: the queues unsure)."""
        try:
            await self.grants_durable()
        except ServiceNotAvailable as e:
            return [
                a if not a.HasField("response") else _failed_answer(a.index, e) for a in answers
            ]
        return answers

    def _end_held_acquires(self, channel_id: str, group: str) -> None:
        """The acquires of ``channel_id`` waiting in ``group`` answer now, with what they got."""
        for (g, _), waiting in list(self._held_acquires.items()):
            if g != group:
                continue
            for held in [h for h in waiting if h.channel_id == channel_id]:
                held.ended = True
                held.wake_up()

    def _let_go(self, group: str, mq: MessageQueue) -> None:
        """``mq`` is free: granted at once to the latest acquire waiting for it, if any (the
        channels denied it earlier then wait for its new holder, untold); else they are told
        (QueueReleased) and may ask again."""
        waiting = self._held_acquires.get((group, mq))
        while waiting:
            held = waiting.pop()
            channel = self.channels.get(held.channel_id)
            if channel is None or channel.closed or held.ended or mq not in held.waiting:
                continue
            result = self.grants.acquire(group, held.client_id, held.channel_id, [mq])
            if not result.granted:  # not free after all: its waiters are told, as before
                break
            self.grants_given += 1
            held.waiting.discard(mq)
            held.handed.append((mq, result.granted[0].epoch))
            held.wake_up()
            if not waiting:
                del self._held_acquires[(group, mq)]
            return
        self._held_acquires.pop((group, mq), None)
        self._push_queue_released(group, mq)

    def release_queues(
        self, request: broker_pb2.ReleaseQueuesRequest, peer: str
    ) -> broker_pb2.ReleaseQueuesResponse:
        check_group(request.consumer_group)
        released = self._release(request.consumer_group, request.client_id, request.releases, peer)
        return broker_pb2.ReleaseQueuesResponse(released=[mq.to_proto() for mq in released])

    def _release(
        self, group: str, client_id: str, releases: Sequence[broker_pb2.QueueRelease], peer: str
    ) -> list[MessageQueue]:
        """Release ``client_id``'s grants presented in ``releases`` (epoch and final offset,
        committed with it); each queue let go is handed on (``_let_go``). The queues released."""
        finals: dict[MessageQueue, int] = {}
        pairs = []
        mqs = self._queues([r.message_queue for r in releases])
        for mq, r in zip(mqs, releases, strict=True):
            finals[mq] = r.final_offset
            pairs.append((mq, r.epoch))

        def commit_final(mq: MessageQueue) -> None:
            if finals[mq] >= 0:
                self.offsets.commit_offset(peer, group, mq.topic, mq.queue_id, finals[mq])

        holders = {mq: grant.channel_id for mq in mqs if (grant := self.grants.holder(group, mq))}
        released = self.grants.release(group, client_id, pairs, commit=commit_final)
        for mq in released:
            self.watches.forget(mq.topic, mq.queue_id, group, holders.get(mq, ""))
            self._let_go(group, mq)
        return released

    def _channel_gone(self, channel_id: str) -> None:
        """A channel closed or expired: its grants are let go, its watches end."""
        for group, mq in self.grants.release_channel(channel_id):
            self._let_go(group, mq)
        self.watches.forget_channel(channel_id)
        self._persist_grants_soon()

    def _load_grants(self) -> None:
        """Restore the grants of the last run (each an orphan until its client is back)."""
        restored = self.grant_store.load(self.grants, _now_ms())
        if restored is not None:
            self._grants_persisted = self.grants.version
            log.info("queue grants restored", grants=restored, file=str(self.grants_file))

    async def grants_durable(self) -> None:
        """Return once the grant table as it is now is on disk (an acquire answers only then:
        a grant survives a crash once given).

        Group commit: a write, in a thread, takes the changes made when it begins (a journal
        line each, the whole table now and then: ``GrantStore``) and serves every change made
        before that; changes made during it wait for the next. At 1,000 consumers a rebalance
        makes thousands of acquires and releases within a second, and a durable write of the
        whole table for each, on the event loop, stalled the broker until its channels expired.
        """
        target = self.grants.version
        while self._grants_persisted < target:
            try:
                await asyncio.shield(self._grants_write())
            except OSError as e:
                # The change is in memory, not on disk: the client must not count on it, and
                # treats this as an answer lost (the queues unsure, asked for again).
                raise ServiceNotAvailable(f"the queue grant table could not be written: {e}") from e

    def _persist_grants_soon(self) -> None:
        """A change nobody waits for (a channel opened or closed): written with the next
        write, or one started now."""
        if self._grants_persisted < self.grants.version:
            self._grants_write()

    def _grants_write(self) -> asyncio.Task[None]:
        """The grant-table write running now, or one started (one at a time)."""
        if self._grants_writing is None or self._grants_writing.done():
            self._grants_writing = asyncio.ensure_future(self._write_grants())
            self._grants_writing.add_done_callback(_log_write_failure)
        return self._grants_writing

    async def _write_grants(self) -> None:
        version = await self.grant_store.write(self.grants)
        self._grants_persisted = max(self._grants_persisted, version)
        if self._grants_persisted < self.grants.version:
            # Changes made during this write that nobody awaits (a channel closed) go with a
            # next one (those an acquire or a release awaits start it themselves). After a
            # failed write, the next change writes again: no retry loop on a failing disk.
            asyncio.get_running_loop().call_soon(self._persist_grants_soon)

    async def persist_grants_now(self) -> None:
        """At shutdown: the table's last changes, written before the process ends."""
        try:
            await self.grants_durable()
        except ServiceNotAvailable:  # the write failed: logged by _log_write_failure
            pass

    # ---- watched queues --------------------------------------------------------------------
    def watch_pull(self, request: broker_pb2.PullMessageRequest) -> bool:
        """A pull with ``watch`` found nothing: watch its queue from its offset for the
        client's channel (the pull's ``channel_id``, else the client's first in the group)
        instead of being pulled again; whether it is watched (the channel is open, and
        nothing came since)."""
        group = request.consumer_group
        if request.channel_id:
            channel = self.channels.get(request.channel_id)
            if channel is None or channel.client_id != request.client_id:
                return False
        else:
            info = self.consumer_manager.find_channel(group, request.client_id)
            if info is None:
                return False
            channel = info.channel
        if not _pushable(channel):
            return False
        return self._watch(
            group, channel.channel_id, request.topic, request.queue_id, request.queue_offset
        )

    def watch_queues(
        self, request: broker_pb2.WatchQueuesRequest
    ) -> broker_pb2.WatchQueuesResponse:
        """The renewal of a client's watched queues: each watched from its offset for the
        client's open channel in the group, as a pull with ``watch`` that found nothing
        (``watch_pull``) would be; the answer says which are. Not watched, so pulled: a queue
        with something after the offset, one whose reset waits for its next pull (the pull
        moves it), one whose epoch is not the current grant's (the pull is fenced), and every
        queue when the channel is not the client's open one in the group."""
        check_group(request.consumer_group)
        for i, q in enumerate(request.queues):  # all checked first: a bad one watches nothing
            self._check_queue(f"queues[{i}]", q.topic, q.queue_id)
        group = request.consumer_group
        channel = self.channels.get(request.channel_id)
        member = self.consumer_manager.find_channel(group, request.client_id)
        if (
            channel is None
            or channel.client_id != request.client_id
            or not _pushable(channel)
            or member is None
            or member.channel is not channel
        ):
            return broker_pb2.WatchQueuesResponse(watching=[False] * len(request.queues))
        broker = self.config.broker_name
        return broker_pb2.WatchQueuesResponse(
            watching=[
                not self.offsets.reset_waiting(group, q.topic, q.queue_id, q.offset)
                and (
                    not q.epoch
                    or self.grants.is_current(
                        group, MessageQueue(q.topic, broker, q.queue_id), request.client_id, q.epoch
                    )
                )
                and self._watch(group, channel.channel_id, q.topic, q.queue_id, q.offset)
                for q in request.queues
            ]
        )

    def watch_start_offsets(
        self,
        request: broker_pb2.QueryConsumerOffsetsRequest,
        response: broker_pb2.QueryConsumerOffsetsResponse,
    ) -> None:
        """A rebalance's start-offset query with ``watch_channel_id``: each queue whose answer
        is its end is watched for that channel (an unknown channel watches nothing), and the
        answer says which. The classic handoff's counterpart of a watched grant: a moved idle
        queue is not pulled by its new owner (a join at 1,000 consumers otherwise starts
        3,600 pulls that each wait 15 s for nothing)."""
        channel_id = request.watch_channel_id
        known = _pushable(self.channels.get(channel_id))
        response.watching.extend(
            known
            and offset >= 0
            and self._watch(request.consumer_group, channel_id, q.topic, q.queue_id, offset)
            for q, offset in zip(request.queues, response.offsets, strict=True)
        )

    def _watch(self, group: str, channel_id: str, topic: str, queue_id: int, offset: int) -> bool:
        # Only at the queue's end: before it there is something to pull now, and past it (the
        # store lost its tail in a crash) the pull moves the offset back (OFFSET_ILLEGAL).
        if offset != self.store.get_max_offset(topic, queue_id):
            return False
        self.watches.watch(topic, queue_id, group, channel_id, offset)
        return True

    def messages_arrived(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> None:
        """The store's arrival listener: push MessagesArrived to the queue's watchers."""
        for group, channel_id in self.watches.arrived(topic, queue_id, max_offset):
            self._push_messages_arrived(channel_id, group, topic, queue_id, max_offset)

    def _push_messages_arrived(
        self, channel_id: str, group: str, topic: str, queue_id: int, max_offset: int = -1
    ) -> None:
        channel = self.channels.get(channel_id)
        if channel is None:
            return
        # -1 (an offset reset) says "pull now" whatever the client's offset: a reset that
        # lands between a start-offset query's answer and the park would otherwise be kept as
        # an early wake-up no higher than the parked offset, and wait for the renewal.
        mq = MessageQueue(topic, self.config.broker_name, queue_id).to_proto()
        arrived = broker_pb2.MessagesArrived(
            consumer_group=group, message_queue=mq, max_offset=max_offset
        )
        channel.offer(broker_pb2.ChannelEvent(messages_arrived=arrived))

    def _push_queue_released(self, group: str, mq: MessageQueue) -> None:
        """Tell the channels that were denied ``mq`` (its waiters) that it is free now."""
        event: broker_pb2.ChannelEvent | None = None
        for channel_id in self.grants.take_waiters(group, mq):
            channel = self.channels.get(channel_id)
            if channel is None:
                continue
            if event is None:
                event = broker_pb2.ChannelEvent(
                    queue_released=broker_pb2.QueueReleased(
                        consumer_group=group, message_queue=mq.to_proto()
                    )
                )
            channel.offer(event)

    # ---- retries ---------------------------------------------------------------------------
    async def consumer_send_msg_back(
        self, request: broker_pb2.ConsumerSendMsgBackRequest, peer: str
    ) -> broker_pb2.ConsumerSendMsgBackResponse:
        """CONSUMER_SEND_MSG_BACK: retry later on %RETRY%group, or dead-letter on %DLQ%group."""
        group = request.group
        check_group(group)
        if request.commit_log_offset < 0:
            raise InvalidArgument(
                f"commit_log_offset must be >= 0, got {request.commit_log_offset}"
            )
        msg = self.store.look_message_by_offset(request.commit_log_offset)
        if msg is None or (
            request.origin_msg_id
            and request.origin_msg_id
            not in (msg.msg_id, msg.properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID))
        ):
            raise QueryNotFound(
                f"no message at commit log offset {request.commit_log_offset}"
                + (f" with id {request.origin_msg_id}" if request.origin_msg_id else "")
                + f" on broker {self.config.broker_name}"
            )
        properties = dict(msg.properties)
        properties.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, request.origin_topic or msg.topic)
        properties.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        settings = self.group_settings(group)
        max_times = request.max_reconsume_times or settings.retry_max_times
        reconsume = msg.reconsume_times
        delay_level = request.delay_level
        if reconsume >= max_times or delay_level < 0:
            target = dlq_topic(group)
            self.topics.create_topic_if_absent(target, 1, PermName.READ | PermName.WRITE)
            delay_level = 0
        else:
            target = retry_topic(group)
            self.topics.create_topic_if_absent(
                target, settings.retry_queue_nums, PermName.READ | PermName.WRITE
            )
            if delay_level == 0:
                delay_level = 3 + reconsume
        properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(reconsume + 1)
        properties[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        config = self.topics.select_topic_config(target)
        queue_id = 0 if config is None else int(time.monotonic_ns()) % config.write_queue_nums
        message = Message(
            topic=target,
            body=msg.body,
            tags=msg.tags,
            keys=msg.keys,
            flag=msg.flag,
            properties=properties,
            delay_time_level=delay_level,
        )
        await self.schedule.put_delayed_or_now(
            message,
            queue_id,
            born_host=msg.born_host or peer,
            born_timestamp=msg.born_timestamp,
            reconsume_times=reconsume + 1,
        )
        log.info(
            "consumer send message back",
            group=group,
            target_topic=target,
            msg_id=msg.msg_id,
            reconsume_times=reconsume + 1,
            delay_level=delay_level,
        )
        return broker_pb2.ConsumerSendMsgBackResponse(
            target_topic=target, reconsume_times=reconsume + 1
        )

    # ---- administration --------------------------------------------------------------------
    def get_producer_connection_list(
        self, request: broker_pb2.GetProducerConnectionListRequest
    ) -> broker_pb2.ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST: the producer group's clients (those that heartbeat)."""
        check_group(request.producer_group)
        channels = self.producer_manager.get_group_channels(request.producer_group)
        if not channels:
            raise QueryNotFound(
                f"the producer group[{request.producer_group}] is not online on broker "
                f"{self.config.broker_name}"
            )
        return broker_pb2.ProducerConnection(connections=[_connection(c) for c in channels])

    def get_consumer_connection_list(
        self, request: broker_pb2.GetConsumerConnectionListRequest
    ) -> broker_pb2.ConsumerConnection:
        check_group(request.consumer_group)
        info = self.consumer_manager.get_consumer_group_info(request.consumer_group)
        if info is None:
            raise SubscriptionGroupNotExist(
                f"the consumer group[{request.consumer_group}] not online"
            )
        response = broker_pb2.ConsumerConnection(
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        response.connections.extend(_connection(c) for c in info.channel_info_table.values())
        for _, sub in sorted(info.subscription_table.items()):
            response.subscriptions.append(sub.to_proto())
        return response

    async def get_consume_stats(
        self, request: broker_pb2.GetConsumeStatsRequest
    ) -> broker_pb2.ConsumeStats:
        """GET_CONSUME_STATS: per queue the offsets and the holder (the fenced grant, the
        orderly lock, else what the group's clients report holding); the group's consume TPS."""
        response = self._consume_stats(request)
        holders, tps = await self.running_holders(request.consumer_group)
        for queue in response.queues:
            if not queue.holder_client_id:
                queue.holder_client_id = holders.get(
                    MessageQueue.from_proto(queue.message_queue), ""
                )
        response.consume_tps = tps
        return response

    def _consume_stats(self, request: broker_pb2.GetConsumeStatsRequest) -> broker_pb2.ConsumeStats:
        group = request.consumer_group
        check_group(group)
        info = self.consumer_manager.get_consumer_group_info(group)
        if request.topic:
            topics = [request.topic]
        else:
            topics = sorted(
                set(info.subscription_table)
                if info
                else set() | set(self.offsets.which_topic_by_consumer(group))
            )
        if not topics:
            raise SubscriptionGroupNotExist(
                f"the consumer group[{group}] has no subscription or offset here"
            )
        now = _now_ms()
        response = broker_pb2.ConsumeStats()
        for topic in topics:
            config = self.topics.select_topic_config(topic)
            if config is None:
                continue
            for qid in range(config.read_queue_nums):
                mq = MessageQueue(topic, self.config.broker_name, qid)
                grant = self.grants.holder(group, mq)
                holder = (
                    grant.client_id if grant else (self.locks.get_lock_holder(group, mq, now) or "")
                )
                max_offset = self.store.get_max_offset(topic, qid)
                consumer_offset = self.offsets.query_offset(group, topic, qid)
                last = 0
                if consumer_offset > 0:
                    last = self.store.get_store_timestamp(topic, qid, consumer_offset - 1) or 0
                response.queues.add(
                    message_queue=mq.to_proto(),
                    broker_offset=max_offset,
                    consumer_offset=consumer_offset,
                    last_timestamp=last,
                    holder_client_id=holder,
                )
        return response

    # ---- consumer running info (GET_CONSUMER_RUNNING_INFO 307) -----------------------------
    async def get_consumer_running_info(
        self, request: broker_pb2.GetConsumerRunningInfoRequest
    ) -> broker_pb2.ConsumerRunningInfo:
        """Ask one client of the group, through its channel, and wait for its report."""
        group = request.consumer_group
        check_group(group)
        if not request.client_id:
            raise InvalidArgument("client_id is required")
        info = self.consumer_manager.get_consumer_group_info(group)
        channels = [
            c.channel
            for c in (info.channel_info_table.values() if info else ())
            if c.client_id == request.client_id and not c.channel.closed
        ]
        if not channels:
            raise QueryNotFound(
                f"client {request.client_id} is not a live member of {group} on broker "
                f"{self.config.broker_name}"
            )
        channel = channels[0]
        if channel.protocol != "grpc":
            raise InvalidArgument(
                f"client {request.client_id} speaks RocketMQ's remoting protocol: its running "
                "info is not asked for here"
            )
        request_id = next(self._request_ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._running_info_waiters[request_id] = (channel.channel_id, future)
        try:
            event = broker_pb2.ChannelEvent(
                get_consumer_running_info=broker_pb2.GetConsumerRunningInfo(
                    request_id=request_id, consumer_group=group
                )
            )
            if not channel.offer(event):
                raise ServiceNotAvailable(f"the channel of client {request.client_id} is full")
            timeout = (request.timeout_ms or 3_000) / 1000
            try:
                report: broker_pb2.ConsumerRunningInfoReport = await asyncio.wait_for(
                    future, timeout
                )
            except TimeoutError:
                raise ServiceNotAvailable(
                    f"client {request.client_id} did not report its running info within "
                    f"{timeout:g}s"
                ) from None
        finally:
            self._running_info_waiters.pop(request_id, None)
        if report.error:
            raise QueryNotFound(report.error)
        return report.info

    def report_consumer_running_info(
        self, request: broker_pb2.ConsumerRunningInfoReport
    ) -> broker_pb2.ReportConsumerRunningInfoResponse:
        """A client's answer: wakes the question waiting for it (late answers are dropped)."""
        waiting = self._running_info_waiters.get(request.request_id)
        if waiting is not None:
            channel_id, future = waiting
            if channel_id != request.channel_id:
                raise InvalidArgument(
                    f"request {request.request_id} was not asked on channel {request.channel_id!r}"
                )
            if not future.done():
                future.set_result(request)
        return broker_pb2.ReportConsumerRunningInfoResponse()

    async def running_holders(
        self, group: str, timeout_ms: int = 2_000
    ) -> tuple[dict[MessageQueue, str], float]:
        """Who holds which of this broker's queues, as the group's gRPC clients report it, and
        their summed consume TPS (for GET_CONSUME_STATS); clients that do not answer count
        for nothing."""
        info = self.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return {}, 0.0
        client_ids = sorted(
            {c.client_id for c in info.channel_info_table.values() if c.channel.protocol == "grpc"}
        )

        async def ask(client_id: str) -> broker_pb2.ConsumerRunningInfo | None:
            try:
                return await self.get_consumer_running_info(
                    broker_pb2.GetConsumerRunningInfoRequest(
                        consumer_group=group, client_id=client_id, timeout_ms=timeout_ms
                    )
                )
            except MQError:
                return None

        holders: dict[MessageQueue, str] = {}
        tps = 0.0
        for running in await asyncio.gather(*(ask(c) for c in client_ids)):
            if running is None:
                continue
            for pq in running.mq_table:
                if not pq.dropped and pq.message_queue.broker_name == self.config.broker_name:
                    holders[MessageQueue.from_proto(pq.message_queue)] = running.client_id
            tps += sum(s.consume_ok_tps for s in running.status_table)
        return holders, tps

    # ---- subscription groups (UPDATE_AND_CREATE / GET_ALL / DELETE_SUBSCRIPTIONGROUP) ---------
    def update_subscription_group(
        self, request: broker_pb2.SubscriptionGroupConfig
    ) -> broker_pb2.UpdateAndCreateSubscriptionGroupResponse:
        self.groups.update(SubscriptionGroupConfig.from_proto(request))
        return broker_pb2.UpdateAndCreateSubscriptionGroupResponse()

    def get_all_subscription_group_config(self) -> broker_pb2.GetAllSubscriptionGroupConfigResponse:
        return broker_pb2.GetAllSubscriptionGroupConfigResponse(
            configs=[c.to_proto() for _, c in sorted(self.groups.table.items())]
        )

    def delete_subscription_group(
        self, request: broker_pb2.DeleteSubscriptionGroupRequest
    ) -> broker_pb2.DeleteSubscriptionGroupResponse:
        """Forget the group's settings; with ``remove_offset``, its committed offsets too.
        Online members keep consuming (auto-creation gives the group its defaults again)."""
        existed = self.groups.delete(request.group_name)
        if request.remove_offset and self.offsets.remove_offset(request.group_name):
            self.persist_offsets_now()
        return broker_pb2.DeleteSubscriptionGroupResponse(existed=existed)

    # ---- offset reset (INVOKE_BROKER_TO_RESET_OFFSET 222, RESET_CONSUMER_CLIENT_OFFSET 220) ---
    def reset_offset(
        self, request: broker_pb2.ResetOffsetRequest
    ) -> broker_pb2.ResetOffsetResponse:
        """Move the group's offsets of every queue of the topic here to the first message
        stored at or after the timestamp (``force``: also forward), and tell the group's online
        clients through their channels. Until a queue's next pull starts at the new offset,
        other commits are ignored and pulls from elsewhere are told to move (clients that
        missed the event, remoting ones included, follow at their next pull)."""
        group, topic = request.consumer_group, request.topic
        check_group(group)
        check_topic(topic)
        if request.timestamp < 0:
            raise InvalidArgument(f"timestamp must be >= 0, got {request.timestamp}")
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotFound(f"topic[{topic}] not exist on broker {self.config.broker_name}")
        info = self.consumer_manager.get_consumer_group_info(group)
        members = [
            c for c in (info.channel_info_table.values() if info else ()) if not c.channel.closed
        ]
        response = broker_pb2.ResetOffsetResponse()
        for queue_id in range(config.read_queue_nums):
            target = self.store.get_offset_in_queue_by_time(topic, queue_id, request.timestamp)
            current = self.offsets.query_offset(group, topic, queue_id)
            offset = target if request.force or current < 0 or target < current else current
            self.offsets.reset_offset(group, topic, queue_id, offset, pending=bool(members))
            response.offsets.add(queue_id=queue_id, offset=offset)
        self.persist_offsets_now()
        log.info(
            "reset offset by time",
            group=group,
            topic=topic,
            timestamp=request.timestamp,
            force=request.force,
            offsets={o.queue_id: o.offset for o in response.offsets},
        )
        event = broker_pb2.ChannelEvent(
            reset_offset=broker_pb2.ResetOffsetEvent(
                topic=topic,
                consumer_group=group,
                offsets=response.offsets,
                broker_name=self.config.broker_name,
            )
        )
        for member in members:
            if member.channel.protocol == "grpc" and member.channel.offer(event):
                response.clients_told.append(member.client_id)
        for queue_id in range(config.read_queue_nums):
            if self.on_reset is not None:
                self.on_reset(topic, queue_id)
            # A watched queue has no pull to answer: woken, it pulls and is told to move.
            for channel_id in self.watches.take(topic, queue_id, group):
                self._push_messages_arrived(channel_id, group, topic, queue_id)
        return response

    async def persist_offsets(self) -> None:
        """The periodic flush (in a thread: it writes and fsyncs a file)."""
        await asyncio.to_thread(self.persist_offsets_now)

    def persist_offsets_now(self) -> None:
        """Write the offsets; one writer at a time (a cancelled flush's thread may still run)."""
        with self._persist_lock:
            self.offsets.persist()


def _connection(cci: ClientChannelInfo) -> broker_pb2.Connection:
    """A client's ``Connection`` row (consumer and producer connection lists)."""
    return broker_pb2.Connection(
        client_id=cci.client_id,
        client_addr=cci.channel.remote_addr,
        language=cci.language,
        version=cci.version,
        last_update_timestamp=cci.last_update_timestamp,
        protocol=cci.channel.protocol,
    )


class _TraceListener:
    """Records each CHANGE of a group with its channels (the notifications pushed are recorded
    where they are offered: ``DefaultConsumerIdsChangeListener``)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
        if event is not ConsumerGroupEvent.CHANGE or not tracer.enabled:
            return
        raw = args[0] if args else ()
        channels = (
            [c for c in raw if isinstance(c, Channel)] if isinstance(raw, list | tuple) else []
        )
        clients = sorted(c.client_id for c in channels)
        tracer.record(
            "consumer_table_changed", broker=self.config.broker_name, group=group, clients=clients
        )
