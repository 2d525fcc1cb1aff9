"""Consume queue: 20-byte entries in segments, offsets, truncation, retention, search by time."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from aiorocketmq.broker.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue

SEGMENT = 4 * CQ_STORE_UNIT_SIZE  # four entries per segment


def make_queue(path: Path, segment_size: int = SEGMENT) -> ConsumeQueue:
    directory = path / "T" / "0"
    cq = ConsumeQueue("T", 0, str(directory), segment_size)
    if directory.is_dir():
        cq.load()
    return cq


def entries(first: int, count: int, size: int = 100) -> list[tuple[int, int, int]]:
    """Entries whose commit log offsets are 1000 * queue offset."""
    return [(1000 * (first + i), size, 7) for i in range(count)]


def test_entries_are_20_bytes_in_segments_named_by_byte_offset(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(0, entries(0, 10))
    assert (cq.min_offset, cq.max_offset) == (0, 10)
    names = sorted(os.listdir(tmp_path / "T" / "0"))
    assert names == [f"{n:020d}" for n in (0, 80, 160)]
    raw = (tmp_path / "T" / "0" / names[1]).read_bytes()
    assert len(raw) == 4 * CQ_STORE_UNIT_SIZE
    assert struct.unpack_from(">qiq", raw, 0) == (4000, 100, 7)
    assert cq.get_unit(9) == (9000, 100, 7) and cq.get_unit(10) is None
    assert cq.read_units(2, 100) == b"".join(struct.pack(">qiq", *e) for e in entries(2, 2))
    assert cq.max_physic_offset == 9100
    cq.close()
    again = make_queue(tmp_path)
    assert (again.min_offset, again.max_offset, again.max_physic_offset) == (0, 10, 9100)
    again.close()


def test_append_refuses_to_overwrite(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(0, entries(0, 3))
    with pytest.raises(ValueError, match="below the next offset"):
        cq.append(2, entries(2, 1))
    cq.close()


def test_gap_reads_as_blanks_and_min_starts_at_first_real_entry(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(6, entries(6, 2))
    assert (cq.min_offset, cq.max_offset) == (6, 8)
    assert cq.get_unit(4) is None and cq.get_unit(5) is None  # blanks (holes)
    assert cq.read_units(0, 4) is None  # segment 0 does not exist: OFFSET_FOUND_NULL
    assert cq.roll_next_file(1) == 4
    cq.close()


def test_truncate_dirty_cuts_entries_past_the_commit_log_end(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(0, entries(0, 10))
    dropped = cq.truncate_dirty(5050)  # the message at 5000 would end at 5100
    assert (dropped, cq.max_offset, cq.max_physic_offset) == (5, 5, 4100)
    assert sorted(os.listdir(tmp_path / "T" / "0")) == [f"{n:020d}" for n in (0, 80)]
    cq.append(5, entries(5, 1))
    assert cq.max_offset == 6
    cq.close()


def test_delete_expired_moves_min_offset_and_keeps_the_last_segment(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(0, entries(0, 10))
    assert cq.delete_expired(5000) == 1  # segment [0..3] all below 5000; [4..7] holds 5000
    assert cq.min_offset == 5
    assert cq.delete_expired(100_000) == 1  # [4..7] goes; [8..9] is the last: kept
    assert (cq.min_offset, cq.max_offset) == (10, 10)
    assert sorted(os.listdir(tmp_path / "T" / "0")) == [f"{160:020d}"]
    cq.append(10, entries(10, 1))
    assert (cq.min_offset, cq.max_offset) == (10, 11)
    cq.close()


def test_offset_by_time_is_a_lower_bound(tmp_path: Path) -> None:
    cq = make_queue(tmp_path)
    cq.append(0, entries(0, 9))
    stamps = {1000 * i: 100 + 10 * (i // 2) for i in range(9)}  # 100,100,110,110,120,...

    def store_time(offset: int) -> int | None:
        return stamps.get(offset)

    assert cq.get_offset_in_queue_by_time(0, store_time) == 0
    assert cq.get_offset_in_queue_by_time(110, store_time) == 2
    assert cq.get_offset_in_queue_by_time(111, store_time) == 4
    assert cq.get_offset_in_queue_by_time(140, store_time) == 8
    assert cq.get_offset_in_queue_by_time(141, store_time) == 9  # all older: max offset
    cq.close()
