"""``RemotingServer``: RocketMQ's remoting protocol over asyncio TCP, for any role.

One ``RemotingConnection`` per accepted socket. Each request frame runs the role's handler in
its own task (a held pull must not stop the requests behind it); its answer is written with the
request's opaque unless the request was one-way. The server can also push one-way requests to
a client on the client's own connection (NOTIFY_CONSUMER_IDS_CHANGED).

A misbehaving client affects only its own connection:

- a frame the decoder cannot read (garbage, a length over the limit, a header that is not a
  header) closes that connection after one log line;
- a request its handler rejects is answered with the error's response code and message;
- a handler that fails unexpectedly answers SYSTEM_ERROR and logs the traceback;
- a connection that sends nothing for ``idle_timeout_ms`` is closed (RocketMQ's
  ``serverChannelMaxIdleTimeSeconds``, 120 s); one that vanishes mid-frame is forgotten.

Closing a connection cancels its handlers' tasks, then calls the role's ``on_close``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import ERROR_TYPE_FIELD, MQError
from aiorocketmq.protocol.remoting.command import (
    DEFAULT_MAX_FRAME_LENGTH,
    FLAG_ONEWAY,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode_command_parts,
)

__all__ = ["Handler", "RemotingConnection", "RemotingServer"]

log = get_logger("aiorocketmq.protocol.remoting")

Handler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]
"""A role's request handler: the response, or None for none (one-way requests)."""

DEFAULT_IDLE_TIMEOUT_MS = 120_000


class RemotingConnection(asyncio.Protocol):
    """One client socket: frames in, responses and pushed requests out."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.remote_addr = ""
        self.last_read = time.monotonic()
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self.context: Any = None
        """What the role keeps for this connection (the broker: its channel)."""
        self.language = ""
        self.version = 0

    # ---- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            host = peer[0]
            self.remote_addr = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            for cmd in self.decoder.feed(data):
                if cmd.is_response:
                    continue  # we push only one-way requests; a late answer is dropped
                if not self.language:
                    self.language, self.version = cmd.language, cmd.version
                task = asyncio.get_running_loop().create_task(self._serve(cmd))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        except FrameError as e:
            log.warning(
                "remoting connection closed: unreadable frame",
                server=self.server.name,
                remote_addr=self.remote_addr,
                error=str(e),
            )
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed_now()

    # ---- requests ----------------------------------------------------------------------------
    async def _serve(self, cmd: RemotingCommand) -> None:
        start = time.perf_counter()
        try:
            response = await self.server.handler(self, cmd)
        except MQError as e:
            # The class too (ours; other clients ignore the field): a code alone is ambiguous.
            response = cmd.response(
                int(e.response_code),
                remark=e.message,
                ext_fields={ERROR_TYPE_FIELD: type(e).__name__},
            )
        except asyncio.CancelledError:
            return
        except Exception as e:
            log.exception(
                "remoting request failed",
                server=self.server.name,
                code=cmd.code,
                remote_addr=self.remote_addr,
            )
            response = cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}")
        if response is not None and not cmd.is_oneway:
            self.write(response)
        if self.server.observe is not None:
            code = response.code if response is not None else 0
            self.server.observe(cmd.code, code, time.perf_counter() - start)

    def write(self, cmd: RemotingCommand) -> bool:
        """Send a frame; False when the connection is already closed."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False
        self.transport.writelines(encode_command_parts(cmd))
        return True

    def push_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> bool:
        """A server-initiated one-way request on this connection (no answer is awaited)."""
        return self.write(
            RemotingCommand(
                code=code,
                opaque=next(self.server.opaques),
                flag=FLAG_ONEWAY,
                ext_fields=ext_fields,
                body=body,
            )
        )

    # ---- closing -----------------------------------------------------------------------------
    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self._closed_now()

    def _closed_now(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.server.connections.discard(self)
        for task in list(self.tasks):
            task.cancel()
        if self.decoder.pending:
            log.info(
                "remoting connection lost mid-frame",
                server=self.server.name,
                remote_addr=self.remote_addr,
                pending_bytes=self.decoder.pending,
            )
        if self.server.on_close is not None:
            try:
                self.server.on_close(self)
            except Exception:
                log.exception("remoting close handler failed", server=self.server.name)


class RemotingServer:
    """A TCP listener speaking remoting frames to ``handler``; ``on_close`` per closed socket."""

    def __init__(
        self,
        handler: Handler,
        *,
        name: str,
        on_close: Callable[[RemotingConnection], None] | None = None,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
    ) -> None:
        self.handler = handler
        self.name = name
        self.on_close = on_close
        self.max_frame_length = max_frame_length
        self.idle_timeout_ms = idle_timeout_ms
        self.connections: set[RemotingConnection] = set()
        self.opaques = itertools.count(1)
        # (request code, response code, seconds) of each request served: the role's metrics.
        self.observe: Callable[[int, int, float], None] | None = None
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.host = ""
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, listen: str) -> None:
        """Bind ``host:port`` (port 0: any free port, read back in ``port``)."""
        host, _, port = listen.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                lambda: RemotingConnection(self), host, int(port), reuse_address=True
            )
        except (OSError, ValueError) as e:
            raise OSError(f"cannot listen on {listen} (remoting): {e}") from e
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = host, int(sock[1])
        self._sweeper = loop.create_task(self._close_idle(), name=f"{self.name}-remoting-idle")

    async def _close_idle(self) -> None:
        interval = min(self.idle_timeout_ms / 4000, 10.0)
        while True:
            await asyncio.sleep(interval)
            limit = time.monotonic() - self.idle_timeout_ms / 1000
            for conn in [c for c in self.connections if c.last_read < limit]:
                log.info(
                    "remoting connection idle, closed",
                    server=self.name,
                    remote_addr=conn.remote_addr,
                    idle_timeout_ms=self.idle_timeout_ms,
                )
                conn.close()

    async def stop(self) -> None:
        """Stop listening and close every connection (their on_close runs)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in list(self.connections):
            conn.close()
        if server is not None:
            await server.wait_closed()
