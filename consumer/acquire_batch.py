"""``AcquireBatcher``: the fenced acquires of a process's client instances to one broker, sent
together.

Client instances sharing their connections (``ClientConfig.share_connections``: a process
hosting many consumers of a group, each with its own client id) each send an acquire in every
rebalance pass that moves queues. At 1,000 consumers in eight processes under AVG a join makes
about 950, and each unary call cost the broker and the client more than the acquire itself
(gRPC's per-call work: most of both sides' CPU in a join). Acquires asked for within
``linger`` of one another go in one ``AcquireQueuesBatch`` call, whose answers stream back as
each is done (an acquire may wait at the broker for a release); one alone goes as
``AcquireQueues``. Each caller sees what its own call would have given: the response, or the
typed error (``ServiceNotAvailable`` when no answer came: the queues are then unsure).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import (
    MQError,
    ServiceNotAvailable,
    from_response_code,
    from_rpc_error,
)
from aiorocketmq.protocol.rpc import call, caller_cancelled
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc

__all__ = ["MAX_BATCH", "AcquireBatcher"]

log = get_logger("aiorocketmq.consumer.acquire_batch")

MAX_BATCH = 1024  # the broker's limit per AcquireQueuesBatch


@dataclass(slots=True)
class _Asked:
    request: broker_pb2.AcquireQueuesRequest
    answer: asyncio.Future[broker_pb2.AcquireQueuesResponse]
    deadline: float  # loop time


class AcquireBatcher:
    """The acquires to one broker over one shared channel (``SharedChannels.attached``)."""

    def __init__(self, channel: grpc.aio.Channel, linger_s: float) -> None:
        self.stub: Any = broker_pb2_grpc.BrokerStub(channel)
        self.linger_s = linger_s
        self._asked: list[_Asked] = []
        self._flush: asyncio.TimerHandle | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self.batches = 0  # calls of more than one acquire (for tests and the curious)

    async def acquire(
        self, request: broker_pb2.AcquireQueuesRequest, timeout: float
    ) -> broker_pb2.AcquireQueuesResponse:
        """The answer to ``request``, sent with the others asked for meanwhile."""
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

    def _send(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        batch = [a for a in self._asked if not a.answer.done()]  # cancelled while waiting
        self._asked = []
        if batch:
            task = asyncio.get_running_loop().create_task(self._call(batch))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[_Asked]) -> None:
        timeout = max(a.deadline for a in batch) - asyncio.get_running_loop().time()
        if len(batch) == 1:
            await self._call_one(batch[0], timeout)
            return
        self.batches += 1
        request = broker_pb2.AcquireQueuesBatchRequest(acquires=[a.request for a in batch])
        error: MQError
        try:
            async for message in self.stub.AcquireQueuesBatch(request, timeout=timeout):
                for answer in message.answers:
                    self._answer(batch, answer)
            error = ServiceNotAvailable("the batch ended without answering this acquire")
        except grpc.aio.AioRpcError as e:
            error = from_rpc_error(e)
        except asyncio.CancelledError:
            if caller_cancelled():
                for a in batch:
                    a.answer.cancel()
                raise
            error = ServiceNotAvailable(
                "the call was cancelled on the client side (its gRPC channel was closed)",
                grpc_status=grpc.StatusCode.CANCELLED,
            )
        for a in batch:
            if not a.answer.done():
                a.answer.set_exception(error)

    async def _call_one(self, asked: _Asked, timeout: float) -> None:
        try:
            response = await call(self.stub.AcquireQueues, asked.request, timeout)
        except MQError as e:
            if not asked.answer.done():
                asked.answer.set_exception(e)
            return
        except asyncio.CancelledError:
            asked.answer.cancel()
            raise
        if not asked.answer.done():
            asked.answer.set_result(response)

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
