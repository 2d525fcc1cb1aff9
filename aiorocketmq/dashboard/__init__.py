"""A small web dashboard for a cluster: its name servers and brokers, topics, consumer groups
(RocketMQ Dashboard's progress view: who holds which queue, offsets, lag, TPS) and a live
rebalance timeline, or the replay of a recorded trace.

``aiorocketmq dashboard -n 127.0.0.1:9876 [--listen 127.0.0.1:8080]``, or in a program::

    async with Dashboard("127.0.0.1:9876", "127.0.0.1:0") as dashboard:
        print(dashboard.url)
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from aiohttp import web

from aiorocketmq.dashboard.app import create_app
from aiorocketmq.dashboard.source import ClusterSource
from aiorocketmq.dashboard.timeline import Timeline, TraceError, parse_trace

__all__ = ["ClusterSource", "Dashboard", "Timeline", "TraceError", "create_app", "parse_trace"]


class Dashboard:
    """The dashboard served on ``listen`` (``host:port``; port 0 picks one) until ``stop``."""

    def __init__(
        self,
        namesrv_addr: str,
        listen: str = "127.0.0.1:8080",
        *,
        refresh: float = 1.0,
        trace: Path | None = None,
    ) -> None:
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"listen must be host:port, got {listen!r}")
        self.host, self.port = host.strip("[]"), int(port)
        self.source = ClusterSource(namesrv_addr, refresh=refresh)
        self.app = create_app(self.source, trace=trace)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> str:
        """Serve; the URL."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]
        return self.url

    def watch(self, group: str) -> None:
        """Follow ``group``'s rebalance from now on, whether its page is open or not."""
        self.source.watch(group)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Dashboard:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
