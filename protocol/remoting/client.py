"""``RemotingClient``: one connection to a remoting server, each request answered by its opaque.

The connection opens at the first request, and again at the first request after it was lost,
as RocketMQ's remoting client reconnects on demand. A request ends in its response or in a
typed ``MQError``: ``ServiceNotAvailable`` when the connection cannot be opened, is lost while
the request waits, or the deadline passes first. A lost connection fails only the requests that
were on it; ``asyncio.CancelledError`` comes out only when the caller was cancelled.
``RemotingClients`` keeps one client per address for as long as its owner lives.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from typing import cast

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channels import RefCounted
from aiorocketmq.protocol.errors import ServiceNotAvailable
from aiorocketmq.protocol.remoting.command import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode_command_parts,
)

__all__ = ["ConnectFailed", "RemotingClient", "RemotingClients"]

log = get_logger("aiorocketmq.protocol.remoting")


class ConnectFailed(ServiceNotAvailable):
    """The connection could not be opened (refused, unreachable, or not within the deadline):
    no request went out."""


class _Connection(asyncio.Protocol):
    """One socket of a ``RemotingClient``: frames out, responses in."""

    def __init__(self, client: RemotingClient) -> None:
        self.client = client
        self.decoder = FrameDecoder(client.max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            for cmd in self.decoder.feed(data):
                if cmd.is_response:
                    self.client._answered(cmd)
                # A request from the server (a notification) has nobody to go to here: the
                # data path's connection never sends a heartbeat, so none is expected.
        except FrameError as e:
            log.warning(
                "remoting connection closed: unreadable frame", addr=self.client.addr, error=str(e)
            )
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client._lost(self, exc)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if not self.closed:
            self.closed = True
            self.client._lost(self, None)


class RemotingClient:
    """Requests to one ``host:port`` over one connection, (re)opened on demand."""

    def __init__(self, addr: str, *, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.addr = addr
        self.max_frame_length = max_frame_length
        self._conn: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._opaques = itertools.count(1)
        # opaque -> (the caller's future, the connection its request went out on)
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], _Connection]] = {}
        self._closed = False

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` (its opaque set here) and wait for its response, ``timeout`` s at most
        in all (connecting included)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        conn: _Connection | None = None
        try:
            async with asyncio.timeout_at(deadline):
                conn = await self._connected()
                cmd.opaque = next(self._opaques)
                future: asyncio.Future[RemotingCommand] = loop.create_future()
                self._pending[cmd.opaque] = (future, conn)
                try:
                    transport = conn.transport
                    if transport is None or transport.is_closing():
                        raise ServiceNotAvailable(
                            f"the remoting connection to {self.addr} is closing"
                        )
                    transport.writelines(encode_command_parts(cmd))
                    return await future
                finally:
                    self._pending.pop(cmd.opaque, None)
        except TimeoutError:
            if conn is None:
                raise ConnectFailed(
                    f"cannot connect to {self.addr} (remoting) within {timeout:.3g} s"
                ) from None
            raise ServiceNotAvailable(
                f"no answer from {self.addr} within {timeout:.3g} s (remoting request code "
                f"{cmd.code})"
            ) from None

    async def _connected(self) -> _Connection:
        """The open connection, opened now if there is none."""
        if self._closed:
            raise ServiceNotAvailable(f"the remoting client of {self.addr} is closed")
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # one connect at a time; the others use its result
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn
            host, _, port = self.addr.rpartition(":")
            try:
                _, conn = await asyncio.get_running_loop().create_connection(
                    lambda: _Connection(self), host.strip("[]"), int(port)
                )
            except (OSError, ValueError) as e:
                raise ConnectFailed(f"cannot connect to {self.addr} (remoting): {e}") from None
            if self._closed:  # closed while connecting: nobody would close this one
                conn.close()
                raise ServiceNotAvailable(f"the remoting client of {self.addr} is closed")
            self._conn = conn
            return conn

    def _answered(self, cmd: RemotingCommand) -> None:
        waiting = self._pending.get(cmd.opaque)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(cmd)
        # else: the caller gave up (deadline, cancel) and the late answer is dropped

    def _lost(self, conn: _Connection, exc: Exception | None) -> None:
        """``conn`` closed: every request still waiting on it fails; the next one reconnects."""
        if self._conn is conn:
            self._conn = None
        reason = f": {exc}" if exc else ""
        for future, on in list(self._pending.values()):
            if on is conn and not future.done():
                future.set_exception(
                    ServiceNotAvailable(f"the remoting connection to {self.addr} was lost{reason}")
                )

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with ``ServiceNotAvailable``."""
        self._closed = True
        if self._conn is not None:
            self._conn.close()


# The connections the clients of one event loop share (``RemotingClients(shared=True)``).
_SHARED_BY_LOOP: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, RefCounted[RemotingClient]
] = weakref.WeakKeyDictionary()


def _shared() -> RefCounted[RemotingClient]:
    loop = asyncio.get_running_loop()
    table = _SHARED_BY_LOOP.get(loop)
    if table is None:
        table = _SHARED_BY_LOOP[loop] = RefCounted(RemotingClient)
    return table


class RemotingClients:
    """One ``RemotingClient`` per address, for as long as their owner lives. ``shared=True``:
    taken from the event loop's shared ones (counted by reference; the last owner to let go
    closes it), as the client instances of one process share their gRPC channels
    (``ClientConfig.share_connections``): a process hosting many consumers then holds one
    connection per broker, not one each."""

    def __init__(self, *, shared: bool = False) -> None:
        self.shared = shared
        self._clients: dict[str, RemotingClient] = {}
        self._closed = False

    def client(self, addr: str) -> RemotingClient:
        """The client of ``addr`` (after ``close()``, one that refuses every request)."""
        found = self._clients.get(addr)
        if found is None:
            if self._closed:
                found = RemotingClient(addr)
                found._closed = True
                return found
            found = _shared().acquire(addr) if self.shared else RemotingClient(addr)
            self._clients[addr] = found
        return found

    async def close(self) -> None:
        """Let go of every connection: a private one is closed, a shared one by its last
        owner."""
        self._closed = True
        clients, self._clients = self._clients, {}
        for addr, client in clients.items():
            if self.shared:
                last = _shared().release(addr)
                if last is not None:
                    await last.close()
            else:
                await client.close()
