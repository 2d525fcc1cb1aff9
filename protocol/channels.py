"""gRPC channels by address, private to one client or shared by the clients of a process.

A client keeps one channel per server address in a ``StubTable``, opened on first use and kept
until ``close()``: a failed call never closes it (every call to that server shares it, and
closing it would cancel them all); gRPC reconnects a lost connection by itself.

By default each client has its own channels, as each RocketMQ client instance has its own
connections. With ``shared=True`` the clients of one event loop take their channels from one
``SharedChannels`` table, counted by reference and closed when the last one lets go: a process
hosting a thousand consumers (each with its own client id, so its own client instance) then
opens one connection per broker, not a thousand. Each client still has its own calls and its
own channel stream to each broker (HTTP/2 carries them side by side), so the broker sees each
client as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar, cast

import grpc

from aiorocketmq.protocol.rpc import insecure_channel

__all__ = ["RefCounted", "SharedChannels", "StubTable", "shared_channels"]

StubT = TypeVar("StubT")
T = TypeVar("T")


class RefCounted(Generic[T]):
    """One object per address (a channel, a connection), made for its first user and handed
    back by ``release`` when its last user is done, for the caller to close."""

    def __init__(self, make: Callable[[str], T]) -> None:
        self._make = make
        self._entries: dict[str, tuple[T, int]] = {}

    def acquire(self, addr: str) -> T:
        """The object of ``addr`` (made now for the first user), counted as one more user."""
        found, users = self._entries.get(addr) or (self._make(addr), 0)
        self._entries[addr] = (found, users + 1)
        return found

    def release(self, addr: str) -> T | None:
        """One user of ``addr`` is done: the object when that was the last user, else None."""
        entry = self._entries.get(addr)
        if entry is None:
            return None
        found, users = entry
        if users > 1:
            self._entries[addr] = (found, users - 1)
            return None
        del self._entries[addr]
        return found

    def get(self, addr: str) -> T | None:
        entry = self._entries.get(addr)
        return entry[0] if entry is not None else None

    def __len__(self) -> int:
        return len(self._entries)


class SharedChannels:
    """One channel per address for every client of an event loop that asks for one."""

    def __init__(self) -> None:
        self._channels: RefCounted[grpc.aio.Channel] = RefCounted(insecure_channel)
        # Objects living with a channel, for its users together (``attached``).
        self._attached: dict[tuple[str, str], object] = {}

    def acquire(self, addr: str) -> grpc.aio.Channel:
        """The channel to ``addr`` (opened by the first user), counted as one more user."""
        return self._channels.acquire(addr)

    async def release(self, addr: str) -> None:
        """One user of ``addr`` is done; the last one closes the channel."""
        channel = self._channels.release(addr)
        if channel is None:
            return
        for key in [k for k in self._attached if k[0] == addr]:
            close = getattr(self._attached.pop(key), "close", None)
            if close is not None:  # what it holds for the channel's users fails now
                close()
        await channel.close()

    def attached(self, addr: str, name: str, make: Callable[[grpc.aio.Channel], T]) -> T:
        """The object ``name`` that the users of ``addr``'s channel share (made from the
        channel on first ask; dropped when the channel closes): a batcher of their calls."""
        key = (addr, name)
        found = self._attached.get(key)
        if found is None:
            channel = self._channels.get(addr)
            assert channel is not None, f"no user holds the channel to {addr}"
            found = self._attached[key] = make(channel)
        return cast(T, found)

    def __len__(self) -> int:
        return len(self._channels)


# grpc.aio channels belong to the loop they were made on: one table per loop.
_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedChannels] = (
    weakref.WeakKeyDictionary()
)


def shared_channels() -> SharedChannels:
    """The running event loop's table of shared channels."""
    loop = asyncio.get_running_loop()
    table = _BY_LOOP.get(loop)
    if table is None:
        table = _BY_LOOP[loop] = SharedChannels()
    return table


class StubTable(Generic[StubT]):
    """A stub per address over a channel that lives as long as its owner (see the module)."""

    def __init__(self, make_stub: Callable[[grpc.aio.Channel], StubT], *, shared: bool = False):
        self._make_stub = make_stub
        self.shared = shared
        self._entries: dict[str, tuple[grpc.aio.Channel, StubT]] = {}
        self._pool: SharedChannels | None = None

    def stub(self, addr: str) -> StubT:
        """The stub for ``addr`` (its channel opened, or taken from the shared ones, on first
        use)."""
        entry = self._entries.get(addr)
        if entry is None:
            if self.shared:
                if self._pool is None:
                    self._pool = shared_channels()
                channel = self._pool.acquire(addr)
            else:
                channel = insecure_channel(addr)
            entry = self._entries[addr] = (channel, self._make_stub(channel))
        return entry[1]

    def shared_object(
        self, addr: str, name: str, make: Callable[[grpc.aio.Channel], T]
    ) -> T | None:
        """The object ``name`` shared by the users of ``addr``'s shared channel
        (``SharedChannels.attached``); None when this table's channels are its own."""
        self.stub(addr)
        if self._pool is None:
            return None
        return self._pool.attached(addr, name, make)

    def channel(self, addr: str) -> grpc.aio.Channel | None:
        """The channel to ``addr`` if one is open."""
        entry = self._entries.get(addr)
        return entry[0] if entry is not None else None

    async def close(self) -> None:
        """Let go of every channel: a private one is closed (calls still in flight are
        cancelled); a shared one is closed by its last user."""
        entries, self._entries = self._entries, {}
        for addr, (channel, _) in entries.items():
            if self._pool is not None:
                await self._pool.release(addr)
            else:
                await channel.close()
