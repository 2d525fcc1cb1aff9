"""``MQClientInstance``: one per client id in a process, shared by its consumers.

It owns what the consumers of a process share (spec 1.2): the name-server client and the
routes, one channel stream and one gRPC channel per broker (both kept until shutdown: a failed
call closes neither, and the stream reopens whatever ended it; with ``share_connections`` the
gRPC channels are shared by the process's instances), the timers (route poll 30 s,
heartbeat 30 s, offset persist 5 s), the ``RebalanceService`` and the ``PullMessageService``.
A NOTIFY_CONSUMER_IDS_CHANGED from any broker wakes the rebalance of every group (RocketMQ
ignores the group named in the notification too).

Instances are kept in ``MQClientManager`` by client id; the last consumer to leave shuts the
instance down.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
import zlib
from collections.abc import (
    Awaitable,
    Callable,
    Container,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, ClassVar, Protocol

from aiorocketmq.consumer.acquire_batch import AcquireBatcher
from aiorocketmq.consumer.broker_channel import BrokerChannel, reconnect_backoff_ms
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.pull_message_service import (
    PullHandler,
    PullMessageService,
    PullRequest,
    RenewHandler,
)
from aiorocketmq.consumer.rebalance_service import RebalanceService
from aiorocketmq.consumer.stats import ConvergenceClock
from aiorocketmq.logs import get_logger
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.client_id import build_client_id, default_instance_name
from aiorocketmq.protocol.data_path import DataPath
from aiorocketmq.protocol.errors import ChannelNotFound, MQError, ServiceNotAvailable
from aiorocketmq.protocol.membership import MembershipChange, NotifiedMembers
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.route import MASTER_ID, route_to_subscribe_queues
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import is_retry_topic
from aiorocketmq.trace import tracer

__all__ = ["ConsumerInner", "MQClientInstance", "MQClientManager", "consumer_client_id"]

log = get_logger("aiorocketmq.consumer.client")


class ConsumerInner(Protocol):
    """What the instance needs of each registered consumer."""

    @property
    def group_name(self) -> str: ...
    def consumer_data(self) -> common_pb2.ConsumerData: ...
    def subscribed_topics(self) -> set[str]: ...
    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    async def do_rebalance(self) -> bool: ...
    async def persist_consumer_offset(self) -> None: ...
    def broker_channel_lost(self, broker_name: str) -> None: ...
    def broker_reconnected(
        self, broker_name: str, held: dict[MessageQueue, int] | None = None
    ) -> None: ...
    def allocated_by(self, members: list[str]) -> bool: ...
    async def pull_message(self, request: PullRequest) -> None: ...
    async def renew_watches(
        self, broker_name: str, requests: list[PullRequest]
    ) -> set[MessageQueue]: ...
    def on_queue_released(self, mq: MessageQueue) -> None: ...
    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None: ...
    def is_balanced(self) -> bool: ...
    def running_info(self) -> broker_pb2.ConsumerRunningInfo: ...


class MQClientInstance:
    """Routes, channels, heartbeats and the shared services of one client id."""

    def __init__(
        self, client_id: str, namesrv_addr: str, config: ClientConfig | None = None
    ) -> None:
        self.client_id = client_id
        self.namesrv_addr = namesrv_addr
        self.config = config or ClientConfig()
        self.namesrv = NameServerClient(
            namesrv_addr,
            timeout=self.config.mq_client_api_timeout_ms / 1000,
            shared_channels=self.config.share_connections,
        )
        self.brokers = BrokerConnections(shared=self.config.share_connections)
        self.data = DataPath(self.brokers, self.config.data_transport)
        self.consumer_table: dict[str, ConsumerInner] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.topic_route_table: dict[str, common_pb2.TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        # Broker name -> broker id -> remoting address, of the brokers that serve remoting.
        self.remoting_addr_table: dict[str, dict[int, str]] = {}
        # The channel id each broker last acknowledged a heartbeat on.
        self._heartbeat_landed: dict[str, str] = {}
        self.channels: dict[str, BrokerChannel] = {}
        self._notifier: str | None = None  # the broker whose notifications we take, if one
        # Brokers whose last heartbeat answer named a group of ours they do not notify
        # (HeartbeatResponse.silent_groups): never picked to notify us.
        self._silent: set[str] = set()
        self.rebalance_service = RebalanceService(
            self.do_rebalance,
            wait_interval_ms=self.config.rebalance_wait_interval_ms,
            min_interval_ms=self.config.rebalance_min_interval_ms,
            is_balanced=self.all_consumers_balanced,
        )
        self.pull_message_service = PullMessageService(self._pull_handler, self._renew_handler)
        self._tasks: set[asyncio.Task[None]] = set()
        self._heartbeat_lock = asyncio.Lock()
        self._heartbeat_again = False
        self._route_lock = asyncio.Lock()
        self.running = False
        self.notifications_received = 0
        # group -> the members the last NOTIFY_CONSUMER_IDS_CHANGED carried, until a rebalance
        # pass takes them (instead of asking a broker with GET_CONSUMER_LIST_BY_GROUP).
        self.notified_consumer_ids: dict[str, list[str]] = {}
        # Notifications read too late to rebalance by their member list (``_fresh``), and the
        # broker that sent the last of them, per group: the pass asks it for the members.
        self.stale_notifications = 0
        self.notifying_broker: dict[str, str] = {}
        # Notifications whose members the last pass had already allocated by: no pass.
        self.notifications_already_applied = 0
        # From a change of a group (or the start) to the rebalance pass that settles it.
        self.convergence = ConvergenceClock()

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self.running:
            return
        self.running = True
        cfg = self.config
        self._spawn(
            self._every(
                10, cfg.poll_name_server_interval_ms, self.update_topic_route_info_from_name_server
            ),
            "route-poll",
        )
        self._spawn(
            self._every(
                1_000,
                cfg.heartbeat_broker_interval_ms,
                self.send_heartbeat_to_all_broker,
                spread=True,
            ),
            "heartbeat",
        )
        self._spawn(
            self._every(
                10_000,
                cfg.persist_consumer_offset_interval_ms,
                self.persist_all_consumer_offset,
                spread=True,
            ),
            "persist-offset",
        )
        self.pull_message_service.start()
        self.rebalance_service.start()
        log.info(
            "the client factory started", client_id=self.client_id, namesrv_addr=self.namesrv_addr
        )

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        tasks = [*self._tasks, *self._side_tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._side_tasks.clear()
        await self.rebalance_service.shutdown()
        await self.pull_message_service.shutdown()
        for channel in list(self.channels.values()):
            await channel.close()
        self.channels.clear()
        await self.data.close()
        await self.brokers.close()
        await self.namesrv.close()
        log.info("the client factory shutdown", client_id=self.client_id)

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"{self.client_id}-{name}")
        self._tasks.add(task)

    async def _every(
        self,
        initial_ms: int,
        period_ms: int,
        action: Callable[[], Awaitable[Any]],
        *,
        spread: bool = False,
    ) -> None:
        """Run ``action`` after ``initial_ms``, then every ``period_ms``. ``spread``: the first
        run comes up to one period later, at random (ours): a thousand clients started together
        then heartbeat and commit spread over the period, not in waves (up to a thousand
        heartbeats were counted in one join's window at 1,000 consumers on four brokers; the
        spread alone changed no benchmark figure measurably)."""
        if spread:
            initial_ms += int(random.uniform(0, period_ms))
        await asyncio.sleep(initial_ms / 1000)
        while True:
            try:
                await action()
            except Exception:
                log.exception("client timer failed", action=getattr(action, "__name__", "?"))
            await asyncio.sleep(period_ms / 1000)

    # ---- consumers -------------------------------------------------------------------------
    def register_consumer(self, consumer: ConsumerInner) -> None:
        group = consumer.group_name
        if group in self.consumer_table:
            raise ValueError(
                f"The consumer group[{group}] has been created before, specify another name please."
            )
        self.consumer_table[group] = consumer
        self.convergence.changed(time.monotonic())  # a join: settled at its first balanced pass

    async def unregister_consumer(
        self,
        group: str,
        releases: Mapping[str, Sequence[broker_pb2.QueueRelease]] | None = None,
        *,
        only: Container[str] | None = None,
    ) -> dict[str, list[common_pb2.MessageQueue] | None]:
        """Leave the group on every broker at once (UNREGISTER_CLIENT): the brokers notify the
        group. At once, so that they all tell the group about the same membership together;
        one after the other, a rebalance woken by the first could ask one not told yet.

        ``releases`` (fenced handoff), by broker name, ride with the unregister to that
        broker's master; the answer says, for each such broker, what it released (None: no
        answer, or no open channel to carry them). ``only``: to these brokers (by name) alone.
        """
        self.consumer_table.pop(group, None)
        riding = {
            addr: name
            for name in releases or {}
            if (addr := self.find_broker_addr(name)) is not None
        }
        answers: dict[str, list[common_pb2.MessageQueue] | None] = dict.fromkeys(releases or {})

        async def leave(addr: str, channel_id: str) -> None:
            request = broker_pb2.UnregisterClientRequest(
                channel_id=channel_id, client_id=self.client_id, consumer_group=group
            )
            name = riding.get(addr)
            if name is not None and releases is not None:
                request.releases.extend(releases[name])
            try:
                response = await call(
                    self.brokers.stub(addr).UnregisterClient, request, self._timeout()
                )
            except MQError as e:
                log.warning("unregister client failed", addr=addr, group=group, error=str(e))
                return
            if name is not None:
                answers[name] = list(response.released)

        await asyncio.gather(
            *(
                leave(addr, channel.channel_id)
                for addr, channel in list(self.channels.items())
                if channel.channel_id is not None and (only is None or channel.broker_name in only)
            )
        )
        return answers

    def _pull_handler(self, group: str) -> PullHandler | None:
        consumer = self.consumer_table.get(group)
        return consumer.pull_message if consumer is not None else None

    def _renew_handler(self, group: str) -> RenewHandler | None:
        consumer = self.consumer_table.get(group)
        return consumer.renew_watches if consumer is not None else None

    def all_consumers_balanced(self) -> bool:
        """Every consumer holds exactly its last allocation (a local check, no RPC)."""
        return all(c.is_balanced() for c in self.consumer_table.values())

    def rebalance_immediately(self) -> None:
        self.rebalance_service.wakeup()

    async def do_rebalance(self) -> bool:
        """Every registered consumer rebalances; balanced only if all are.

        A subscribed topic whose route is still unknown is looked up first (ours: RocketMQ
        waits for the 30 s route poll). The retry topic is the usual case: the broker creates
        it at the group's first heartbeat, after the consumer fetched its routes.
        """
        balanced = True
        for consumer in list(self.consumer_table.values()):
            for topic in sorted(consumer.subscribed_topics() - set(self.topic_route_table)):
                await self.update_topic_route_info_from_name_server(topic)
            try:
                balanced = await consumer.do_rebalance() and balanced
            except Exception:
                log.exception("doRebalance failed", group=consumer.group_name)
                balanced = False
        if balanced and self.consumer_table:
            self.convergence.settled(time.monotonic())
        return balanced

    async def persist_all_consumer_offset(self) -> None:
        for consumer in list(self.consumer_table.values()):
            await consumer.persist_consumer_offset()

    def _timeout(self) -> float:
        return self.config.mq_client_api_timeout_ms / 1000

    # ---- routes ----------------------------------------------------------------------------
    async def update_topic_route_info_from_name_server(self, topic: str | None = None) -> bool:
        """Refresh one topic's route (or every subscribed topic's); True if any changed.

        A name-server error leaves the old route in place: consumers keep their cached queues.
        """
        topics = (
            [topic]
            if topic
            else sorted({t for c in self.consumer_table.values() for t in c.subscribed_topics()})
        )
        changed_any = False
        grown: set[str] = set()  # brokers of routes that changed (not first read)
        async with self._route_lock:
            for t in topics:
                try:
                    route = await self.namesrv.get_route_info_by_topic(t)
                except MQError as e:
                    log.debug("update topic route failed", topic=t, error=str(e))
                    continue
                old = self.topic_route_table.get(t)
                if old is not None and _route_key(old) == _route_key(route):
                    continue
                changed_any = True
                if old is not None:
                    grown.update(bd.broker_name for bd in route.broker_datas)
                self.topic_route_table[t] = route
                for bd in route.broker_datas:
                    self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
                    self.remoting_addr_table[bd.broker_name] = dict(bd.remoting_addrs)
                mqs = route_to_subscribe_queues(t, route)
                for consumer in self.consumer_table.values():
                    if t in consumer.subscribed_topics():
                        consumer.update_topic_subscribe_info(t, mqs)
                log.info("topic route changed", topic=t, queues=len(mqs))
        if grown and self.running and self.consumer_table and self.heartbeat_missing(grown):
            # Ours: a broker new in a route (back from a restart our client started during,
            # or added) hears from us now; RocketMQ waits for the next 30 s heartbeat, and
            # until then that broker lists none of our consumers. That broker alone.
            self._spawn_side_task(self._heartbeat_brokers_missing(grown))
        return changed_any

    def _retry_topics(self) -> set[str]:
        return {
            t
            for c in self.consumer_table.values()
            for t in c.subscribed_topics()
            if is_retry_topic(t)
        }

    async def refresh_routes_short_of_brokers(self, topics: Iterable[str]) -> bool:
        """Read again the routes of ``topics`` that miss a broker we heartbeat; True if one
        changed. After each heartbeat round, for the groups' retry topics: the round's
        heartbeats create a group's retry topic where it was missing, and a broker that
        created it answers only once the name server has it. Read only before (RocketMQ's
        order), members that started together saw it on different brokers for up to 30 s
        (the route poll) and allocated its queues differently."""
        brokers = set(self.broker_addr_table)
        changed = False
        for topic in sorted(topics):
            route = self.topic_route_table.get(topic)
            if route is None or not brokers <= {bd.broker_name for bd in route.broker_datas}:
                changed = await self.update_topic_route_info_from_name_server(topic) or changed
        return changed

    def _broker_id(self, broker_name: str) -> int | None:
        """The broker id calls to ``broker_name`` go to: its master's, else any it has."""
        addrs = self.broker_addr_table.get(broker_name) or {}
        return MASTER_ID if MASTER_ID in addrs else next(iter(addrs), None)

    def find_broker_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``, else any of its addresses."""
        broker_id = self._broker_id(broker_name)
        return None if broker_id is None else self.broker_addr_table[broker_name][broker_id]

    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        """Call ``method`` on ``broker_name``'s master; failures raise the typed ``MQError``.

        A failure never closes the broker's channel: the other calls in flight on it (long-poll
        pulls, the channel stream) go on, and gRPC reconnects a lost connection by itself.
        """
        addr = self.find_broker_addr(broker_name)
        if addr is None:
            raise ServiceNotAvailable(f"no address for broker {broker_name} in the routes")
        return await call(
            getattr(self.brokers.stub(addr), method), request, timeout or self._timeout()
        )

    async def pull(
        self, broker_name: str, request: broker_pb2.PullMessageRequest, timeout: float
    ) -> broker_pb2.PullMessageResponse:
        """PullMessage on ``broker_name``'s master, on the data transport the config names
        (``protocol.data_path``); failures raise the typed ``MQError``."""
        broker_id = self._broker_id(broker_name)
        if broker_id is None:
            raise ServiceNotAvailable(f"no address for broker {broker_name} in the routes")
        addr = self.broker_addr_table[broker_name][broker_id]
        remoting_addr = (self.remoting_addr_table.get(broker_name) or {}).get(broker_id)
        return await self.data.pull(addr, remoting_addr, broker_name, request, timeout)

    async def acquire_queues(
        self, broker_name: str, request: broker_pb2.AcquireQueuesRequest
    ) -> broker_pb2.AcquireQueuesResponse:
        """AcquireQueues on ``broker_name``'s master; with shared connections, sent with the
        acquires of the process's other instances asked for meanwhile (``AcquireBatcher``)."""
        addr = self.find_broker_addr(broker_name) if self.config.batch_acquires else None
        batcher = None
        if addr is not None:
            linger_s = self.config.acquire_batch_ms / 1000
            threshold = self.config.acquire_batch_threshold
            batcher = self.brokers.shared_object(
                addr, "acquires", lambda channel: AcquireBatcher(channel, linger_s, threshold)
            )
        if batcher is None:  # (no address: invoke_broker says so)
            response = await self.invoke_broker(broker_name, "AcquireQueues", request)
            assert isinstance(response, broker_pb2.AcquireQueuesResponse)
            return response
        return await batcher.acquire(request, self._timeout())

    def open_channel_id(self, broker_name: str) -> str:
        """The id of our channel to ``broker_name``'s master if it is open now, else ""."""
        channel = self._open_channel(broker_name)
        return (channel.channel_id or "") if channel is not None else ""

    async def channel_id_for(self, broker_name: str) -> str | None:
        """The id of our open channel to ``broker_name``'s master (opened if needed)."""
        addr = self.find_broker_addr(broker_name)
        if addr is None:
            return None
        return await self._channel(addr).wait_ready(self._timeout())

    def take_notified_consumer_ids(self, group: str) -> list[str] | None:
        """The members the latest notification for ``group`` carried, once (None if none came
        since the last pass took them): a rebalance pass uses them instead of asking a broker."""
        return self.notified_consumer_ids.pop(group, None)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP from one broker of the topic; None when it cannot say."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            await self.update_topic_route_info_from_name_server(topic)
            route = self.topic_route_table.get(topic)
            if route is None or not route.broker_datas:
                return None
        names = sorted(bd.broker_name for bd in route.broker_datas)
        # A notification read late names the broker that sent it: that one has seen at least
        # that change, where a broker picked at random may not have yet (a join or a leave
        # reaches the brokers one by one) and its list would make the pass allocate by the
        # membership before the change, to be redone a second later.
        notifier = self.channels.get(self.notifying_broker.pop(group, ""))
        if notifier is not None and notifier.broker_name in names:
            broker_name = notifier.broker_name
        else:
            # Ours: a broker whose membership version we hold (its notifications, or its last
            # answer) is asked with it, and answers "unchanged" when nothing changed; RocketMQ
            # asks a broker at random.
            holding = [
                n for n in names if (c := self._open_channel(n)) and c.members.version(group)
            ]
            broker_name = random.choice(holding or names)
        channel = self._open_channel(broker_name)
        members = channel.members if channel is not None else NotifiedMembers()
        opened = channel.channel_id if channel is not None else None
        response = await self._consumer_list(broker_name, group, members.version(group))
        if response is not None and response.unchanged:
            # The members we hold (sorted, interned); gone only if a notification refused
            # meanwhile dropped them: then asked again, for the list.
            held = members.members(group, response.version)
            if held is not None:
                return held
            response = await self._consumer_list(broker_name, group, 0)
        if response is None:
            return None
        ids = list(map(sys.intern, response.consumer_id_list))  # as notified ids (membership)
        if ids.count(self.client_id) > 1:
            log.error(
                "duplicate client id in consumer group: another process uses this client id, so "
                "both compute the same allocation and some queues are consumed by nobody; give each "
                "consumer a unique instance_name",
                group=group,
                client_id=self.client_id,
                broker=broker_name,
            )
        elif (
            response.version > members.version(group)
            and channel is not None
            and channel.channel_id == opened
        ):
            # Held, to be asked with next time: if newer than what a notification brought
            # meanwhile, and from the channel that was open when we asked (a channel reopened
            # since holds what its broker sends it from its start).
            ids = members.whole(group, response.version, ids)
        return ids

    async def _consumer_list(
        self, broker_name: str, group: str, known_version: int
    ) -> broker_pb2.GetConsumerListByGroupResponse | None:
        """GET_CONSUMER_LIST_BY_GROUP to ``broker_name``; None when it failed."""
        request = broker_pb2.GetConsumerListByGroupRequest(
            consumer_group=group, known_version=known_version
        )
        try:
            response: broker_pb2.GetConsumerListByGroupResponse = await self.invoke_broker(
                broker_name, "GetConsumerListByGroup", request
            )
            return response
        except MQError as e:
            log.debug(
                "get consumer list by group failed",
                group=group,
                broker=broker_name,
                error=str(e),
            )
            return None

    def _open_channel(self, broker_name: str) -> BrokerChannel | None:
        """Our channel to ``broker_name`` if it is open now (the memberships it holds are that
        broker's), else None."""
        addr = self.find_broker_addr(broker_name)
        channel = self.channels.get(addr) if addr is not None else None
        return channel if channel is not None and channel.channel_id else None

    # ---- channels and heartbeats -----------------------------------------------------------
    def _channel(self, addr: str) -> BrokerChannel:
        channel = self.channels.get(addr)
        if channel is None:
            channel = BrokerChannel(
                addr,
                self.client_id,
                lambda: self.brokers.stub(addr),
                self._on_channel_event,
                self._on_channel_reopen,
                reconnect_delay_ms=self.config.channel_reconnect_delay_ms,
                reconnect_max_delay_ms=self.config.channel_reconnect_max_delay_ms,
                on_open=self._on_channel_open,
                on_lost=self._on_channel_lost,
            )
            self.channels[addr] = channel
            channel.start()
        return channel

    def _fresh(self, notify: broker_pb2.NotifyConsumerIdsChanged) -> bool:
        """Whether a notification's member list is recent enough to rebalance by."""
        if not notify.sent_at_ms:
            return True
        age_ms = time.time() * 1000 - notify.sent_at_ms
        if age_ms <= self.config.notified_ids_max_age_ms:
            return True
        self.stale_notifications += 1
        return False

    def _notified_members(
        self, addr: str, notify: broker_pb2.NotifyConsumerIdsChanged
    ) -> list[str] | None:
        """The members a notification carried: whole, or as a change from the version the
        channel holds (``protocol.membership``); None when it carried none or its base is not
        the one held."""
        channel = self.channels.get(addr)
        group = notify.consumer_group
        if notify.base_version:
            if channel is None:
                return None
            change = MembershipChange(
                notify.version,
                notify.base_version,
                tuple(notify.added_ids),
                tuple(notify.removed_ids),
            )
            return channel.members.apply(change, group)
        if not notify.consumer_id_list:
            return None
        if channel is None:
            return list(notify.consumer_id_list)
        return channel.members.whole(group, notify.version, notify.consumer_id_list)

    def _on_channel_event(self, addr: str, event: broker_pb2.ChannelEvent) -> None:
        kind = event.WhichOneof("event")
        if kind == "notify_consumer_ids_changed":
            notify = event.notify_consumer_ids_changed
            group = notify.consumer_group
            self.notifications_received += 1
            members = self._notified_members(addr, notify)
            consumer = self.consumer_table.get(group)
            wake = True
            if members is None and not notify.base_version:
                pass  # a remoting-style notification (the group only): the pass asks
            elif members is not None and self._fresh(notify):  # our brokers send the members
                if (
                    consumer is not None
                    and group not in self.notified_consumer_ids  # no list waits for a pass
                    and consumer.allocated_by(members)
                ):
                    # Ours: the last pass allocated by these very members and holds its share
                    # (each broker notifies the same change: four brokers, four notifications).
                    self.notifications_already_applied += 1
                    wake = False
                else:
                    self.notified_consumer_ids[group] = members
                    self.notifying_broker.pop(group, None)
            else:  # read late (a newer membership may be on its way), or a change from a
                # version we do not hold: the pass asks this broker
                self.notified_consumer_ids.pop(group, None)
                self.notifying_broker[group] = addr
            tracer.record(
                "notify_received",
                client_id=self.client_id,
                addr=addr,
                group=notify.consumer_group,
                members=len(members) if members is not None else 0,
            )
            log.info(
                "NOTIFY_CONSUMER_IDS_CHANGED received",
                client_id=self.client_id,
                addr=addr,
                group=notify.consumer_group,
            )
            if wake:
                self.convergence.changed(time.monotonic())
                self.rebalance_immediately()
        elif kind == "queue_released":
            group = event.queue_released.consumer_group
            consumer = self.consumer_table.get(group)
            if consumer is not None:
                consumer.on_queue_released(
                    MessageQueue.from_proto(event.queue_released.message_queue)
                )
        elif kind == "messages_arrived":
            arrived = event.messages_arrived
            self.pull_message_service.wake(
                arrived.consumer_group,
                MessageQueue.from_proto(arrived.message_queue),
                arrived.max_offset,
            )
        elif kind == "reset_offset":
            reset = event.reset_offset
            consumer = self.consumer_table.get(reset.consumer_group)
            if consumer is not None:
                offsets = {
                    MessageQueue(reset.topic, reset.broker_name, o.queue_id): o.offset
                    for o in reset.offsets
                }
                log.info(
                    "RESET_CONSUMER_CLIENT_OFFSET received",
                    client_id=self.client_id,
                    group=reset.consumer_group,
                    topic=reset.topic,
                    broker=reset.broker_name,
                )
                self._spawn_side_task(consumer.reset_offset(offsets))
        elif kind == "get_consumer_running_info":
            self._spawn_side_task(self._report_running_info(addr, event.get_consumer_running_info))

    def _spawn_side_task(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _report_running_info(
        self, addr: str, question: broker_pb2.GetConsumerRunningInfo
    ) -> None:
        """GET_CONSUMER_RUNNING_INFO from a broker: answer on the channel it came by."""
        channel = self.channels.get(addr)
        if channel is None or channel.channel_id is None:
            return
        report = broker_pb2.ConsumerRunningInfoReport(
            channel_id=channel.channel_id, request_id=question.request_id
        )
        consumer = self.consumer_table.get(question.consumer_group)
        if consumer is None:
            report.error = f"client {self.client_id} has no consumer of {question.consumer_group}"
        else:
            report.info.CopyFrom(consumer.running_info())
        try:
            await call(self.brokers.stub(addr).ReportConsumerRunningInfo, report, self._timeout())
        except MQError as e:
            log.info("running info report failed", addr=addr, error=str(e))

    def _on_channel_open(self, channel: BrokerChannel) -> None:
        """Every open of a channel (a broker restarted, or found at a new address): the
        offsets it was known to have are sent again at the next commit, and each consumer
        learns which of its grants there the new channel holds (those it does not were given
        away meanwhile). Its queues parked on the old channel's watches are pulled now: the
        new channel has none."""
        if channel.broker_name:
            held = channel.held
            for group, consumer in self.consumer_table.items():
                mine = None if held is None else held.get(group, {})
                consumer.broker_reconnected(channel.broker_name, mine)
            self.pull_message_service.wake_broker(channel.broker_name)

    async def _on_channel_reopen(self, channel: BrokerChannel) -> None:
        """A reopened channel (or a first open no heartbeat waited for): heartbeat to that broker,
        then rebalance (RocketMQ's onChannelActive).

        Until a heartbeat lands on the new channel this client is in none of that broker's
        groups, so where RocketMQ sends one, ours tries again (with the reconnect backoff)
        while the channel stays open.
        """
        channel_id = channel.channel_id
        failures = 0
        while (
            channel_id is not None
            and self.running
            and self.consumer_table
            and channel.channel_id == channel_id
        ):
            if await self._heartbeat_one(channel.addr, self._heartbeat_data()):
                self.rebalance_immediately()
                return
            failures += 1
            delay = reconnect_backoff_ms(
                failures,
                self.config.channel_reconnect_delay_ms,
                self.config.channel_reconnect_max_delay_ms,
                random.random(),
            )
            await asyncio.sleep(delay / 1000)

    def _heartbeat_data(self) -> common_pb2.HeartbeatData:
        return common_pb2.HeartbeatData(
            client_id=self.client_id,
            consumer_data_set=[c.consumer_data() for c in self.consumer_table.values()],
        )

    def _broker_addrs(self) -> list[str]:
        """Every broker address of the routes, sorted: whom a heartbeat round goes to."""
        return sorted({a for addrs in self.broker_addr_table.values() for a in addrs.values()})

    def _notifier_order(self, addrs: list[str]) -> list[str]:
        """``addrs`` from a place set by our client id, so that a group's members spread their
        notifying brokers over the brokers."""
        start = zlib.crc32(self.client_id.encode()) % len(addrs)
        return addrs[start:] + addrs[:start]

    def _open_notifiers(self, addrs: list[str], skip: Container[str] = ()) -> Iterator[str]:
        """The brokers of ``addrs`` in our order whose channel is open (when reached), but
        ``skip``."""
        return (a for a in self._notifier_order(addrs) if a not in skip and self._may_notify(a))

    def _may_notify(self, addr: str) -> bool:
        """Whether ``addr`` can be our notifier now: its channel is open, and it did not say
        it leaves a group of ours untold (``_silent``)."""
        return addr not in self._silent and self._channel_open(addr)

    def _pick_notifier(self, addrs: list[str]) -> None:
        """Before a round: the broker whose NOTIFY_CONSUMER_IDS_CHANGED we take
        (``notified_by_one_broker``): the one picked before while its channel lives, else the
        first in our order with an open channel, else the first not opened yet, else the first;
        never one that said it does not notify a group of ours (``_silent``). None (every
        broker notifies what it does) when every broker said so, or when only such brokers
        are reachable now: picking a closed one would leave them all quiet meanwhile."""
        self._silent &= set(addrs)  # a broker gone from the routes is asked afresh if it returns
        if not self.config.notified_by_one_broker or not addrs:
            self._notifier = None
            return
        if self._notifier in addrs and self._may_notify(self._notifier):
            return
        order = [a for a in self._notifier_order(addrs) if a not in self._silent]
        unopened = next((a for a in order if a not in self.channels), None)
        if unopened is None and order and not self._silent:
            unopened = order[0]
        self._notifier = next(self._open_notifiers(addrs), unopened)

    def _channel_open(self, addr: str) -> bool:
        channel = self.channels.get(addr)
        return channel is not None and channel.channel_id is not None

    def _notified_elsewhere(self, addr: str) -> bool:
        """Whether the broker at ``addr`` is to send us no notifications (another one does)."""
        return self._notifier is not None and addr != self._notifier

    async def _find_notifier(self, addrs: list[str], failed: set[str]) -> None:
        """The notifying broker's heartbeat failed or its channel ended: ask the others with
        an open channel in our order until one takes it (one that answers it does not notify
        a group of ours does not: ``_note_silence``). If none does, every broker is to notify
        us, which the round after says to them (until then, none may)."""
        for addr in self._open_notifiers(addrs, failed):
            self._notifier = addr
            if await self._heartbeat_one(addr, self._heartbeat_data()) and addr not in self._silent:
                return
        self._notifier = None
        if self.running:
            self._spawn_side_task(self._heartbeat_in_background())

    def _on_channel_lost(self, channel: BrokerChannel) -> None:
        """A stream ended: each consumer holds back its fenced queues of that broker until the
        next open lists their grants. When it was the broker that notifies us, another one
        is asked at once (ours: until its heartbeat lands, no broker tells us of a change)."""
        if channel.broker_name:
            for consumer in self.consumer_table.values():
                consumer.broker_channel_lost(channel.broker_name)
        if channel.addr == self._notifier and self.running and self.consumer_table:
            self._spawn_side_task(self._find_notifier(self._broker_addrs(), {channel.addr}))

    async def _heartbeat_one(self, addr: str, data: common_pb2.HeartbeatData) -> bool:
        channel = self._channel(addr)
        channel_id = await channel.wait_ready(self._timeout())
        if channel_id is None:
            log.warning("no channel to broker for heartbeat", addr=addr)
            return False
        for _ in range(2):
            elsewhere = self._notified_elsewhere(addr)
            request = broker_pb2.HeartbeatRequest(
                channel_id=channel_id, heartbeat=data, notified_elsewhere=elsewhere
            )
            try:
                response = await call(self.brokers.stub(addr).Heartbeat, request, self._timeout())
            except ChannelNotFound:
                channel.mark_broken(channel_id)
                return False
            except MQError as e:
                log.warning("send heart beat to broker failed", addr=addr, error=str(e))
                return False
            self._note_silence(addr, bool(response.silent_groups))
            if elsewhere == self._notified_elsewhere(addr):
                break  # else another broker was picked while it flew: say it again
        self._heartbeat_landed[addr] = channel_id
        return True

    def _note_silence(self, addr: str, silent: bool) -> None:
        """Whether ``addr``'s heartbeat answer named a group of ours it does not notify
        (``HeartbeatResponse.silent_groups``). When the broker notifying us just did, a round
        goes at once: it picks another, and tells this one to stay quiet."""
        if not silent:
            self._silent.discard(addr)
            return
        if addr not in self._silent and addr == self._notifier and self.running:
            self._spawn_side_task(self._heartbeat_in_background())
        self._silent.add(addr)

    def heartbeat_missing(self, broker_names: Iterable[str]) -> bool:
        """Whether one of these brokers has had no heartbeat from us on its current channel
        (a broker new in the routes, whose channel opened for a pull or a grant): it lists
        none of our consumers, and answers their pulls SUBSCRIPTION_NOT_EXIST."""
        return bool(self._addrs_missing_heartbeat(broker_names))

    def _addrs_missing_heartbeat(self, broker_names: Iterable[str]) -> list[str]:
        addrs = []
        for name in sorted(set(broker_names)):
            addr = self.find_broker_addr(name)
            if addr is None:
                continue
            channel = self.channels.get(addr)
            landed = self._heartbeat_landed.get(addr)
            if channel is None or channel.channel_id is None or landed != channel.channel_id:
                addrs.append(addr)
        return addrs

    async def _heartbeat_brokers_missing(self, broker_names: Iterable[str]) -> None:
        """Heartbeat those of these brokers that have had none on their current channel."""
        addrs = self._addrs_missing_heartbeat(broker_names)
        if addrs:
            data = self._heartbeat_data()
            await asyncio.gather(*(self._heartbeat_one(addr, data) for addr in addrs))

    async def send_heartbeat_to_all_broker(self) -> bool:
        """HEART_BEAT to every broker of the routes at once; True if there was any broker.

        One round at a time, like RocketMQ's tryLock; where we differ: a call that finds a round
        in flight is not dropped but makes that round go again with fresh data, so a new
        subscription version always reaches the brokers (else pulls fail SUBSCRIPTION_NOT_LATEST
        until the next periodic heartbeat). The caller holding the round waits for two at most
        (its own and one for the calls made during it); later calls get a round of their own
        in the background. Waiting until no call came in would hold ``start()`` for as long as
        its group keeps changing, as every rebalance that moves a queue asks for a heartbeat.
        """
        if self._heartbeat_lock.locked():
            self._heartbeat_again = True
            return True
        async with self._heartbeat_lock:
            sent = False
            self._heartbeat_again = True
            for _ in range(2):
                if not self._heartbeat_again:
                    break
                self._heartbeat_again = False
                data = self._heartbeat_data()
                addrs = self._broker_addrs()
                if not data.consumer_data_set or not addrs:
                    break
                self._pick_notifier(addrs)
                landed = await asyncio.gather(*(self._heartbeat_one(a, data) for a in addrs))
                sent = True
                notifier = self._notifier
                if notifier is not None and not landed[addrs.index(notifier)]:
                    await self._find_notifier(addrs, {notifier})
                if await self.refresh_routes_short_of_brokers(self._retry_topics()):
                    self.rebalance_immediately()
            if self._heartbeat_again and self.running:
                self._spawn_side_task(self._heartbeat_in_background())
            return sent

    async def _heartbeat_in_background(self) -> None:
        """The round asked for while a caller's two rounds ran (nobody waits for it)."""
        await self.send_heartbeat_to_all_broker()


def _route_key(route: common_pb2.TopicRouteData) -> bytes:
    """A comparable form of a route (sorted by broker name, as ``topicRouteDataChanged``)."""
    copy = common_pb2.TopicRouteData()
    copy.CopyFrom(route)
    queue_datas = sorted(copy.queue_datas, key=lambda q: q.broker_name)
    broker_datas = sorted(copy.broker_datas, key=lambda b: b.broker_name)
    del copy.queue_datas[:]
    del copy.broker_datas[:]
    copy.queue_datas.extend(queue_datas)
    copy.broker_datas.extend(broker_datas)
    return copy.SerializeToString(deterministic=True)


class MQClientManager:
    """The process-wide table of client instances, by client id (RocketMQ's singleton)."""

    _instances: ClassVar[dict[str, MQClientInstance]] = {}
    _users: ClassVar[dict[str, int]] = {}

    @classmethod
    def get_or_create(
        cls, client_id: str, namesrv_addr: str, config: ClientConfig | None = None
    ) -> MQClientInstance:
        instance = cls._instances.get(client_id)
        if instance is None:
            instance = cls._instances[client_id] = MQClientInstance(client_id, namesrv_addr, config)
        cls._users[client_id] = cls._users.get(client_id, 0) + 1
        return instance

    @classmethod
    async def release(cls, client_id: str) -> None:
        """One user is done; the last one shuts the instance down."""
        users = cls._users.get(client_id, 0) - 1
        if users > 0:
            cls._users[client_id] = users
            return
        cls._users.pop(client_id, None)
        instance = cls._instances.pop(client_id, None)
        if instance is not None:
            await instance.shutdown()


def consumer_client_id(client_ip: str, instance_name: str | None, clustering: bool) -> str:
    """A consumer's client id: RocketMQ changes the default instance name to ``pid#nanotime``
    in CLUSTERING (``changeInstanceNameToPID``) and keeps ``DEFAULT`` in BROADCASTING."""
    if instance_name is None:
        instance_name = default_instance_name() if clustering else "DEFAULT"
    return build_client_id(client_ip, instance_name)
