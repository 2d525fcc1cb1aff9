"""A consume queue: the index of one (topic, queue id) into the commit log.

Rules:
- Entry ``n`` (the message at queue offset ``n``) is 20 bytes: commit log offset (int64), size
  (int32), tag hash (int64), big-endian, at byte ``20 * n`` of the queue's logical file. The
  logical file is cut into segments of ``mapped_file_size_consume_queue`` bytes under
  ``consumequeue/<topic>/<queueId>/``, each named by its start *byte* offset in 20 zero-padded
  digits, as RocketMQ.
- Offsets are dense: the store appends entries in queue-offset order, a batch with one write.
- An all-zero entry (size 0) is a *blank*: a hole left where entries could not be rebuilt
  (RocketMQ's ``fillPreBlank``). Readers skip blanks; they count as scanned.
- ``max_offset`` is the next offset to be written. ``min_offset`` is the first entry whose
  message is still in the commit log: it moves when retention deletes old commit-log segments
  (``correct_min_offset``) and whole consume-queue segments whose entries all point below the
  commit log's new start (``delete_expired``). The last segment is always kept, so a queue's
  offsets never go back to 0.
- Within a queue, commit log offsets grow with queue offsets, and so (with an honest clock) do
  store timestamps: ``get_offset_in_queue_by_time`` is a binary search over them.

Blocking file I/O, no asyncio; the ``MessageStore`` serialises writers and fsyncs in a thread.
"""

from __future__ import annotations

import bisect
import os
import shutil
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiorocketmq.broker.store.config import CQ_STORE_UNIT_SIZE
from aiorocketmq.broker.store.files import pwrite_all

__all__ = ["CQ_STORE_UNIT_SIZE", "CQ_UNIT", "ConsumeQueue", "select_units", "select_units_py"]

CQ_UNIT = struct.Struct(">qiq")
_READ_BACK_UNITS = 1024

Selection = tuple[int, list[tuple[int, int]], list[tuple[int, int, int]]]
"""(units scanned, chosen (commit log offset, size) in order, runs (start, bytes, records))."""


def select_units_py(
    units: bytes,
    max_nums: int,
    max_bytes: int,
    physical_min: int,
    code_set: frozenset[int] | None,
) -> Selection:
    """A pull's pick from consume-queue ``units``, read from the first on.

    Takes up to ``max_nums`` entries and, if ``max_bytes`` >= 0, stops before the one that
    would pass ``max_bytes`` (but takes at least one); skips blanks, entries below
    ``physical_min`` (deleted) and, with a ``code_set``, tag hashes not in it. ``scanned``
    counts every entry looked at, so the next pull starts after it. Chosen entries that lie
    back to back in the commit log form one run: one read each.
    """
    chosen: list[tuple[int, int]] = []
    runs: list[tuple[int, int, int]] = []
    total = scanned = 0
    run_start = run_end = run_count = 0
    for physical, size, tags_code in CQ_UNIT.iter_unpack(units):
        if len(chosen) >= max_nums or (max_bytes >= 0 and chosen and total + size > max_bytes):
            break
        scanned += 1
        if size <= 0 or physical < physical_min:
            continue
        if code_set is not None and tags_code not in code_set:
            continue
        chosen.append((physical, size))
        total += size
        if run_count and physical == run_end:
            run_end += size
            run_count += 1
        else:
            if run_count:
                runs.append((run_start, run_end - run_start, run_count))
            run_start, run_end, run_count = physical, physical + size, 1
    if run_count:
        runs.append((run_start, run_end - run_start, run_count))
    return scanned, chosen, runs


def _select_units() -> Callable[..., Selection]:
    from aiorocketmq.protocol.record import (
        _speedups,  # the C module, when built and not switched off
    )

    return select_units_py if _speedups is None else _speedups.select_units


select_units: Callable[..., Selection] = _select_units()
"""``select_units_py``, in C when ``aiorocketmq.protocol._speedups`` was built."""


@dataclass(slots=True, eq=False)
class _CQSegment:
    """One segment file; ``start`` and ``count`` are in entries (queue offsets)."""

    start: int
    path: str
    fd: int
    count: int


