"""``BrokerConnections``: one gRPC channel and stub per broker address, shared by a client.

Clients (producers, consumers, mqadmin) talk to many brokers; this keeps one channel per
address, opened on first use and kept until ``close()``. A failed call never closes it: every
call to that broker shares the channel, and closing it would cancel all of them (and the
consumer's channel stream with them). A gRPC channel reconnects by itself after a lost
connection or a peer's restart (keepalive and the reconnect backoff in ``CHANNEL_OPTIONS``), so
the next call after a failure simply tries again.
"""

from __future__ import annotations

from typing import Any

import grpc

from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2_grpc

__all__ = ["BrokerConnections"]


class BrokerConnections:
    """Channels and ``BrokerStub`` objects by address, for as long as their owner lives."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[grpc.aio.Channel, Any]] = {}

    def stub(self, addr: str) -> Any:
        """The ``BrokerStub`` for ``addr`` (a channel is opened on first use)."""
        entry = self._entries.get(addr)
        if entry is None:
            channel = insecure_channel(addr)
            entry = self._entries[addr] = (channel, broker_pb2_grpc.BrokerStub(channel))
        return entry[1]

    async def close(self) -> None:
        """Close every channel: the owner's shutdown (calls still in flight are cancelled)."""
        entries, self._entries = self._entries, {}
        for channel, _ in entries.values():
            await channel.close()
