"""Offset stores: where a consumer keeps how far it has consumed each queue.

``RemoteBrokerOffsetStore`` (CLUSTERING) keeps offsets in memory and commits them to the
queue's broker: every 5 s, when a queue is dropped, at shutdown, and piggybacked on pulls.
``LocalFileOffsetStore`` (BROADCASTING) keeps them in a JSON file per client id and group.

Where we differ from RocketMQ: its 5 s commit sends every queue's offset each time; ours leaves
out an offset whose last commit the broker acknowledged, and sends all of a broker's again
after a channel to it opened (a restarted broker may have lost its last seconds of offsets).
An idle group of 1,000 consumers otherwise makes some 700 calls a second that change nothing,
a fifth of the brokers' and the clients' CPU while nothing flows. A commit the application
asks for (``only_changed=False``) sends all.

Rules (spec 5.1-5.2): updates are increase-only unless asked otherwise, and a frozen offset
(set by the OFFSET_ILLEGAL fix) ignores updates until removed; ``persist_all`` commits the
assigned queues and forgets the rest; reads answer -1 when nothing is known, -2 on an error.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import MQError, QueryNotFound, QueueFenced
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.trace import tracer

__all__ = [
    "ControllableOffset",
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "new_offset_store",
]

log = get_logger("aiorocketmq.consumer.offset_store")


class ReadOffsetType(Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


@dataclass(slots=True)
class ControllableOffset:
    """An offset that can be frozen against later updates."""

    value: int
    allow_to_update: bool = True

    def update(self, target: int, increase_only: bool) -> None:
        if self.allow_to_update:
            self.value = max(self.value, target) if increase_only else target

    def update_and_freeze(self, target: int) -> None:
        self.value = target
        self.allow_to_update = False


class OffsetStore(Protocol):
    """What RebalanceImpl and the consume services need from an offset store."""

    async def load(self) -> None: ...
    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...
    def update_and_freeze_offset(self, mq: MessageQueue, offset: int) -> None: ...
    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int: ...
    async def persist_all(self, mqs: set[MessageQueue], *, only_changed: bool = True) -> None: ...
    async def persist(self, mq: MessageQueue) -> None: ...
    async def persist_many(self, mqs: list[MessageQueue]) -> None: ...
    def remove_offset(self, mq: MessageQueue) -> None: ...
    def remove_offsets(self, mqs: Iterable[MessageQueue]) -> None: ...
    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]: ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, ControllableOffset] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        current = self.offset_table.get(mq)
        if current is None:
            self.offset_table[mq] = ControllableOffset(offset)
        else:
            current.update(offset, increase_only)

    def update_and_freeze_offset(self, mq: MessageQueue, offset: int) -> None:
        current = self.offset_table.setdefault(mq, ControllableOffset(offset))
        current.update_and_freeze(offset)

    def memory_offset(self, mq: MessageQueue) -> int:
        current = self.offset_table.get(mq)
        return -1 if current is None else current.value

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def remove_offsets(self, mqs: Iterable[MessageQueue]) -> None:
        """Forget these queues' offsets (queues let go, or about to be read afresh)."""
        for mq in mqs:
            self.remove_offset(mq)

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return {
            mq: o.value for mq, o in self.offset_table.items() if not topic or mq.topic == topic
        }


# A broker call: (broker name, stub method name, request) -> response.
BrokerInvoker = Callable[[str, str, Any], Awaitable[Any]]


