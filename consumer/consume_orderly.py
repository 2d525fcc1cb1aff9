"""``ConsumeMessageOrderlyService``: one batch at a time per queue, only while the queue is locked.

Rules (spec 1.4, 4.3, 6.8):

- In CLUSTERING a queue is consumed only while this client holds the broker's lock on it
  (LOCK_BATCH_MQ) and the local lock is fresh (``lock_max_live_ms``, 30 s). The service
  re-locks every queue it holds every ``lock_interval_ms`` (20 s), one request per broker.
- Per queue, one consume request runs at a time and takes the next batch in offset order;
  the listener runs under the queue's ``consume_lock``, so a rebalance that drops the queue
  can wait for the batch in flight (up to 500 ms) before it persists the offset and unlocks.
- SUCCESS commits the batch (offset after its last message); SUSPEND_CURRENT_QUEUE_A_MOMENT
  puts the batch back and retries after ``suspend_current_queue_time_ms`` (1 s), until
  ``max_reconsume_times`` (unlimited by default for orderly) sends it to the dead-letter queue.
- BROADCASTING never locks.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.stats import ConsumerStatsManager
from aiorocketmq.consumer.types import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerOrderly,
    MessageModel,
)
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["ConsumeMessageOrderlyService"]

log = get_logger("aiorocketmq.consumer.consume")

MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000


class ConsumeMessageOrderlyService:
    """Consumes each queue's messages in order, one batch at a time."""

    def __init__(
        self,
        consumer_group: str,
        listener: MessageListenerOrderly,
        message_model: MessageModel,
        *,
        process_queue_of: Callable[[MessageQueue], ProcessQueue | None],
        update_offset: Callable[[MessageQueue, int], None],
        lock: Callable[[MessageQueue], Awaitable[bool]],
        lock_all: Callable[[], Awaitable[None]],
        send_to_dlq: Callable[[MessageExt], Awaitable[bool]],
        consume_message_batch_max_size: int = 1,
        suspend_current_queue_time_ms: int = 1_000,
        max_reconsume_times: int = 2**31 - 1,
        lock_interval_ms: int = 20_000,
        lock_max_live_ms: int = 30_000,
        on_consumed: Callable[[MessageQueue, list[MessageExt]], None] | None = None,
    ) -> None:
        self.consumer_group = consumer_group
        self.listener = listener
        self.message_model = message_model
        self.process_queue_of = process_queue_of
        self.update_offset = update_offset
        self.lock = lock
        self.lock_all = lock_all
        self.send_to_dlq = send_to_dlq
        self.batch_size = consume_message_batch_max_size
        self.suspend_ms = min(max(suspend_current_queue_time_ms, 10), 30_000)
        self.max_reconsume_times = max_reconsume_times
        self.lock_interval_ms = lock_interval_ms
        self.lock_max_live_ms = lock_max_live_ms
        self.on_consumed = on_consumed
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock_task: asyncio.Task[None] | None = None
        self._reconsume: dict[tuple[MessageQueue, int], int] = defaultdict(int)
        self.consumed_ok = 0
        # Rates for the running info (set by the consumer; None: not kept).
        self.stats: ConsumerStatsManager | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self.message_model is MessageModel.CLUSTERING and self._lock_task is None:
            self._lock_task = asyncio.create_task(
                self._lock_loop(), name=f"lock-all-{self.consumer_group}"
            )

    async def shutdown(self, await_terminate_s: float = 0.0) -> None:
        if self._lock_task is not None:
            self._lock_task.cancel()
            await asyncio.gather(self._lock_task, return_exceptions=True)
            self._lock_task = None
        if await_terminate_s > 0 and self._tasks:
            await asyncio.wait(list(self._tasks), timeout=await_terminate_s)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _lock_loop(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.lock_all()
            except Exception:
                log.exception("lockAll failed", group=self.consumer_group)
            await asyncio.sleep(self.lock_interval_ms / 1000)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _later(self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int) -> None:
        async def again() -> None:
            await asyncio.sleep(delay_ms / 1000)
            await self._consume(mq, pq)

        self._spawn(again())

    # ---- consuming -------------------------------------------------------------------------
    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        """A pull put messages in ``pq``; start its consume request unless one is running."""
        if dispatch_to_consume:
            self._spawn(self._consume(mq, pq))

    def _may_consume(self, pq: ProcessQueue) -> bool:
        return self.message_model is MessageModel.BROADCASTING or (
            pq.locked and not pq.is_lock_expired(self.lock_max_live_ms)
        )

    async def _try_lock_later_and_reconsume(
        self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int
    ) -> None:
        await asyncio.sleep(delay_ms / 1000)
        if pq.dropped:
            return
        if await self.lock(mq):
            self._later(mq, pq, 10)
        else:
            self._later(mq, pq, 3_000)

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        async with self._queue_locks[mq]:
            if not self._may_consume(pq):
                if not pq.dropped:
                    self._spawn(self._try_lock_later_and_reconsume(mq, pq, 100))
                return
            started = time.monotonic()
            while True:
                if pq.dropped:
                    return
                if not self._may_consume(pq):
                    self._spawn(self._try_lock_later_and_reconsume(mq, pq, 10))
                    return
                if (time.monotonic() - started) * 1000 > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                    self._later(mq, pq, 10)
                    return
                msgs = pq.take_messages(self.batch_size)
                if not msgs:
                    return  # take_messages cleared ``consuming``: the next pull dispatches
                if not await self._consume_batch(mq, pq, msgs):
                    return

    async def _consume_batch(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]
    ) -> bool:
        """Run the listener on one batch; True to go on with the next batch now."""
        context = ConsumeOrderlyContext(mq)
        started = time.monotonic()
        async with pq.consume_lock:
            if pq.dropped:
                pq.rollback()
                return False
            try:
                status = await self.listener(msgs, context)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consumeMessage exception", group=self.consumer_group, mq=str(mq))
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if not isinstance(status, ConsumeOrderlyStatus):
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if self.stats is not None:
            done = time.monotonic()
            ok = len(msgs) if status is ConsumeOrderlyStatus.SUCCESS else 0
            self.stats.consumed(mq.topic, ok, len(msgs) - ok, (done - started) * 1000, done)
        if status is ConsumeOrderlyStatus.SUCCESS:
            return self._commit(mq, pq, msgs)
        over = [
            m for m in msgs if self._reconsume[(mq, m.queue_offset)] + 1 >= self.max_reconsume_times
        ]
        if over:
            for m in over:
                if not await self.send_to_dlq(m):
                    break
            else:
                return self._commit(mq, pq, msgs)
        for m in msgs:
            self._reconsume[(mq, m.queue_offset)] += 1
            m.reconsume_times += 1
        pq.make_message_to_consume_again(msgs)
        wait = context.suspend_current_queue_time_millis
        self._later(mq, pq, self.suspend_ms if wait < 0 else min(max(wait, 10), 30_000))
        return False

    def _commit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> bool:
        offset = pq.commit()
        for m in msgs:
            self._reconsume.pop((mq, m.queue_offset), None)
        self.consumed_ok += len(msgs)
        if self.on_consumed is not None:
            self.on_consumed(mq, msgs)
        # Ours: a batch that ends while its queue is being dropped still commits: the queue stays
        # locked by us until that offset is persisted. RocketMQ discards it (consumed again).
        if offset >= 0 and (not pq.dropped or pq.locked):
            self.update_offset(mq, offset)
        return True
