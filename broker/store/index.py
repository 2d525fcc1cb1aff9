"""The key index: which commit-log offsets hold messages of a topic with a given key.

RocketMQ's ``IndexFile`` layout, in files under ``<store>/index/`` named by the creation time:

- a 40-byte header: begin and end store timestamps (ms), begin and end commit-log offsets
  (int64 each), the number of hash slots used and the number of entries (int32 each);
- ``hash_slot_num`` slots of 4 bytes: the number of the newest entry whose key hashes there
  (0: none);
- ``index_num`` entries of 20 bytes: the key's hash (int32), the commit-log offset (int64),
  the store time in seconds after the file's begin timestamp (int32), and the number of the
  previous entry in the same slot (int32), so a slot is a linked list from newest to oldest.

Entry 0 is never used (0 means "no entry"). A key is ``topic#key``; each message is indexed under
each of its KEYS and its UNIQ_KEY. Hashes collide: a query returns candidate offsets, and the
store reads each message and keeps it only if it really has the key. A full file is followed by
a new one. Everything here is pure computation over a writable buffer (an ``mmap``, or a
``bytearray`` in tests); ``IndexService`` owns the files.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from aiorocketmq.logs import get_logger

__all__ = ["INDEX_HEADER_SIZE", "IndexFile", "IndexService", "index_file_size", "key_hash"]

log = get_logger("aiorocketmq.broker.store.index")

_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = _HEADER.size  # 40
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
_ENTRY_SIZE = _ENTRY.size  # 20


def key_hash(key: str) -> int:
    """A key's non-negative 31-bit hash (stable across runs and machines)."""
    return zlib.crc32(key.encode("utf-8")) & 0x7FFFFFFF


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * _SLOT.size + index_num * _ENTRY_SIZE


@dataclass
class _Header:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1  # entry 0 is "none"


