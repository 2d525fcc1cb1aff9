"""The key index: the index file's slots and chains, and the store finding messages by key."""

from __future__ import annotations

import os
from pathlib import Path

from aiorocketmq.broker.store import MessageStore, MessageStoreConfig
from aiorocketmq.broker.store.index import IndexFile, IndexService, index_file_size, key_hash
from aiorocketmq.protocol.message import Message


def new_file(slots: int = 7, entries: int = 50) -> IndexFile:
    return IndexFile(bytearray(index_file_size(slots, entries)), slots, entries)


def test_every_key_is_found_through_its_slot_chain_despite_collisions() -> None:
    index = new_file(slots=7, entries=200)
    base = 1_700_000_000_000
    for i in range(100):
        assert index.put(f"T#k{i}", phy_offset=1000 + i, store_timestamp=base + i * 10)
    for i in range(100):
        candidates = index.lookup(f"T#k{i}", 100, 0, 2**62)
        assert 1000 + i in candidates
        # every candidate shares the key's hash (collisions are for the store to sort out)
        assert all(key_hash(f"T#k{(c - 1000)}") == key_hash(f"T#k{i}") for c in candidates)
    assert index.header.index_count == 101 and index.header.hash_slot_count == 7


def test_newest_first_a_limit_and_a_time_window() -> None:
    index = new_file()
    base = 1_700_000_000_000
    for i in range(5):
        index.put("T#same", phy_offset=i * 100, store_timestamp=base + i * 60_000)
    assert index.lookup("T#same", 10, 0, 2**62) == [400, 300, 200, 100, 0]
    assert index.lookup("T#same", 2, 0, 2**62) == [400, 300]
    window = index.lookup("T#same", 10, base + 60_000, base + 180_000)
    assert window == [300, 200, 100]
    assert index.lookup("T#other", 10, 0, 2**62) == []


def test_a_full_file_refuses_and_a_zeroed_buffer_is_a_new_file() -> None:
    index = new_file(slots=3, entries=4)  # entry 0 is never used: room for 3
    assert [index.put(f"T#{i}", i, 1) for i in range(4)] == [True, True, True, False]
    assert index.full
    reopened = IndexFile(index.buf, 3, 4)
    assert reopened.header == index.header


def test_the_service_rolls_files_and_deletes_what_the_log_lost(tmp_path: Path) -> None:
    service = IndexService(str(tmp_path / "index"), 5, 4)
    service.load()
    for i in range(10):
        service.put([f"T#k{i}"], phy_offset=i * 100, store_timestamp=1_000 + i, end=i * 100 + 100)
    assert len(service.files) == 4  # 3 entries each
    assert service.lookup("T#k7", 5, 0, 2**62) == [700]
    assert service.end_phy_offset == 1000
    deleted = service.delete_before(650)  # files ending at 300 and 600
    assert len(deleted) == 2 and not any(os.path.exists(p) for p in deleted)
    assert service.lookup("T#k1", 5, 0, 2**62) == []
    service.close()
    again = IndexService(str(tmp_path / "index"), 5, 4)
    again.load()
    assert again.lookup("T#k7", 5, 0, 2**62) == [700] and again.end_phy_offset == 1000
    again.close()


async def test_the_store_finds_a_message_among_many_by_key_and_after_a_restart(
    tmp_path: Path,
) -> None:
    config = MessageStoreConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=256,  # several index files
    )
    store = MessageStore(config, store_host="127.0.0.1:10911")
    await store.start()
    try:
        for start in range(0, 1000, 100):
            batch = [
                Message("Orders", f"order {i}".encode(), keys=f"order-{i} customer-{i % 7}")
                for i in range(start, start + 100)
            ]
            await store.put_messages(
                "Orders", start // 100 % 4, batch, born_host="10.0.0.1:1", born_timestamp=1
            )
            keyless = [Message("Orders", b"no key") for _ in range(30)]  # read past, not indexed
            await store.put_messages("Orders", 5, keyless, born_host="10.0.0.1:1", born_timestamp=1)
        await store.put_messages(
            "Other", 0, [Message("Other", b"x", keys="order-5")], born_host="10.0.0.1:1",
            born_timestamp=1,
        )  # fmt: skip
        [found] = await store.query_messages_by_key("Orders", "order-517", 32)
        assert found.body == b"order 517" and found.topic == "Orders"
        customers = await store.query_messages_by_key("Orders", "customer-3", 1000)
        assert sorted(m.body for m in customers) == sorted(
            f"order {i}".encode() for i in range(1000) if i % 7 == 3
        )
        assert len(await store.query_messages_by_key("Orders", "customer-3", 10)) == 10
        assert [m.topic for m in await store.query_messages_by_key("Other", "order-5", 5)] == [
            "Other"
        ]
        assert await store.query_messages_by_key("Orders", "order-5000", 5) == []
        uniq = found.properties.get("UNIQ_KEY")
        if uniq:
            [by_uniq] = await store.query_messages_by_key("Orders", uniq, 5)
            assert by_uniq.body == b"order 517"
        files = sorted(os.listdir(config.store_path_index))
        assert len(files) > 5
    finally:
        await store.shutdown()

    store = MessageStore(config, store_host="127.0.0.1:10911")
    await store.start()
    try:
        [found] = await store.query_messages_by_key("Orders", "order-3", 32)
        assert found.body == b"order 3"
        assert sorted(os.listdir(config.store_path_index)) == files  # nothing indexed twice
    finally:
        await store.shutdown()
