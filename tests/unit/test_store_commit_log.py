"""Commit log: record format, segment rolls with blank markers, reads, recovery cuts, ids."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from aiorocketmq.broker.store.commit_log import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    CommitLog,
    DispatchRequest,
    decode_message,
    decode_properties,
    encode_properties,
    record_size,
    tags_string_to_tags_code,
)
from aiorocketmq.broker.store.message_id import (
    create_message_id,
    decode_message_id,
    format_host,
    parse_host,
)
from aiorocketmq.protocol.tags import java_string_hash

HOST = (bytes([10, 0, 0, 7]), 10911)
BORN = (bytes([192, 168, 1, 2]), 50000)


def append(log: CommitLog, bodies: list[bytes], *, queue_offset: int = 0, topic: str = "T",
           tags: str | None = "TagA") -> list[tuple[int, int]]:
    props = encode_properties({"TAGS": tags} if tags else {}).encode()
    return log.append_batch(
        topic=topic.encode(), queue_id=1, queue_offset=queue_offset,
        items=[(b, props, 0) for b in bodies], born_timestamp=111, born_host=BORN,
        store_timestamp=222, store_host=HOST, reconsume_times=0,
    )


def open_log(path: Path, segment_size: int = 1024) -> CommitLog:
    log = CommitLog(str(path), segment_size)
    log.load()
    return log


def test_record_layout_is_rocketmq_v2(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    [(offset, size)] = append(log, [b"hello"])
    raw = log.read(offset, size)
    assert raw is not None and len(raw) == size == record_size(0, 5, 1, len("TAGS\x01TagA\x02"))
    total, magic, crc, qid, flag, qoff, phys = struct.unpack_from(">iiiiiqq", raw)
    assert (total, magic, qid, flag, qoff, phys) == (size, MESSAGE_MAGIC_CODE, 1, 0, 0, 0)
    assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    # born host at 48: ip + port; store timestamp at 56
    assert raw[48:52] == BORN[0] and struct.unpack_from(">i", raw, 52)[0] == BORN[1]
    assert struct.unpack_from(">q", raw, 56)[0] == 222
    assert raw.endswith(b"hello\x00\x01T\x00\x0aTAGS\x01TagA\x02")
    msg = decode_message(raw, 0, "broker-a")
    assert msg.body == b"hello" and msg.tags == "TagA" and msg.properties == {}
    assert msg.born_host == "192.168.1.2:50000" and msg.store_host == "10.0.0.7:10911"
    assert msg.msg_id == create_message_id(*HOST, 0) and msg.broker_name == "broker-a"
    log.close()


def test_records_never_span_segments_and_blank_marks_the_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_size=1024)
    placed = append(log, [bytes([i]) * 100 for i in range(30)])
    sizes = {size for _, size in placed}
    assert len(sizes) == 1
    for offset, size in placed:
        assert offset // 1024 == (offset + size - 1) // 1024
    names = sorted(os.listdir(tmp_path))
    assert names[0] == "0" * 20 and names[1] == f"{1024:020d}"
    first = (tmp_path / names[0]).read_bytes()
    per_segment = (1024 - END_FILE_MIN_BLANK_LENGTH) // next(iter(sizes))
    blank_at = per_segment * next(iter(sizes))
    assert struct.unpack_from(">ii", first, blank_at) == (1024 - blank_at, BLANK_MAGIC_CODE)
    assert len(first) == blank_at + END_FILE_MIN_BLANK_LENGTH  # not preallocated
    messages = list(log.iter_messages(0))
    assert [m.body[0] for m in messages] == list(range(30))
    assert [m.commit_log_offset for m in messages] == [o for o, _ in placed]
    log.close()


def test_read_records_coalesces_and_reports_gone(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_size=4096)
    placed = append(log, [b"a" * 50, b"b" * 50, b"c" * 50])
    found = log.read_records([*placed, (10**9, 100)])
    assert found[3] is None
    bufs = {id(f[0]) for f in found[:3] if f is not None}
    assert len(bufs) == 1  # one pread for the three neighbours
    assert [decode_message(f[0], f[1]).body[:1] for f in found[:3] if f] == [b"a", b"b", b"c"]
    log.close()


def test_keyed_ranges_are_the_writes_that_may_hold_a_key(tmp_path: Path) -> None:
    """The key index reads only these: writes with a KEYS or UNIQ_KEY property (adjacent ones
    merged), and everything written before the log was opened, which nobody watched."""
    log = open_log(tmp_path, segment_size=1 << 20)
    [(a, _)] = append(log, [b"plain"])
    keyed = encode_properties({"KEYS": "order-1"}).encode()
    placed = log.append_batch(
        topic=b"T", queue_id=1, queue_offset=1, items=[(b"k", keyed, 0)], born_timestamp=1,
        born_host=BORN, store_timestamp=2, store_host=HOST, reconsume_times=0,
    )
    [(k1, _)] = placed
    uniq = encode_properties({"UNIQ_KEY": "AC11"}).encode()
    [(k2, k2_size)] = log.append_batch(
        topic=b"T", queue_id=1, queue_offset=2, items=[(b"u", uniq, 0)], born_timestamp=1,
        born_host=BORN, store_timestamp=2, store_host=HOST, reconsume_times=0,
    )
    [(b, _)] = append(log, [b"plain again"], queue_offset=3)
    end = log.max_offset
    assert log.keyed_ranges(a, end) == [(k1, k2 + k2_size)]  # two writes, merged
    assert log.keyed_ranges(k2, end) == [(k2, k2 + k2_size)]
    assert log.keyed_ranges(b, end) == []  # and the ranges before b are forgotten
    log.close()
    reopened = open_log(tmp_path, segment_size=1 << 20)
    [(c, c_size)] = append(reopened, [b"after the restart"], queue_offset=4)
    assert reopened.keyed_ranges(a, c + c_size) == [(a, end)]  # not watched: all of it
    assert reopened.keyed_ranges(end, c + c_size) == []
    reopened.close()


def test_failed_append_leaves_the_log_as_before(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_size=1024)
    append(log, [b"x" * 100])
    before = log.max_offset
    with pytest.raises(ValueError, match="exceeds the segment size"):
        append(log, [b"y" * 100, b"z" * 5000])
    assert log.max_offset == before
    assert os.path.getsize(tmp_path / ("0" * 20)) == before
    log.close()


def reopen_and_recover(
    path: Path, segment_size: int = 1024
) -> tuple[CommitLog, list[DispatchRequest]]:
    log = open_log(path, segment_size)
    seen: list[DispatchRequest] = []
    log.recover(0, seen.append)
    return log, seen


def test_recover_cuts_a_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, 1 << 20)
    placed = append(log, [b"m%d" % i for i in range(5)])
    log.close()
    segment = tmp_path / ("0" * 20)
    with segment.open("r+b") as f:
        f.truncate(placed[-1][0] + 7)
    log, seen = reopen_and_recover(tmp_path, 1 << 20)
    assert [r.consume_queue_offset for r in seen] == [0, 1, 2, 3]
    assert log.max_offset == placed[-1][0] == segment.stat().st_size
    assert seen[0].tags_code == java_string_hash("TagA")
    log.close()


def test_recover_cuts_at_a_crc_mismatch_and_deletes_later_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, 1024)
    placed = append(log, [bytes([65 + i]) * 200 for i in range(12)])
    log.close()
    victim_offset, victim_size = placed[2]
    segment = tmp_path / ("0" * 20)
    data = bytearray(segment.read_bytes())
    data[victim_offset + victim_size - 30] ^= 0xFF  # inside the body
    segment.write_bytes(bytes(data))
    log, seen = reopen_and_recover(tmp_path, 1024)
    assert [r.commit_log_offset for r in seen] == [o for o, _ in placed[:2]]
    assert log.max_offset == victim_offset
    assert sorted(os.listdir(tmp_path)) == ["0" * 20]
    log.close()


def test_recover_follows_blank_markers_and_zero_tails(tmp_path: Path) -> None:
    log = open_log(tmp_path, 1024)
    placed = append(log, [b"q" * 200 for _ in range(12)])
    log.close()
    last = tmp_path / sorted(os.listdir(tmp_path))[-1]
    with last.open("ab") as f:
        f.write(bytes(64))  # an extended-but-unwritten tail after a crash reads as zeros
    log, seen = reopen_and_recover(tmp_path, 1024)
    assert [r.commit_log_offset for r in seen] == [o for o, _ in placed]
    assert log.max_offset == placed[-1][0] + placed[-1][1]
    log.close()


def test_delete_expired_deletes_an_old_prefix_never_the_last(tmp_path: Path) -> None:
    log = open_log(tmp_path, 1024)
    append(log, [b"r" * 200 for _ in range(16)])
    starts = log.segment_starts()
    assert len(starts) >= 4
    now_ms = int(os.stat(tmp_path / f"{starts[-1]:020d}").st_mtime * 1000)
    os.utime(tmp_path / f"{starts[1]:020d}", (now_ms / 1000 + 60, now_ms / 1000 + 60))
    assert log.delete_expired(now_ms + 10_000, 1_000) == [starts[0]]  # stops at a newer one
    assert log.min_offset == starts[1]
    assert log.delete_expired(now_ms + 10**9, 1_000) == starts[1:-1]
    assert log.segment_starts() == starts[-1:]
    log.close()


def test_properties_round_trip_and_tags_code() -> None:
    props = {"KEYS": "k1 k2", "TAGS": "TagA", "a": "1"}
    text = encode_properties(props)
    assert text == "KEYS\x01k1 k2\x02TAGS\x01TagA\x02a\x011\x02"
    assert decode_properties(text) == props
    assert tags_string_to_tags_code(None) == tags_string_to_tags_code("") == 0
    assert tags_string_to_tags_code("TagA") == java_string_hash("TagA")


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:10911", (bytes([127, 0, 0, 1]), 10911)),
        ("ipv4:10.1.2.3:5", (bytes([10, 1, 2, 3]), 5)),
        ("/10.1.2.3:6", (bytes([10, 1, 2, 3]), 6)),
        ("ipv6:%5B::1%5D:7", (bytes(15) + b"\x01", 7)),
        ("[::1]:8", (bytes(15) + b"\x01", 8)),
        ("10.0.0.1", (bytes([10, 0, 0, 1]), 0)),
    ],
)
def test_parse_host(address: str, expected: tuple[bytes, int]) -> None:
    assert parse_host(address) == expected


def test_parse_host_rejects_names() -> None:
    with pytest.raises(ValueError):
        parse_host("localhost:10911")


def test_message_id_round_trip() -> None:
    msg_id = create_message_id(bytes([10, 0, 0, 7]), 10911, 123456789)
    assert msg_id == "0A000007" + "00002A9F" + f"{123456789:016X}"
    assert decode_message_id(msg_id) == ("10.0.0.7", 10911, 123456789)
    v6 = create_message_id(bytes(15) + b"\x01", 9, 5)
    assert len(v6) == 56 and decode_message_id(v6) == ("::1", 9, 5)
    assert format_host(bytes(15) + b"\x01", 9) == "[::1]:9"
    with pytest.raises(ValueError):
        decode_message_id("XYZ")
