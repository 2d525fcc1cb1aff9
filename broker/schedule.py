"""``ScheduleMessageService``: delayed delivery with RocketMQ's 18 delay levels.

Theory of operation (as RocketMQ): a message with delay level L is stored first in
``SCHEDULE_TOPIC_XXXX`` queue L-1, with its real topic and queue in properties. One task per
level reads that queue in order; each message is due at its store time plus the level's delay,
and when due it is stored again in its real queue. Because the delayed copy lives in the commit
log and each level's progress is written to ``config/delayOffset.json``, delayed messages
survive a restart (a message may be delivered twice if the broker dies between delivering it
and saving the progress: at least once, never lost).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from aiorocketmq.broker.store import MessageStore, PutMessageResult
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import Message, MessageConst, MessageExt

__all__ = ["SCHEDULE_TOPIC", "ScheduleMessageService"]

log = get_logger("aiorocketmq.broker.schedule")

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_SCHEDULE_GROUP = "SCHEDULE_CONSUMER"
_PROGRESS_FLUSH_S = 1.0


def _now_ms() -> int:
    return int(time.time() * 1000)


class ScheduleMessageService:
    """Holds delayed messages until due, then stores them in their real queue."""

    def __init__(
        self,
        store: MessageStore,
        store_root: Path,
        levels_ms: list[int],
        *,
        check_interval_ms: int = 100,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.store = store
        self.levels_ms = levels_ms
        self.check_interval_s = check_interval_ms / 1000
        self.clock = clock
        self.path = store_root / "config" / "delayOffset.json"
        self.offset_table: dict[int, int] = {}
        self._arrived = {level: asyncio.Event() for level in range(1, len(levels_ms) + 1)}
        self._tasks: set[asyncio.Task[None]] = set()
        self._dirty = False
        self.delivered = 0

    # ---- storing ---------------------------------------------------------------------------
    async def put_delayed_or_now(
        self,
        message: Message,
        queue_id: int,
        *,
        born_host: str,
        born_timestamp: int,
        reconsume_times: int = 0,
    ) -> list[PutMessageResult]:
        """Store ``message`` now, or in the schedule topic when it has a delay level."""
        level = min(message.delay_time_level, len(self.levels_ms))
        if level <= 0:
            return await self.store.put_messages(
                message.topic,
                queue_id,
                [message],
                born_host=born_host,
                born_timestamp=born_timestamp,
                reconsume_times=reconsume_times,
            )
        properties = dict(message.properties)
        properties[MessageConst.PROPERTY_REAL_TOPIC] = message.topic
        properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        delayed = Message(
            topic=SCHEDULE_TOPIC,
            body=message.body,
            tags=message.tags,
            keys=message.keys,
            flag=message.flag,
            properties=properties,
        )
        return await self.store.put_messages(
            SCHEDULE_TOPIC,
            level - 1,
            [delayed],
            born_host=born_host,
            born_timestamp=born_timestamp,
            reconsume_times=reconsume_times,
        )

    def on_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None
    ) -> None:
        """Store arrival listener: wake the level's delivery task."""
        if topic == SCHEDULE_TOPIC and (queue_id + 1) in self._arrived:
            self._arrived[queue_id + 1].set()

    # ---- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self.offset_table = {int(k): int(v) for k, v in data.get("offsetTable", {}).items()}

    def persist(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"offsetTable": {str(k): v for k, v in self.offset_table.items()}})
        )
        os.replace(tmp, self.path)
        self._dirty = False

    async def start(self) -> None:
        self.load()
        for level in range(1, len(self.levels_ms) + 1):
            self._tasks.add(
                asyncio.create_task(self._deliver_loop(level), name=f"schedule-level-{level}")
            )
        self._tasks.add(asyncio.create_task(self._persist_loop(), name="schedule-persist"))

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.persist()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(_PROGRESS_FLUSH_S)
            if self._dirty:
                self.persist()

    # ---- delivering ------------------------------------------------------------------------
    async def _deliver_loop(self, level: int) -> None:
        delay_ms = self.levels_ms[level - 1]
        event = self._arrived[level]
        while True:
            event.clear()
            wait_s = await self._deliver_due(level, delay_ms)
            try:
                async with asyncio.timeout(wait_s):
                    await event.wait()
            except TimeoutError:
                pass

    async def _deliver_due(self, level: int, delay_ms: int) -> float:
        """Deliver what is due at this level; answer how long to wait before looking again."""
        while True:
            offset = self.offset_table.get(level, 0)
            min_offset = self.store.get_min_offset(SCHEDULE_TOPIC, level - 1)
            if offset < min_offset:
                offset = min_offset
            result = self.store.get_messages(
                _SCHEDULE_GROUP, SCHEDULE_TOPIC, level - 1, offset, 32, None, None
            )
            if not result.messages:
                return max(self.check_interval_s, 1.0)
            for msg in result.messages:
                due = msg.store_timestamp + delay_ms
                now = self.clock()
                if now < due:
                    return min((due - now) / 1000, self.check_interval_s * 10)
                await self._deliver(msg)
                self.offset_table[level] = msg.queue_offset + 1
                self._dirty = True

    async def _deliver(self, msg: MessageExt) -> None:
        properties = dict(msg.properties)
        topic = properties.pop(MessageConst.PROPERTY_REAL_TOPIC, "")
        queue_id = int(properties.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, "0"))
        properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        if not topic:
            log.warning("delayed message without a real topic, dropped", msg_id=msg.msg_id)
            return
        real = Message(
            topic=topic,
            body=msg.body,
            tags=msg.tags,
            keys=msg.keys,
            flag=msg.flag,
            properties=properties,
        )
        await self.store.put_messages(
            topic,
            queue_id,
            [real],
            born_host=msg.born_host,
            born_timestamp=msg.born_timestamp,
            reconsume_times=msg.reconsume_times,
        )
        self.delivered += 1
        log.debug("delayed message delivered", topic=topic, queue_id=queue_id, msg_id=msg.msg_id)
