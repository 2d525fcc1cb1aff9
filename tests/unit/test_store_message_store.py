"""MessageStore: put/get, offsets, tag filtering, statuses, recovery, retention, group commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import aiorocketmq.broker.store.message_store as message_store_module
from aiorocketmq.broker.store import (
    DelayLevelRefused,
    GetMessageResult,
    GetMessageStatus,
    MessageStore,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
    decode_message_id,
)
from aiorocketmq.broker.store.consume_queue import CQ_UNIT, select_units
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MessageIllegal,
    MessageTooLarge,
    ServiceNotAvailable,
)
from aiorocketmq.protocol.message import Message, MessageExt
from aiorocketmq.protocol.record import decode_records
from aiorocketmq.protocol.tags import java_string_hash, parse_expression
from aiorocketmq.protocol.v1 import common_pb2
from tests.helpers import wait_until

TOPIC = "TopicTest"
CQ_UNITS = 8  # consume-queue entries per segment in these tests


@pytest.fixture
def config(tmp_path: Path) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=20 * CQ_UNITS,
    )


@asynccontextmanager
async def running(config: MessageStoreConfig, **kwargs: Any) -> AsyncIterator[MessageStore]:
    store = MessageStore(config, **kwargs)
    await store.start()
    try:
        yield store
    finally:
        await store.shutdown()


async def put(
    store: MessageStore,
    count: int = 1,
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    tags: str | None = "TagA",
    body: bytes | None = None,
    prefix: str = "m",
) -> list[PutMessageResult]:
    messages = [
        Message(topic, body if body is not None else f"{prefix}{i}".encode() * 20, tags=tags)
        for i in range(count)
    ]
    return await store.put_messages(
        topic, queue_id, messages, born_host="10.0.0.9:40000", born_timestamp=1_700_000_000_000
    )


def get(
    store: MessageStore,
    offset: int = 0,
    *,
    queue_id: int = 0,
    max_nums: int = 32,
    max_bytes: int | None = None,
    expression: str | None = None,
    topic: str = TOPIC,
) -> GetMessageResult:
    return store.get_messages(
        "group", topic, queue_id, offset, max_nums, max_bytes,
        None if expression is None else parse_expression(expression),
    )


def read_messages(store: MessageStore, queue_id: int = 0, topic: str = TOPIC) -> list[MessageExt]:
    """Every message of the queue, pulling as a consumer would (reads stop at CQ segments)."""
    messages: list[MessageExt] = []
    offset = store.get_min_offset(topic, queue_id)
    while True:
        result = get(store, offset, queue_id=queue_id, topic=topic)
        if result.status is not GetMessageStatus.FOUND:
            return messages
        messages.extend(result.messages)
        offset = result.next_begin_offset


def read_all(store: MessageStore, queue_id: int = 0, topic: str = TOPIC) -> list[bytes]:
    return [m.body for m in read_messages(store, queue_id, topic)]


def commit_log_files(config: MessageStoreConfig) -> list[Path]:
    return sorted(Path(config.store_path_commit_log).iterdir())


# ---- put and get ------------------------------------------------------------------------------
async def test_put_and_read_back_across_segment_rolls(config: MessageStoreConfig) -> None:
    async with running(config, broker_name="broker-a") as store:
        results: list[PutMessageResult] = []
        for batch in range(15):
            results += await put(store, 7, prefix=f"b{batch}-")
        assert [r.queue_offset for r in results] == list(range(105))
        assert len(commit_log_files(config)) > 5
        for r in results:
            assert decode_message_id(r.msg_id) == ("127.0.0.1", 10911, r.commit_log_offset)
            looked = store.look_message_by_offset(r.commit_log_offset)
            assert looked is not None and looked.queue_offset == r.queue_offset
        expected = [f"b{b}-{i}".encode() * 20 for b in range(15) for i in range(7)]
        assert read_all(store) == expected
        first = get(store, 0, max_nums=3)
        assert first.status is GetMessageStatus.FOUND and first.next_begin_offset == 3
        m = first.messages[0]
        assert (m.topic, m.queue_id, m.queue_offset, m.tags, m.broker_name) == (
            TOPIC, 0, 0, "TagA", "broker-a"
        )
        assert m.born_host == "10.0.0.9:40000" and m.store_host == "127.0.0.1:10911"
        assert m.msg_id == results[0].msg_id and m.store_timestamp == results[0].store_timestamp
    for path in commit_log_files(config):
        assert path.stat().st_size <= 4096  # grown, not preallocated


async def test_files_are_not_preallocated_at_the_default_size(tmp_path: Path) -> None:
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path))
    async with running(config) as store:
        await put(store, 3)
    [segment] = commit_log_files(config)
    assert segment.name == "0" * 20 and segment.stat().st_size < 4096


async def test_offsets_are_dense_per_queue_under_concurrent_puts(
    config: MessageStoreConfig,
) -> None:
    async with running(config) as store:
        async def producer(topic: str, queue_id: int) -> list[PutMessageResult]:
            out: list[PutMessageResult] = []
            for _ in range(10):
                out += await put(store, 3, topic=topic, queue_id=queue_id)
                await asyncio.sleep(0)
            return out

        keys = [(t, q) for t in ("TopicA", "TopicB") for q in range(3)]
        per_queue = await asyncio.gather(*(producer(t, q) for t, q in keys))
        for (topic, queue_id), results in zip(keys, per_queue, strict=True):
            assert sorted(r.queue_offset for r in results) == list(range(30))
            assert store.get_max_offset(topic, queue_id) == 30
            assert len(read_all(store, queue_id, topic)) == 30
        assert store.queue_ids("TopicA") == [0, 1, 2] and store.topics() == ["TopicA", "TopicB"]
        offsets = sorted(r.commit_log_offset for rs in per_queue for r in rs)
        assert len(set(offsets)) == 180


async def test_batch_is_consecutive_and_properties_round_trip(config: MessageStoreConfig) -> None:
    async with running(config) as store:
        await put(store, 2, queue_id=1)
        batch = [
            Message(TOPIC, b"one", tags="T1", keys="k1 k2", flag=3, properties={"a": "1"}),
            Message(TOPIC, b"two", delay_time_level=2),
        ]
        results = await store.put_messages(
            TOPIC, 1, batch, born_host="ipv4:10.1.1.1:5", born_timestamp=42, reconsume_times=4
        )
        assert [r.queue_offset for r in results] == [2, 3]
        one, two = get(store, 2, queue_id=1).messages
        assert (one.body, one.tags, one.keys, one.flag, one.properties) == (
            b"one", "T1", "k1 k2", 3, {"a": "1"}
        )
        assert (one.reconsume_times, one.born_timestamp, one.born_host) == (4, 42, "10.1.1.1:5")
        assert two.tags is None and two.properties == {"DELAY": "2"}


async def test_max_nums_and_max_bytes(config: MessageStoreConfig) -> None:
    async with running(config) as store:
        await put(store, 10)
        assert len(get(store, max_nums=4).messages) == 4
        size = get(store, max_nums=1).messages[0].store_size
        result = get(store, max_bytes=size * 3 + 1)
        assert len(result.messages) == 3 and result.next_begin_offset == 3
        assert len(get(store, max_bytes=1).messages) == 1  # at least one


# ---- batches as they come off the wire, raw reads ---------------------------------------------
def wire_batch(count: int, *, tags: str = "", prefix: str = "w") -> list[common_pb2.Message]:
    return [
        common_pb2.Message(topic=TOPIC, body=f"{prefix}{i}".encode() * 30, tags=tags)
        for i in range(count)
    ]


def read_raw(store: MessageStore, queue_id: int = 0, **kw: Any) -> list[MessageExt]:
    """Every message of the queue, read as raw records and decoded as a client would."""
    messages: list[MessageExt] = []
    offset = store.get_min_offset(TOPIC, queue_id)
    while True:
        expression = kw.get("expression")
        result = store.get_messages(
            "group", TOPIC, queue_id, offset, kw.get("max_nums", 32), kw.get("max_bytes"),
            None if expression is None else parse_expression(expression), raw=True,
        )
        if result.status is not GetMessageStatus.FOUND:
            return messages
        assert result.messages == [] and result.message_count == result.record_count > 0
        assert result.buffer_total_size == len(result.records)
        batch = decode_records(result.records, store.broker_name)
        assert len(batch) == result.record_count
        messages.extend(batch)
        offset = result.next_begin_offset


async def test_put_batch_of_wire_messages_answers_per_batch(config: MessageStoreConfig) -> None:
    async with running(config, broker_name="broker-a") as store:
        await put(store, 3)
        first = await store.put_batch(
            TOPIC, 0, wire_batch(4, tags="TagW"), born_host="10.0.0.9:1", born_timestamp=5
        )
        assert first.queue_offset == 3 and first.status is PutMessageStatus.PUT_OK
        decoded = get(store, 3).messages
        assert [m.commit_log_offset for m in decoded] == first.commit_log_offsets
        assert [(m.tags, m.keys, m.properties) for m in decoded] == [("TagW", None, {})] * 4
        assert decoded[0].store_timestamp == first.store_timestamp
        # Rolling into new segments (4 KiB here) takes the general path: same records.
        for batch in range(12):
            await store.put_batch(
                TOPIC, 0, wire_batch(5, prefix=f"r{batch}-"), born_host="10.0.0.9:1",
                born_timestamp=5,
            )
        assert len(commit_log_files(config)) > 3
        assert read_raw(store) == read_messages(store)
        assert [m.queue_offset for m in read_raw(store)] == list(range(67))


async def test_put_batch_checks_topics_and_refuses_delays_before_writing(
    config: MessageStoreConfig,
) -> None:
    async with running(config) as store:
        batch = wire_batch(3)
        batch[2].topic = "Other"
        with pytest.raises(MessageIllegal, match=r"messages\[2\]\.topic is 'Other'"):
            await store.put_batch(
                TOPIC, 0, batch, born_host="1.2.3.4:5", born_timestamp=0, check_topics=True
            )
        batch = wire_batch(3)
        batch[1].delay_time_level = 3
        with pytest.raises(DelayLevelRefused, match=r"messages\[1\]"):
            await store.put_batch(
                TOPIC, 0, batch, born_host="1.2.3.4:5", born_timestamp=0, refuse_delayed=True
            )
        batch[2].body = b""
        with pytest.raises(MessageIllegal, match=r"messages\[2\]: message body is empty"):
            store.validate_messages(TOPIC, batch, born_host="1.2.3.4:5")
        assert store.get_max_offset(TOPIC, 0) == 0 and store.commit_log_max_offset == 0
        batch[2].body = b"ok"  # without refuse_delayed the level is stored as a property
        await store.put_batch(TOPIC, 0, batch, born_host="1.2.3.4:5", born_timestamp=0)
        assert get(store, 1).messages[0].properties == {"DELAY": "3"}


async def test_raw_reads_filter_tags_exactly_and_respect_limits(
    config: MessageStoreConfig,
) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")
    async with running(config) as store:
        for tags in ("Aa", "BB", "C", "Aa", None, "BB"):
            await put(store, 2, tags=tags)
        assert [m.tags for m in read_raw(store, expression="Aa")] == ["Aa"] * 4
        assert [m.queue_offset for m in read_raw(store, expression="BB || C")] == [
            2, 3, 4, 5, 10, 11
        ]
        collision = store.get_messages(
            "group", TOPIC, 0, 0, 2, None, parse_expression("BB"), raw=True
        )
        assert (collision.status, collision.records, collision.next_begin_offset) == (
            GetMessageStatus.NO_MATCHED_MESSAGE, b"", 2
        )
        size = get(store, max_nums=1).messages[0].store_size
        limited = store.get_messages("group", TOPIC, 0, 0, 32, size * 3 + 1, None, raw=True)
        assert limited.record_count == 3 and limited.next_begin_offset == 3
        assert len(read_raw(store, max_nums=5)) == 12


async def test_raw_read_of_removed_records(config: MessageStoreConfig) -> None:
    config.file_reserved_time_hours = 1
    now = [time.time_ns() // 1_000_000]
    async with running(config, clock=lambda: now[0]) as store:
        for _ in range(10):
            await put(store, 5)
        units = store._find_consume_queue(TOPIC, 0).read_units(0, 50)  # type: ignore[union-attr]
        assert units is not None
        now[0] += 2 * 3_600_000
        await store.delete_expired_files()
        # A read racing retention: the records its entries point to are gone.
        physical_min = store.commit_log_min_offset
        stale = b"".join(u for u in _units(units) if CQ_UNIT.unpack(u)[0] < physical_min)
        _, gone, runs = select_units(stale, 50, -1, 0, None)  # as picked before the deletion
        assert gone
        assert store._read_raw(gone, runs, None) == (b"", 0, True)


def _units(data: bytes) -> list[bytes]:
    return [data[i : i + 20] for i in range(0, len(data), 20)]


# ---- tag filtering ------------------------------------------------------------------------------
async def test_tag_filter_by_hash_then_exact_tag(config: MessageStoreConfig) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # a real Java hash collision
    async with running(config) as store:
        for tags in ("Aa", "BB", "C", "Aa", None, "BB"):
            await put(store, tags=tags)
        aa = get(store, expression="Aa")
        assert [m.queue_offset for m in aa.messages] == [0, 3]
        assert aa.next_begin_offset == 6  # every unit scanned, filtered ones included
        bb_or_c = get(store, expression="BB || C")
        assert [m.tags for m in bb_or_c.messages] == ["BB", "C", "BB"]
        assert len(get(store, expression="*").messages) == 6
        none = get(store, expression="Z")
        assert (none.status, none.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 6)
        partial = get(store, 1, expression="C", max_nums=1)
        assert [m.queue_offset for m in partial.messages] == [2]
        assert partial.next_begin_offset == 3


async def test_only_a_collision_in_range_is_no_matched_message(config: MessageStoreConfig) -> None:
    async with running(config) as store:
        await put(store, 2, tags="Aa")
        result = get(store, expression="BB")  # the hash matches, the exact tag does not
        assert result.status is GetMessageStatus.NO_MATCHED_MESSAGE
        assert result.messages == [] and result.next_begin_offset == 2


# ---- statuses and next-begin-offset corrections ------------------------------------------------
async def test_next_begin_offset_corrections(config: MessageStoreConfig) -> None:
    async with running(config) as store:
        await put(store, 5)
        found = get(store, 1, max_nums=2)
        assert (found.status, found.next_begin_offset) == (GetMessageStatus.FOUND, 3)
        assert (found.min_offset, found.max_offset) == (0, 5)
        one = get(store, 5)
        assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 5)
        badly = get(store, 9)
        assert (badly.status, badly.next_begin_offset) == (
            GetMessageStatus.OFFSET_OVERFLOW_BADLY, 5
        )
        empty = get(store, 7, queue_id=3)
        assert (empty.status, empty.next_begin_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
        for topic, queue_id in (("../etc", 0), (TOPIC, -1)):
            bad = get(store, 4, queue_id=queue_id, topic=topic)
            assert (bad.status, bad.next_begin_offset) == (
                GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0
            )


async def test_offset_too_small_after_retention(config: MessageStoreConfig) -> None:
    config.file_reserved_time_hours = 1
    now = [time.time_ns() // 1_000_000]
    async with running(config, clock=lambda: now[0]) as store:
        results: dict[int, list[PutMessageResult]] = {0: [], 1: []}
        for _ in range(14):
            for queue_id in (0, 1):
                results[queue_id] += await put(store, 5, queue_id=queue_id)
        results[0] += await put(store, 1, queue_id=0)
        segments = commit_log_files(config)
        assert len(segments) >= 5
        assert store.get_min_offset(TOPIC, 0) == 0  # the head is still there
        assert await store.delete_expired_files() == 0  # nothing old yet
        now[0] += 2 * 3_600_000
        assert await store.delete_expired_files() == len(segments) - 1
        assert commit_log_files(config) == segments[-1:]  # the current segment stays
        first_kept = int(segments[-1].name)
        assert store.commit_log_min_offset == first_kept
        for queue_id in (0, 1):
            max_offset = len(results[queue_id])
            min_offset = store.get_min_offset(TOPIC, queue_id)
            assert min_offset == next(
                (r.queue_offset for r in results[queue_id] if r.commit_log_offset >= first_kept),
                max_offset,
            )
            assert 0 < min_offset <= max_offset == store.get_max_offset(TOPIC, queue_id)
            small = get(store, 0, queue_id=queue_id)
            assert (small.status, small.next_begin_offset) == (
                GetMessageStatus.OFFSET_TOO_SMALL, min_offset
            )
            assert small.min_offset == min_offset
            assert len(read_all(store, queue_id)) == max_offset - min_offset
            cq_dir = Path(config.store_path_consume_queue) / TOPIC / str(queue_id)
            first_cq = min(int(p.name) for p in cq_dir.iterdir()) // 20
            assert 0 < first_cq <= min_offset  # whole consume-queue segments went too
        assert get(store, 70, queue_id=0).status is GetMessageStatus.FOUND


async def test_retention_task_runs_on_its_interval(config: MessageStoreConfig) -> None:
    config.clean_resource_interval_ms = 20
    config.file_reserved_time_hours = 0
    async with running(config) as store:
        await put(store, 40)
        await wait_until(lambda: len(commit_log_files(config)) == 1, message="segments deleted")
        assert store.get_min_offset(TOPIC, 0) > 0


async def test_offset_found_null_for_a_missing_consume_queue_segment(
    config: MessageStoreConfig,
) -> None:
    async with running(config) as store:
        await put(store, 3 * CQ_UNITS)
    cq_dir = Path(config.store_path_consume_queue) / TOPIC / "0"
    (cq_dir / f"{20 * CQ_UNITS:020d}").unlink()
    async with running(config) as store:
        result = get(store, CQ_UNITS + 2)
        assert (result.status, result.next_begin_offset) == (
            GetMessageStatus.OFFSET_FOUND_NULL, 2 * CQ_UNITS
        )
        assert get(store, 2 * CQ_UNITS).status is GetMessageStatus.FOUND


# ---- time --------------------------------------------------------------------------------------
async def test_offset_by_time_and_store_timestamps(config: MessageStoreConfig) -> None:
    now = [1_000_000]
    async with running(config, clock=lambda: now[0]) as store:
        for _ in range(6):
            await put(store, 2)  # one store timestamp per batch
            now[0] += 1000
        assert store.get_store_timestamp(TOPIC, 0, 5) == 1_002_000
        assert store.get_store_timestamp(TOPIC, 0, 12) is None
        by_time = store.get_offset_in_queue_by_time
        assert by_time(TOPIC, 0, 0) == 0
        assert by_time(TOPIC, 0, 1_002_000) == 4
        assert by_time(TOPIC, 0, 1_002_001) == 6
        assert by_time(TOPIC, 0, 9_999_999) == 12
        assert by_time(TOPIC, 7, 0) == 0


# ---- recovery ----------------------------------------------------------------------------------
async def fill_two_queues(config: MessageStoreConfig, batches: int = 6) -> None:
    async with running(config) as store:
        for b in range(batches):
            await put(store, 2, queue_id=0, prefix=f"q0b{b}-")
            await put(store, 2, queue_id=1, prefix=f"q1b{b}-")


async def test_recovery_cuts_a_torn_write(config: MessageStoreConfig) -> None:
    await fill_two_queues(config)
    last = commit_log_files(config)[-1]
    with last.open("r+b") as f:
        f.truncate(last.stat().st_size - 10)  # the last record (queue 1, offset 11) is torn
    async with running(config) as store:
        assert store.get_max_offset(TOPIC, 0) == 12
        assert store.get_max_offset(TOPIC, 1) == 11
        assert len(read_all(store, 1)) == 11
        [again] = await put(store, queue_id=1, prefix="after")
        assert again.queue_offset == 11
        assert read_all(store, 1)[-1] == b"after0" * 20
    async with running(config) as store:
        assert store.get_max_offset(TOPIC, 1) == 12


async def test_recovery_cuts_at_a_crc_mismatch_and_after(config: MessageStoreConfig) -> None:
    await fill_two_queues(config)
    async with running(config) as store:
        victim = get(store, 7, queue_id=0).messages[0]  # batch 3 of queue 0
        later = [m for q in (0, 1) for m in read_messages(store, q)
                 if m.commit_log_offset > victim.commit_log_offset]
    segment = commit_log_files(config)[victim.commit_log_offset // 4096]
    position = victim.commit_log_offset - int(segment.name) + victim.store_size - 40
    data = bytearray(segment.read_bytes())
    data[position] ^= 0x01  # one bit inside the body
    segment.write_bytes(bytes(data))
    async with running(config) as store:
        assert store.commit_log_max_offset == victim.commit_log_offset
        assert store.get_max_offset(TOPIC, 0) == 7
        queue1 = read_all(store, 1)
        assert len(queue1) == 12 - sum(1 for m in later if m.queue_id == 1)
        assert store.get_max_offset(TOPIC, 1) == len(queue1)
        assert len(read_all(store, 0)) == 7  # every consume-queue entry points at a record
        assert store.look_message_by_offset(victim.commit_log_offset) is None
        [again] = await put(store, queue_id=0)
        assert again.queue_offset == 7 and again.commit_log_offset == victim.commit_log_offset


async def test_recovery_rebuilds_missing_consume_queue_entries(
    config: MessageStoreConfig,
) -> None:
    await fill_two_queues(config, batches=3)
    cq_file = Path(config.store_path_consume_queue) / TOPIC / "0" / ("0" * 20)
    with cq_file.open("r+b") as f:
        f.truncate(20 * 2)  # keep two of six entries
    async with running(config) as store:
        assert store.get_max_offset(TOPIC, 0) == 6
        expected = [f"q0b{b}-{i}".encode() * 20 for b in range(3) for i in range(2)]
        assert read_all(store, 0) == expected
        assert (await put(store, queue_id=0))[0].queue_offset == 6


def lose_checkpoint_and_queues(config: MessageStoreConfig) -> None:
    """No checkpoint; queue 0's files gone, queue 1's directory gone."""
    Path(config.store_checkpoint).unlink()
    for q in ("0", "1"):
        for path in (Path(config.store_path_consume_queue) / TOPIC / q).iterdir():
            path.unlink()
    (Path(config.store_path_consume_queue) / TOPIC / "1").rmdir()


async def test_recovery_rebuilds_queues_when_the_checkpoint_is_gone(
    config: MessageStoreConfig,
) -> None:
    await fill_two_queues(config, batches=3)
    lose_checkpoint_and_queues(config)
    async with running(config) as store:
        assert store.queue_ids(TOPIC) == [0, 1]
        assert [len(read_all(store, q)) for q in (0, 1)] == [6, 6]


def zero_entries_and_lose_checkpoint(config: MessageStoreConfig, first: int, count: int) -> None:
    """A crash kept the consume queue's length but not all its pages, and no checkpoint."""
    Path(config.store_checkpoint).unlink()
    cq_file = Path(config.store_path_consume_queue) / TOPIC / "0" / ("0" * 20)
    with cq_file.open("r+b") as f:
        f.seek(20 * first)
        f.write(bytes(20 * count))


