"""The name server's async shell: the gRPC servicer and the ``NameServer`` component.

``NameServerService`` turns each RPC into one call on the ``RouteInfoManager`` (every method is
wrapped by ``guard``, so typed errors become statuses and nothing crashes the server).
``NameServer`` owns the gRPC server and one housekeeping task, RocketMQ's
``scanNotActiveBroker`` every ``scan_not_active_broker_interval_ms``; ``start()`` starts both,
``shutdown()`` cancels and awaits the task and stops the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.metrics import MetricFamilies, ServerMetrics
from aiorocketmq.nameserver.config import NamesrvConfig
from aiorocketmq.nameserver.remoting import NameServerRemoting
from aiorocketmq.nameserver.route_info_manager import RouteInfoManager
from aiorocketmq.protocol.codes import RPC_REQUEST_CODES
from aiorocketmq.protocol.remoting.server import RemotingServer
from aiorocketmq.protocol.rpc import guard, new_server
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

__all__ = ["NameServer", "NameServerService", "wall_clock_ms"]

log = get_logger("aiorocketmq.nameserver")


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, as RocketMQ's ``System.currentTimeMillis``."""
    return time.time_ns() // 1_000_000


class NameServerService(nameserver_pb2_grpc.NameServerServicer):  # type: ignore[misc]
    """The ``NameServer`` gRPC service over one ``RouteInfoManager``."""

    def __init__(
        self, route_info_manager: RouteInfoManager, now_ms: Callable[[], int] = wall_clock_ms
    ) -> None:
        self.route_info_manager = route_info_manager
        self._now_ms = now_ms
        self.metrics: ServerMetrics | None = None

    def observe_rpc(self, rpc: str, response_code: int, seconds: float) -> None:
        """Called by ``guard`` after each RPC: the latency histogram, when metrics are on."""
        if self.metrics is not None:
            code = RPC_REQUEST_CODES.get(f"NameServer.{rpc}")
            self.metrics.observe_rpc("grpc", rpc if code is None else int(code), response_code,
                                     seconds)

    @guard
    async def RegisterBroker(
        self, request: nameserver_pb2.RegisterBrokerRequest, context: grpc.aio.ServicerContext
    ) -> nameserver_pb2.RegisterBrokerResponse:
        """REGISTER_BROKER (103): record the broker and its topics; refresh its liveness."""
        result = self.route_info_manager.register_broker(
            cluster_name=request.cluster_name,
            broker_addr=request.broker_addr,
            broker_name=request.broker_name,
            broker_id=request.broker_id,
            now=self._now_ms(),
            ha_server_addr=request.ha_server_addr,
            topic_configs=request.topic_configs,
            data_version=request.data_version,
            heartbeat_timeout_millis=request.heartbeat_timeout_millis,
            remoting_addr=request.remoting_addr,
        )
        fields = {
            "cluster": request.cluster_name,
            "broker_name": request.broker_name,
            "broker_id": request.broker_id,
            "broker_addr": request.broker_addr,
            "data_version": request.data_version,
            "topics": len(request.topic_configs),
        }
        if result.first_registration:
            log.info("new broker registered", ha_server_addr=request.ha_server_addr, **fields)
        else:
            log.debug("register broker", **fields)
        return nameserver_pb2.RegisterBrokerResponse(
            master_addr=result.master_addr, ha_server_addr=result.ha_server_addr
        )

    @guard
    async def UnregisterBroker(
        self, request: nameserver_pb2.UnregisterBrokerRequest, context: grpc.aio.ServicerContext
    ) -> nameserver_pb2.UnregisterBrokerResponse:
        """UNREGISTER_BROKER (104): the broker leaves; its queues leave the routes at once."""
        known = self.route_info_manager.unregister_broker(
            cluster_name=request.cluster_name,
            broker_addr=request.broker_addr,
            broker_name=request.broker_name,
            broker_id=request.broker_id,
        )
        log.info(
            "unregister broker",
            cluster=request.cluster_name,
            broker_name=request.broker_name,
            broker_id=request.broker_id,
            broker_addr=request.broker_addr,
            known=known,
        )
        return nameserver_pb2.UnregisterBrokerResponse()

    @guard
    async def GetRouteInfoByTopic(
        self, request: nameserver_pb2.GetRouteInfoByTopicRequest, context: grpc.aio.ServicerContext
    ) -> common_pb2.TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105): the topic's route; NOT_FOUND when no live broker has it."""
        return self.route_info_manager.pick_topic_route_data(request.topic)

    @guard
    async def GetBrokerClusterInfo(
        self, request: nameserver_pb2.GetBrokerClusterInfoRequest, context: grpc.aio.ServicerContext
    ) -> nameserver_pb2.ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106): clusters, broker names, addresses, liveness."""
        return self.route_info_manager.get_all_cluster_info()

    @guard
    async def DeleteTopic(
        self, request: nameserver_pb2.DeleteTopicInNamesrvRequest, context: grpc.aio.ServicerContext
    ) -> nameserver_pb2.DeleteTopicInNamesrvResponse:
        """DELETE_TOPIC_IN_NAMESRV (216): the topic leaves the routes."""
        existed = self.route_info_manager.delete_topic(request.topic)
        log.info("delete topic", topic=request.topic, existed=existed)
        return nameserver_pb2.DeleteTopicInNamesrvResponse(existed=existed)

    @guard
    async def GetAllTopicList(
        self, request: nameserver_pb2.GetAllTopicListRequest, context: grpc.aio.ServicerContext
    ) -> nameserver_pb2.TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic a live broker serves."""
        return self.route_info_manager.get_all_topic_list()


