"""``DataPath``: how a client's sends and pulls travel to a broker, shared by the producer and
the consumers.

``data_transport="grpc"`` (the default): the broker's ``SendMessage`` and ``PullMessage`` RPCs
over the client's gRPC channel. ``"remoting"``: the same requests as RocketMQ's remoting frames
(SEND_BATCH_MESSAGE, PULL_MESSAGE; ``protocol/remoting/data.py``) on a plain TCP connection to
the broker's remoting address, which the route names (``BrokerData.remoting_addrs``) when the
broker serves remoting. A broker that does not is reached over gRPC all the same. Either way the
answer is the same protobuf response and the same typed errors, so nothing above this class
knows which one carried it. Everything else a client asks (heartbeats, offsets, the channel
stream) stays on gRPC.

Why offer both: a grpc.aio call costs far more CPU than the frame it carries (HTTP/2, the
poller thread waking the event loop, a copy per layer); a remoting frame is one length-prefixed
write on an asyncio socket. ``docs/benchmarks.md`` has the figures.
"""

from __future__ import annotations

from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import MessageTooLarge
from aiorocketmq.protocol.remoting.client import RemotingClient, RemotingClients
from aiorocketmq.protocol.remoting.command import DEFAULT_MAX_FRAME_LENGTH
from aiorocketmq.protocol.remoting.data import (
    pull_command,
    pull_response,
    send_command,
    send_response,
)
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["DATA_TRANSPORTS", "SEND_MAX_BYTES", "DataPath", "check_data_transport"]

DATA_TRANSPORTS = ("grpc", "remoting")
# The largest batch body a remoting send carries: the frame limit less room for its header.
SEND_MAX_BYTES = DEFAULT_MAX_FRAME_LENGTH - 64 * 1024


def check_data_transport(value: str) -> str:
    """``value`` if it names a data transport, else ``ValueError`` naming the choices."""
    if value not in DATA_TRANSPORTS:
        raise ValueError(f"data_transport must be one of {DATA_TRANSPORTS}, got {value!r}")
    return value


class DataPath:
    """Sends and pulls to brokers on the transport the client was set to."""

    def __init__(self, brokers: BrokerConnections, data_transport: str = "grpc") -> None:
        self.brokers = brokers
        self.transport = check_data_transport(data_transport)
        # Shared by the client instances of the process when their gRPC channels are.
        self.remoting = RemotingClients(shared=brokers.shared)

    def _remoting(self, remoting_addr: str | None) -> RemotingClient | None:
        """The connection a request goes on when it goes over remoting, else None (gRPC)."""
        if self.transport != "remoting" or not remoting_addr:
            return None
        return self.remoting.client(remoting_addr)

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
        if client is not None:
            if len(request.batch_body) > SEND_MAX_BYTES:
                raise MessageTooLarge(
                    f"a send of {len(request.batch_body)} bytes does not fit a remoting frame "
                    f"({SEND_MAX_BYTES} bytes at most): send fewer messages at a time"
                )
            answer = await client.invoke(send_command(request), timeout)
            return send_response(answer, request, broker_name)
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
            answer = await client.invoke(pull_command(request), timeout)
            return pull_response(answer, broker_name)
        response: broker_pb2.PullMessageResponse = await call(
            self.brokers.stub(addr).PullMessage, request, timeout
        )
        return response

    async def close(self) -> None:
        """Close the remoting connections (the gRPC channels belong to ``brokers``' owner)."""
        await self.remoting.close()
