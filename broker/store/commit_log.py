"""The commit log: every message of every queue, appended in one sequence of segment files.

Rules:
- A message's *physical offset* is its byte position in one endless log. The log is cut into
  segments of ``mapped_file_size_commit_log`` bytes, each a file named by its start offset in
  20 zero-padded digits (``00000000000000000000``, ``00000000001073741824``, ...), as RocketMQ.
- Records are appended only, and a record never spans two segments: when the next record (plus
  an 8-byte marker) does not fit, an *end-of-file blank* ``(remaining bytes, BLANK_MAGIC_CODE)``
  closes the segment and the record goes to the next one, whose name is the old start plus the
  segment size. The blank's size field is how a reader skips to the next segment.
- Files are not preallocated: they grow as records are written (RocketMQ maps 1 GiB up front).
  So a segment's file size is where writing stopped, and a torn tail is a short file.
- One record is RocketMQ's message format, version 2; ``aiorocketmq.protocol.record`` defines it (and
  decodes it: clients read the same records from a pull's ``records``).
- A record is valid when its magic is right, its lengths add up to its total size, its
  physical-offset field equals where it lies and its body matches the CRC. ``recover`` scans
  from a given offset, hands each valid record to a dispatch callback, and cuts the log at the
  first invalid one (truncating that file and deleting every later segment, like RocketMQ's
  ``truncateDirtyFiles``).

This module does blocking file I/O and knows nothing of asyncio or of consume queues; the
``MessageStore`` calls it from the event loop (writes are small page-cache copies) and runs the
fsyncs in a thread.
"""

from __future__ import annotations

import bisect
import functools
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from aiorocketmq.broker.store.files import pwrite_all
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.record import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    HOST_FLAGS,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    PHYSICAL_OFFSET_POS,
    STOREHOSTADDRESS_V6_FLAG,
    SYSFLAG_POS,
    RecordBatchEncoder,
    decode_message,
    decode_properties,
    encode_properties,
    find_property,
    header_struct,
    host_sysflag,
    record_size,
    store_timestamp_pos,
)
from aiorocketmq.protocol.tags import java_string_hash

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "END_FILE_MIN_BLANK_LENGTH",
    "MESSAGE_MAGIC_CODE",
    "STOREHOSTADDRESS_V6_FLAG",
    "CommitLog",
    "DispatchRequest",
    "decode_message",
    "decode_properties",
    "encode_properties",
    "host_sysflag",
    "record_size",
    "tags_string_to_tags_code",
]

log = get_logger("aiorocketmq.broker.store.commit_log")

_SIZE_MAGIC = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# The fixed part of a record up to and including the body length, per host-flag combination.
_HEADERS = {flags: header_struct(flags) for flags in (0, 0x10, 0x20, 0x30)}
# Where STORETIMESTAMP lies, per host-flag combination.
_STORE_TS_POS = {flags: store_timestamp_pos(flags) for flags in _HEADERS}


@functools.lru_cache(maxsize=4096)
def _tags_hash(tags: str) -> int:
    return java_string_hash(tags)


