"""``BrokerController``: the broker component; owns its parts, its tasks and its gRPC server.

``start()`` loads the store and the config files, serves gRPC, registers with every name server
and starts the timers: name-server registration (30 s), consumer-offset flush (5 s), client
channel scan (10 s, 120 s expiry), delayed delivery. ``shutdown()`` unregisters from the name
servers, stops serving, cancels and awaits every task and flushes what it keeps on disk.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path
from types import TracebackType

import grpc

from aiorocketmq.broker.admin_processor import AdminProcessor
from aiorocketmq.broker.client_processor import ClientManageProcessor
from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.long_polling import PullRequestHoldService
from aiorocketmq.broker.metrics import GroupChangeCounter, collect_broker
from aiorocketmq.broker.offset_processor import OffsetProcessor
from aiorocketmq.broker.pull_processor import PullMessageProcessor
from aiorocketmq.broker.schedule import SCHEDULE_TOPIC, ScheduleMessageService
from aiorocketmq.broker.send_processor import SendMessageProcessor
from aiorocketmq.broker.store import MessageStore, MessageStoreConfig
from aiorocketmq.broker.topic_config_manager import TopicConfigManager
from aiorocketmq.logs import get_logger
from aiorocketmq.metrics import MetricFamilies, ServerMetrics
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.codes import RPC_REQUEST_CODES
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.remoting.server import RemotingServer
from aiorocketmq.protocol.rpc import new_server
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc

__all__ = ["AUTO_CREATE_TOPIC_KEY_TOPIC", "BrokerController"]

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"

log = get_logger("aiorocketmq.broker")


HEARTBEAT_REGISTER_WAIT_S = 1.5
"""How long a heartbeat that created a topic waits for the name servers to have it."""


def _retrieve(task: asyncio.Task[None]) -> None:
    """A registration whose waiters timed out: take its outcome (they logged the timeout)."""
    if not task.cancelled():
        task.exception()


def _now_ms() -> int:
    return int(time.time() * 1000)


def package_version() -> str:
    try:
        return _dist_version("aiorocketmq")
    except PackageNotFoundError:
        return "unknown"


class BrokerController:
    """A broker: store, topics, consumer groups, and the gRPC service over them."""

    def __init__(self, config: BrokerConfig, store_config: MessageStoreConfig) -> None:
        self.config = config
        self.store_config = store_config
        self.store_root = Path(store_config.store_path_root_dir)
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.address = ""
        self._tasks: set[asyncio.Task[None]] = set()
        self._register_now = asyncio.Event()
        self.namesrv: NameServerClient | None = None
        self.registered_count = 0
        self._registered_version = -1  # the topics' data_version the name servers last got
        self._registering: asyncio.Task[None] | None = None  # a registration a heartbeat awaits
        self.running = False
        self.remoting: RemotingServer | None = None
        self.metrics: ServerMetrics | None = None
        self.group_changes = GroupChangeCounter()
        self.boot_timestamp = 0

    @property
    def remoting_address(self) -> str:
        """``host:port`` remoting clients dial; empty when the broker serves none."""
        return self.remoting.address if self.remoting is not None else ""

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind, load, serve, register, and start the timers."""
        from aiorocketmq.broker.service import (
            BrokerService,  # the servicer imports this module's types
        )

        host = self.config.listen.rpartition(":")[0] or "127.0.0.1"
        self.server = new_server()
        broker_pb2_grpc.add_BrokerServicer_to_server(BrokerService(self), self.server)
        try:
            self.port = self.server.add_insecure_port(self.config.listen)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {self.config.listen}: {e}") from e
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.listen}")
        self.address = f"{self.config.broker_ip1 or host}:{self.port}"
        self.store = MessageStore(
            self.store_config, store_host=self.address, broker_name=self.config.broker_name
        )
        self.topics = TopicConfigManager(
            self.store_root, default_topic_queue_nums=self.config.default_topic_queue_nums
        )
        self.topics.load()
        if self.config.auto_create_topic_enable:
            # The default topic's route tells producers which brokers auto-create topics.
            self.topics.create_topic_if_absent(
                AUTO_CREATE_TOPIC_KEY_TOPIC, self.config.default_topic_queue_nums, PermName(7)
            )
        self.topics.on_change = self._register_now.set
        self.hold = PullRequestHoldService()
        self.schedule = ScheduleMessageService(
            self.store,
            self.store_root,
            self.config.delay_levels_ms(),
            check_interval_ms=self.config.schedule_check_interval_ms,
        )
        self.client = ClientManageProcessor(
            self.config, self.topics, self.store, self.schedule, self.store_root
        )
        self.client.consumer_manager.append_consumer_ids_change_listener(self.group_changes)
        self.client.on_reset = self.hold.release
        self.store.add_arrival_listener(self.hold.notify_message_arriving)
        self.store.add_arrival_listener(self.client.messages_arrived)
        self.store.add_arrival_listener(self.schedule.on_message_arriving)
        self.send = SendMessageProcessor(self.config, self.topics, self.store, self.schedule)
        self.pull = PullMessageProcessor(
            self.config,
            self.topics,
            self.store,
            self.hold,
            self.client,
            self.client.offsets,
            self.client.grants,
            self.client,
        )
        self.offset = OffsetProcessor(
            self.config, self.topics, self.store, self.client.offsets, self.client.grants
        )
        self.admin = AdminProcessor(
            self.config, self.topics, self.store, on_config_change=self._config_changed
        )

        await self.store.start()
        if self.config.metrics_listen:
            self.metrics = ServerMetrics(
                node_type="broker",
                cluster=self.config.broker_cluster_name,
                node_id=self.config.broker_name,
                collect=self._collect_metrics,
            )
            self.metrics.start(self.config.metrics_listen)
        if self.config.remoting_listen:
            await self._start_remoting(host)
        await self.server.start()
        await self.schedule.start()
        self._spawn(
            self._every(self.config.flush_consumer_offset_interval_ms, self.client.persist_offsets),
            "offset-flush",
        )
        self._spawn(
            self._every(
                self.config.client_channel_scan_interval_ms, self.client.scan_not_active_channel
            ),
            "channel-scan",
        )
        if self.client.grants.restored_at:  # grants came back from the last run
            self._spawn(
                self._every(1_000, self.client.expire_restored_grants), "restored-grant-expiry"
            )
        if self.config.namesrv_addr:
            self.namesrv = NameServerClient(self.config.namesrv_addr)
            try:
                await self.register_broker_all()
            except MQError as e:  # the name server may come later: keep trying every period
                log.warning("register broker to name server failed", error=str(e))
            self._spawn(self._register_loop(), "namesrv-register")
        self.running = True
        self.boot_timestamp = _now_ms()
        log.info(
            "the broker boot success",
            broker_name=self.config.broker_name,
            cluster=self.config.broker_cluster_name,
            address=self.address,
            remoting_address=self.remoting_address or None,
            metrics_address=self.metrics.address if self.metrics is not None else None,
            namesrv_addr=self.config.namesrv_addr,
            store=str(self.store_root),
        )

    async def _start_remoting(self, host: str) -> None:
        """Serve RocketMQ's remoting protocol too (``remoting_listen``), over the same parts."""
        from aiorocketmq.broker.remoting import BrokerRemoting

        handler = BrokerRemoting(self)
        remoting = RemotingServer(
            handler.handle,
            name=self.config.broker_name,
            on_close=handler.on_close,
            max_frame_length=self.config.remoting_max_frame_length,
            idle_timeout_ms=self.config.remoting_idle_timeout_ms,
        )
        await remoting.start(self.config.remoting_listen)
        # Clients dial broker_ip1, else the host bound (the gRPC one for a wildcard bind).
        if self.config.broker_ip1 or remoting.host in ("0.0.0.0", "::", ""):
            remoting.host = self.config.broker_ip1 or host
        handler.bind(remoting.address)
        remoting.observe = self._observe_remoting
        self.remoting = remoting

    def runtime_info(self) -> broker_pb2.BrokerRuntimeInfo:
        """GET_BROKER_RUNTIME_INFO: RocketMQ's brokerStatus figures (the ones we keep)."""
        now = _now_ms()
        up_s = max(0, now - self.boot_timestamp) // 1000
        usage = shutil.disk_usage(self.store_root)
        table = {
            "brokerName": self.config.broker_name,
            "brokerVersionDesc": f"aiorocketmq {package_version()}",
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": f"[ {up_s // 86400} days, {up_s // 3600 % 24} hours, "
            f"{up_s // 60 % 60} minutes, {up_s % 60} seconds ]",
            "address": self.address,
            "remotingAddress": self.remoting_address,
            "msgPutTotalTodayNow": str(sum(c[0] for c in self.send.stats.values())),
            "msgGetTotalTodayNow": str(sum(c[0] for c in self.pull.stats.values())),
            "commitLogMinOffset": str(self.store.commit_log_min_offset),
            "commitLogMaxOffset": str(self.store.commit_log_max_offset),
            "commitLogDiskRatio": f"{(usage.total - usage.free) / usage.total:.4f}",
            "topicNumber": str(len(self.topics.topic_config_table)),
            "consumerGroupNumber": str(len(self.client.consumer_manager.consumer_table)),
            "channelsOpen": str(len(self.client.channels)),
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "heldPulls": str(self.hold.held_count()),
        }
        return broker_pb2.BrokerRuntimeInfo(table=table)

    def _collect_metrics(self, out: MetricFamilies) -> None:
        collect_broker(self, out)

    def observe_rpc(self, rpc: str, response_code: int, seconds: float) -> None:
        """A gRPC request served (``protocol.rpc.guard`` calls it): the latency histogram."""
        if self.metrics is not None:
            code = RPC_REQUEST_CODES.get(f"Broker.{rpc}")
            self.metrics.observe_rpc(
                "grpc", rpc if code is None else int(code), response_code, seconds
            )

    def _observe_remoting(self, request_code: int, response_code: int, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_rpc("remoting", request_code, response_code, seconds)

    async def shutdown(self) -> None:
        """Unregister, stop serving, stop the timers, flush. Idempotent."""
        if not self.running:
            return
        self.running = False
        if self._registering is not None:  # not to land after the unregistration below
            self._registering.cancel()
            await asyncio.gather(self._registering, return_exceptions=True)
        if self.namesrv is not None:
            try:
                await self.namesrv.unregister_broker(
                    cluster_name=self.config.broker_cluster_name,
                    broker_name=self.config.broker_name,
                    broker_id=self.config.broker_id,
                    broker_addr=self.address,
                )
            except MQError as e:
                log.warning("unregister broker failed", error=str(e))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.hold.wake_all()
        if self.remoting is not None:
            await self.remoting.stop()
        self.client.close_all_channels()
        if self.server is not None:
            await self.server.stop(grace=0.5)
        await self.client.persist_grants_now()  # after the last release a handler could make
        await self.schedule.shutdown()
        if self.metrics is not None:
            self.metrics.stop()
        self.client.persist_offsets_now()
        await self.store.shutdown()
        if self.namesrv is not None:
            await self.namesrv.close()
        log.info("the broker shutdown", broker_name=self.config.broker_name)

    def _config_changed(self) -> None:
        """UPDATE_BROKER_CONFIG changed settings: refresh the one component that copies one."""
        self.client.listener.notify_consumer_ids_changed_enable = (
            self.config.notify_consumer_ids_changed_enable
        )

    async def __aenter__(self) -> BrokerController:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    # ---- name servers ----------------------------------------------------------------------
    async def register_broker_all(self) -> None:
        """REGISTER_BROKER to every name server, with every topic but internal ones."""
        if self.namesrv is None:
            return
        version = self.topics.data_version
        topic_configs = [
            c.to_proto()
            for name, c in sorted(self.topics.topic_config_table.items())
            if name != SCHEDULE_TOPIC
        ]
        await self.namesrv.register_broker(
            cluster_name=self.config.broker_cluster_name,
            broker_name=self.config.broker_name,
            broker_id=self.config.broker_id,
            broker_addr=self.address,
            topic_configs=topic_configs,
            data_version=self.topics.data_version,
            remoting_addr=self.remoting_address,
            timeout=self.config.register_broker_timeout_ms / 1000,
        )
        self.registered_count += 1
        self._registered_version = max(self._registered_version, version)

    async def heartbeat(self, request: broker_pb2.HeartbeatRequest) -> broker_pb2.HeartbeatResponse:
        """HEART_BEAT (both protocols). One that created its group's retry topic answers once
        the name servers have it, as RocketMQ registers a topic created that way before
        answering: a consumer that reads the retry topic's route after its heartbeat then sees
        it on every broker. Read earlier, it was on only some of them, and such consumers
        allocated the retry queues differently from the rest for up to 30 s (the route
        refresh), each waiting on a queue another held."""
        before = self.topics.data_version
        response = self.client.heartbeat(request)
        if self.topics.data_version != before:
            await self.topics_registered()
        return response

    async def topics_registered(self) -> None:
        """Return once the name servers have the topics as they are now, or after
        ``HEARTBEAT_REGISTER_WAIT_S`` (well within a client's 3 s deadline) or a failure:
        logged, and the register loop tries again."""
        target = self.topics.data_version
        if self.namesrv is None or self._registered_version >= target:
            return
        try:
            async with asyncio.timeout(HEARTBEAT_REGISTER_WAIT_S):
                await self._registered_through(target)
        except (MQError, TimeoutError) as e:
            log.warning("register broker to name server failed", error=str(e) or "timed out")

    def _register_shared(self) -> asyncio.Task[None]:
        """The registration in flight, or a new one: the register loop and the heartbeats that
        wait for one share it, so a topic created by a heartbeat is registered once."""
        if self._registering is None or self._registering.done():
            self._registering = asyncio.ensure_future(self.register_broker_all())
            self._registering.add_done_callback(_retrieve)
        return self._registering

    async def _registered_through(self, version: int) -> None:
        """Share registrations until one that began at ``version`` or later has landed (one
        in flight may have begun before a change)."""
        while self._registered_version < version:
            await asyncio.shield(self._register_shared())

    async def _register_loop(self) -> None:
        period = self.config.register_name_server_period_ms / 1000
        while True:
            try:
                async with asyncio.timeout(period):
                    await self._register_now.wait()
            except TimeoutError:
                pass
            self._register_now.clear()
            try:
                await asyncio.shield(self._register_shared())  # the period's, whatever changed
                await self._registered_through(self.topics.data_version)
            except MQError as e:
                log.warning("register broker to name server failed", error=str(e))

    # ---- timers ----------------------------------------------------------------------------
    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)

    async def _every(self, period_ms: int, action: Callable[[], Awaitable[None] | None]) -> None:
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                result = action()
                if result is not None:
                    await result
            except Exception:
                log.exception(
                    "broker timer failed", action=getattr(action, "__name__", str(action))
                )
