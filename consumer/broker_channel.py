"""``BrokerChannel``: the client end of one broker's ``OpenChannel`` stream.

Theory of operation: a client instance keeps one stream open to each broker it talks to. The
first event carries the ``channel_id`` that heartbeats name; the broker then pushes
NOTIFY_CONSUMER_IDS_CHANGED (and, in the fenced handoff, QueueReleased). When the stream ends
(the broker restarted, the network broke) the task opens it again after a short delay and
calls ``on_open``, which re-sends the heartbeat and rebalances, like RocketMQ's channel-active
listener. Cancelling the task ends the stream: the broker runs its channel-close path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["BrokerChannel"]

log = get_logger("aiorocketmq.consumer.channel")


class BrokerChannel:
    """One long-lived stream to the broker at ``addr``; reopened until closed."""

    def __init__(
        self,
        addr: str,
        client_id: str,
        stub: Callable[[], Any],
        on_event: Callable[[str, broker_pb2.ChannelEvent], None],
        on_open: Callable[[BrokerChannel], Coroutine[Any, Any, None]],
        *,
        reconnect_delay_ms: int = 200,
    ) -> None:
        self.addr = addr
        self.client_id = client_id
        self._stub = stub
        self._on_event = on_event
        self._on_open = on_open
        self.reconnect_delay_ms = reconnect_delay_ms
        self.channel_id: str | None = None
        self.broker_name = ""
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.opened_count = 0

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
            return None
        return self.channel_id

    def mark_broken(self) -> None:
        """A request said our channel id is unknown: forget it until the stream reopens."""
        self.channel_id = None
        self._ready.clear()

    async def _run(self) -> None:
        request = broker_pb2.OpenChannelRequest(
            client_id=self.client_id, language="PYTHON", version=1
        )
        while True:
            call = self._stub().OpenChannel(request)
            try:
                async for event in call:
                    kind = event.WhichOneof("event")
                    if kind == "opened":
                        self.channel_id = event.opened.channel_id
                        self.broker_name = event.opened.broker_name
                        self.opened_count += 1
                        self._ready.set()
                        log.debug("channel opened", addr=self.addr, channel_id=self.channel_id)
                        task = asyncio.create_task(self._on_open(self))
                        self._side_tasks.add(task)
                        task.add_done_callback(self._side_tasks.discard)
                    else:
                        self._on_event(self.addr, event)
            except grpc.aio.AioRpcError as e:
                log.debug("channel stream ended", addr=self.addr, code=e.code().name)
            finally:
                call.cancel()
                self.channel_id = None
                self._ready.clear()
            await asyncio.sleep(self.reconnect_delay_ms / 1000)
