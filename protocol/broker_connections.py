"""``BrokerConnections``: one gRPC channel and stub per broker address, shared by a client.

Clients (producers, consumers, mqadmin) talk to many brokers; this keeps one channel per
address, opened on first use and dropped when a call to it fails at the transport level, so the
next call reconnects.
"""

from __future__ import annotations

from typing import Any

import grpc

from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2_grpc

__all__ = ["BrokerConnections"]


class BrokerConnections:
    """Channels and ``BrokerStub`` objects by address."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[grpc.aio.Channel, Any]] = {}

    def stub(self, addr: str) -> Any:
        """The ``BrokerStub`` for ``addr`` (a channel is opened on first use)."""
        entry = self._entries.get(addr)
        if entry is None:
            channel = insecure_channel(addr)
            entry = self._entries[addr] = (channel, broker_pb2_grpc.BrokerStub(channel))
        return entry[1]

    async def drop(self, addr: str) -> None:
        """Forget ``addr``'s channel (after a transport failure) so the next call reconnects."""
        entry = self._entries.pop(addr, None)
        if entry is not None:
            await entry[0].close()

    async def close(self) -> None:
        entries, self._entries = self._entries, {}
        for channel, _ in entries.values():
            await channel.close()