class ConsumeQueue:
    """The index of one queue (blocking I/O; see the module rules)."""

    def __init__(self, topic: str, queue_id: int, directory: str, segment_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.units_per_segment = segment_size // CQ_STORE_UNIT_SIZE
        self._segments: list[_CQSegment] = []
        self._starts: list[int] = []
        self._dirty: set[_CQSegment] = set()
        self._dirty_dirs: set[str] = set()
        self.min_offset = 0
        # End (offset + size) in the commit log of the last entry that is not a blank.
        self.max_physic_offset = 0

    # ---- opening -------------------------------------------------------------------------
    def load(self) -> None:
        """Open the segment files; cut a torn (partial) last entry."""
        names = sorted(
            n
            for n in os.listdir(self.directory)
            if len(n) == 20 and n.isdigit() and int(n) % CQ_STORE_UNIT_SIZE == 0
        )
        for name in names:
            path = os.path.join(self.directory, name)
            fd = os.open(path, os.O_RDWR)
            size = os.fstat(fd).st_size
            count = min(size // CQ_STORE_UNIT_SIZE, self.units_per_segment)
            if size != count * CQ_STORE_UNIT_SIZE:
                os.ftruncate(fd, count * CQ_STORE_UNIT_SIZE)
            self._segments.append(_CQSegment(int(name) // CQ_STORE_UNIT_SIZE, path, fd, count))
        self._starts = [s.start for s in self._segments]
        self.min_offset = self._segments[0].start if self._segments else 0
        self._reset_max_physic_offset()

    def _reset_max_physic_offset(self) -> None:
        last = self._last_entry_where(lambda offset, size: size > 0)
        self.max_physic_offset = 0 if last is None else last[1] + last[2]

    # ---- offsets -------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """The queue offset the next message will get."""
        if not self._segments:
            return self.min_offset
        last = self._segments[-1]
        return last.start + last.count

    def _segment_for(self, offset: int) -> _CQSegment | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0:
            return None
        seg = self._segments[index]
        return seg if offset < seg.start + seg.count else None

    def roll_next_file(self, offset: int) -> int:
        """The first offset of the segment after the one ``offset`` falls in (capped at max)."""
        per = self.units_per_segment
        return min(offset + per - offset % per, self.max_offset)

    # ---- writing -------------------------------------------------------------------------
    def append(self, queue_offset: int, entries: Sequence[tuple[int, int, int]]) -> None:
        """Write ``(commit log offset, size, tag hash)`` entries from ``queue_offset`` on.

        ``queue_offset`` must be at least ``max_offset``; a gap is left as blanks (holes).
        One write per segment touched; on failure the queue is cut back to where it was.
        """
        self.append_units(queue_offset, b"".join([CQ_UNIT.pack(*entry) for entry in entries]))

    def append_units(self, queue_offset: int, data: bytes) -> None:
        """``append`` of entries already packed (``CQ_UNIT`` each, back to back)."""
        expected = self.max_offset
        if queue_offset < expected:
            raise ValueError(
                f"consume queue {self.topic}/{self.queue_id}: offset {queue_offset} is below "
                f"the next offset {expected}"
            )
        count = len(data) // CQ_STORE_UNIT_SIZE
        if not count:
            return
        per = self.units_per_segment
        try:
            done = 0
            offset = queue_offset
            while done < count:
                seg = self._segment_for_write(offset)
                chunk_count = min(seg.start + per - offset, count - done)
                chunk = data[done * CQ_STORE_UNIT_SIZE : (done + chunk_count) * CQ_STORE_UNIT_SIZE]
                pwrite_all(seg.fd, chunk, (offset - seg.start) * CQ_STORE_UNIT_SIZE)
                seg.count = offset - seg.start + chunk_count
                self._dirty.add(seg)
                done += chunk_count
                offset += chunk_count
        except BaseException:
            self.truncate(expected)
            raise
        if self.min_offset >= expected:  # the queue had no live entry: start at the first
            self.min_offset = queue_offset
        last_offset, last_size, _ = CQ_UNIT.unpack_from(data, (count - 1) * CQ_STORE_UNIT_SIZE)
        self.max_physic_offset = last_offset + last_size

    def _segment_for_write(self, offset: int) -> _CQSegment:
        if self._segments and offset < self._segments[-1].start + self.units_per_segment:
            return self._segments[-1]
        start = offset - offset % self.units_per_segment
        if not os.path.isdir(self.directory):  # a new queue: its parents change too
            os.makedirs(self.directory, exist_ok=True)
            topic_dir = os.path.dirname(self.directory)
            self._dirty_dirs.update((topic_dir, os.path.dirname(topic_dir)))
        self._dirty_dirs.add(self.directory)
        path = os.path.join(self.directory, f"{start * CQ_STORE_UNIT_SIZE:020d}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = _CQSegment(start, path, fd, 0)
        self._segments.append(seg)
        self._starts.append(start)
        return seg

    def repair(self, offset: int, entry: tuple[int, int, int]) -> bool:
        """Make the entry at ``offset`` (below ``max_offset``) equal ``entry``; whether it was not.

        Recovery uses it for entries written after the last checkpoint: a crash may have kept a
        file's length but not every page of it, leaving zeros (blanks) inside.
        """
        seg = self._segment_for(offset)
        if seg is None:
            return False
        packed = CQ_UNIT.pack(*entry)
        position = (offset - seg.start) * CQ_STORE_UNIT_SIZE
        if os.pread(seg.fd, CQ_STORE_UNIT_SIZE, position) == packed:
            return False
        pwrite_all(seg.fd, packed, position)
        self._dirty.add(seg)
        if offset < self.min_offset:
            self.min_offset = offset
        self.max_physic_offset = max(self.max_physic_offset, entry[0] + entry[1])
        return True

    def truncate(self, offset: int) -> None:
        """Drop the entries at ``offset`` and after (the first segment file always stays)."""
        while len(self._segments) > 1 and self._segments[-1].start >= offset:
            self._close_segment(self._segments.pop(), unlink=True)
            self._starts.pop()
        if self._segments:
            seg = self._segments[-1]
            keep = max(0, min(seg.count, offset - seg.start))
            if keep < seg.count:
                os.ftruncate(seg.fd, keep * CQ_STORE_UNIT_SIZE)
                seg.count = keep
                self._dirty.add(seg)
        self.min_offset = min(self.min_offset, self.max_offset)
        self._reset_max_physic_offset()

    def truncate_dirty(self, commit_log_end: int) -> int:
        """Drop trailing entries whose message does not end by ``commit_log_end``; how many."""
        if not self._segments:
            return 0
        before = self.max_offset
        last = self._last_entry_where(
            lambda offset, size: size > 0 and offset + size <= commit_log_end
        )
        keep = self._segments[0].start if last is None else last[0] + 1
        if keep < before:
            self.truncate(keep)
        return before - self.max_offset

    def _last_entry_where(self, keep: Callable[[int, int], bool]) -> tuple[int, int, int] | None:
        """``(queue offset, commit log offset, size)`` of the last entry that ``keep`` accepts.

        Walks back from the tail; in practice it stops at the first entry it reads.
        """
        for seg in reversed(self._segments):
            end = seg.count
            while end > 0:
                begin = max(0, end - _READ_BACK_UNITS)
                data = os.pread(
                    seg.fd, (end - begin) * CQ_STORE_UNIT_SIZE, begin * CQ_STORE_UNIT_SIZE
                )
                units = len(data) // CQ_STORE_UNIT_SIZE
                for i in range(units - 1, -1, -1):
                    offset, size, _ = CQ_UNIT.unpack_from(data, i * CQ_STORE_UNIT_SIZE)
                    if keep(offset, size):
                        return seg.start + begin + i, offset, size
                end = begin
        return None

    # ---- reading -------------------------------------------------------------------------
    def read_units(self, offset: int, max_units: int) -> bytes | None:
        """Up to ``max_units`` raw entries from ``offset``, within one segment; None if absent."""
        seg = self._segment_for(offset)
        if seg is None or max_units <= 0:
            return None
        count = min(max_units, seg.start + seg.count - offset)
        data = os.pread(
            seg.fd, count * CQ_STORE_UNIT_SIZE, (offset - seg.start) * CQ_STORE_UNIT_SIZE
        )
        usable = len(data) - len(data) % CQ_STORE_UNIT_SIZE
        return data[:usable] if usable else None

    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        """``(commit log offset, size, tag hash)`` at ``offset``; None if absent or a blank."""
        data = self.read_units(offset, 1)
        if data is None:
            return None
        unit: tuple[int, int, int] = CQ_UNIT.unpack(data)
        return unit if unit[1] > 0 else None

    def get_offset_in_queue_by_time(
        self, timestamp: int, store_time: Callable[[int], int | None]
    ) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (ms).

        ``min_offset`` if every live message is newer, ``max_offset`` if every one is older.
        ``store_time(commit log offset)`` reads a message's store timestamp. (RocketMQ 5's
        ``BoundaryType.LOWER``; RocketMQ 4 returned the offset of the nearest timestamp.)
        """
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            probe, found = mid, None
            while probe < hi:  # step over blanks and holes to a readable entry
                unit = self.get_unit(probe)
                if unit is not None:
                    found = store_time(unit[0])
                    if found is not None:
                        break
                probe = (
                    probe + 1
                    if unit is not None or self._segment_for(probe)
                    else (self.roll_next_file(probe))
                )
            if found is None or found >= timestamp:
                hi = mid
            else:
                lo = probe + 1
        return lo

    # ---- retention -----------------------------------------------------------------------
    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Delete leading segments whose entries all point below the commit log's start.

        Judged by each segment's last entry, as RocketMQ; never the last segment. Then
        ``min_offset`` is corrected. Returns how many segments went.
        """
        deleted = 0
        while len(self._segments) > 1:
            seg = self._segments[0]
            if seg.count:
                data = os.pread(seg.fd, CQ_STORE_UNIT_SIZE, (seg.count - 1) * CQ_STORE_UNIT_SIZE)
                last_offset = CQ_UNIT.unpack(data)[0] if len(data) == CQ_STORE_UNIT_SIZE else 0
                if last_offset >= commit_log_min_offset:
                    break
            self._close_segment(self._segments.pop(0), unlink=True)
            self._starts.pop(0)
            deleted += 1
        self.correct_min_offset(commit_log_min_offset)
        return deleted

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Move ``min_offset`` to the first entry that is not a blank and not yet deleted."""
        if not self._segments:
            return
        offset = max(self.min_offset, self._segments[0].start)
        for seg in self._segments:
            if seg.start + seg.count <= offset:
                continue
            begin = max(offset, seg.start) - seg.start
            while begin < seg.count:
                units = min(_READ_BACK_UNITS, seg.count - begin)
                data = os.pread(seg.fd, units * CQ_STORE_UNIT_SIZE, begin * CQ_STORE_UNIT_SIZE)
                for i in range(len(data) // CQ_STORE_UNIT_SIZE):
                    phys, size, _ = CQ_UNIT.unpack_from(data, i * CQ_STORE_UNIT_SIZE)
                    if size > 0 and phys >= commit_log_min_offset:
                        self.min_offset = seg.start + begin + i
                        return
                begin += units
        self.min_offset = self.max_offset

    # ---- flushing and closing ------------------------------------------------------------
    def take_dirty(self) -> tuple[list[int], set[str]]:
        """Descriptors written and directories changed since the last call (to fsync)."""
        fds = [seg.fd for seg in self._dirty]
        dirs = self._dirty_dirs
        self._dirty.clear()
        self._dirty_dirs = set()
        return fds, dirs

    def mark_all_dirty(self) -> None:
        """After a failed fsync: flush everything next time."""
        self._dirty.update(self._segments)
        self._dirty_dirs.add(self.directory)

    def _close_segment(self, seg: _CQSegment, *, unlink: bool) -> None:
        self._dirty.discard(seg)
        os.close(seg.fd)
        if unlink:
            try:
                os.unlink(seg.path)
            except FileNotFoundError:
                pass
            self._dirty_dirs.add(self.directory)

    def close(self) -> None:
        for seg in self._segments:
            self._close_segment(seg, unlink=False)
        self._segments.clear()
        self._starts.clear()

    def destroy(self) -> None:
        """Close and delete this queue's files and directory."""
        self.close()
        self._dirty_dirs.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
