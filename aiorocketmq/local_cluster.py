"""``LocalCluster``: name servers and brokers in this process, on ephemeral loopback ports.

For tests, the demo and benchmarks: ``async with LocalCluster(tmp_path, brokers=2) as c:``
starts one name server and the brokers (stores under ``root``), with timings shrunk through the
same settings a user would set (``broker_overrides``), and stops everything on exit. With
``remoting=True`` every server also speaks RocketMQ's remoting protocol, so Apache's clients can
use the cluster at ``namesrv_remoting_addr``; with ``metrics=True`` every server serves
Prometheus metrics (``namesrv.metrics.address``, ``broker.metrics.address``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiorocketmq.broker.broker_controller import BrokerController
from aiorocketmq.broker.config import load_settings
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.nameserver.config import NamesrvConfig
from aiorocketmq.nameserver.service import NameServer
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

__all__ = ["LocalCluster"]


@dataclass
class LocalCluster:
    """One name server and ``brokers`` brokers named broker-a, broker-b, ..."""

    root: Path
    brokers: int = 1
    remoting: bool = False
    metrics: bool = False
    broker_overrides: dict[str, Any] = field(default_factory=dict)
    namesrv_config: NamesrvConfig = field(
        default_factory=lambda: NamesrvConfig(listen="127.0.0.1:0")
    )
    namesrv: NameServer | None = None
    broker_list: list[BrokerController] = field(default_factory=list)
    # The name server's address while it is stopped (it restarts there).
    namesrv_listen: str = ""

    @property
    def namesrv_addr(self) -> str:
        if self.namesrv is None:
            assert self.namesrv_listen, "cluster not started"
            return self.namesrv_listen
        return self.namesrv.address

    @property
    def namesrv_remoting_addr(self) -> str:
        """The name server's remoting address (what an Apache client's NAMESRV_ADDR names)."""
        assert self.namesrv is not None and self.namesrv.remoting_address, "no remoting"
        return self.namesrv.remoting_address

    def broker(self, name: str) -> BrokerController:
        for b in self.broker_list:
            if b.config.broker_name == name:
                return b
        raise KeyError(name)

    def new_broker(self, index: int, **overrides: Any) -> BrokerController:
        """A broker (not started) wired to this cluster's name server."""
        name = f"broker-{chr(ord('a') + index)}"
        settings: dict[str, Any] = {
            "broker_name": name,
            "listen": "127.0.0.1:0",
            "namesrv_addr": self.namesrv_addr,
            "store_path_root_dir": str(self.root / name),
        }
        if self.remoting:
            settings["remoting_listen"] = "127.0.0.1:0"
        if self.metrics:
            settings["metrics_listen"] = "127.0.0.1:0"
        settings.update(self.broker_overrides)
        settings.update(overrides)
        broker_config, store_config = load_settings(None, **settings)
        return BrokerController(broker_config, store_config)

    async def start(self) -> None:
        if self.remoting and not self.namesrv_config.remoting_listen:
            self.namesrv_config.remoting_listen = "127.0.0.1:0"
        if self.metrics and not self.namesrv_config.metrics_listen:
            self.namesrv_config.metrics_listen = "127.0.0.1:0"
        self.namesrv = NameServer(self.namesrv_config)
        await self.namesrv.start()
        for i in range(self.brokers):
            broker = self.new_broker(i)
            await broker.start()
            self.broker_list.append(broker)

    async def create_topic(
        self, topic: str, queues: int = 8, *, perm: int = 6, timeout: float = 10.0
    ) -> None:
        """Create ``topic`` with ``queues`` read and write queues on every broker, and wait until
        the name server routes it on all of them (``TimeoutError`` after ``timeout`` s)."""
        config = common_pb2.TopicConfig(
            topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm
        )
        conns = BrokerConnections()
        try:
            for broker in self.broker_list:
                await conns.stub(broker.address).UpdateAndCreateTopic(
                    broker_pb2.UpdateAndCreateTopicRequest(topic_config=config), timeout=timeout
                )
        finally:
            await conns.close()
        async with NameServerClient(self.namesrv_addr) as ns:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        route = await ns.get_route_info_by_topic(topic)
                    except MQError:
                        route = None
                    if route is not None and len(
                        [q for q in route.queue_datas if q.read_queue_nums == queues]
                    ) == len(self.broker_list):
                        return
                    await asyncio.sleep(0.02)

    async def restart_broker(self, name: str) -> BrokerController:
        """Stop a broker and start it again on the same port and store."""
        old = self.broker(name)
        await old.shutdown()
        index = self.broker_list.index(old)
        ports: dict[str, Any] = {"listen": f"127.0.0.1:{old.port}"}
        if old.remoting is not None:
            ports["remoting_listen"] = f"127.0.0.1:{old.remoting.port}"
        fresh = self.new_broker(index, **ports)
        await fresh.start()
        self.broker_list[index] = fresh
        return fresh

    async def stop_namesrv(self) -> None:
        """Stop the name server (brokers keep retrying their registration)."""
        if self.namesrv is not None:
            self.namesrv_listen = self.namesrv.address
            if self.namesrv.remoting is not None:
                self.namesrv_config.remoting_listen = self.namesrv.remoting_address
            await self.namesrv.shutdown()
            self.namesrv = None

    async def start_namesrv(self) -> None:
        """Start the name server again on its old address (empty tables: brokers re-register)."""
        config = NamesrvConfig(
            listen=self.namesrv_listen or self.namesrv_config.listen,
            scan_not_active_broker_interval_ms=self.namesrv_config.scan_not_active_broker_interval_ms,
            broker_channel_expired_time_ms=self.namesrv_config.broker_channel_expired_time_ms,
            remoting_listen=self.namesrv_config.remoting_listen,
        )
        self.namesrv = NameServer(config)
        await self.namesrv.start()

    async def shutdown(self) -> None:
        for broker in self.broker_list:
            await broker.shutdown()
        self.broker_list.clear()
        if self.namesrv is not None:
            await self.namesrv.shutdown()
            self.namesrv = None

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