async def test_recovery_repairs_blank_entries_after_the_checkpoint(
    config: MessageStoreConfig,
) -> None:
    await fill_two_queues(config, batches=3)
    zero_entries_and_lose_checkpoint(config, 1, 2)
    async with running(config) as store:
        assert store.get_max_offset(TOPIC, 0) == 6
        expected = [f"q0b{b}-{i}".encode() * 20 for b in range(3) for i in range(2)]
        assert read_all(store, 0) == expected


async def test_consume_queue_entries_past_the_commit_log_are_cut(
    config: MessageStoreConfig,
) -> None:
    await fill_two_queues(config, batches=3)
    segment = commit_log_files(config)[-1]
    async with running(config) as store:
        cut_at = get(store, 4, queue_id=0).messages[0].commit_log_offset
    with segment.open("r+b") as f:
        f.truncate(cut_at - int(segment.name))  # as if the commit log lost its tail in a crash
    async with running(config) as store:
        assert store.get_max_offset(TOPIC, 0) == 4
        assert store.get_max_offset(TOPIC, 1) == 4
        assert get(store, 0).next_begin_offset == 4


async def test_deleted_topic_is_not_rebuilt(config: MessageStoreConfig) -> None:
    async with running(config) as store:
        await put(store, 3)
        await put(store, 3, topic="Other")
        await store.delete_topic_queues(TOPIC)
        assert store.queue_ids(TOPIC) == [] and store.get_max_offset(TOPIC, 0) == 0
        assert get(store).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert not (Path(config.store_path_consume_queue) / TOPIC).exists()
    async with running(config) as store:
        assert store.queue_ids(TOPIC) == [] and store.queue_ids("Other") == [0]
        assert (await put(store))[0].queue_offset == 0