def tags_string_to_tags_code(tags: str | None) -> int:
    """The consume queue's tag hash: Java ``String.hashCode()`` of the tags, 0 for none."""
    return _tags_hash(tags) if tags else 0


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What the consume queue needs of one record (RocketMQ's ``DispatchRequest``)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    properties: str = ""


def _frame(buf: memoryview, pos: int, limit: int) -> tuple[int, struct.Struct] | None:
    """The size of the record at ``pos`` and its header's layout, if its frame fits."""
    if pos + MIN_RECORD_SIZE > limit:
        return None
    total: int = _I32.unpack_from(buf, pos)[0]
    if total < MIN_RECORD_SIZE or pos + total > limit:
        return None
    header = _HEADERS[_I32.unpack_from(buf, pos + SYSFLAG_POS)[0] & HOST_FLAGS]
    if header.size > total:
        return None
    return total, header


def _check_record(
    buf: memoryview, pos: int, limit: int, expected_offset: int
) -> DispatchRequest | None:
    """The record at ``pos`` if it is whole and valid (see the module rules), else None."""
    frame = _frame(buf, pos, limit)
    if frame is None:
        return None
    total, header = frame
    end = pos + total
    (
        _,
        magic,
        body_crc,
        queue_id,
        _,
        queue_offset,
        physical_offset,
        _,
        _,
        _,
        _,
        store_timestamp,
        _,
        _,
        _,
        _,
        body_length,
    ) = header.unpack_from(buf, pos)
    if (
        magic != MESSAGE_MAGIC_CODE
        or physical_offset != expected_offset
        or queue_id < 0
        or queue_offset < 0
        or body_length < 0
    ):
        return None
    body_start = pos + header.size
    topic_pos = body_start + body_length
    if topic_pos + 2 > end:
        return None
    topic_length = _I16.unpack_from(buf, topic_pos)[0]
    properties_pos = topic_pos + 2 + topic_length
    if topic_length <= 0 or properties_pos + 2 > end:
        return None
    properties_length = _I16.unpack_from(buf, properties_pos)[0]
    if properties_length < 0 or properties_pos + 2 + properties_length != end:
        return None
    if zlib.crc32(buf[body_start:topic_pos]) & 0x7FFFFFFF != body_crc:
        return None
    try:
        topic = str(buf[topic_pos + 2 : properties_pos], "utf-8")
        properties = str(buf[properties_pos + 2 : end], "utf-8")
    except UnicodeDecodeError:
        return None
    tags = find_property(properties, MessageConst.PROPERTY_TAGS)
    return DispatchRequest(
        topic=topic,
        queue_id=queue_id,
        commit_log_offset=physical_offset,
        msg_size=total,
        tags_code=tags_string_to_tags_code(tags),
        store_timestamp=store_timestamp,
        consume_queue_offset=queue_offset,
        properties=properties,
    )


_KEY_MARKERS = (
    f"{MessageConst.PROPERTY_KEYS}\x01".encode(),
    f"{MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01".encode(),
)


def _keyed_record(
    buf: memoryview, pos: int, limit: int, expected_offset: int
) -> DispatchRequest | None:
    """The record at ``pos`` as the key index needs it: where it is, when it was stored, and
    its properties only when they may name a key (KEYS or UNIQ_KEY), else "".

    It reads records this store wrote and acknowledged (the recovery checked the tail at start),
    so it checks their frame, not their body's CRC; decoding every record's body CRC and
    strings in Python cost the broker about a microsecond per message, on a thread that takes
    the event loop's GIL.
    """
    frame = _frame(buf, pos, limit)
    if frame is None:
        return None
    total, header = frame
    end = pos + total
    fields = header.unpack_from(buf, pos)
    magic, queue_id, queue_offset, physical_offset = fields[1], fields[3], fields[5], fields[6]
    body_length = fields[16]
    if magic != MESSAGE_MAGIC_CODE or physical_offset != expected_offset:
        return None
    topic_pos = pos + header.size + body_length
    if body_length < 0 or topic_pos + 2 > end:
        return None
    topic_length = _I16.unpack_from(buf, topic_pos)[0]
    properties_pos = topic_pos + 2 + topic_length
    properties = ""
    if properties_pos + 2 < end:
        raw = bytes(buf[properties_pos + 2 : end])
        if any(marker in raw for marker in _KEY_MARKERS):
            properties = raw.decode("utf-8", "replace")
    return DispatchRequest(
        topic=str(buf[topic_pos + 2 : properties_pos], "utf-8", "replace") if properties else "",
        queue_id=queue_id,
        commit_log_offset=physical_offset,
        msg_size=total,
        tags_code=0,
        store_timestamp=fields[11],
        consume_queue_offset=queue_offset,
        properties=properties,
    )


@dataclass(slots=True, eq=False)
class _Segment:
    """One segment file. ``wrote`` is its file size; ``full`` once a blank marker closes it."""

    start: int
    path: str
    fd: int
    wrote: int
    capacity: int
    full: bool = False

    @property
    def end(self) -> int:
        """The physical offset right after this segment's data (its whole span once full)."""
        return self.start + (self.capacity if self.full else self.wrote)


class CommitLog:
    """The segment files of one store's commit log (blocking I/O; see the module rules)."""

    def __init__(self, directory: str, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self._segments: list[_Segment] = []
        self._starts: list[int] = []
        self._dir_fd: int | None = None
        # A segment was created or deleted since the directory was last fsynced.
        self.dir_dirty = False
        # For the key index: what this log wrote since it was opened and may hold a KEYS or
        # UNIQ_KEY property, as [start, end) ranges of whole writes (adjacent ones merged).
        # Records from before the open (``load``) were not watched: all of them may.
        self._keyed: list[list[int]] = []
        self._watched_from = 0

    # ---- opening and recovery ------------------------------------------------------------
    def load(self) -> None:
        """Open every segment file (in offset order); validity is ``recover``'s job."""
        os.makedirs(self.directory, exist_ok=True)
        self._dir_fd = os.open(self.directory, os.O_RDONLY)
        names = sorted(n for n in os.listdir(self.directory) if len(n) == 20 and n.isdigit())
        for name in names:
            path = os.path.join(self.directory, name)
            fd = os.open(path, os.O_RDWR)
            size = os.fstat(fd).st_size
            self._segments.append(_Segment(int(name), path, fd, size, max(self.segment_size, size)))
        self._starts = [s.start for s in self._segments]
        for seg, nxt in zip(self._segments, self._segments[1:], strict=False):
            seg.capacity = nxt.start - seg.start
            seg.full = True
        self._watched_from = self._segments[-1].end if self._segments else 0

    def recover(self, scan_from: int, dispatch: Callable[[DispatchRequest], None]) -> None:
        """Check every record from ``scan_from`` on, dispatch the valid ones, cut at a bad one."""
        if not self._segments:
            return
        scan_from = max(scan_from, self.min_offset)
        index = max(0, bisect.bisect_right(self._starts, scan_from) - 1)
        pos = scan_from - self._segments[index].start
        while index < len(self._segments):
            seg = self._segments[index]
            last = index == len(self._segments) - 1
            end, blank = self._scan_segment(seg, pos, dispatch)
            if blank is not None:
                seg.full = True
                seg.capacity = end + blank
                if end + END_FILE_MIN_BLANK_LENGTH < seg.wrote:
                    self._truncate_file(seg, end + END_FILE_MIN_BLANK_LENGTH)
            elif end < seg.wrote:
                log.warning(
                    "commit log tail cut: torn or corrupt record",
                    segment=os.path.basename(seg.path),
                    offset=seg.start + end,
                    dropped_bytes=self.max_offset - (seg.start + end),
                )
                self.truncate(seg.start + end)
                return
            elif last:
                seg.full = False
                seg.capacity = max(self.segment_size, seg.wrote)
            index += 1
            pos = 0

    def scan_keyed(
        self, offset: int, dispatch: Callable[[DispatchRequest], None], max_bytes: int
    ) -> int:
        """For the key index: dispatch the records from ``offset`` (a record boundary) on,
        about ``max_bytes`` of them at most, as ``_keyed_record`` reads them (a record with no
        key has no topic and no properties); where it stopped. Changes nothing."""
        offset = max(offset, self.min_offset)
        stop = min(self.max_offset, offset + max_bytes)
        while offset < stop:
            seg = self._segment_for(offset)
            if seg is None:
                break
            if offset >= seg.start + seg.wrote:
                if not seg.full:
                    break
                offset = seg.start + seg.capacity
                continue
            end, blank = self._scan_segment(
                seg, offset - seg.start, dispatch, stop - seg.start, read=_keyed_record
            )
            if blank is not None:
                offset = seg.start + seg.capacity
            elif seg.start + end == offset:
                break  # an invalid record (a torn tail being cut): nothing more here
            else:
                offset = seg.start + end
        return offset

    def _scan_segment(
        self,
        seg: _Segment,
        pos: int,
        dispatch: Callable[[DispatchRequest], None],
        stop: int | None = None,
        *,
        read: Callable[[memoryview, int, int, int], DispatchRequest | None] = _check_record,
    ) -> tuple[int, int | None]:
        """(where valid data ends, the blank's size if a blank marker ends it); with ``stop``,
        no record is started at or after that position. ``read`` checks and reads a record
        (None: not a whole valid one)."""
        size = seg.wrote
        if size == 0 or pos >= size:
            return min(pos, size), None
        stop = size if stop is None else min(stop, size)
        with mmap.mmap(seg.fd, size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                while pos + END_FILE_MIN_BLANK_LENGTH <= size and pos < stop:
                    total, magic = _SIZE_MAGIC.unpack_from(view, pos)
                    if magic == BLANK_MAGIC_CODE:
                        if total < END_FILE_MIN_BLANK_LENGTH:
                            break
                        return pos, total
                    request = read(view, pos, size, seg.start + pos)
                    if request is None:
                        break
                    dispatch(request)
                    pos += request.msg_size
            finally:
                view.release()
        return pos, None

    # ---- offsets -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """The first physical offset still on disk."""
        return self._segments[0].start if self._segments else 0

    @property
    def max_offset(self) -> int:
        """The physical offset the next record would get (ignoring a roll)."""
        return self._segments[-1].end if self._segments else 0

    @property
    def max_record_size(self) -> int:
        """The largest record a fresh segment can take (room is kept for the blank marker)."""
        return self.segment_size - END_FILE_MIN_BLANK_LENGTH

    def segment_starts(self) -> list[int]:
        return list(self._starts)

    def _segment_for(self, offset: int) -> _Segment | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0:
            return None
        return self._segments[index]

    # ---- appending -----------------------------------------------------------------------
    def _new_segment(self, start: int) -> _Segment:
        path = os.path.join(self.directory, f"{start:020d}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = _Segment(start, path, fd, 0, self.segment_size)
        self._segments.append(seg)
        self._starts.append(start)
        self.dir_dirty = True
        return seg

    def _writable_segment(self) -> _Segment:
        if not self._segments:
            return self._new_segment(0)
        last = self._segments[-1]
        if last.full:
            return self._new_segment(last.start + last.capacity)
        return last

    def append_batch(
        self,
        *,
        topic: bytes,
        queue_id: int,
        queue_offset: int,
        items: Sequence[tuple[bytes, bytes, int]],
        born_timestamp: int,
        born_host: tuple[bytes, int],
        store_timestamp: int,
        store_host: tuple[bytes, int],
        reconsume_times: int,
    ) -> list[tuple[int, int]]:
        """Append one record per ``(body, properties, flag)``, with consecutive queue offsets.

        Returns ``(physical offset, size)`` of each (see ``append_encoded``).
        """
        encoder = RecordBatchEncoder(
            topic=topic,
            queue_id=queue_id,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_timestamp=store_timestamp,
            store_host=store_host,
            reconsume_times=reconsume_times,
        )
        positions = self.append_encoded(encoder, items, queue_offset)
        fixed = encoder.fixed_size
        return [
            (position, fixed + len(body) + len(properties))
            for position, (body, properties, _) in zip(positions, items, strict=True)
        ]

    def write_position(self) -> tuple[int, int]:
        """``(where the next record goes, how far records may reach)`` in the writable segment.

        A batch whose records all end by the second value can be written with ``append_at``.
        """
        seg = self._writable_segment()
        return seg.start + seg.wrote, seg.start + seg.capacity - END_FILE_MIN_BLANK_LENGTH

    def append_at(self, position: int, data: bytes, *, keyed: bool | None = None) -> None:
        """Write records built for ``position`` (from ``write_position``), in one write.

        ``keyed``: whether a record has a key, when the caller knows (else the records are
        searched). On failure the log is cut back to ``position``.
        """
        seg = self._segments[-1]
        if seg.full or position != seg.start + seg.wrote:
            raise ValueError(f"records built for {position}, but the log ends at {seg.end}")
        if position + len(data) > seg.start + seg.capacity - END_FILE_MIN_BLANK_LENGTH:
            raise ValueError(f"{len(data)} bytes at {position} overflow the segment")
        try:
            self._write(seg, data, keyed)
        except BaseException:
            self.truncate(position)
            raise

    def append_encoded(
        self,
        encoder: RecordBatchEncoder,
        items: Sequence[tuple[bytes, bytes, int]],
        queue_offset: int,
        payload_size: int | None = None,
    ) -> list[int]:
        """Append the records of ``items`` built by ``encoder``; the physical offset of each.

        ``payload_size``, if the caller knows it, is the sum of the bodies' and properties'
        lengths. One write per segment touched (one in all when the batch fits the current
        segment); on any failure everything this call wrote is cut again.
        """
        fixed = encoder.fixed_size
        count = len(items)
        if payload_size is None:
            payload_size = sum(len(body) + len(properties) for body, properties, _ in items)
        mark = self.max_offset
        placed: list[int] = []
        try:
            seg = self._writable_segment()
            position = seg.start + seg.wrote
            limit = seg.start + seg.capacity - END_FILE_MIN_BLANK_LENGTH
            if position + fixed * count + payload_size <= limit:  # the usual case
                parts: list[bytes] = []
                encoder.encode(items, queue_offset, position, parts, placed)
                self._write(seg, b"".join(parts))
                return placed
            done = 0
            while done < count:
                end, after = done, position
                while end < count:
                    body, properties, _ = items[end]
                    size = fixed + len(body) + len(properties)
                    if after + size > limit:
                        break
                    after += size
                    end += 1
                parts = []
                if end > done:
                    encoder.encode(items[done:end], queue_offset + done, position, parts, placed)
                if end < count:  # the next record does not fit: close the segment
                    if size > self.max_record_size:
                        raise ValueError(
                            f"record of {size} bytes exceeds the segment size {self.segment_size}"
                        )
                    blank = seg.start + seg.capacity - after
                    parts.append(_SIZE_MAGIC.pack(blank, BLANK_MAGIC_CODE))
                    self._write(seg, b"".join(parts))
                    seg.full = True
                    seg = self._new_segment(seg.start + seg.capacity)
                    limit = seg.start + seg.capacity - END_FILE_MIN_BLANK_LENGTH
                    position = seg.start
                elif parts:
                    self._write(seg, b"".join(parts))
                done = end
        except BaseException:
            self.truncate(mark)
            raise
        return placed

    def _write(self, seg: _Segment, data: bytes, keyed: bool | None = None) -> None:
        pwrite_all(seg.fd, data, seg.wrote)
        start = seg.start + seg.wrote
        seg.wrote += len(data)
        if keyed is None:  # not known: C searches, no record parsed
            keyed = any(marker in data for marker in _KEY_MARKERS)
        if keyed:
            ranges = self._keyed
            if ranges and ranges[-1][1] == start:
                ranges[-1][1] = start + len(data)
            else:
                ranges.append([start, start + len(data)])

    def keyed_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` (record boundaries) whose records may hold a key: the
        key index reads only these, and passes over the rest of the log without reading it.
        Ranges that end by ``start`` are forgotten."""
        keyed = self._keyed
        while keyed and keyed[0][1] <= start:
            keyed.pop(0)
        found = [(start, min(end, self._watched_from))] if start < self._watched_from else []
        for a, b in keyed:
            if a >= end:
                break
            a, b = max(a, start, self._watched_from), min(b, end)
            if a < b:
                found.append((a, b))
        return found

    def truncate(self, offset: int) -> None:
        """Drop everything at or after physical ``offset`` (files cut, later segments deleted)."""
        self._keyed = [[a, min(b, offset)] for a, b in self._keyed if a < offset]
        while len(self._segments) > 1 and self._segments[-1].start >= offset:
            self._destroy(self._segments.pop())
            self._starts.pop()
        if not self._segments:
            return
        seg = self._segments[-1]
        relative = max(0, offset - seg.start)
        if relative < seg.wrote:
            self._truncate_file(seg, relative)
            seg.full = False
            seg.capacity = max(self.segment_size, relative)

    def _truncate_file(self, seg: _Segment, size: int) -> None:
        os.ftruncate(seg.fd, size)
        seg.wrote = size

    # ---- reading -------------------------------------------------------------------------
    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at physical ``offset``, or None if they are not (all) on disk."""
        seg = self._segment_for(offset)
        if seg is None or size <= 0 or offset + size > seg.start + seg.wrote:
            return None
        data = os.pread(seg.fd, size, offset - seg.start)
        return data if len(data) == size else None

    def read_records(
        self,
        records: Sequence[tuple[int, int]],
        *,
        max_gap: int = 64 * 1024,
        max_span: int = 4 * 1024 * 1024,
    ) -> list[tuple[bytes, int] | None]:
        """``(buffer, position)`` of each ``(offset, size)`` record, None where it is gone.

        Records close together in one segment (the usual case: one queue's messages written in
        batches) are read with a single ``pread`` covering them all.
        """
        out: list[tuple[bytes, int] | None] = []
        count = len(records)
        i = 0
        while i < count:
            offset, size = records[i]
            seg = self._segment_for(offset)
            seg_end = seg.start + seg.wrote if seg is not None else 0
            if seg is None or offset + size > seg_end or size <= 0:
                out.append(None)
                i += 1
                continue
            span_end = offset + size
            j = i + 1
            while j < count:
                nxt, nxt_size = records[j]
                if (
                    nxt < span_end
                    or nxt - span_end > max_gap
                    or nxt + nxt_size > seg_end
                    or nxt + nxt_size - offset > max_span
                ):
                    break
                span_end = nxt + nxt_size
                j += 1
            data = os.pread(seg.fd, span_end - offset, offset - seg.start)
            for k in range(i, j):
                at, length = records[k]
                out.append((data, at - offset) if at - offset + length <= len(data) else None)
            i = j
        return out

    def read_runs(self, runs: Sequence[tuple[int, int]]) -> list[bytes | None]:
        """The bytes of each ``(offset, size)`` run of back-to-back records, None where gone.

        A run lies in one segment (records never span two, and a blank ends a segment).
        """
        out: list[bytes | None] = []
        for offset, size in runs:
            seg = self._segment_for(offset)
            if seg is None or size <= 0 or offset + size > seg.start + seg.wrote:
                out.append(None)
                continue
            data = os.pread(seg.fd, size, offset - seg.start)
            out.append(data if len(data) == size else None)
        return out

    def read_record(self, offset: int) -> bytes | None:
        """The whole record at ``offset`` if one starts there (checked by magic and offset)."""
        seg = self._segment_for(offset)
        if seg is None or offset < self.min_offset:
            return None
        relative = offset - seg.start
        available = seg.wrote - relative
        if available < MIN_RECORD_SIZE:
            return None
        data = os.pread(seg.fd, min(available, 4096), relative)
        total, magic = _SIZE_MAGIC.unpack_from(data, 0)
        if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or total > available:
            return None
        if total > len(data):
            data = os.pread(seg.fd, total, relative)
        if _I64.unpack_from(data, PHYSICAL_OFFSET_POS)[0] != offset:
            return None
        return data[:total]

    def read_store_timestamp(self, offset: int) -> int | None:
        """STORETIMESTAMP of the record at ``offset`` (one small read)."""
        # Every record is longer than the longest header prefix read here.
        head = self.read(offset, _STORE_TS_POS[HOST_FLAGS] + 8)
        if head is None or _SIZE_MAGIC.unpack_from(head, 0)[1] != MESSAGE_MAGIC_CODE:
            return None
        sysflag = _I32.unpack_from(head, SYSFLAG_POS)[0] & HOST_FLAGS
        value: int = _I64.unpack_from(head, _STORE_TS_POS[sysflag])[0]
        return value

    def iter_messages(self, offset: int, broker_name: str = "") -> Iterator[MessageExt]:
        """Every message from physical ``offset`` (a record boundary) to the end, in order."""
        offset = max(offset, self.min_offset)
        while offset < self.max_offset:
            seg = self._segment_for(offset)
            if seg is None:
                return
            if offset >= seg.start + seg.wrote:
                if not seg.full:
                    return
                offset = seg.start + seg.capacity
                continue
            head = os.pread(seg.fd, END_FILE_MIN_BLANK_LENGTH, offset - seg.start)
            if len(head) < END_FILE_MIN_BLANK_LENGTH:
                return
            total, magic = _SIZE_MAGIC.unpack_from(head, 0)
            if magic == BLANK_MAGIC_CODE:
                offset = seg.start + seg.capacity
                continue
            data = self.read_record(offset)
            if data is None:
                return
            yield decode_message(data, 0, broker_name)
            offset += total

    # ---- flushing and retention ----------------------------------------------------------
    def fds_to_flush(self, flushed: int, target: int) -> list[int]:
        """File descriptors holding bytes in ``[flushed, target)``, plus the directory's."""
        fds = [s.fd for s in self._segments if s.start + s.wrote > flushed and s.start < target]
        if self.dir_dirty and self._dir_fd is not None:
            fds.append(self._dir_fd)
            self.dir_dirty = False
        return fds

    def delete_expired(self, now_ms: int, reserved_ms: int) -> list[int]:
        """Delete the oldest segments last modified over ``reserved_ms`` ago; their starts.

        Never the current (last) segment, and never one after a segment still kept: only a
        prefix of the log goes (RocketMQ's ``deleteExpiredFileByTime``).
        """
        deleted: list[int] = []
        while len(self._segments) > 1:
            seg = self._segments[0]
            modified_ms = os.fstat(seg.fd).st_mtime_ns // 1_000_000
            if now_ms < modified_ms + reserved_ms:
                break
            self._destroy(self._segments.pop(0))
            self._starts.pop(0)
            deleted.append(seg.start)
        return deleted

    def _destroy(self, seg: _Segment) -> None:
        os.close(seg.fd)
        try:
            os.unlink(seg.path)
        except FileNotFoundError:
            pass
        self.dir_dirty = True

    def close(self) -> None:
        for seg in self._segments:
            os.close(seg.fd)
        self._segments.clear()
        self._starts.clear()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None
