"""``DataPath``: how a client's sends and pulls travel to a broker, shared by the producer and
the consumers.

Three settings of ``data_transport``:

- ``"grpc"``: the broker's ``SendMessage`` and ``PullMessage`` RPCs over the client's gRPC
  channel;
- ``"remoting"``: the same requests as RocketMQ's remoting frames (SEND_BATCH_MESSAGE,
  PULL_MESSAGE; ``protocol/remoting/data.py``) on a plain TCP connection to the broker's remoting
  address, which the route names (``BrokerData.remoting_addrs``) when the broker serves
  remoting. A broker that does not is reached over gRPC all the same;
- ``"auto"`` (the default): remoting where the route names an address, as ``"remoting"``, but
  never worse off than gRPC. A remoting address that cannot be connected to (a firewall, a port
  not published) is set aside for ``UNREACHABLE_S`` and the request goes over gRPC meanwhile;
  a send too large for a remoting frame goes over gRPC (``"remoting"`` refuses it as
  ``MessageTooLarge``).

Either way the answer is the same protobuf response and the same typed errors, so nothing
above this class knows which one carried it. Everything else a client asks (heartbeats,
offsets, the channel stream) stays on gRPC.

Why offer both: a grpc.aio call costs far more CPU than the frame it carries (HTTP/2, the
poller thread waking the event loop, a copy per layer); a remoting frame is one length-prefixed
write on an asyncio socket. ``docs/benchmarks.md`` has the figures.
"""

from __future__ import annotations

import time

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import MessageTooLarge, ServiceNotAvailable
from aiorocketmq.protocol.remoting.client import ConnectFailed, RemotingClient, RemotingClients
from aiorocketmq.protocol.remoting.command import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand
from aiorocketmq.protocol.remoting.data import (
    pull_command,
    pull_response,
    send_command,
    send_response,
)
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = [
    "DATA_TRANSPORTS",
    "SEND_MAX_BYTES",
    "UNREACHABLE_S",
    "DataPath",
    "check_data_transport",
]

log = get_logger("aiorocketmq.protocol.data_path")

DATA_TRANSPORTS = ("auto", "grpc", "remoting")
# The largest batch body a remoting send carries: the frame limit less room for its header.
SEND_MAX_BYTES = DEFAULT_MAX_FRAME_LENGTH - 64 * 1024
# "auto": how long a remoting address that could not be connected to is passed over.
UNREACHABLE_S = 30.0


def check_data_transport(value: str) -> str:
    """``value`` if it names a data transport, else ``ValueError`` naming the choices."""
    if value not in DATA_TRANSPORTS:
        raise ValueError(f"data_transport must be one of {DATA_TRANSPORTS}, got {value!r}")
    return value


class DataPath:
    """Sends and pulls to brokers on the transport the client was set to."""

    def __init__(self, brokers: BrokerConnections, data_transport: str = "auto") -> None:
        self.brokers = brokers
        self.transport = check_data_transport(data_transport)
        # Shared by the client instances of the process when their gRPC channels are.
        self.remoting = RemotingClients(shared=brokers.shared)
        # "auto": remoting address -> monotonic time until which it is passed over.
        self._unreachable: dict[str, float] = {}

    def _remoting(self, remoting_addr: str | None) -> RemotingClient | None:
        """The connection a request goes on when it goes over remoting, else None (gRPC)."""
        if self.transport == "grpc" or not remoting_addr:
            return None
        if self._unreachable and self.transport == "auto":
            until = self._unreachable.get(remoting_addr)
            if until is not None:
                if time.monotonic() < until:
                    return None
                del self._unreachable[remoting_addr]  # try it again
        return self.remoting.client(remoting_addr)

    async def _invoke(
        self, client: RemotingClient, command: RemotingCommand, timeout: float
    ) -> RemotingCommand | None:
        """``command``'s answer; None when, under "auto", the connection could not be opened
        (the address is then passed over for ``UNREACHABLE_S``: the caller goes over gRPC)."""
        try:
            return await client.invoke(command, timeout)
        except ConnectFailed as e:
            if self.transport != "auto":
                raise
            if client.addr not in self._unreachable:
                log.warning(
                    "remoting address unreachable: sends and pulls go over gRPC",
                    remoting_addr=client.addr,
                    retry_after_s=UNREACHABLE_S,
                    error=str(e),
                )
            self._unreachable[client.addr] = time.monotonic() + UNREACHABLE_S
            return None

    async def send(
        self,
        addr: str,
        remoting_addr: str | None,
        broker_name: str,
        request: broker_pb2.SendMessageRequest,
        timeout: float,
    ) -> broker_pb2.SendMessageResponse:
        """``SendMessage`` of ``request`` to the broker at ``addr`` (gRPC) or
        ``remoting_addr``."""
        client = self._remoting(remoting_addr)
        if client is not None and len(request.batch_body) > SEND_MAX_BYTES:
            if self.transport == "remoting":
                raise MessageTooLarge(
                    f"a send of {len(request.batch_body)} bytes does not fit a remoting frame "
                    f"({SEND_MAX_BYTES} bytes at most): send fewer messages at a time"
                )
            client = None  # "auto": gRPC carries it
        if client is not None:
            started = time.monotonic()
            answer = await self._invoke(client, send_command(request), timeout)
            if answer is not None:
                return send_response(answer, request, broker_name)
            timeout = _left(timeout, started)
        response: broker_pb2.SendMessageResponse = await call(
            self.brokers.stub(addr).SendMessage, request, timeout
        )
        return response

    async def pull(
        self,
        addr: str,
        remoting_addr: str | None,
        broker_name: str,
        request: broker_pb2.PullMessageRequest,
        timeout: float,
    ) -> broker_pb2.PullMessageResponse:
        """``PullMessage`` of ``request`` from the broker at ``addr`` (gRPC) or
        ``remoting_addr``."""
        client = self._remoting(remoting_addr)
        if client is not None:
            started = time.monotonic()
            answer = await self._invoke(client, pull_command(request), timeout)
            if answer is not None:
                return pull_response(answer, broker_name)
            timeout = _left(timeout, started)
        response: broker_pb2.PullMessageResponse = await call(
            self.brokers.stub(addr).PullMessage, request, timeout
        )
        return response

    async def close(self) -> None:
        """Close the remoting connections (the gRPC channels belong to ``brokers``' owner)."""
        await self.remoting.close()


def _left(timeout: float, started: float) -> float:
    """What a failed remoting connect begun at ``started`` left of ``timeout`` s."""
    left = timeout - (time.monotonic() - started)
    if left <= 0:
        raise ServiceNotAvailable(
            f"the remoting connect took the whole {timeout:.3g} s: no time left for gRPC"
        )
    return left
