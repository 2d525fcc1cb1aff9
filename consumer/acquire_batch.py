"""``AcquireBatcher``: the fenced acquires of a process's client instances to one broker, sent
together.

Client instances sharing their connections (``ClientConfig.share_connections``: a process
hosting many consumers of a group, each with its own client id) each send an acquire in every
rebalance pass that moves queues. At 1,000 consumers in eight processes under AVG a join makes
about 950, and each unary call cost the broker and the client more than the acquire itself
(gRPC's per-call work: most of both sides' CPU in a join). In such a burst (8 acquires or more
in calls still open), those asked for within ``linger`` of one another go in one
``AcquireQueuesBatch`` call when they are four or more, whose answers stream back as each is
done (an acquire may wait at the broker for a release); fewer go each alone as
``AcquireQueues``, and so does an acquire in a quiet moment, at once (at 32 x 128, batching
every acquire made joins about 10 ms slower at p50: the linger, and batches of two or three).
Each caller sees what its own call would have given: the response, or the typed error
(``ServiceNotAvailable`` when no answer came: the queues are then unsure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MQError,
    ServiceNotAvailable,
    from_response_code,
    from_rpc_error,
)
from aiorocketmq.protocol.rpc import call, caller_cancelled
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc

__all__ = ["MAX_BATCH", "MIN_BATCH", "AcquireBatcher"]

log = get_logger("aiorocketmq.consumer.acquire_batch")

MAX_BATCH = 1024  # the broker's limit per AcquireQueuesBatch
MIN_BATCH = 4  # fewer go each alone, as AcquireQueues
# Acquires are held back for a batch only while this many sent are still unanswered (a burst:
# a change in a large group); in a quiet moment each goes at once.
BATCH_WHEN_UNANSWERED = 8


# Each acquire's wait at the broker (``wait_millis``) ends this long before its caller's
# deadline, leaving time for its answer, as the broker does for a single call's deadline.
ANSWER_MARGIN_S = 0.5


@dataclass(slots=True)
class _Asked:
    request: broker_pb2.AcquireQueuesRequest
    answer: asyncio.Future[broker_pb2.AcquireQueuesResponse]
    deadline: float  # loop time
    call: asyncio.Task[None] | None = None  # the call that carries it, once sent
    batch: list[_Asked] | None = None  # the acquires of that call


class AcquireBatcher:
    """The acquires to one broker over one shared channel (``SharedChannels.attached``)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        linger_s: float,
        batch_when_unanswered: int = BATCH_WHEN_UNANSWERED,
    ) -> None:
        self.stub: Any = broker_pb2_grpc.BrokerStub(channel)
        self.linger_s = linger_s
        self.batch_when_unanswered = batch_when_unanswered
        self._asked: list[_Asked] = []
        self._flush: asyncio.TimerHandle | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self._unanswered = 0  # acquires sent, their answer not read yet
        self.batches = 0  # calls of more than one acquire (for tests and the curious)

    async def acquire(
        self, request: broker_pb2.AcquireQueuesRequest, timeout: float
    ) -> broker_pb2.AcquireQueuesResponse:
        """The answer to ``request``, sent with the others asked for meanwhile."""
        if self._flush is None and self._unanswered < self.batch_when_unanswered:
            # A quiet moment: at once, alone, from the caller's own task (as without batching).
            self._unanswered += 1
            try:
                response: broker_pb2.AcquireQueuesResponse = await call(
                    self.stub.AcquireQueues, request, timeout
                )
                return response
            finally:
                self._unanswered -= 1
        loop = asyncio.get_running_loop()
        asked = _Asked(request, loop.create_future(), loop.time() + timeout)
        self._asked.append(asked)
        if len(self._asked) >= MAX_BATCH:
            self._send()
        elif self._flush is None:
            self._flush = loop.call_later(self.linger_s, self._send)
        try:
            # Cancelled (the caller's pass), the future is too: its answer is dropped.
            return await asyncio.wait_for(asked.answer, timeout)
        except TimeoutError:
            raise ServiceNotAvailable(
                f"AcquireQueues got no answer within {timeout:.1f} s",
                grpc_status=grpc.StatusCode.DEADLINE_EXCEEDED,
            ) from None
        finally:
            self._given_up(asked)

    @staticmethod
    def _given_up(asked: _Asked) -> None:
        """A caller is done: once no caller of its call waits any more, the call is cancelled
        (the broker then stops waiting for releases on behalf of nobody)."""
        call, batch = asked.call, asked.batch or []
        if call is not None and not call.done() and all(a.answer.done() for a in batch):
            call.cancel()

    def close(self) -> None:
        """The channel closes: what is not sent yet fails as unanswered."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        asked, self._asked = self._asked, []
        _fail(asked, lambda: ServiceNotAvailable("the broker's connection was closed"))

    def _send(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        batch = [a for a in self._asked if not a.answer.done()]  # cancelled while waiting
        self._asked = []
        # A few go alone: a streamed call costs more than a unary one, and a batch of two or
        # three saved nothing (32 x 128: more CPU per change, and slower).
        for part in [batch] if len(batch) >= MIN_BATCH else [[a] for a in batch]:
            task = asyncio.get_running_loop().create_task(self._call(part))
            for a in part:
                a.call, a.batch = task, part
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[_Asked]) -> None:
        self._unanswered += len(batch)
        try:
            await self._send_and_answer(batch)
        finally:
            self._unanswered -= len(batch)

    async def _send_and_answer(self, batch: list[_Asked]) -> None:
        now = asyncio.get_running_loop().time()
        for a in batch:  # a wait at the broker ends before its own caller's deadline
            wait_ms = int((a.deadline - now - ANSWER_MARGIN_S) * 1000)
            a.request.wait_millis = max(0, min(a.request.wait_millis, wait_ms))
        timeout = max(a.deadline for a in batch) - now
        error: Callable[[], MQError]
        try:
            if len(batch) == 1:
                batch[0].answer.set_result(
                    await call(self.stub.AcquireQueues, batch[0].request, timeout)
                )
                return
            self.batches += 1
            request = broker_pb2.AcquireQueuesBatchRequest(acquires=[a.request for a in batch])
            async for message in self.stub.AcquireQueuesBatch(request, timeout=timeout):
                for answer in message.answers:
                    self._answer(batch, answer)
            error = _unanswered("the batch ended without answering this acquire")
        except asyncio.InvalidStateError:
            return  # its one caller gave up meanwhile
        except MQError as e:  # the single call's own error, as its caller would have had it
            error = _same(e)
        except grpc.aio.AioRpcError as e:
            error = _batch_failed(from_rpc_error(e))
        except asyncio.CancelledError:
            if caller_cancelled():  # nobody waits any more, or the process shuts down
                for a in batch:
                    a.answer.cancel()
                raise
            error = _unanswered("the call was cancelled on the client side (its channel closed)")
        except Exception as e:  # the channel was closed before the call (gRPC's UsageError)
            error = _unanswered(f"the acquires could not be sent: {e!r}")
        _fail(batch, error)

    @staticmethod
    def _answer(batch: list[_Asked], answer: broker_pb2.AcquireAnswer) -> None:
        if not 0 <= answer.index < len(batch):
            log.warning("a batch answer names no acquire of the batch", index=answer.index)
            return
        asked = batch[answer.index]
        if asked.answer.done():  # its caller gave up (cancelled, or out of time)
            return
        if answer.response_code == 0 and answer.HasField("response"):
            asked.answer.set_result(answer.response)
        else:
            asked.answer.set_exception(from_response_code(answer.response_code, answer.error))


def _fail(batch: list[_Asked], error: Callable[[], MQError]) -> None:
    """Each acquire of ``batch`` not answered yet fails with an error of its own."""
    for a in batch:
        if not a.answer.done():
            a.answer.set_exception(error())


def _same(e: MQError) -> Callable[[], MQError]:
    return lambda: e


def _unanswered(why: str) -> Callable[[], MQError]:
    """No answer came: the broker may have granted the queues (the caller takes them as
    unsure)."""
    return lambda: ServiceNotAvailable(why)


def _batch_failed(e: MQError) -> Callable[[], MQError]:
    """The whole call failed: refused before anything was done (INVALID_ARGUMENT), or after
    some of its acquires may have been done, which is no answer for those not answered."""
    if isinstance(e, InvalidArgument):
        return lambda: InvalidArgument(e.message)
    return _unanswered(f"the batch failed before this acquire's answer: {e.message}")