class NameServer:
    """The name server component (RocketMQ's ``NamesrvController``): gRPC server + housekeeping."""

    def __init__(
        self, config: NamesrvConfig | None = None, *, now_ms: Callable[[], int] = wall_clock_ms
    ) -> None:
        self.config = config if config is not None else NamesrvConfig()
        self._now_ms = now_ms
        self.route_info_manager = RouteInfoManager(
            default_heartbeat_timeout_ms=self.config.broker_channel_expired_time_ms
        )
        self.service = NameServerService(self.route_info_manager, now_ms)
        self._server: grpc.aio.Server | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self.port: int = 0
        self.remoting: RemotingServer | None = None
        self.metrics: ServerMetrics | None = None

    @property
    def address(self) -> str:
        """``host:port`` the server is bound to (the real port when ``listen`` asked for 0)."""
        host, _, _ = self.config.listen.rpartition(":")
        return f"{host}:{self.port}"

    @property
    def remoting_address(self) -> str:
        """``host:port`` of the remoting listener; empty when there is none."""
        return self.remoting.address if self.remoting is not None else ""

    async def start(self) -> None:
        """Bind ``config.listen`` (and ``remoting_listen``), start serving and the scan task."""
        if self._server is not None:
            raise RuntimeError("name server already started")
        server = new_server()
        nameserver_pb2_grpc.add_NameServerServicer_to_server(self.service, server)
        try:
            port = server.add_insecure_port(self.config.listen)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {self.config.listen}: {e}") from e
        if port == 0:
            raise OSError(f"cannot listen on {self.config.listen}")
        if self.config.metrics_listen:
            self.metrics = ServerMetrics(
                node_type="namesrv", cluster="", node_id=self.config.listen,
                collect=self._collect_metrics,
            )
            self.metrics.start(self.config.metrics_listen)
            self.service.metrics = self.metrics
        if self.config.remoting_listen:
            remoting = RemotingServer(
                NameServerRemoting(self.route_info_manager).handle, name="namesrv"
            )
            await remoting.start(self.config.remoting_listen)
            remoting.observe = self._observe_remoting
            self.remoting = remoting
        await server.start()
        self._server = server
        self.port = port
        self._scan_task = asyncio.create_task(
            self._scan_not_active_broker_loop(), name="nameserver-scan-not-active-broker"
        )
        log.info(
            "name server boot success",
            address=self.address,
            remoting_address=self.remoting_address or None,
            scan_not_active_broker_interval_ms=self.config.scan_not_active_broker_interval_ms,
            broker_channel_expired_time_ms=self.config.broker_channel_expired_time_ms,
        )

    def _collect_metrics(self, out: MetricFamilies) -> None:
        """Live brokers per cluster, and topics routed."""
        routes = self.route_info_manager
        clusters: dict[str, int] = {}
        for live in routes.broker_live_table.values():
            clusters[live.cluster_name] = clusters.get(live.cluster_name, 0) + 1
        out.gauge("aiorocketmq_namesrv_live_brokers", "Live broker addresses, per cluster",
                  (({"broker_cluster": c}, n) for c, n in sorted(clusters.items())))
        out.gauge("rocketmq_topic_number", "Topics some registered broker serves",
                  [({}, len(routes.topic_queue_table))])

    def _observe_remoting(self, request_code: int, response_code: int, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_rpc("remoting", request_code, response_code, seconds)

    async def shutdown(self) -> None:
        """Cancel and await the scan task, then stop the server (in-flight RPCs get a grace)."""
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # we are being cancelled ourselves, not just the task
        remoting, self.remoting = self.remoting, None
        if remoting is not None:
            await remoting.stop()
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            metrics.stop()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(self.config.shutdown_grace_ms / 1000)
            log.info("name server shutdown", address=self.address)

    async def __aenter__(self) -> NameServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    def scan_not_active_broker(self) -> None:
        """One housekeeping pass: drop the brokers silent for longer than their timeout."""
        for info in self.route_info_manager.scan_not_active_broker(self._now_ms()):
            log.warning(
                "the broker's channel expired",
                cluster=info.cluster_name,
                broker_name=info.broker_name,
                broker_id=info.broker_id,
                broker_addr=info.broker_addr,
                last_update_timestamp=info.last_update_timestamp,
                heartbeat_timeout_millis=info.heartbeat_timeout_millis,
            )

    async def _scan_not_active_broker_loop(self) -> None:
        """Run the scan every interval until cancelled; a failing pass is logged, not fatal."""
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.scan_not_active_broker()
            except Exception:
                log.exception("scan not active broker failed")
