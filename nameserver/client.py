"""``NameServerClient``: what producers, consumers, brokers and mqadmin use to talk to name servers.

Rules:

- Addresses come as ``"host:port;host:port"`` (RocketMQ's ``namesrvAddr``) or a list.
- Queries go to one name server: the last one that answered first, then the others in order.
  Only a transport failure (``ServiceNotAvailable``: unreachable, deadline exceeded) moves on to
  the next; an answer, even an error such as ``TopicNotFound``, is final. A failed call leaves
  its channel open: other calls share it, closing it would cancel them, and gRPC reconnects it
  by itself (RocketMQ closes a failed Netty channel, which carries one request at a time there).
- ``register_broker`` and ``unregister_broker`` go to *every* name server at once, as a broker's
  ``registerBrokerAll`` does (each keeps its own soft state); they succeed if one answered.
- Every call has a deadline (``timeout`` seconds, per attempt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channels import StubTable
from aiorocketmq.protocol.errors import MQError, ServiceNotAvailable
from aiorocketmq.protocol.rpc import DEFAULT_RPC_TIMEOUT, call
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

__all__ = ["DEFAULT_NAMESRV_PORT", "NameServerClient", "parse_namesrv_addr"]

DEFAULT_NAMESRV_PORT = 9876

log = get_logger("aiorocketmq.nameserver.client")

Resp = TypeVar("Resp")


def _one_addr(part: str) -> str:
    """``host:port``, ``host`` (the name server's port 9876 added) or ``[v6]:port``."""
    if part.startswith("["):
        host, sep, rest = part[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if not sep or (rest and not port):
            raise ValueError(f"bad name server address {part!r}: use [v6]:port")
        host = f"[{host}]"
    elif part.count(":") == 1:
        host, _, port = part.partition(":")
    elif ":" in part:
        raise ValueError(f"bad name server address {part!r}: write an IPv6 host as [v6]:port")
    else:
        host, port = part, ""
    if not host:
        raise ValueError(f"bad name server address {part!r}: no host")
    if not port:
        return f"{host}:{DEFAULT_NAMESRV_PORT}"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad name server address {part!r}: port {port!r} is not 1..65535")
    return f"{host}:{int(port)}"


def parse_namesrv_addr(addrs: str | Sequence[str]) -> list[str]:
    """``"a:1;b:2"``, ``"a:1,b:2"`` or ``["a:1", "b:2"]`` -> ``["a:1", "b:2"]``.

    RocketMQ separates name servers with ``;``; ``,`` is accepted too. A bare host gets the
    name server's port (9876); blank parts are dropped; a malformed one is a ``ValueError``
    naming it.
    """
    text = addrs if isinstance(addrs, str) else ";".join(addrs)
    parts = [p.strip() for p in text.replace(",", ";").split(";")]
    result = [_one_addr(p) for p in parts if p]
    if not result:
        raise ValueError(f"no name server address in {addrs!r}")
    return result


class NameServerClient:
    """Async client of one or more name servers; close it with ``close()`` or ``async with``."""

    def __init__(
        self,
        addrs: str | Sequence[str],
        *,
        timeout: float = DEFAULT_RPC_TIMEOUT,
        shared_channels: bool = False,
    ) -> None:
        self.addrs = parse_namesrv_addr(addrs)
        self.timeout = timeout
        # One channel per name server, private or shared by the process's clients.
        self._stubs: StubTable[Any] = StubTable(
            nameserver_pb2_grpc.NameServerStub, shared=shared_channels
        )
        self._last_good = 0

    async def _call_one(
        self,
        addr: str,
        rpc: Callable[[Any], Callable[..., Awaitable[Resp]]],
        request: Any,
        timeout: float | None,
    ) -> Resp:
        """One RPC to one name server (its channel stays open whatever the outcome)."""
        stub = self._stubs.stub(addr)
        return await call(rpc(stub), request, self.timeout if timeout is None else timeout)

    async def _invoke(
        self,
        rpc: Callable[[Any], Callable[..., Awaitable[Resp]]],
        request: Any,
        timeout: float | None,
    ) -> Resp:
        """Ask the last good name server, then the others in order, until one answers."""
        order = self.addrs[self._last_good :] + self.addrs[: self._last_good]
        failures: list[str] = []
        for addr in order:
            try:
                response = await self._call_one(addr, rpc, request, timeout)
            except ServiceNotAvailable as e:
                log.warning("name server not available", namesrv_addr=addr, error=e.message)
                failures.append(f"{addr}: {e.message}")
                continue
            self._last_good = self.addrs.index(addr)
            return response
        raise ServiceNotAvailable("no name server answered (" + "; ".join(failures) + ")")

    async def _invoke_all(
        self,
        rpc: Callable[[Any], Callable[..., Awaitable[Resp]]],
        request: Any,
        timeout: float | None,
    ) -> Resp:
        """Send to every name server at once; the first answer in address order is returned."""
        results = await asyncio.gather(
            *(self._call_one(addr, rpc, request, timeout) for addr in self.addrs),
            return_exceptions=True,
        )
        answered: list[Resp] = []
        errors: list[tuple[str, MQError]] = []
        for addr, result in zip(self.addrs, results, strict=True):
            if isinstance(result, MQError):
                errors.append((addr, result))
            elif isinstance(result, BaseException):
                raise result
            else:
                answered.append(result)
        for addr, error in errors:
            if not isinstance(error, ServiceNotAvailable):
                raise error  # the request itself is wrong: every name server would say so
            log.warning("name server not available", namesrv_addr=addr, error=error.message)
        if not answered:
            raise ServiceNotAvailable(
                "no name server answered ("
                + "; ".join(f"{addr}: {error.message}" for addr, error in errors)
                + ")"
            )
        return answered[0]

    # -- queries ------------------------------------------------------------------------------

    async def get_route_info_by_topic(
        self, topic: str, *, timeout: float | None = None
    ) -> common_pb2.TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC: the topic's route; ``TopicNotFound`` when it has none."""
        return await self._invoke(
            lambda s: s.GetRouteInfoByTopic,
            nameserver_pb2.GetRouteInfoByTopicRequest(topic=topic),
            timeout,
        )

    async def get_broker_cluster_info(
        self, *, timeout: float | None = None
    ) -> nameserver_pb2.ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: clusters, broker names, addresses and liveness."""
        return await self._invoke(
            lambda s: s.GetBrokerClusterInfo, nameserver_pb2.GetBrokerClusterInfoRequest(), timeout
        )

    async def get_all_topic_list(self, *, timeout: float | None = None) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic a live broker serves, sorted."""
        response: nameserver_pb2.TopicList = await self._invoke(
            lambda s: s.GetAllTopicList, nameserver_pb2.GetAllTopicListRequest(), timeout
        )
        return list(response.topic_list)

    async def delete_topic(self, topic: str, *, timeout: float | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV on every name server."""
        await self._invoke_all(
            lambda s: s.DeleteTopic,
            nameserver_pb2.DeleteTopicInNamesrvRequest(topic=topic),
            timeout,
        )

    # -- broker side --------------------------------------------------------------------------

    async def register_broker(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        ha_server_addr: str = "",
        topic_configs: Iterable[common_pb2.TopicConfig] = (),
        data_version: int = 0,
        heartbeat_timeout_millis: int = 0,
        remoting_addr: str = "",
        timeout: float | None = None,
    ) -> nameserver_pb2.RegisterBrokerResponse:
        """REGISTER_BROKER to every name server; the answer says a slave's master address."""
        request = nameserver_pb2.RegisterBrokerRequest(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            ha_server_addr=ha_server_addr,
            topic_configs=topic_configs,
            data_version=data_version,
            heartbeat_timeout_millis=heartbeat_timeout_millis,
            remoting_addr=remoting_addr,
        )
        return await self._invoke_all(lambda s: s.RegisterBroker, request, timeout)

    async def unregister_broker(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        timeout: float | None = None,
    ) -> None:
        """UNREGISTER_BROKER to every name server (a broker's shutdown)."""
        request = nameserver_pb2.UnregisterBrokerRequest(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
        )
        await self._invoke_all(lambda s: s.UnregisterBroker, request, timeout)

    # -- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every channel (in-flight calls are cancelled; a shared one closes with its
        last user)."""
        await self._stubs.close()

    async def __aenter__(self) -> NameServerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