class IndexFile:
    """One index file over ``buf`` (``hash_slot_num`` slots, room for ``index_num`` entries)."""

    def __init__(self, buf: mmap.mmap | bytearray, hash_slot_num: int, index_num: int) -> None:
        if len(buf) < index_file_size(hash_slot_num, index_num):
            raise ValueError("index buffer too small for its slots and entries")
        self.buf = buf
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        fields = _HEADER.unpack_from(buf, 0)
        self.header = _Header(*fields)
        if self.header.index_count <= 0:  # a new, zeroed file
            self.header = _Header()
            self._write_header()

    @property
    def full(self) -> bool:
        return self.header.index_count >= self.index_num

    @property
    def end_phy_offset(self) -> int:
        return self.header.end_phy_offset

    @property
    def begin_timestamp(self) -> int:
        return self.header.begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self.header.end_timestamp

    def _write_header(self) -> None:
        h = self.header
        _HEADER.pack_into(
            self.buf, 0, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset,
            h.end_phy_offset, h.hash_slot_count, h.index_count,
        )  # fmt: skip

    def _slot_pos(self, hashed: int) -> int:
        return INDEX_HEADER_SIZE + (hashed % self.hash_slot_num) * _SLOT.size

    def _entry_pos(self, number: int) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * _SLOT.size + number * _ENTRY_SIZE

    def put(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Index ``key`` at ``phy_offset``; False (nothing written) when the file is full."""
        h = self.header
        if self.full:
            return False
        hashed = key_hash(key)
        slot_pos = self._slot_pos(hashed)
        previous = _SLOT.unpack_from(self.buf, slot_pos)[0]
        if not 0 < previous < h.index_count:
            previous = 0
        if h.index_count == 1:
            h.begin_timestamp = store_timestamp
            h.begin_phy_offset = phy_offset
        seconds = max(0, (store_timestamp - h.begin_timestamp) // 1000)
        number = h.index_count
        _ENTRY.pack_into(self.buf, self._entry_pos(number), hashed, phy_offset, seconds, previous)
        _SLOT.pack_into(self.buf, slot_pos, number)
        if previous == 0:
            h.hash_slot_count += 1
        h.index_count += 1
        h.end_timestamp = max(h.end_timestamp, store_timestamp)
        h.end_phy_offset = max(h.end_phy_offset, phy_offset)
        self._write_header()
        return True

    def mark_end(self, phy_offset: int) -> None:
        """Everything before ``phy_offset`` is indexed here (records without keys included)."""
        if phy_offset > self.header.end_phy_offset:
            self.header.end_phy_offset = phy_offset
            self._write_header()

    def overlaps(self, begin: int, end: int) -> bool:
        """Whether the file's time range meets ``[begin, end]`` (ms)."""
        h = self.header
        return h.index_count > 1 and h.begin_timestamp <= end and h.end_timestamp >= begin

    def lookup(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Commit-log offsets of entries with ``key``'s hash stored in ``[begin, end]`` (ms),
        newest first, at most ``max_num`` (some may be collisions: check the message)."""
        h = self.header
        hashed = key_hash(key)
        number = _SLOT.unpack_from(self.buf, self._slot_pos(hashed))[0]
        found: list[int] = []
        seen = 0
        while 0 < number < h.index_count and len(found) < max_num and seen < h.index_count:
            seen += 1
            entry_hash, phy, seconds, previous = _ENTRY.unpack_from(
                self.buf, self._entry_pos(number)
            )
            stored = h.begin_timestamp + seconds * 1000
            # seconds are truncated: an entry stored up to 1 s after ``stored`` still matches
            if stored > end:
                number = previous
                continue
            if stored + 999 < begin:
                break  # older from here on
            if entry_hash == hashed:
                found.append(phy)
            if previous >= number:
                break
            number = previous
        return found


class IndexService:
    """The index files of a store: the newest takes new keys; queries read them all.

    Puts come from one builder (a thread that reads new commit-log records); queries may run
    at the same time from the event loop: a lock keeps each put and each lookup whole.
    """

    def __init__(self, directory: str, hash_slot_num: int, index_num: int) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[tuple[str, mmap.mmap, IndexFile]] = []
        self._lock = threading.Lock()

    @property
    def file_size(self) -> int:
        return index_file_size(self.hash_slot_num, self.index_num)

    def load(self) -> None:
        """Open the files there, oldest first; a file of another size is left alone."""
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if not name.isdigit() or os.path.getsize(path) != self.file_size:
                log.warning("not an index file of this store's size; ignored", path=path)
                continue
            self.files.append(self._open(path))

    def _open(self, path: str) -> tuple[str, mmap.mmap, IndexFile]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < self.file_size:
                os.ftruncate(fd, self.file_size)  # sparse: costs what is written
            mm = mmap.mmap(fd, self.file_size)
        finally:
            os.close(fd)
        return path, mm, IndexFile(mm, self.hash_slot_num, self.index_num)

    @property
    def end_phy_offset(self) -> int:
        """Records before this commit-log offset are indexed."""
        return self.files[-1][2].end_phy_offset if self.files else 0

    def _writable(self, now_ms: int) -> IndexFile:
        if not self.files or self.files[-1][2].full:
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000))
            name += f"{now_ms % 1000:03d}"
            path = os.path.join(self.directory, name)
            while os.path.exists(path):
                path += "0"
            previous_end = self.end_phy_offset
            self.files.append(self._open(path))
            self.files[-1][2].mark_end(previous_end)
        return self.files[-1][2]

    def put(self, keys: Iterable[str], phy_offset: int, store_timestamp: int, end: int) -> None:
        """Index a record's keys (``topic#key`` each); ``end`` is where the record ends."""
        with self._lock:
            for key in keys:
                index = self._writable(store_timestamp)
                if not index.put(key, phy_offset, store_timestamp):
                    index = self._writable(store_timestamp)
                    index.put(key, phy_offset, store_timestamp)
            if self.files:
                self.files[-1][2].mark_end(end)
            else:
                self._writable(store_timestamp).mark_end(end)

    def lookup(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Candidate commit-log offsets for ``key`` (``topic#key``), newest files first."""
        found: list[int] = []
        with self._lock:
            for _, _, index in reversed(self.files):
                if len(found) >= max_num:
                    break
                if index.overlaps(begin, end):
                    found.extend(index.lookup(key, max_num - len(found), begin, end))
        return found

    def flush(self) -> None:
        with self._lock:
            for _, mm, _ in self.files:
                mm.flush()

    def delete_before(self, min_phy_offset: int) -> list[str]:
        """Delete the files whose every entry points before ``min_phy_offset`` (the commit
        log's records there are gone); never the newest. The paths deleted."""
        deleted = []
        with self._lock:
            while len(self.files) > 1 and self.files[0][2].end_phy_offset < min_phy_offset:
                path, mm, _ = self.files.pop(0)
                mm.close()
                os.unlink(path)
                deleted.append(path)
        return deleted

    def close(self) -> None:
        with self._lock:
            for _, mm, _ in self.files:
                mm.flush()
                mm.close()
            self.files = []
