"""A name server and a broker as real processes, for benchmarks (``async with``)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

__all__ = ["BrokerProcesses", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class BrokerProcesses:
    """``mqnamesrv`` and one ``mqbroker`` on loopback, stores under ``root``."""

    def __init__(self, root: Path, *, settings: str = "", broker_name: str = "broker-a") -> None:
        self.root = root
        self.settings = settings
        self.broker_name = broker_name
        self.namesrv_addr = f"127.0.0.1:{free_port()}"
        self.broker_addr = f"127.0.0.1:{free_port()}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conns = BrokerConnections()

    def _spawn(self, *args: str) -> None:
        bin_dir = Path(sys.executable).parent
        log = (self.root / f"{args[0]}.log").open("ab")
        self.procs.append(
            subprocess.Popen(
                [str(bin_dir / args[0]), *args[1:]], stdout=log, stderr=log, env=os.environ.copy()
            )
        )

    async def start(self) -> None:
        self._spawn("mqnamesrv", "--listen", self.namesrv_addr, "--log-level", "WARNING")
        config = self.root / "broker.toml"
        config.write_text("register_name_server_period_ms = 1000\n" + self.settings)
        self._spawn(
            "mqbroker",
            "-n",
            self.namesrv_addr,
            "--listen",
            self.broker_addr,
            "--store-dir",
            str(self.root / "store"),
            "--broker-name",
            self.broker_name,
            "-c",
            str(config),
            "--log-level",
            "WARNING",
        )
        async with NameServerClient(self.namesrv_addr) as ns:
            for _ in range(300):
                try:
                    info = await ns.get_broker_cluster_info(timeout=0.5)
                    if self.broker_name in info.broker_addr_table:
                        return
                except Exception:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError("the broker did not register in time")

    async def create_topic(self, topic: str, queues: int) -> None:
        """Create the topic and wait until the name server routes it."""
        await self.conns.stub(self.broker_addr).UpdateAndCreateTopic(
            broker_pb2.UpdateAndCreateTopicRequest(
                topic_config=common_pb2.TopicConfig(
                    topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6
                )
            ),
            timeout=5,
        )
        async with NameServerClient(self.namesrv_addr) as ns:
            for _ in range(300):
                try:
                    route = await ns.get_route_info_by_topic(topic)
                    if route.queue_datas and route.queue_datas[0].read_queue_nums == queues:
                        return
                except Exception:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"topic {topic} not routed in time")

    async def stop(self) -> None:
        await self.conns.close()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                await asyncio.to_thread(p.wait, 10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    async def __aenter__(self) -> BrokerProcesses:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