class RemoteBrokerOffsetStore(_MemoryTable):
    """CLUSTERING: offsets live on the brokers; this is the consumer's cache of them."""

    def __init__(self, group: str, invoke: BrokerInvoker, *, client_id: str = "") -> None:
        super().__init__()
        self.group = group
        self.client_id = client_id
        self._invoke = invoke
        # Fenced handoff: the epoch to present with each queue's commits (0 = classic), and who
        # to tell when the broker refuses a commit because the queue moved on.
        self.epochs: dict[MessageQueue, int] = {}
        # A commit refused (QUEUE_FENCED): called with the queue and the epoch it presented.
        self.on_fenced: Callable[[MessageQueue, int], None] | None = None
        # Fenced: a queue without an epoch is not ours (its release is under way, or done), and
        # a commit without one the broker would not fence: it is not sent.
        self.fenced = False
        # Watched idle queues: the channel id to give a start-offset query per broker ("" none;
        # classic: fenced grants say it themselves), and the queues the brokers said they watch
        # (from those queries, or fenced grants: ``FencedHandoff`` shares this dict), queue ->
        # the channel it is watched for. The pass parks those rather than pulls them.
        self.watch_channel: Callable[[str], str] | None = None
        self.watching: dict[MessageQueue, str] = {}
        # The offset each queue's broker acknowledged last: the periodic commit skips it. (Not
        # a query's answer: a broker answers 0 for a young queue without storing it.)
        self.committed: dict[MessageQueue, int] = {}

    def remove_offset(self, mq: MessageQueue) -> None:
        super().remove_offset(mq)
        self.committed.pop(mq, None)

    def broker_reconnected(self, broker_name: str) -> None:
        """A channel to ``broker_name`` opened: it may have restarted and lost recent offsets,
        so the next periodic commit sends all of its queues."""
        for mq in [mq for mq in self.committed if mq.broker_name == broker_name]:
            del self.committed[mq]

    async def load(self) -> None:
        return None

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            value = self.memory_offset(mq)
            if value >= 0 or read_type is ReadOffsetType.READ_FROM_MEMORY:
                return value
        try:
            response = await self._invoke(
                mq.broker_name,
                "QueryConsumerOffset",
                broker_pb2.QueryConsumerOffsetRequest(
                    consumer_group=self.group,
                    topic=mq.topic,
                    queue_id=mq.queue_id,
                    set_zero_if_not_found=True,
                ),
            )
        except QueryNotFound:
            return -1
        except MQError as e:
            log.warning("query consumer offset failed", group=self.group, mq=str(mq), error=str(e))
            return -2
        offset = int(response.offset)
        self.update_offset(mq, offset, increase_only=False)
        return offset

    async def read_offsets_from_store(self, mqs: list[MessageQueue]) -> dict[MessageQueue, int]:
        """READ_FROM_STORE for many queues (a rebalance's new ones): one QueryConsumerOffsets
        per broker, brokers at once.

        Each answer is as ``read_offset`` gives it: the offset, -1 when none, -2 on an error.
        With ``watch_channel``, the brokers watch those at their end, added to ``watching``.
        """
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)

        async def one(broker_name: str, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
            request = broker_pb2.QueryConsumerOffsetsRequest(
                consumer_group=self.group,
                set_zero_if_not_found=True,
                queues=[broker_pb2.QueueRef(topic=mq.topic, queue_id=mq.queue_id) for mq in queues],
                watch_channel_id=self.watch_channel(broker_name) if self.watch_channel else "",
            )
            try:
                response = await self._invoke(broker_name, "QueryConsumerOffsets", request)
            except MQError as e:
                log.warning(
                    "query consumer offsets failed",
                    group=self.group,
                    broker=broker_name,
                    error=str(e),
                )
                return dict.fromkeys(queues, -2)
            # (A broker that knows no watch answers no ``watching``: none watched.)
            watched = {mq for mq, w in zip(queues, response.watching, strict=False) if w}
            for mq in queues:
                if mq in watched:
                    self.watching[mq] = request.watch_channel_id
                else:
                    self.watching.pop(mq, None)  # a watch asked earlier is not this one's
            return dict(zip(queues, (int(o) for o in response.offsets), strict=True))

        results: dict[MessageQueue, int] = {}
        for part in await asyncio.gather(*(one(b, q) for b, q in by_broker.items())):
            results.update(part)
        for mq, offset in results.items():
            if offset >= 0:
                self.update_offset(mq, offset, increase_only=False)
        return results

    async def _commit(self, broker_name: str, entries: dict[MessageQueue, int]) -> None:
        if self.fenced:
            entries = {mq: offset for mq, offset in entries.items() if mq in self.epochs}
            if not entries:
                return
        request = broker_pb2.UpdateConsumerOffsetRequest(
            consumer_group=self.group, client_id=self.client_id
        )
        presented = {mq: self.epochs.get(mq, 0) for mq in entries}
        for mq, offset in sorted(entries.items()):
            request.offsets.add(
                topic=mq.topic, queue_id=mq.queue_id, offset=offset, epoch=presented[mq]
            )
        if tracer.wants("offset_commit"):
            tracer.record(
                "offset_commit",
                group=self.group,
                client_id=self.client_id,
                broker=broker_name,
                offsets={str(mq): off for mq, off in entries.items()},
            )
        try:
            await self._invoke(broker_name, "UpdateConsumerOffset", request)
            self.committed.update(entries)
        except QueueFenced:
            # One stale epoch refuses the whole batch: commit the queues one by one.
            if len(entries) > 1:
                for mq, offset in entries.items():
                    await self._commit(broker_name, {mq: offset})
            elif self.on_fenced is not None:
                mq = next(iter(entries))
                self.on_fenced(mq, presented[mq])
        except MQError as e:
            log.warning(
                "update consumer offset failed",
                group=self.group,
                broker_name=broker_name,
                error=str(e),
            )

    async def persist_all(self, mqs: set[MessageQueue], *, only_changed: bool = True) -> None:
        """Commit every assigned queue's offset (one RPC per broker), with ``only_changed``
        (the timers) those its broker is not known to have; forget the other queues."""
        by_broker: dict[str, dict[MessageQueue, int]] = defaultdict(dict)
        for mq, offset in list(self.offset_table.items()):
            if mq in mqs:
                known = only_changed and self.committed.get(mq) == offset.value
                if offset.value >= 0 and not known:
                    by_broker[mq.broker_name][mq] = offset.value
            else:
                self.remove_offset(mq)
        await asyncio.gather(*(self._commit(b, entries) for b, entries in by_broker.items()))

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_many([mq])

    async def persist_many(self, mqs: list[MessageQueue]) -> None:
        """Commit these queues' offsets: one RPC per broker, the brokers at once."""
        by_broker: dict[str, dict[MessageQueue, int]] = defaultdict(dict)
        for mq in mqs:
            offset = self.offset_table.get(mq)
            if offset is not None and offset.value >= 0:
                by_broker[mq.broker_name][mq] = offset.value
        await asyncio.gather(*(self._commit(b, entries) for b, entries in by_broker.items()))


def default_offset_store_dir() -> Path:
    """``$ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR`` or ``~/.rocketmq_offsets``."""
    env = os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR")
    return Path(env) if env else Path.home() / ".rocketmq_offsets"


class LocalFileOffsetStore(_MemoryTable):
    """BROADCASTING: ``<dir>/<client id>/<group>/offsets.json`` (with a ``.bak``)."""

    def __init__(self, group: str, client_id: str, directory: Path | None = None) -> None:
        super().__init__()
        self.group = group
        base = directory if directory is not None else default_offset_store_dir()
        self.path = base / client_id.replace(":", "_") / group / "offsets.json"

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path.with_name("offsets.json.bak")):
            try:
                data = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                log.warning("offset file unreadable", path=str(path), error=str(e))
                continue
            return {
                MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"])
                for e in data.get("offsetTable", [])
            }
        return {}

    async def load(self) -> None:
        for mq, offset in self._read_file().items():
            self.offset_table[mq] = ControllableOffset(offset)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            value = self.memory_offset(mq)
            if value >= 0 or read_type is ReadOffsetType.READ_FROM_MEMORY:
                return value
        offset = self._read_file().get(mq, -1)
        if offset >= 0:
            self.update_offset(mq, offset, increase_only=False)
        return offset

    def _write(self, table: Iterable[tuple[MessageQueue, int]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "offsetTable": [
                {
                    "topic": mq.topic,
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "offset": off,
                }
                for mq, off in sorted(table)
            ]
        }
        tmp = self.path.with_name("offsets.json.tmp")
        tmp.write_text(json.dumps(payload, indent=1))
        if self.path.exists():
            os.replace(self.path, self.path.with_name("offsets.json.bak"))
        os.replace(tmp, self.path)

    async def persist_all(self, mqs: set[MessageQueue], *, only_changed: bool = True) -> None:
        self._write(
            (mq, o.value) for mq, o in self.offset_table.items() if mq in mqs and o.value >= 0
        )

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_many([mq])

    async def persist_many(self, mqs: list[MessageQueue]) -> None:
        on_disk = self._read_file()
        for mq in mqs:
            offset = self.offset_table.get(mq)
            if offset is not None:
                on_disk[mq] = offset.value
        self._write(on_disk.items())


def new_offset_store(
    broadcasting: bool,
    group: str,
    client_id: str,
    invoke: BrokerInvoker,
    directory: Path | None = None,
) -> LocalFileOffsetStore | RemoteBrokerOffsetStore:
    """The store a consumer uses: a local file in BROADCASTING, the brokers in CLUSTERING."""
    if broadcasting:
        return LocalFileOffsetStore(group, client_id, directory)
    return RemoteBrokerOffsetStore(group, invoke, client_id=client_id)
