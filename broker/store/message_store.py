"""``MessageStore``: the broker's message store (RocketMQ's ``DefaultMessageStore``).

Theory of operation:

- **Put.** ``put_batch`` appends a batch of messages for one (topic, queue id): under one
  ``asyncio.Lock`` it takes the queue's next offset and, in one pass over the messages (the
  wire's protobuf messages or ``Message`` objects alike), validates each, builds its record
  (``aiorocketmq.protocol.record.RecordBatchEncoder``: what the batch shares, hosts, timestamps, topic, is
  packed once; per message one header, the body's CRC) and its consume-queue entry; then one
  write to the commit log and one to the consume queue. When the batch does not fit the
  current segment, the general path rolls segments (one write per segment touched). It answers
  per batch (``PutBatchResult``: first queue offset, the commit log offsets); ``put_messages``
  answers a ``PutMessageResult`` per message. Offsets are therefore dense and a batch is
  consecutive. RocketMQ builds consume queues asynchronously from the commit log (its
  ``ReputMessageService``); we write them in the same step, so a put is readable as soon as it
  returns, and keep the asynchronous path for recovery only. Arrival listeners are then called
  synchronously (the long-poll hold service answers parked pulls from there).
- **Flush.** Writes go to the page cache at once. ``ASYNC_FLUSH``: a task fsyncs the commit log
  every ``flush_interval_commit_log_ms``. ``SYNC_FLUSH``: a put returns only after an fsync
  covering it (group commit: the flusher waits for requests, fsyncs once, wakes every request
  whose offset the fsync covered; ``flush_count`` counts those fsyncs). A put not covered within
  ``sync_flush_timeout_ms`` returns with ``FLUSH_DISK_TIMEOUT`` (its message is stored).
  Consume queues are fsynced every ``flush_interval_consume_queue_ms``, after which the
  *checkpoint* file records the commit-log offset below which every consume-queue entry is
  durable. fsyncs run in a thread; the loop never waits on the disk.
- **Recover** (in ``start``, in a thread). The commit log is scanned from the start of its last
  three segments (RocketMQ's normal recovery), or from the checkpoint if that is older; every
  record's magic, lengths, physical offset and body CRC are checked and the log is cut at the
  first bad or torn record (files truncated, later segments deleted). Every valid record the
  scan meets that its consume queue lacks is written to it (entries rebuilt); from the
  checkpoint on, existing entries are checked too and rewritten where a crash left zeros. Then
  consume-queue entries that point past the commit log's end are cut. A record below the
  checkpoint whose queue directory is gone is not rebuilt: its topic was deleted
  (``delete_topic_queues`` moves the checkpoint past it at once). Entries older than the
  scanned window cannot be rebuilt; a queue missing them keeps blanks there (readers skip
  them) and its min offset starts after them.
- **Retention.** Every ``clean_resource_interval_ms``: delete the oldest commit-log segments
  last modified more than ``file_reserved_time_hours`` ago (by ``clock``), never the current
  one, then consume-queue segments whose entries all point below the commit log's new start,
  and move each queue's min offset to its first live entry. RocketMQ waits for its
  ``deleteWhen`` hour (04) or a full disk; we delete as soon as files expire.
- **Read.** ``get_messages`` reads consume-queue entries from ``offset``, filters them by tag
  hash, reads the chosen records (neighbouring records with one ``pread``), re-checks the exact
  tag (a hash collision is not a match) and returns ``MessageExt`` objects with the statuses
  and ``next_begin_offset`` corrections of RocketMQ's ``getMessage`` on a master. With
  ``raw=True`` it returns the records themselves, back to back (RocketMQ's
  ``GetMessageResult`` holds buffers too): each run of neighbouring records is one ``pread``
  answered as read, and only with a tag filter is a record's TAGS property decoded.
- **Concurrency.** The store owns its tasks (flush, consume-queue flush, retention), started in
  ``start`` and cancelled and awaited in ``shutdown``, which then flushes and closes the files.
  Files are closed only when no fsync thread can still use their descriptors.

``broker_name`` (a constructor argument, default ``""``) is copied into every ``MessageExt``
read; a broker passes its own name.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar

from aiorocketmq.broker.store.commit_log import (
    CommitLog,
    DispatchRequest,
    decode_message,
    encode_properties,
    host_sysflag,
    record_size,
    tags_string_to_tags_code,
)
from aiorocketmq.broker.store.config import MessageStoreConfig
from aiorocketmq.broker.store.consume_queue import CQ_UNIT, ConsumeQueue, select_units
from aiorocketmq.broker.store.files import fsync_all, fsync_dirs
from aiorocketmq.broker.store.index import IndexService
from aiorocketmq.broker.store.message_id import parse_host
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.batch import build_records, decode_batch, property_code
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MessageIllegal,
    MessageTooLarge,
    MQError,
    ServiceNotAvailable,
)
from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.record import (
    MESSAGE_MAGIC_CODE,
    RecordBatchEncoder,
    create_message_ids,
    find_property,
    record_tags,
)
from aiorocketmq.protocol.tags import SubscriptionExpression

__all__ = [
    "ArrivalListener",
    "DelayLevelRefused",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "PutBatchResult",
    "PutMessageResult",
    "PutMessageStatus",
    "StorableMessage",
]

log = get_logger("aiorocketmq.broker.store")

T = TypeVar("T")

# Scan at least this many consume-queue entries per read (RocketMQ's maxFilterMessageCount of
# 16 000 bytes), so a pull through a long run of filtered-out messages still moves forward.
MAX_FILTER_UNITS = 16_000 // 20
# Recovery checks this many segments at the end of the commit log (RocketMQ: 3).
RECOVER_SEGMENTS = 3
_MAX_PROPERTIES_LENGTH = 32767  # an int16 length in the record
_MAX_TOPIC_BYTES = 255  # a directory name
_MAX_QUEUE_ID = 2**31 - 1

# <root>/checkpoint: magic, commit-log offset below which every consume queue is durable, CRC.
_CHECKPOINT = struct.Struct(">4sqI")
_CHECKPOINT_MAGIC = b"CKP1"

ArrivalListener = Callable[[str, int, int, int], None]
"""``callback(topic, queue_id, max_offset, tags_code)``: called after each put (see put)."""


class GetMessageStatus(Enum):
    """RocketMQ's ``GetMessageStatus``."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutMessageStatus(Enum):
    """RocketMQ's ``PutMessageStatus`` (the values this store produces)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """Where one stored message went."""

    queue_offset: int
    commit_log_offset: int
    msg_id: str
    store_timestamp: int
    status: PutMessageStatus = PutMessageStatus.PUT_OK


@dataclass(frozen=True, slots=True)
class PutBatchResult:
    """Where a batch went: consecutive queue offsets from ``queue_offset``, one commit-log
    offset per message (RocketMQ's ``AppendMessageResult`` of a batch: no object per message).
    """

    queue_offset: int
    commit_log_offsets: list[int]
    store_timestamp: int
    status: PutMessageStatus = PutMessageStatus.PUT_OK


class StorableMessage(Protocol):
    """What the store reads of a message: ``aiorocketmq.protocol.message.Message`` or the wire's Message.

    An empty ``tags`` or ``keys`` means none (the wire's strings are never None).
    """

    @property
    def topic(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> str | None: ...
    @property
    def flag(self) -> int: ...
    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def delay_time_level(self) -> int: ...


class DelayLevelRefused(Exception):
    """``put_batch(refuse_delayed=True)`` met a message with a delay level; nothing was written."""


@dataclass(slots=True)
class GetMessageResult:
    """What one read of a queue found; ``next_begin_offset`` is where the next read starts.

    A read decodes the messages (``messages``), or, when asked for raw records, answers the
    found records back to back as stored (``records``, ``record_count`` of them).
    """

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    records: bytes = b""
    record_count: int = 0

    @property
    def message_count(self) -> int:
        return self.record_count if self.records else len(self.messages)

    @property
    def buffer_total_size(self) -> int:
        if self.records:
            return len(self.records)
        return sum(m.store_size for m in self.messages)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _read_checkpoint(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_CHECKPOINT.size)
    except FileNotFoundError:
        return None
    if len(data) != _CHECKPOINT.size:
        return None
    magic, offset, crc = _CHECKPOINT.unpack(data)
    if magic != _CHECKPOINT_MAGIC or zlib.crc32(data[:12]) != crc or offset < 0:
        return None
    checkpoint: int = offset
    return checkpoint


def _write_checkpoint(path: str, offset: int) -> None:
    head = _CHECKPOINT_MAGIC + struct.pack(">q", offset)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, _CHECKPOINT.pack(_CHECKPOINT_MAGIC, offset, zlib.crc32(head)), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def _storable_topic(topic: str) -> bool:
    """Whether ``topic`` can name a consume-queue directory (the broker checks RocketMQ's rules)."""
    return (
        0 < len(topic.encode()) <= _MAX_TOPIC_BYTES
        and "/" not in topic
        and "\\" not in topic
        and "\x00" not in topic
        and topic not in (".", "..")
    )


class MessageStore:
    """The commit log, the consume queues, and the tasks that flush and clean them."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: str = "127.0.0.1:10911",
        clock: Callable[[], int] = _now_ms,
        broker_name: str = "",
    ) -> None:
        self.config = config
        self.store_host = store_host
        try:
            self._store_host = parse_host(store_host)
        except ValueError as e:
            raise ValueError(f"store_host must be an IP address and port: {e}") from e
        self.broker_name = broker_name
        self._clock = clock
        self._commit_log = CommitLog(
            config.store_path_commit_log, config.mapped_file_size_commit_log
        )
        self._consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._index: IndexService | None = (
            IndexService(config.store_path_index, config.max_hash_slot_num, config.max_index_num)
            if config.message_index_enable
            else None
        )
        # Held while the index builder reads the commit log in a thread (segments are not
        # deleted under it).
        self._index_lock = asyncio.Lock()
        self._index_wakeup = asyncio.Event()
        self._put_lock = asyncio.Lock()
        # Held while fsyncing or deleting files, so no descriptor is closed under a thread.
        self._commit_log_lock = asyncio.Lock()
        self._consume_queue_lock = asyncio.Lock()
        self._dirty_queues: set[ConsumeQueue] = set()
        self._dirs_to_sync: set[str] = set()
        self._flushed_where = 0
        self._checkpoint_offset = -1
        self._last_physical_min_offset = 0
        self._flush_requests: deque[tuple[int, asyncio.Future[bool]]] = deque()
        self._flush_wakeup = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._listeners: list[ArrivalListener] = []
        self._born_hosts: dict[str, tuple[bytes, int]] = {}
        self._property_codes: dict[bytes, int | None] = {}  # batch items' properties → tags code
        self._started = False
        self._running = False
        self._closed = False
        self.flush_count = 0
        """fsyncs of the commit log so far (group commit shares one among many puts)."""

    @property
    def store_host_address(self) -> tuple[bytes, int]:
        """``store_host`` as the records hold it: (packed ip, port)."""
        return self._store_host

    # ---- lifecycle -----------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        return self._running

    async def start(self) -> None:
        """Load and recover the files, then start the flush and retention tasks."""
        if self._running or self._closed:
            raise RuntimeError("a MessageStore starts once")
        self.config.validate()
        try:
            await self._run_blocking(self._load_and_recover)
        except BaseException:
            await self._wait_inflight()  # cancelled: let the recovery thread finish first
            self._close_files()
            self._closed = True
            raise
        self._started = True
        self._checkpoint_offset = self._commit_log.max_offset
        self._last_physical_min_offset = self._commit_log.min_offset
        self._running = True
        if self.config.sync_flush:
            self._spawn(self._group_commit_loop(), "store-group-commit")
        else:
            self._spawn(self._flush_commit_log_loop(), "store-flush-commit-log")
        self._spawn(self._flush_consume_queue_loop(), "store-flush-consume-queue")
        self._spawn(self._clean_loop(), "store-clean-expired")
        if self._index is not None:
            self._spawn(self._index_loop(), "store-build-index")
            self._index_wakeup.set()  # records the index lacks (it is new, or was behind)
        log.info(
            "message store started",
            root=self.config.store_path_root_dir,
            min_offset=self._commit_log.min_offset,
            max_offset=self._commit_log.max_offset,
            queues=sum(len(q) for q in self._consume_queue_table.values()),
            flush_disk_type=self.config.flush_disk_type,
        )

    async def shutdown(self) -> None:
        """Stop the tasks, flush everything, close the files. Idempotent."""
        if self._closed:
            return
        if not self._started:
            self._closed = True
            return
        self._running = False
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._wait_inflight()
            await self.flush()
        finally:
            self._tasks.clear()
            self._finish_flush_requests(everything=True)
            max_offset = self._commit_log.max_offset
            if not self._inflight:  # else leak the descriptors rather than close them in use
                self._close_files()
            self._closed = True
            log.info("message store shut down", max_offset=max_offset)

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("store task failed", task=task.get_name(), exc_info=task.exception())

    def _check_running(self) -> None:
        if not self._running:
            raise ServiceNotAvailable("the message store is not running")

    def _close_files(self) -> None:
        for queues in self._consume_queue_table.values():
            for cq in queues.values():
                cq.close()
        self._commit_log.close()
        if self._index is not None:
            self._index.close()

    async def _run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in a thread; if we are cancelled, the thread still finishes (tracked)."""
        future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        self._inflight.add(future)
        future.add_done_callback(self._inflight_done)
        return await asyncio.shield(future)

    def _inflight_done(self, future: asyncio.Future[Any]) -> None:
        self._inflight.discard(future)
        if not future.cancelled():
            future.exception()  # retrieved here; the awaiting caller may have gone

    async def _wait_inflight(self) -> None:
        if self._inflight:
            await asyncio.wait(set(self._inflight))

    # ---- recovery (blocking, in a thread, before any task runs) --------------------------
    def _load_and_recover(self) -> None:
        os.makedirs(self.config.store_path_consume_queue, exist_ok=True)
        if self._index is not None:
            self._index.load()
        checkpoint = _read_checkpoint(self.config.store_checkpoint)
        self._commit_log.load()
        self._load_consume_queues()
        starts = self._commit_log.segment_starts()
        window = starts[-RECOVER_SEGMENTS] if len(starts) >= RECOVER_SEGMENTS else 0
        logics_offset = self._commit_log.min_offset if checkpoint is None else checkpoint
        rebuilt = [0]

        def dispatch(request: DispatchRequest) -> None:
            if self._dispatch_on_recovery(request, logics_offset):
                rebuilt[0] += 1

        self._commit_log.recover(min(window, logics_offset), dispatch)
        end = self._commit_log.max_offset
        min_offset = self._commit_log.min_offset
        cut = 0
        for queues in self._consume_queue_table.values():
            for cq in queues.values():
                dropped = cq.truncate_dirty(end)
                if dropped:
                    cut += dropped
                    self._dirty_queues.add(cq)
                cq.correct_min_offset(min_offset)
        if rebuilt[0] or cut:
            log.warning("consume queues recovered", rebuilt_entries=rebuilt[0], cut_entries=cut)
        fsync_all(self._commit_log.fds_to_flush(min(window, logics_offset), end))
        self._flushed_where = end
        fds, dirs = self._take_dirty_queues()
        fsync_all(fds)
        fsync_dirs(sorted(dirs))
        _write_checkpoint(self.config.store_checkpoint, end)

    def _load_consume_queues(self) -> None:
        root = self.config.store_path_consume_queue
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir) or not _storable_topic(topic):
                continue
            for name in os.listdir(topic_dir):
                queue_dir = os.path.join(topic_dir, name)
                if not name.isdigit() or int(name) > _MAX_QUEUE_ID or not os.path.isdir(queue_dir):
                    continue
                cq = ConsumeQueue(
                    topic, int(name), queue_dir, self.config.mapped_file_size_consume_queue
                )
                cq.load()
                self._consume_queue_table.setdefault(topic, {})[int(name)] = cq

    def _dispatch_on_recovery(self, request: DispatchRequest, logics_offset: int) -> bool:
        """Index one scanned record if its queue lacks it; whether it wrote an entry.

        Below the checkpoint (``logics_offset``) entries are durable: only a queue cut short
        is extended. From the checkpoint on, each entry is checked, and rewritten if wrong.
        """
        cq = self._find_consume_queue(request.topic, request.queue_id)
        if cq is None:
            if request.commit_log_offset < logics_offset or not _storable_topic(request.topic):
                return False  # the queue was deleted after this record
            cq = self._find_or_create_consume_queue(request.topic, request.queue_id)
        entry = (request.commit_log_offset, request.msg_size, request.tags_code)
        if request.consume_queue_offset >= cq.max_offset:
            if request.commit_log_offset < cq.max_physic_offset:
                return False  # from before the queue was deleted and made again
            cq.append(request.consume_queue_offset, [entry])
        elif request.commit_log_offset < logics_offset or not cq.repair(
            request.consume_queue_offset, entry
        ):
            return False
        self._dirty_queues.add(cq)
        return True

    # ---- queues ---------------------------------------------------------------------------
    def _find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self._consume_queue_table.get(topic)
        return None if queues is None else queues.get(queue_id)

    def _find_or_create_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self._consume_queue_table.setdefault(topic, {})
        cq = queues.get(queue_id)
        if cq is None:
            cq = ConsumeQueue(
                topic,
                queue_id,
                os.path.join(self.config.store_path_consume_queue, topic, str(queue_id)),
                self.config.mapped_file_size_consume_queue,
            )
            queues[queue_id] = cq
        return cq

    def _take_dirty_queues(self) -> tuple[list[int], set[str]]:
        fds: list[int] = []
        dirs = self._dirs_to_sync
        self._dirs_to_sync = set()
        for cq in self._dirty_queues:
            queue_fds, queue_dirs = cq.take_dirty()
            fds.extend(queue_fds)
            dirs |= queue_dirs
        self._dirty_queues = set()
        return fds, dirs

    def topics(self) -> list[str]:
        """Topics that have at least one consume queue."""
        return sorted(self._consume_queue_table)

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` that have a consume queue, ascending."""
        return sorted(self._consume_queue_table.get(topic, ()))

    async def delete_topic_queues(self, topic: str) -> None:
        """Delete every consume queue of ``topic`` (its commit-log records age out normally).

        The checkpoint then moves past the records, so recovery will not index them again.
        """
        self._check_running()
        async with self._consume_queue_lock:
            queues = self._consume_queue_table.pop(topic, None)
            if not queues:
                return
            for cq in queues.values():
                self._dirty_queues.discard(cq)
                cq.destroy()
            shutil.rmtree(
                os.path.join(self.config.store_path_consume_queue, topic), ignore_errors=True
            )
            self._dirs_to_sync.add(self.config.store_path_consume_queue)
        log.info("topic consume queues deleted", topic=topic, queues=sorted(queues))
        await self._flush_consume_queues()

    # ---- put ------------------------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(topic, queue_id, max_offset, tags_code)`` after every put.

        Called synchronously once per distinct tag hash in the batch, with the queue's new max
        offset (the offset after the batch); an exception is logged, never raised to the put.
        """
        self._listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        self._listeners.remove(listener)

    def _born_host(self, born_host: str) -> tuple[bytes, int]:
        cached = self._born_hosts.get(born_host)
        if cached is None:
            try:
                cached = parse_host(born_host)
            except ValueError:
                # Not an IP address (a name, a unix socket): stored as 0.0.0.0:0.
                cached = (bytes(4), 0)
            if len(self._born_hosts) >= 4096:
                self._born_hosts.clear()
            self._born_hosts[born_host] = cached
        return cached

    def validate_messages(
        self,
        topic: str,
        messages: Sequence[StorableMessage],
        *,
        born_host: str,
        check_topics: bool = False,
    ) -> None:
        """Raise what ``put_batch`` would raise for these messages, storing nothing."""
        self._encode_batch(topic, messages, self._born_host(born_host), check_topics)

    def _encode_batch(
        self,
        topic: str,
        messages: Sequence[StorableMessage],
        born: tuple[bytes, int],
        check_topics: bool,
    ) -> tuple[list[tuple[bytes, bytes, int]], list[int], int]:
        """Validate a batch: ``(body, properties, flag)`` and tags code of each, payload bytes.

        The general path (``put_batch`` builds the records directly when they fit the current
        segment). Errors name the message by its index.
        """
        fixed = record_size(host_sysflag(born[0], self._store_host[0]), 0, len(topic.encode()), 0)
        room = self._commit_log.max_record_size - fixed
        items: list[tuple[bytes, bytes, int]] = []
        codes: list[int] = []
        payload = 0
        for index, message in enumerate(messages):
            body = message.body
            self._check_message(topic, index, message, len(body), check_topics)
            properties, code = self._encode_properties(topic, index, message)
            size = len(body) + len(properties)
            if size > room:
                raise MessageTooLarge(
                    f"messages[{index}]: message of {fixed + size} bytes does not fit a commit "
                    f"log segment of {self.config.mapped_file_size_commit_log} bytes"
                )
            items.append((body, properties, message.flag))
            codes.append(code)
            payload += size
        return items, codes, payload

    def _check_message(
        self, topic: str, index: int, message: StorableMessage, size: int, check_topics: bool
    ) -> None:
        if not size:
            raise MessageIllegal(f"messages[{index}]: message body is empty (topic {topic})")
        if size > self.config.max_message_size:
            raise MessageTooLarge(
                f"messages[{index}]: message body size {size} bytes exceeds the maximum message "
                f"size {self.config.max_message_size} bytes (topic {topic})"
            )
        if check_topics and message.topic and message.topic != topic:
            raise MessageIllegal(
                f"messages[{index}].topic is {message.topic!r} but the batch is for topic {topic!r}"
            )

    def _encode_properties(
        self, topic: str, index: int, message: StorableMessage
    ) -> tuple[bytes, int]:
        """``(properties, tags code)`` of a message: TAGS, KEYS, DELAY and its own properties."""
        tags = message.tags
        if message.properties or message.keys or message.delay_time_level > 0:
            merged = dict(message.properties)
            if tags:
                merged[MessageConst.PROPERTY_TAGS] = tags
            if message.keys:
                merged[MessageConst.PROPERTY_KEYS] = message.keys
            if message.delay_time_level > 0:
                merged[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(message.delay_time_level)
            tags = merged.get(MessageConst.PROPERTY_TAGS) or None
            text = encode_properties(merged)
            if text.count("\x01") != len(merged) or text.count("\x02") != len(merged):
                raise MessageIllegal(
                    f"messages[{index}]: message property names and values must not contain "
                    "\\x01 or \\x02"
                )
        elif tags:
            if "\x01" in tags or "\x02" in tags:
                raise MessageIllegal(
                    f"messages[{index}]: message tags must not contain \\x01 or \\x02"
                )
            text = f"{MessageConst.PROPERTY_TAGS}\x01{tags}\x02"
        else:
            return b"", 0
        properties = text.encode()
        if len(properties) > _MAX_PROPERTIES_LENGTH:
            raise MessageIllegal(
                f"messages[{index}]: message properties are {len(properties)} bytes, over the "
                f"limit {_MAX_PROPERTIES_LENGTH} (topic {topic})"
            )
        return properties, tags_string_to_tags_code(tags)

    async def put_messages(
        self,
        topic: str,
        queue_id: int,
        messages: Sequence[StorableMessage],
        *,
        born_host: str,
        born_timestamp: int,
        reconsume_times: int = 0,
    ) -> list[PutMessageResult]:
        """``put_batch``, answered with one ``PutMessageResult`` per message."""
        self._check_running()
        if not messages:
            return []
        put = await self.put_batch(
            topic,
            queue_id,
            messages,
            born_host=born_host,
            born_timestamp=born_timestamp,
            reconsume_times=reconsume_times,
        )
        ids = create_message_ids(*self._store_host, put.commit_log_offsets)
        first, store_timestamp, status = put.queue_offset, put.store_timestamp, put.status
        return [
            PutMessageResult(first + i, offset, msg_id, store_timestamp, status)
            for i, (offset, msg_id) in enumerate(zip(put.commit_log_offsets, ids, strict=True))
        ]

    async def put_batch(
        self,
        topic: str,
        queue_id: int,
        messages: Sequence[StorableMessage] | bytes,
        *,
        born_host: str,
        born_timestamp: int,
        reconsume_times: int = 0,
        check_topics: bool = False,
        refuse_delayed: bool = False,
    ) -> PutBatchResult:
        """Store ``messages`` consecutively in queue ``queue_id`` of ``topic`` (one batch).

        ``messages`` may be a producer's batch body (``aiorocketmq.protocol.batch``): its records are built
        straight from it (``aiorocketmq.protocol.batch.build_records``) when it is well formed and plain;
        otherwise it is decoded into messages (``MessageIllegal`` names a malformed item) and
        stored as below.

        ``topic`` is where they go; each message's own topic field is consulted only with
        ``check_topics`` (then it must be empty or ``topic``). Raises ``MessageIllegal`` (empty
        body, bad properties) or ``MessageTooLarge`` before anything is written, naming the
        message by its index. A delay level is stored as the DELAY property (delaying is the
        schedule service's job); with ``refuse_delayed``, a message with a delay level other
        than 0 raises ``DelayLevelRefused`` instead, nothing written. Under ``SYNC_FLUSH``
        returns after the fsync (or with ``FLUSH_DISK_TIMEOUT``).

        One pass over the messages validates them and builds their records and consume-queue
        entries, then one write each (per segment touched): no object per message.
        """
        self._check_running()
        if not messages:
            raise InvalidArgument("a batch to store has at least one message")
        batch_body = messages if isinstance(messages, bytes) else None
        plain: Sequence[StorableMessage] = () if isinstance(messages, bytes) else messages
        if not _storable_topic(topic):
            raise InvalidArgument(f"topic {topic!r} cannot be stored")
        if not 0 <= queue_id <= _MAX_QUEUE_ID:
            raise InvalidArgument(f"queue id {queue_id} is out of range")
        born = self._born_host(born_host)
        flushed: asyncio.Future[bool] | None = None
        async with self._put_lock:  # no await inside: the lock orders puts with flushes
            self._check_running()
            cq = self._find_or_create_consume_queue(topic, queue_id)
            queue_offset = cq.max_offset
            store_timestamp = self._clock()
            encoder = RecordBatchEncoder(
                topic=topic.encode(),
                queue_id=queue_id,
                born_timestamp=born_timestamp,
                born_host=born,
                store_timestamp=store_timestamp,
                store_host=self._store_host,
                reconsume_times=reconsume_times,
            )
            commit_log = self._commit_log
            mark = commit_log.max_offset
            try:
                position, limit = commit_log.write_position()
                built: tuple[int, bytes, bytes, list[int], Iterable[int], bool | None] | None
                built = None
                if batch_body is not None:
                    # A producer's batch body: its records built in one pass (in C when built).
                    built = build_records(
                        batch_body,
                        queue_id,
                        queue_offset,
                        position,
                        encoder.middle,
                        encoder.topic_part,
                        self.config.max_message_size,
                        property_code,
                        self._property_codes,
                    )
                    if built is None or built[0] > limit:
                        # Anything unusual (a delay level, a bad item, a segment roll): the
                        # batch as messages, through the general path and its checks.
                        built, plain = None, decode_batch(batch_body, topic)
                if built is None:
                    built = self._build_records(
                        encoder,
                        topic,
                        plain,
                        queue_offset,
                        position,
                        check_topics,
                        refuse_delayed,
                    )
                if built[0] <= limit:  # the usual case: the batch fits the current segment
                    _, records, units, placed, codes, keyed = built
                    commit_log.append_at(position, records, keyed=keyed)
                else:  # the records roll into a new segment: the general path
                    items, codes, payload = self._encode_batch(topic, plain, born, check_topics)
                    placed = commit_log.append_encoded(encoder, items, queue_offset, payload)
                    fixed, pack = encoder.fixed_size, CQ_UNIT.pack
                    units = b"".join(
                        [
                            pack(offset, fixed + len(item[0]) + len(item[1]), code)
                            for offset, item, code in zip(placed, items, codes, strict=True)
                        ]
                    )
                try:
                    cq.append_units(queue_offset, units)
                except BaseException:
                    commit_log.truncate(mark)
                    raise
            except OSError as e:
                log.error("store write failed", topic=topic, queue_id=queue_id, error=str(e))
                raise MQError(f"the message store could not write: {e}") from e
            self._dirty_queues.add(cq)
            if self.config.sync_flush:
                flushed = self._request_flush(commit_log.max_offset)
        self._notify_arrival(topic, queue_id, queue_offset + len(placed), codes)
        status = PutMessageStatus.PUT_OK
        if flushed is not None and not await self._wait_flushed(flushed):
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return PutBatchResult(queue_offset, placed, store_timestamp, status)

    def _build_records(
        self,
        encoder: RecordBatchEncoder,
        topic: str,
        messages: Sequence[StorableMessage],
        queue_offset: int,
        position: int,
        check_topics: bool,
        refuse_delayed: bool,
    ) -> tuple[int, bytes, bytes, list[int], Iterable[int], bool | None]:
        """Validate and encode in one pass, records from ``position`` on, with no segment roll.

        ``(end position, records, consume-queue entries, record positions, tags codes, None)``
        (the last: whether a record has a key, not known here); the caller checks that the end
        fits the segment.
        """
        pack = encoder.header.pack
        middle = encoder.middle
        head_size = encoder.header.size
        queue_id = encoder.queue_id
        plain_tail = encoder.tail(b"")
        magic = MESSAGE_MAGIC_CODE
        crc32 = zlib.crc32
        unit = CQ_UNIT.pack
        max_size = self.config.max_message_size
        parts: list[bytes] = []
        units: list[bytes] = []
        placed: list[int] = []
        add = parts.append
        add_unit = units.append
        add_placed = placed.append
        by_tags: dict[str, tuple[bytes, int]] = {}
        codes: dict[int, None] = {}  # the distinct tags codes, in order
        last_code = None
        first_offset = queue_offset
        for message in messages:
            body = message.body
            body_length = len(body)
            if not body_length or body_length > max_size:
                index = queue_offset - first_offset
                self._check_message(topic, index, message, body_length, check_topics)
            if check_topics:
                own_topic = message.topic
                if own_topic and own_topic != topic:
                    index = queue_offset - first_offset
                    self._check_message(topic, index, message, body_length, check_topics)
            tags = message.tags
            if message.keys or message.delay_time_level or message.properties:
                index = queue_offset - first_offset
                if refuse_delayed and message.delay_time_level:
                    raise DelayLevelRefused(f"messages[{index}] has a delay level")
                properties, code = self._encode_properties(topic, index, message)
                tail = encoder.tail(properties)
            elif tags:
                tagged = by_tags.get(tags)
                if tagged is None:
                    index = queue_offset - first_offset
                    properties, code = self._encode_properties(topic, index, message)
                    tagged = by_tags[tags] = (encoder.tail(properties), code)
                tail, code = tagged
            else:
                tail, code = plain_tail, 0
            size = head_size + body_length + len(tail)
            add(
                pack(
                    size,
                    magic,
                    crc32(body) & 0x7FFFFFFF,
                    queue_id,
                    message.flag,
                    queue_offset,
                    position,
                    middle,
                    body_length,
                )
            )
            add(body)
            add(tail)
            add_unit(unit(position, size, code))
            add_placed(position)
            if code != last_code:
                codes[code] = None
                last_code = code
            queue_offset += 1
            position += size
        return position, b"".join(parts), b"".join(units), placed, codes, None

    def _notify_arrival(
        self, topic: str, queue_id: int, max_offset: int, tags_codes: Iterable[int]
    ) -> None:
        self._index_wakeup.set()
        if not self._listeners:
            return
        for tags_code in dict.fromkeys(tags_codes):
            for listener in self._listeners:
                try:
                    listener(topic, queue_id, max_offset, tags_code)
                except Exception:
                    log.exception("message arrival listener failed", topic=topic, queue_id=queue_id)

    # ---- flush ----------------------------------------------------------------------------
    def _request_flush(self, offset: int) -> asyncio.Future[bool]:
        """A future set to True once the commit log is durable up to ``offset``."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self._flushed_where >= offset:
            future.set_result(True)
        else:
            self._flush_requests.append((offset, future))
            self._flush_wakeup.set()
        return future

    async def _wait_flushed(self, future: asyncio.Future[bool]) -> bool:
        try:
            async with asyncio.timeout(self.config.sync_flush_timeout_ms / 1000):
                return await asyncio.shield(future)
        except TimeoutError:
            log.warning("flush disk timeout", timeout_ms=self.config.sync_flush_timeout_ms)
            return False

    def _finish_flush_requests(self, *, everything: bool = False) -> None:
        requests = self._flush_requests
        while requests and (everything or requests[0][0] <= self._flushed_where):
            offset, future = requests.popleft()
            if not future.done():
                future.set_result(offset <= self._flushed_where)

    async def _flush_commit_log(self) -> None:
        async with self._commit_log_lock:
            target = self._commit_log.max_offset
            fds = self._commit_log.fds_to_flush(self._flushed_where, target)
            if fds:
                await self._run_blocking(fsync_all, fds)
                self.flush_count += 1
            self._flushed_where = max(self._flushed_where, target)
        self._finish_flush_requests()

    async def _flush_consume_queues(self) -> None:
        async with self._consume_queue_lock:
            target = self._commit_log.max_offset
            queues = set(self._dirty_queues)
            fds, dirs = self._take_dirty_queues()
            if not fds and not dirs and target == self._checkpoint_offset:
                return
            try:
                await self._run_blocking(self._sync_consume_queues, fds, sorted(dirs), target)
            except BaseException:
                for cq in queues:  # fsync them all again next time
                    cq.mark_all_dirty()
                self._dirty_queues |= queues
                self._dirs_to_sync |= dirs
                raise
            self._checkpoint_offset = target

    def _sync_consume_queues(self, fds: list[int], dirs: list[str], target: int) -> None:
        fsync_all(fds)
        fsync_dirs(dirs)
        _write_checkpoint(self.config.store_checkpoint, target)

    async def flush(self) -> None:
        """fsync the commit log, then the consume queues and the checkpoint."""
        await self._flush_commit_log()
        await self._flush_consume_queues()

    async def _group_commit_loop(self) -> None:
        """SYNC_FLUSH: one fsync for every put that asked since the last one."""
        while True:
            await self._flush_wakeup.wait()
            self._flush_wakeup.clear()
            try:
                await self._flush_commit_log()
            except OSError as e:
                log.error("commit log fsync failed", error=str(e))
                await asyncio.sleep(self.config.flush_interval_commit_log_ms / 1000)
                if self._flush_requests:
                    self._flush_wakeup.set()

    async def _flush_commit_log_loop(self) -> None:
        """ASYNC_FLUSH: fsync what was written, every ``flush_interval_commit_log_ms``."""
        while True:
            await asyncio.sleep(self.config.flush_interval_commit_log_ms / 1000)
            try:
                await self._flush_commit_log()
            except OSError as e:
                log.error("commit log fsync failed", error=str(e))

    async def _flush_consume_queue_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_interval_consume_queue_ms / 1000)
            try:
                await self._flush_consume_queues()
            except OSError as e:
                log.error("consume queue fsync failed", error=str(e))

    # ---- the key index (queryMsgByKey) ----------------------------------------------------
    async def _index_loop(self) -> None:
        """Index new records off the put path (RocketMQ's dispatcher does it too): woken by
        puts, at most every 100 ms, one bounded step at a time in a thread."""
        while True:
            await self._index_wakeup.wait()
            await asyncio.sleep(0.1)
            self._index_wakeup.clear()
            try:
                while await self._build_index_step():
                    pass
            except Exception:
                log.exception("building the key index failed")
                await asyncio.sleep(1.0)

    async def _build_index_step(self) -> bool:
        """Index up to 4 MiB of new records; whether more remain."""
        index = self._index
        if index is None:
            return False
        async with self._index_lock:
            target = self._commit_log.max_offset
            start = max(index.end_phy_offset, self._commit_log.min_offset)
            if start >= target:
                return False
            ranges = self._commit_log.keyed_ranges(start, target)
            reached = await self._run_blocking(self._index_records, index, ranges, target)
        return reached < target

    def _index_records(
        self, index: IndexService, ranges: list[tuple[int, int]], target: int
    ) -> int:
        """Blocking: index the records of ``ranges`` (those that may hold a key, up to
        ``target``), about 4 MiB of them at most; where the index now ends."""

        def dispatch(request: DispatchRequest) -> None:
            if not request.properties:  # no key: nothing to index
                return
            keys = find_property(request.properties, MessageConst.PROPERTY_KEYS) or ""
            uniq = find_property(
                request.properties, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
            )
            names = {k for k in keys.split(" ") if k}
            if uniq:
                names.add(uniq)
            index.put(
                [f"{request.topic}#{k}" for k in sorted(names)],
                request.commit_log_offset,
                request.store_timestamp,
                request.commit_log_offset + request.msg_size,
            )

        def indexed_to(offset: int) -> int:
            """Everything before ``offset`` is indexed (keyless records included)."""
            index.put([], offset, int(time.time() * 1000), offset)
            return offset

        budget = 4 * 1024 * 1024
        for start, end in ranges:
            if budget <= 0:  # the next step goes on from here
                return indexed_to(start)
            reached = self._commit_log.scan_keyed(start, dispatch, min(end - start, budget))
            if reached == start:  # a record it cannot read: this range stays unindexed
                log.warning("key index: unreadable record, range passed over", offset=start)
                continue
            budget -= reached - start
            if reached < end:  # out of budget: the next step goes on from here
                return indexed_to(reached)
        return indexed_to(target)

    async def query_messages_by_key(
        self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` among their KEYS (or as their UNIQ_KEY), stored
        in ``[begin_ms, end_ms]``, newest first, at most ``max_num``. Catches the index up
        first, so a message stored before the call is found."""
        self._check_running()
        if self._index is None:
            raise ServiceNotAvailable(
                "the key index is off on this broker (message_index_enable = false)"
            )
        while await self._build_index_step():
            pass
        end_ms = end_ms if end_ms is not None else 2**62
        found: list[MessageExt] = []
        seen: set[int] = set()
        candidates = self._index.lookup(f"{topic}#{key}", max_num * 4, begin_ms, end_ms)
        for phy in candidates:
            if phy in seen or len(found) >= max_num:
                continue
            seen.add(phy)
            message = (
                self.look_message_by_offset(phy) if phy >= self._commit_log.min_offset else None
            )
            if message is None or message.topic != topic:
                continue
            keys = (message.keys or "").split(" ")
            uniq = message.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if (key in keys or key == uniq) and begin_ms <= message.store_timestamp <= end_ms:
                found.append(message)
        return found

    # ---- retention ------------------------------------------------------------------------
    async def _clean_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.clean_resource_interval_ms / 1000)
            try:
                await self.delete_expired_files()
            except OSError as e:
                log.error("deleting expired files failed", error=str(e))

    async def delete_expired_files(self) -> int:
        """One retention pass (see the module notes); how many commit-log segments went."""
        self._check_running()
        reserved_ms = self.config.file_reserved_time_hours * 3_600_000
        async with self._index_lock, self._commit_log_lock:
            deleted = self._commit_log.delete_expired(self._clock(), reserved_ms)
        min_offset = self._commit_log.min_offset
        if self._index is not None:
            async with self._index_lock:
                for path in self._index.delete_before(min_offset):
                    log.info("expired index file deleted", path=path)
        if deleted:
            log.info(
                "expired commit log segments deleted",
                segments=[f"{s:020d}" for s in deleted],
                min_offset=min_offset,
            )
        if min_offset > self._last_physical_min_offset:
            async with self._consume_queue_lock:
                for queues in self._consume_queue_table.values():
                    for cq in queues.values():
                        cq.delete_expired(min_offset)
            self._last_physical_min_offset = min_offset
        return len(deleted)

    async def clean_expired_consume_queues(self, keep_topics: set[str]) -> tuple[int, list[str]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE: delete consume-queue segments whose entries all point
        before the commit log's start, and the queues of topics not in ``keep_topics``; (how
        many segments went, the topics whose queues went)."""
        self._check_running()
        min_offset = self._commit_log.min_offset
        segments = 0
        async with self._consume_queue_lock:
            for queues in self._consume_queue_table.values():
                for cq in queues.values():
                    segments += cq.delete_expired(min_offset)
        gone = [t for t in self.topics() if t not in keep_topics]
        for topic in gone:
            await self.delete_topic_queues(topic)
        if segments or gone:
            log.info("expired consume queues cleaned", segments=segments, topics=gone)
        return segments, gone

    # ---- read -----------------------------------------------------------------------------
    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        max_bytes: int | None,
        expression: SubscriptionExpression | None,
        *,
        raw: bool = False,
    ) -> GetMessageResult:
        """Read up to ``max_nums`` messages (and ``max_bytes``, but at least one) from ``offset``.

        ``group`` is accepted for RocketMQ's signature (statistics); it does not change the
        answer. ``expression`` None or ``*`` takes every message. ``raw``: answer the records
        as stored (``GetMessageResult.records``), no ``MessageExt`` built.
        """
        self._check_running()
        cq = self._find_consume_queue(topic, queue_id)
        if cq is None:
            status = (
                GetMessageStatus.NO_MESSAGE_IN_QUEUE
                if _storable_topic(topic) and 0 <= queue_id <= _MAX_QUEUE_ID
                else GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
            )
            return GetMessageResult(status, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(
                GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset
            )
        if offset == max_offset:
            return GetMessageResult(
                GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset
            )
        if offset > max_offset:
            # RocketMQ 4.x corrected to min_offset when that was 0; current RocketMQ: max_offset.
            return GetMessageResult(
                GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset
            )
        if expression is not None and expression.matches_all:
            expression = None
        max_nums = max(1, max_nums)
        # Unfiltered reads take what they return; filtered ones look further ahead.
        units = cq.read_units(
            offset, max_nums if expression is None else max(MAX_FILTER_UNITS, max_nums)
        )
        if units is None:
            return GetMessageResult(
                GetMessageStatus.OFFSET_FOUND_NULL,
                cq.roll_next_file(offset),
                min_offset,
                max_offset,
            )
        scanned, chosen, runs = select_units(
            units,
            max_nums,
            -1 if max_bytes is None else max_bytes,
            self._commit_log.min_offset,
            None if expression is None else expression.code_set,
        )
        next_begin = offset + scanned
        if raw:
            records, count, removed = self._read_raw(chosen, runs, expression)
            if count:
                status = GetMessageStatus.FOUND
            elif removed:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            else:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            return GetMessageResult(
                status, next_begin, min_offset, max_offset, records=records, record_count=count
            )
        messages: list[MessageExt] = []
        removed = False
        broker_name = self.broker_name
        for found in self._commit_log.read_records(chosen):
            if found is None:
                removed = True
                continue
            message = decode_message(found[0], found[1], broker_name)
            if expression is not None and not expression.matches_tags(message.tags):
                continue  # a tag-hash collision
            messages.append(message)
        if messages:
            status = GetMessageStatus.FOUND
        elif removed:
            status = GetMessageStatus.MESSAGE_WAS_REMOVING
        else:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
        return GetMessageResult(status, next_begin, min_offset, max_offset, messages)

    def _read_raw(
        self,
        chosen: list[tuple[int, int]],
        runs: list[tuple[int, int, int]],
        expression: SubscriptionExpression | None,
    ) -> tuple[bytes, int, bool]:
        """``(records back to back, how many, whether some were gone)`` of ``chosen``.

        Each run of neighbouring records (``select_units``) is read with one ``pread`` and
        answered as read; only with a tag filter is each record's TAGS property decoded, to
        drop hash collisions.
        """
        datas = self._commit_log.read_runs([(start, size) for start, size, _ in runs])
        parts: list[bytes | memoryview] = []
        count = 0
        removed = False
        index = 0
        tags_set = None if expression is None else expression.tags_set
        for (start, _, records), data in zip(runs, datas, strict=True):
            if data is None:
                removed = True
            elif tags_set is None:
                parts.append(data)
                count += records
            else:
                view = memoryview(data)
                for physical, size in chosen[index : index + records]:
                    pos = physical - start
                    if record_tags(view, pos) in tags_set:  # else a tag-hash collision
                        parts.append(view[pos : pos + size])
                        count += 1
            index += records
        return b"".join(parts), count, removed

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        """The queue's first offset whose message is still stored (0 for an unknown queue)."""
        cq = self._find_consume_queue(topic, queue_id)
        return 0 if cq is None else cq.min_offset

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """The offset the queue's next message will get (0 for an unknown queue)."""
        cq = self._find_consume_queue(topic, queue_id)
        return 0 if cq is None else cq.max_offset

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (max offset if none is)."""
        self._check_running()
        cq = self._find_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp_ms, self._commit_log.read_store_timestamp)

    def get_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        """Store timestamp (ms) of the message at ``offset``; None if there is none."""
        self._check_running()
        cq = self._find_consume_queue(topic, queue_id)
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return None
        unit = cq.get_unit(offset)
        return None if unit is None else self._commit_log.read_store_timestamp(unit[0])

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The message stored at ``commit_log_offset`` (e.g. from a decoded message id)."""
        data = self.read_record(commit_log_offset)
        return None if data is None else decode_message(data, 0, self.broker_name)

    def read_record(self, commit_log_offset: int) -> bytes | None:
        """The stored record at ``commit_log_offset`` as it lies in the commit log."""
        self._check_running()
        return self._commit_log.read_record(commit_log_offset)

    @property
    def commit_log_min_offset(self) -> int:
        return self._commit_log.min_offset

    @property
    def commit_log_max_offset(self) -> int:
        return self._commit_log.max_offset

    @property
    def commit_log(self) -> CommitLog:
        """The commit log itself (read-only use: ``iter_messages``, ``segment_starts``)."""
        return self._commit_log
