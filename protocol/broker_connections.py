"""``BrokerConnections``: one gRPC channel and stub per broker address, shared by a client.

Clients (producers, consumers, mqadmin) talk to many brokers; this keeps one channel per
address, opened on first use and kept until ``close()``. A failed call never closes it: every
call to that broker shares the channel, and closing it would cancel all of them (and the
consumer's channel stream with them). A gRPC channel reconnects by itself after a lost
connection or a peer's restart (keepalive and the reconnect backoff in ``CHANNEL_OPTIONS``), so
the next call after a failure simply tries again. ``shared=True`` takes the channels from the
process's shared ones (``aiorocketmq.protocol.channels``).
"""

from __future__ import annotations

from typing import Any

from aiorocketmq.protocol.channels import StubTable
from aiorocketmq.protocol.v1 import broker_pb2_grpc

__all__ = ["BrokerConnections"]


class BrokerConnections(StubTable[Any]):
    """Channels and ``BrokerStub`` objects by address, for as long as their owner lives."""

    def __init__(self, *, shared: bool = False) -> None:
        super().__init__(broker_pb2_grpc.BrokerStub, shared=shared)
