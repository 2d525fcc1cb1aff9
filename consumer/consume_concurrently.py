"""``ConsumeMessageConcurrentlyService``: run the listener on batches, ack by low-water mark.

Rules (spec 4.3): messages are handed to the listener in batches of
``consume_message_batch_max_size`` (1 by default), at most ``consume_thread_max`` (20) batches
at once. CONSUME_SUCCESS acks the batch (or the part up to ``ack_index``); RECONSUME_LATER, an
exception or no answer fails it: in CLUSTERING the failed messages are sent back to the broker
for a later retry (if that fails, consumed again here after 5 s); in BROADCASTING they are
only logged. Then the messages leave the process queue and the offset to commit is the lowest
offset still in it (the low-water mark), increase-only. A batch whose queue was dropped meanwhile
is discarded: no ack, no offset (the new owner delivers it again). A batch of a suspended queue
(fenced, its grant unconfirmed: ``ProcessQueue.suspend``) waits, holding no slot. A message
whose listener call has run longer than ``consume_timeout_ms`` (15 min) is sent back and let
go, so that a hung call holds its queue's committed offset back no longer (``clean_expired``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.stats import ConsumerStatsManager
from aiorocketmq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageListenerConcurrently,
    MessageModel,
)
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["ConsumeMessageConcurrentlyService"]

log = get_logger("aiorocketmq.consumer.consume")

SEND_BACK_RETRY_DELAY_S = 5.0
CLEAN_EXPIRED_MAX = 16
"""Most messages one clean of a queue sends back (RocketMQ's ``cleanExpiredMsg`` loop)."""
EXPIRED_DELAY_LEVEL = 3
"""The delay level an expired message is sent back with: its retry comes 10 s later."""


class ConsumeMessageConcurrentlyService:
    """Consumes the pulled messages of a push consumer, many batches at once."""

    def __init__(
        self,
        consumer_group: str,
        listener: MessageListenerConcurrently,
        message_model: MessageModel,
        *,
        update_offset: Callable[[MessageQueue, int], None],
        send_message_back: Callable[[MessageExt, int], Awaitable[bool]],
        consume_message_batch_max_size: int = 1,
        consume_thread_max: int = 20,
        on_consumed: Callable[[MessageQueue, list[MessageExt]], None] | None = None,
    ) -> None:
        self.consumer_group = consumer_group
        self.listener = listener
        self.message_model = message_model
        self.update_offset = update_offset
        self.send_message_back = send_message_back
        self.batch_size = consume_message_batch_max_size
        self._slots = asyncio.Semaphore(consume_thread_max)
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_consumed = on_consumed
        self.consumed_ok = 0
        self.consumed_failed = 0
        # Rates for the running info (set by the consumer; None: not kept).
        self.stats: ConsumerStatsManager | None = None

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        for i in range(0, len(msgs), self.batch_size):
            self._spawn(self._consume(msgs[i : i + self.batch_size], pq, mq))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def in_flight(self) -> int:
        return len(self._tasks)

    async def shutdown(self, await_terminate_s: float = 0.0) -> None:
        """Stop; with a wait, let batches in flight finish first (RocketMQ waits 0 by default)."""
        if await_terminate_s > 0 and self._tasks:
            await asyncio.wait(list(self._tasks), timeout=await_terminate_s)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        while True:
            if pq.suspended:  # fenced: held back (no slot taken) until resumed or dropped
                await pq.wait_resumed()
            async with self._slots:
                if pq.dropped:
                    return
                if pq.suspended:
                    continue  # suspended while it waited for a slot
                pq.consume_started()
                try:
                    await self._consume_batch(msgs, pq, mq)
                finally:
                    pq.consume_finished()
                return

    async def _consume_batch(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        context = ConsumeConcurrentlyContext(mq)
        now = str(int(time.time() * 1000))
        started = time.monotonic()
        for m in msgs:
            m.properties[MessageConst.PROPERTY_CONSUME_START_TIMESTAMP] = now
        try:
            status = await self.listener(msgs, context)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("consumeMessage exception", group=self.consumer_group, mq=str(mq))
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if not isinstance(status, ConsumeConcurrentlyStatus):
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        pq.last_consume_timestamp = pq.now_ms()
        if self.stats is not None:
            done = time.monotonic()
            ok = 0
            if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
                ok = min(context.ack_index, len(msgs) - 1) + 1
            self.stats.consumed(mq.topic, ok, len(msgs) - ok, (done - started) * 1000, done)
        if pq.dropped and not pq.draining:
            log.info(
                "processQueue is dropped, the consume result is discarded",
                group=self.consumer_group,
                mq=str(mq),
            )
            return
        await self._process_result(status, context, msgs, pq, mq)

    async def _process_result(
        self,
        status: ConsumeConcurrentlyStatus,
        context: ConsumeConcurrentlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(context.ack_index, len(msgs) - 1)
        else:
            ack_index = -1
        self.consumed_ok += ack_index + 1
        if ack_index >= 0 and self.on_consumed is not None:
            self.on_consumed(mq, msgs[: ack_index + 1])
        failed = msgs[ack_index + 1 :]
        self.consumed_failed += len(failed)
        retry_locally: list[MessageExt] = []
        if failed and self.message_model is MessageModel.CLUSTERING:
            for m in failed:
                if not await self.send_message_back(m, context.delay_level_when_next_consume):
                    m.reconsume_times += 1
                    retry_locally.append(m)
        elif failed:
            for m in failed:
                log.warning(
                    "BROADCASTING, the message consume failed, drop it",
                    group=self.consumer_group,
                    msg_id=m.msg_id,
                )
        done = msgs
        if retry_locally:
            retried = {id(m) for m in retry_locally}
            done = [m for m in msgs if id(m) not in retried]
        offset = pq.remove_message(done)
        if offset >= 0 and (not pq.dropped or pq.draining):
            self.update_offset(mq, offset)
        if retry_locally:
            self._spawn(self._consume_later(retry_locally, pq, mq))

    async def clean_expired(
        self, pq: ProcessQueue, mq: MessageQueue, consume_timeout_ms: int
    ) -> int:
        """RocketMQ's ``cleanExpiredMsg``: up to ``CLEAN_EXPIRED_MAX`` head messages whose
        listener call has run longer than ``consume_timeout_ms`` are sent back for a retry and
        let go, so that one hung call cannot hold its queue's committed offset back for ever;
        how many. The new low-water mark is committed at once (RocketMQ waits for the queue's
        next ack: on a queue with nothing else to consume, that is never). A message that
        could not be sent back stays (tried again next time). In BROADCASTING it is only let
        go, as a failed one is.

        The hung call goes on: if it ends, its outcome is handled as ever, and a message it
        fails is sent back once more (RocketMQ's behaviour too)."""
        cleaned = 0
        for _ in range(CLEAN_EXPIRED_MAX):
            msg = pq.expired_head(consume_timeout_ms)
            if msg is None or pq.dropped:
                break
            if self.message_model is MessageModel.CLUSTERING and not await self.send_message_back(
                msg, EXPIRED_DELAY_LEVEL
            ):
                break
            if pq.head_message() is not msg:  # consumed or let go meanwhile
                continue
            log.warning(
                "a message consumed for longer than the consume timeout was let go",
                group=self.consumer_group,
                mq=str(mq),
                queue_offset=msg.queue_offset,
                timeout_ms=consume_timeout_ms,
            )
            offset = pq.remove_message([msg])
            if offset >= 0 and (not pq.dropped or pq.draining):
                self.update_offset(mq, offset)
            cleaned += 1
        return cleaned

    async def _consume_later(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        await asyncio.sleep(SEND_BACK_RETRY_DELAY_S)
        await self._consume(msgs, pq, mq)
