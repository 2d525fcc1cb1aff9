"""``SendCoalescer``: concurrent sends to one broker share a request (ours).

Theory of operation: a send request costs gRPC about the same whatever it carries up to a few
hundred kilobytes (on our 2-core machines eight tasks sending batches of 100 messages of 256 B
cost the broker 4.1 µs of CPU a message sent a request each, 1.6 µs sharing requests:
``bench.throughput``). So, as Kafka's producer does with its record
accumulator, a producer keeps at most ``max_in_flight`` requests unanswered per broker; a batch
sent while they are all out waits, and the batches that waited go together in the next request
when one is answered. A lone sender never waits: with nothing in flight its batch goes at once,
as before.

Rules:

- A request carries batches of one topic to one queue: the first waiting batch's. A batch whose
  queue the producer chose itself (round robin, ``movable``) may ride to another queue of the
  same broker that was chosen the same way, as Kafka's sticky partitioner sends records
  without a key; a batch sent to a queue the caller named (or a selector's: orderly sends)
  rides only to that queue, and only batches for that queue ride with it (a queue the broker
  refuses fails only those who named it).
- A batch with a delayed message goes alone (``alone``): the broker stores such a request
  message by message, which would take the others' batches off their one atomic write.
- Order: batches go in the order they were sent, each whole and contiguous in the request, so
  each gets its own slice of the answer (queue offsets, commit log offsets, message ids).
- Size: a request stops growing at ``max_bytes`` (a batch bigger than that goes alone).
- Failures: a transport failure or a broker's refusal of the whole request fails every batch in
  it, and each caller retries as it would have alone (on another broker). A refusal that may
  be one batch's fault (an illegal message) sends each batch again alone, so only the culprit's
  caller hears of it: one caller's bad batch never fails another's.
- Deadlines: a request's is the earliest of its batches' (so no caller gives up on a request
  still out, and retries it elsewhere while it is stored). A caller that gives up (cancelled)
  before its batch went leaves the queue, and its batch is never sent, not even again alone;
  after, its batch is sent and stored all the same, as a send whose answer was lost.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import grpc

from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MessageTooLarge,
    MQError,
    ServiceNotAvailable,
)
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["SendCoalescer", "Slice"]

# What sends one request: (queue, the batches' bodies joined, timeout s) -> the broker's answer.
SendRequest = Callable[[MessageQueue, bytes, float], Awaitable[broker_pb2.SendMessageResponse]]


# Refusals of a request that may be the fault of one batch in it (an illegal message, one too
# large): its batches are sent again one by one. Others (a topic unknown, the broker busy or
# unwritable, a transport failure) concern every batch alike.
_ONE_BATCHS_FAULT = (InvalidArgument, MessageTooLarge)


@dataclass(frozen=True, slots=True)
class Slice:
    """A batch's part of a request's answer: its messages are ``start`` to ``start + count``."""

    response: broker_pb2.SendMessageResponse
    start: int
    count: int


def _new_future() -> asyncio.Future[Slice]:
    return asyncio.get_running_loop().create_future()


def _retrieve(future: asyncio.Future[Slice]) -> None:
    """Mark an abandoned batch's outcome seen (its caller gave up waiting for it)."""
    if not future.cancelled():
        future.exception()


def _fail(batches: Iterable[_Batch], error: BaseException) -> None:
    """Fail the batches not answered yet with ``error`` (seen even if nobody awaits it)."""
    for b in batches:
        if not b.future.done():
            b.future.set_exception(error)
            b.future.add_done_callback(_retrieve)


@dataclass(slots=True, eq=False)
class _Batch:
    mq: MessageQueue
    body: bytes
    count: int
    movable: bool
    alone: bool
    deadline: float
    future: asyncio.Future[Slice] = field(default_factory=_new_future)
    abandoned: bool = False  # its caller gave up: never sent from now on

    def rides_with(self, first: _Batch) -> bool:
        """Whether this batch may go in ``first``'s request (to ``first``'s queue)."""
        if self.alone or first.alone or self.mq.topic != first.mq.topic:
            return False
        return self.mq == first.mq or (self.movable and first.movable)


@dataclass(slots=True, eq=False)
class _Request:
    broker: str
    group: list[_Batch]
    ended: bool = False