# ---- flushing ----------------------------------------------------------------------------------
async def test_sync_flush_group_commit_shares_fsyncs(config: MessageStoreConfig) -> None:
    config.flush_disk_type = "SYNC_FLUSH"
    async with running(config) as store:
        [first] = await put(store)
        assert store.flush_count == 1  # a sync put returns after its fsync
        before = store.flush_count
        results = await asyncio.gather(
            *(put(store, 2, queue_id=i % 4, prefix=f"c{i}-") for i in range(50))
        )
        fsyncs = store.flush_count - before
        assert all(r.status is PutMessageStatus.PUT_OK for rs in results for r in rs)
        assert 1 <= fsyncs < 10, fsyncs
    async with running(config) as store:
        assert sum(len(read_all(store, q)) for q in range(4)) == 101
        assert first.queue_offset == 0


async def test_sync_flush_timeout_is_reported(
    config: MessageStoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.flush_disk_type = "SYNC_FLUSH"
    config.sync_flush_timeout_ms = 50
    real_fsync = message_store_module.fsync_all

    def slow_fsync(fds: Any) -> None:
        time.sleep(0.3)
        real_fsync(fds)

    async with running(config) as store:
        monkeypatch.setattr(message_store_module, "fsync_all", slow_fsync)
        [result] = await put(store)
        assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert get(store).status is GetMessageStatus.FOUND  # stored all the same


async def test_async_flush_task_fsyncs_on_its_interval(config: MessageStoreConfig) -> None:
    config.flush_interval_commit_log_ms = 10
    config.flush_interval_consume_queue_ms = 10
    async with running(config) as store:
        await put(store, 3)
        await wait_until(lambda: store.flush_count >= 1, message="async flush")
        end = store.commit_log_max_offset
        checkpoint = Path(config.store_checkpoint)
        await wait_until(
            lambda: int.from_bytes(checkpoint.read_bytes()[4:12], "big") == end,
            message="checkpoint",
        )


# ---- listeners, errors, lifecycle --------------------------------------------------------------
async def test_arrival_listener_once_per_tag_code(config: MessageStoreConfig) -> None:
    calls: list[tuple[str, int, int, int]] = []

    def broken(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        raise RuntimeError("listener bug")

    async with running(config) as store:
        store.add_arrival_listener(broken)
        store.add_arrival_listener(lambda *args: calls.append(args))
        await store.put_messages(
            TOPIC, 2, [Message(TOPIC, b"a", tags="A"), Message(TOPIC, b"b", tags="A"),
                       Message(TOPIC, b"c")],
            born_host="1.2.3.4:5", born_timestamp=0,
        )
    assert calls == [(TOPIC, 2, 3, java_string_hash("A")), (TOPIC, 2, 3, 0)]


async def test_rejects_bad_messages_before_writing(config: MessageStoreConfig) -> None:
    config.max_message_size = 1000
    async with running(config) as store:
        with pytest.raises(MessageIllegal):
            await put(store, body=b"")
        with pytest.raises(MessageTooLarge, match=r"1001 bytes exceeds .* 1000 bytes"):
            await put(store, body=b"x" * 1001)
        with pytest.raises(MessageIllegal, match="x01"):
            await store.put_messages(
                TOPIC, 0, [Message(TOPIC, b"ok", properties={"k": "bad\x01"})],
                born_host="1.2.3.4:5", born_timestamp=0,
            )
        with pytest.raises(InvalidArgument):
            await put(store, topic="a/b")
        assert store.get_max_offset(TOPIC, 0) == 0 and store.commit_log_max_offset == 0
    config.max_message_size = 1 << 20
    async with running(config) as store:
        with pytest.raises(MessageTooLarge, match="does not fit a commit log segment"):
            await put(store, body=b"x" * 5000)


async def test_lifecycle_owns_its_tasks(config: MessageStoreConfig) -> None:
    before = asyncio.all_tasks()
    store = MessageStore(config)
    with pytest.raises(ServiceNotAvailable):
        await put(store)
    await store.start()
    # flush the commit log, flush the consume queues, retention, the key index's builder
    assert len(asyncio.all_tasks() - before) == 4
    await put(store)
    await store.shutdown()
    await store.shutdown()
    assert asyncio.all_tasks() == before
    with pytest.raises(ServiceNotAvailable):
        await put(store)
    with pytest.raises(RuntimeError):
        await store.start()
    await MessageStore(config).shutdown()  # never started: nothing to do


def test_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_disk_type"):
        MessageStoreConfig(store_path_root_dir=str(tmp_path), flush_disk_type="SOMETIMES")
    with pytest.raises(ValueError, match="multiple of 20"):
        MessageStoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_consume_queue=30)
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path))
    assert config.store_path_commit_log == str(tmp_path / "commitlog")
    config.flush_interval_commit_log_ms = 0  # assigned after construction: caught at start
    with pytest.raises(ValueError, match="flush_interval_commit_log_ms"):
        config.validate()


async def test_ipv6_hosts_are_stored_with_their_sysflag(config: MessageStoreConfig) -> None:
    async with running(config, store_host="[::1]:10911") as store:
        [result] = await store.put_messages(
            TOPIC, 0, [Message(TOPIC, b"v6", tags="A")],
            born_host="ipv6:[fe80::2]:5", born_timestamp=7,
        )
        assert len(result.msg_id) == 56
        assert decode_message_id(result.msg_id) == ("::1", 10911, 0)
        [m] = get(store).messages
        assert (m.born_host, m.store_host, m.tags, m.born_timestamp) == (
            "[fe80::2]:5", "[::1]:10911", "A", 7
        )
        assert store.get_store_timestamp(TOPIC, 0, 0) == result.store_timestamp
    async with running(config, store_host="[::1]:10911") as store:  # recovery parses it too
        assert read_all(store) == [b"v6"]
