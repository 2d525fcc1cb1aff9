"""What the dashboard knows of the cluster, read through ``AdminClient`` (the same RPCs as
``mqadmin``), and the live watch of a group that feeds its timeline.

Reading changes nothing. A name server or broker that does not answer is shown as down, with
the error, and the rest of the page still works. Every RPC made is counted (``requests``), so the
cost of a refresh can be measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiorocketmq.admin import AdminClient, AdminError
from aiorocketmq.dashboard.timeline import Timeline
from aiorocketmq.logs import get_logger
from aiorocketmq.nameserver.client import NameServerClient, parse_namesrv_addr
from aiorocketmq.protocol.errors import MQError, SubscriptionGroupNotExist
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.validators import is_system_topic

__all__ = ["ClusterSource", "GroupView"]

log = get_logger("aiorocketmq.dashboard")

# Groups of the cluster's own machinery (the tools', the cluster name), hidden unless asked for.
_SYSTEM_GROUPS = {"TOOLS_CONSUMER", "DefaultCluster"}


def is_system(name: str) -> bool:
    """A system topic (``is_system_topic``), or a group of the tools."""
    return is_system_topic(name) or name in _SYSTEM_GROUPS


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class GroupView:
    """One look at a consumer group: members, and per queue offsets, lag and holder."""

    group: str
    members: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    consume_tps: float = 0.0
    error: str = ""

    def holders(self) -> dict[str, list[str]]:
        return {q["queue"]: [q["holder"]] if q["holder"] else [] for q in self.queues}

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "members": self.members,
            "queues": self.queues,
            "consumeTps": round(self.consume_tps, 2),
            "error": self.error,
        }


class _CountingAdmin(AdminClient):
    """An ``AdminClient`` that counts its RPCs (to brokers and to the name servers)."""

    requests = 0

    async def broker_call(self, addr: str, method: str, request: Any) -> Any:
        self.requests += 1
        return await super().broker_call(addr, method, request)

    async def cluster_info(self) -> Any:
        self.requests += 1
        return await super().cluster_info()

    async def topic_list(self) -> list[str]:
        self.requests += 1
        return await super().topic_list()

    async def topic_route(self, topic: str) -> Any:
        self.requests += 1
        return await super().topic_route(topic)


class _Watch:
    """A group watched for its timeline: one poller, many listeners."""

    def __init__(self, group: str) -> None:
        self.timeline = Timeline(group)
        self.view = GroupView(group)
        self.listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self.task: asyncio.Task[None] | None = None
        self.idle_since = time.monotonic()
        self.pinned = False  # watched even with no page open


class ClusterSource:
    """The cluster as the pages show it."""

    def __init__(self, namesrv_addr: str, *, refresh: float = 1.0, timeout: float = 3.0) -> None:
        self.namesrv_addr = namesrv_addr
        self.refresh = refresh
        self.timeout = timeout
        self.admin = _CountingAdmin(namesrv_addr, timeout=timeout)
        self._probes = 0
        self._watches: dict[str, _Watch] = {}
        self._last_offsets: dict[str, tuple[float, int]] = {}
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        for watch in self._watches.values():
            if watch.task is not None:
                watch.task.cancel()
        for watch in self._watches.values():
            if watch.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await watch.task
        await self.admin.close()

    @property
    def requests(self) -> int:
        """RPCs made so far (the dashboard's cost on the cluster)."""
        return self.admin.requests + self._probes

    # ---- the cluster page ------------------------------------------------------------------
    async def cluster(self) -> dict[str, Any]:
        """Name servers (each probed alone) and brokers with their runtime figures."""
        namesrvs = []
        for addr in parse_namesrv_addr(self.namesrv_addr):
            self._probes += 1
            try:
                async with NameServerClient(addr, timeout=self.timeout) as ns:
                    await ns.get_all_topic_list()
                namesrvs.append({"address": addr, "up": True, "error": ""})
            except MQError as e:
                namesrvs.append({"address": addr, "up": False, "error": e.message})
        brokers: list[dict[str, Any]] = []
        error = ""
        try:
            info = await self.admin.cluster_info()
        except MQError as e:
            return {"namesrvs": namesrvs, "brokers": [], "error": e.message}
        clusters = {
            name: cluster for cluster, names in info.cluster_addr_table.items()
            for name in names.broker_names
        }  # fmt: skip
        for name, data in sorted(info.broker_addr_table.items()):
            for broker_id, addr in sorted(data.broker_addrs.items()):
                row: dict[str, Any] = {
                    "cluster": clusters.get(name, ""),
                    "name": name,
                    "id": broker_id,
                    "address": addr,
                    "up": True,
                    "error": "",
                    "status": {},
                }
                try:
                    row["status"] = await self.admin.broker_status(addr)
                except MQError as e:
                    row["up"], row["error"] = False, e.message
                brokers.append(row)
        return {"namesrvs": namesrvs, "brokers": brokers, "error": error}

    # ---- topics ----------------------------------------------------------------------------
    async def topics(self, *, system: bool = False) -> list[dict[str, Any]]:
        """Every topic's queues with min/max offsets and the produce rate since the last look."""
        names = sorted(t for t in await self.admin.topic_list() if system or not is_system(t))
        result = []
        for topic in names:
            row: dict[str, Any] = {"topic": topic, "queues": [], "rate": None, "error": ""}
            try:
                offsets = await self.admin.topic_status(topic)
            except MQError as e:
                row["error"] = e.message
                result.append(row)
                continue
            total = 0
            for o in offsets:
                mq = MessageQueue.from_proto(o.message_queue)
                total += o.max_offset
                row["queues"].append(
                    {
                        "broker": mq.broker_name,
                        "queueId": mq.queue_id,
                        "min": o.min_offset,
                        "max": o.max_offset,
                        "lastUpdate": o.last_update_timestamp,
                    }
                )
            now = time.monotonic()
            last = self._last_offsets.get(topic)
            if last is not None and now > last[0]:
                row["rate"] = round(max(0, total - last[1]) / (now - last[0]), 1)
            self._last_offsets[topic] = (now, total)
            row["messages"] = total
            result.append(row)
        return result

    # ---- consumer groups -------------------------------------------------------------------
    async def groups(self, *, system: bool = False) -> list[str]:
        """Every consumer group the masters know (each group's settings live on each)."""
        names: set[str] = set()
        try:
            masters = await self.admin.master_brokers()
        except MQError:
            return []
        for _, addr in masters:
            try:
                names.update(c.group_name for c in await self.admin.sub_group_configs(addr))
            except MQError as e:
                log.info("a broker did not list its groups", broker=addr, error=e.message)
        return sorted(g for g in names if system or not is_system(g))

    async def group(self, group: str) -> GroupView:
        """Members (language, protocol, address) and every queue's offsets, lag and holder."""
        view = GroupView(group)
        try:
            _, _, conn = await self.admin.consumer_connection(group)
            view.members = [
                {
                    "clientId": c.client_id,
                    "address": c.client_addr,
                    "language": c.language,
                    "protocol": c.protocol or "grpc",
                    "version": c.version,
                }
                for c in sorted(conn.connections, key=lambda c: c.client_id)
            ]
        except SubscriptionGroupNotExist:
            view.members = []
        except MQError as e:
            view.error = e.message
        try:
            stats, view.consume_tps = await self.admin.consume_stats(group)
        except (MQError, AdminError) as e:
            view.error = view.error or str(e)
            return view
        for q in stats:
            mq = MessageQueue.from_proto(q.message_queue)
            lag = q.broker_offset - max(q.consumer_offset, 0)
            view.queues.append(
                {
                    "queue": str(mq),
                    "topic": mq.topic,
                    "broker": mq.broker_name,
                    "queueId": mq.queue_id,
                    "brokerOffset": q.broker_offset,
                    "consumerOffset": q.consumer_offset,
                    "lag": lag,
                    "holder": q.holder_client_id,
                    "lastTimestamp": q.last_timestamp,
                }
            )
        return view

    # ---- the live timeline -----------------------------------------------------------------
    def timeline(self, group: str) -> Timeline:
        return self._watch(group).timeline

    def watch(self, group: str) -> None:
        """Watch ``group`` from now on, page open or not (its timeline starts now)."""
        self._watch(group).pinned = True

    def _watch(self, group: str) -> _Watch:
        watch = self._watches.get(group)
        if watch is None:
            watch = self._watches[group] = _Watch(group)
        if watch.task is None or watch.task.done():
            watch.task = asyncio.get_running_loop().create_task(
                self._poll(watch), name=f"dashboard-watch-{group}"
            )
        return watch

    async def subscribe(self, group: str) -> AsyncIterator[dict[str, Any]]:
        """The group's state now, then again after every look (an SSE stream's payloads)."""
        watch = self._watch(group)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=8)
        watch.listeners.add(queue)
        try:
            yield self._payload(watch)
            while not self._closed:
                yield await queue.get()
        finally:
            watch.listeners.discard(queue)
            watch.idle_since = time.monotonic()

    def _payload(self, watch: _Watch) -> dict[str, Any]:
        return {
            "view": watch.view.to_json(),
            "timeline": watch.timeline.to_json(_now_ms()),
            "requests": self.requests,
        }

    async def _poll(self, watch: _Watch) -> None:
        """Look at the group every ``refresh`` s while someone listens (30 s after the last)."""
        group = watch.timeline.group
        while not self._closed:
            started = time.monotonic()
            view = await self.group(group)
            members = {m["clientId"]: f"{m['language']} over {m['protocol']}" for m in view.members}
            if not view.error:
                watch.view = view
                watch.timeline.observe(_now_ms(), view.holders(), members)
            else:
                watch.view.error = view.error
            payload = self._payload(watch)
            for queue in list(watch.listeners):
                if queue.full():  # a slow page: it gets the newest state
                    with contextlib.suppress(asyncio.QueueEmpty):
                        queue.get_nowait()
                queue.put_nowait(payload)
            idle = time.monotonic() - watch.idle_since > 30
            if not watch.pinned and not watch.listeners and idle:
                return
            await asyncio.sleep(max(0.0, self.refresh - (time.monotonic() - started)))
