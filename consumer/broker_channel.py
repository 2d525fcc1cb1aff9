"""``BrokerChannel``: the client end of one broker's ``OpenChannel`` stream.

Theory of operation: a client instance keeps one stream open to each broker it talks to, for
as long as the instance runs. The first event carries the ``channel_id`` that heartbeats name;
the broker then pushes NOTIFY_CONSUMER_IDS_CHANGED (and, in the fenced handoff, QueueReleased).

Rules:

- Only ``close()`` (the instance's shutdown) ends the task. Whatever else ends the stream (the
  broker restarted or aborted it, the connection dropped, gRPC cancelled the call, a callback
  failed) is logged and the stream is opened again, after ``reconnect_backoff_ms``: the delay
  doubles with each failure in a row, up to a cap, with jitter; an open resets it.
- Until the stream reopens, the broker has run its channel-close path: this client is in none of
  that broker's groups. So a reopen calls ``on_reopen``, which heartbeats and rebalances like
  RocketMQ's channel-active listener. A first open does too when a ``wait_ready`` caller gave up
  waiting for it (the heartbeat that wanted it has already failed).
- A broker that answers CHANNEL_NOT_FOUND for our current channel id no longer knows the stream
  (it expired the channel): ``mark_broken`` ends the stream so that it reopens. An answer about
  an id we have already replaced changes nothing: a heartbeat sent before a reopen and answered
  after it must not make us forget the new stream (we would then wait for an open that never
  comes, and never heartbeat that broker again).
- The channel keeps the group memberships this stream was sent (``members``, versioned: the
  broker sends a change from the last one; ``protocol.membership``). Each open starts empty,
  as the broker's side of a new stream does.
- Each open after the first names the channel id it replaces (``previous_channel_id``): a
  broker that has not seen the old stream end (its connection went silent) moves its queue
  grants to the new one. ``ChannelOpened`` lists the grants the new stream holds (``held``,
  by group), which the owner compares with the queues it holds (``on_open``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.membership import NotifiedMembers
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.rpc import caller_cancelled
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["BrokerChannel", "held_grants", "reconnect_backoff_ms"]

log = get_logger("aiorocketmq.consumer.channel")


def reconnect_backoff_ms(failures: int, initial_ms: int, max_ms: int, jitter: float) -> float:
    """The wait before attempt ``failures + 1``: ``initial_ms`` doubled per failure in a row
    after the first, capped at ``max_ms``, then scaled into its upper half by ``jitter`` in
    [0, 1) (so never more than the cap, never less than half of the step)."""
    step = min(max_ms, initial_ms << min(max(failures - 1, 0), 32))
    return step * (0.5 + 0.5 * jitter)


def held_grants(opened: broker_pb2.ChannelOpened) -> dict[str, dict[MessageQueue, int]] | None:
    """The grants a channel holds as it opens, by group then queue (their epochs); None from a
    broker that does not list them."""
    if not opened.grants_listed:
        return None
    held: dict[str, dict[MessageQueue, int]] = {}
    for g in opened.grants:
        held.setdefault(g.consumer_group, {})[MessageQueue.from_proto(g.message_queue)] = g.epoch
    return held


class BrokerChannel:
    """One long-lived stream to the broker at ``addr``; reopened until closed."""

    def __init__(
        self,
        addr: str,
        client_id: str,
        stub: Callable[[], Any],
        on_event: Callable[[str, broker_pb2.ChannelEvent], None],
        on_reopen: Callable[[BrokerChannel], Coroutine[Any, Any, None]],
        *,
        reconnect_delay_ms: int = 200,
        reconnect_max_delay_ms: int = 5_000,
        on_open: Callable[[BrokerChannel], None] | None = None,
        on_lost: Callable[[BrokerChannel], None] | None = None,
    ) -> None:
        self.addr = addr
        self.client_id = client_id
        self._stub = stub
        self._on_event = on_event
        self._on_reopen = on_reopen
        self._on_open = on_open  # every open, first ones included, before any event
        self._on_lost = on_lost  # every end of an open stream, but close()
        self.reconnect_delay_ms = reconnect_delay_ms
        self.reconnect_max_delay_ms = reconnect_max_delay_ms
        self.channel_id: str | None = None
        self.broker_name = ""
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._call: Any = None  # the OpenChannel call of the stream now open or opening
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.opened_count = 0
        # Stream attempts that ended in a row without an open, or since the last open ended.
        self.failures = 0
        # A wait_ready caller timed out before the next open: that open must catch up.
        self._waiter_gave_up = False
        # What this stream was last sent of each group's membership.
        self.members = NotifiedMembers()
        # The id of the last stream that opened: the next open names it as the one it replaces.
        self.last_channel_id = ""
        # The queue grants the open stream holds, by group (ChannelOpened's list); None before
        # an open, or when the broker does not list them.
        self.held: dict[str, dict[MessageQueue, int]] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"channel-{self.addr}")

    async def close(self) -> None:
        """End the stream (the broker sees the channel close) and stop reconnecting."""
        tasks = [t for t in (self._task, *self._side_tasks) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self.channel_id = None
        self._ready.clear()

    async def wait_ready(self, timeout_s: float) -> str | None:
        """The channel id once the stream is open, or None after ``timeout_s``."""
        if self.channel_id is not None:
            return self.channel_id
        try:
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        except TimeoutError:
            self._waiter_gave_up = True
            return None
        return self.channel_id

    def mark_broken(self, channel_id: str) -> None:
        """A request naming ``channel_id`` was told the broker does not know it. If that is our
        stream's id, end the stream (it reopens); an id we have already replaced is ignored."""
        if channel_id != self.channel_id:
            return
        log.info(
            "broker does not know our channel, reopening it", addr=self.addr, channel_id=channel_id
        )
        self.channel_id = None
        self._ready.clear()
        if self._call is not None:
            self._call.cancel()  # _run sees gRPC's cancel, not its own: it opens again

    async def _run(self) -> None:
        while True:
            call: Any = None
            opened = False
            request = broker_pb2.OpenChannelRequest(
                client_id=self.client_id,
                language="PYTHON",
                version=1,
                previous_channel_id=self.last_channel_id,
            )
            try:
                call = self._call = self._stub().OpenChannel(request)
                async for event in call:
                    if event.WhichOneof("event") == "opened":
                        opened = True
                        self._opened(event.opened)
                    else:
                        self._dispatch(event)
                self._log_end("channel stream ended by the broker")
            except grpc.aio.AioRpcError as e:
                self._log_end("channel stream ended", code=e.code().name, details=e.details())
            except asyncio.CancelledError:
                if caller_cancelled():
                    raise  # close(): the only way out
                self._log_end("channel stream cancelled by gRPC")
            except Exception:
                log.exception("channel stream failed", addr=self.addr)
            finally:
                if call is not None:
                    call.cancel()
                self._call = None
                self.channel_id = None
                self.held = None
                self._ready.clear()
            if opened and self._on_lost is not None:
                try:
                    self._on_lost(self)
                except Exception:  # the owner's failure costs the callback, not the stream
                    log.exception("channel lost handler failed", addr=self.addr)
            self.failures += 1
            delay = reconnect_backoff_ms(
                self.failures, self.reconnect_delay_ms, self.reconnect_max_delay_ms, random.random()
            )
            await asyncio.sleep(delay / 1000)

    def _log_end(self, event: str, **fields: Any) -> None:
        """An open stream's end at INFO; the failed attempts that follow it at DEBUG."""
        level = logging.INFO if self.failures == 0 else logging.DEBUG
        log.log(level, event, addr=self.addr, failures=self.failures + 1, **fields)

    def _opened(self, opened: broker_pb2.ChannelOpened) -> None:
        self.members.clear()
        self.channel_id = self.last_channel_id = opened.channel_id
        self.held = held_grants(opened)
        self.broker_name = opened.broker_name
        self.opened_count += 1
        self.failures = 0
        catch_up = self.opened_count > 1 or self._waiter_gave_up
        self._waiter_gave_up = False
        if self._on_open is not None:
            try:
                self._on_open(self)
            except Exception:  # the owner's failure costs the callback, not the stream
                log.exception("channel open handler failed", addr=self.addr)
        self._ready.set()
        log.log(
            logging.INFO if self.opened_count > 1 else logging.DEBUG,
            "channel opened",
            addr=self.addr,
            channel_id=self.channel_id,
            opened_count=self.opened_count,
        )
        if catch_up:
            task = asyncio.create_task(self._on_reopen(self))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

    def _dispatch(self, event: broker_pb2.ChannelEvent) -> None:
        """Hand a pushed event to the owner; its failure costs the event, not the stream."""
        try:
            self._on_event(self.addr, event)
        except Exception:
            log.exception("channel event handler failed", addr=self.addr)