class SendCoalescer:
    """Per broker, at most ``max_in_flight`` send requests out; the batches that wait share the
    next one."""

    def __init__(self, send: SendRequest, *, max_in_flight: int, max_bytes: int) -> None:
        self._send = send
        self.max_in_flight = max_in_flight
        self.max_bytes = max_bytes
        self._in_flight: dict[str, int] = {}
        self._waiting: dict[str, deque[_Batch]] = {}
        self._requests: set[asyncio.Task[None]] = set()
        # How many requests went out, and how many batches they carried (for tests and stats).
        self.requests = 0
        self.batches = 0

    async def send(
        self,
        mq: MessageQueue,
        body: bytes,
        count: int,
        timeout: float,
        *,
        movable: bool,
        alone: bool = False,
    ) -> Slice:
        """Send one batch (``count`` messages encoded in ``body``) to ``mq`` or, if
        ``movable``, to another queue of its broker with others (never, if ``alone``); its
        slice of the answer."""
        batch = _Batch(mq, body, count, movable, alone, time.monotonic() + timeout)
        waiting = self._waiting.setdefault(mq.broker_name, deque())
        waiting.append(batch)
        self._drain(mq.broker_name)
        try:
            return await asyncio.wait_for(asyncio.shield(batch.future), timeout)
        except (TimeoutError, asyncio.CancelledError) as e:
            batch.abandoned = True
            batch.future.add_done_callback(_retrieve)
            if batch in waiting:  # never sent: nothing of it reached the broker
                waiting.remove(batch)
            if isinstance(e, TimeoutError):
                raise ServiceNotAvailable(
                    f"send to {mq} timed out after {timeout:.3f} s",
                    grpc_status=grpc.StatusCode.DEADLINE_EXCEEDED,
                ) from None
            raise

    async def close(self) -> None:
        """At the producer's shutdown: the batches waiting fail, the requests out are cancelled
        (their batches fail too)."""
        for waiting in self._waiting.values():
            _fail(waiting, ServiceNotAvailable("the producer shut down"))
        self._waiting.clear()
        for task in self._requests:
            task.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)  # each fails its batches

    def _drain(self, broker: str) -> None:
        """Send what waits for ``broker`` while it has a request slot free."""
        waiting = self._waiting.get(broker)
        while waiting and self._in_flight.get(broker, 0) < self.max_in_flight:
            group = self._take(waiting)
            self._in_flight[broker] = self._in_flight.get(broker, 0) + 1
            request = _Request(broker, group)
            task = asyncio.ensure_future(self._request(request))
            self._requests.add(task)
            # Also a callback: it runs even for a task cancelled before it began.
            task.add_done_callback(functools.partial(self._request_done, request=request))
        if waiting is not None and not waiting:
            del self._waiting[broker]

    def _take(self, waiting: deque[_Batch]) -> list[_Batch]:
        """The first batch and those that may ride with it, up to ``max_bytes``."""
        first = waiting.popleft()
        group, size, left = [first], len(first.body), deque[_Batch]()
        while waiting:
            b = waiting.popleft()
            if size + len(b.body) <= self.max_bytes and b.rides_with(first):
                group.append(b)
                size += len(b.body)
            else:
                left.append(b)
        waiting.extend(left)
        return group

    async def _request(self, request: _Request) -> None:
        try:
            await self._send_group(request.group)
        finally:
            self._end(request)  # at once: the next request goes out in this same step

    def _request_done(self, task: asyncio.Task[None], request: _Request) -> None:
        self._requests.discard(task)
        self._end(request)

    def _end(self, request: _Request) -> None:
        """A request ended (once, whichever of its task's end or its done callback comes
        first): its slot is free, and a batch it left unanswered (cancelled, perhaps before it
        began) fails."""
        if request.ended:
            return
        request.ended = True
        self._in_flight[request.broker] -= 1
        _fail(request.group, ServiceNotAvailable("the send was abandoned"))
        self._drain(request.broker)

    async def _send_group(self, group: list[_Batch]) -> None:
        live = [b for b in group if not b.abandoned and not b.future.done()]
        if not live:
            return
        timeout = max(0.001, min(b.deadline for b in live) - time.monotonic())
        body = live[0].body if len(live) == 1 else b"".join(b.body for b in live)
        self.requests += 1
        self.batches += len(live)
        try:
            response = await self._send(live[0].mq, body, timeout)
        except asyncio.CancelledError:
            raise  # ``_end`` fails the batches
        except MQError as e:
            if len(live) > 1 and isinstance(e, _ONE_BATCHS_FAULT):
                # Refused whole: perhaps one batch's fault. Each again alone, so only the
                # culprit's caller hears of it.
                await asyncio.gather(*(self._send_group([b]) for b in live))
            else:
                _fail(live, e)
            return
        except BaseException as e:
            _fail(live, e)
            raise
        start = 0
        for b in live:
            if not b.future.done():
                b.future.set_result(Slice(response, start, b.count))
            start += b.count
