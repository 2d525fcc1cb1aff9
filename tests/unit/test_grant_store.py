"""GrantStore: the fenced grant table on disk as a snapshot and a journal, on real files.

A broker restarted reads back the table of its last complete write: after journal appends,
after a compaction, after a crash between a snapshot and the journal's truncation, after a
torn append, and after a failed write; a table it cannot read, it starts without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.client import grant_store
from aiorocketmq.broker.client.grant_store import GrantStore
from aiorocketmq.broker.client.queue_grants import QueueGrantManager
from aiorocketmq.protocol import MessageQueue

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(8)]


def restarted(path: Path) -> tuple[QueueGrantManager, int | None]:
    """A new broker's table, read from ``path`` as at start."""
    grants = QueueGrantManager(epoch_base=0)
    return grants, GrantStore(path).load(grants, now=0)


def tables(grants: QueueGrantManager) -> dict[str, Any]:
    return grants.to_json()


async def written(tmp_path: Path, rounds: int) -> tuple[Path, QueueGrantManager, GrantStore]:
    """A broker's table after ``rounds`` of churn, written once: its path, table and store."""
    path = tmp_path / "queueGrants.json"
    grants, store = QueueGrantManager(epoch_base=0), GrantStore(path)
    churn(grants, rounds)
    await store.write(grants)
    return path, grants, store


def churn(grants: QueueGrantManager, rounds: int) -> None:
    """Queues move from client to client: grants and drops."""
    for r in range(rounds):
        holder, taker = f"c{r % 3}", f"c{(r + 1) % 3}"
        grants.release_channel(f"{holder}-ch")
        grants.acquire("G", taker, f"{taker}-ch", QUEUES[r % 4 : r % 4 + 4])


async def test_journal_appends_restore_the_table(tmp_path: Path) -> None:
    path = tmp_path / "queueGrants.json"
    grants, store = QueueGrantManager(epoch_base=0), GrantStore(path)
    churn(grants, 3)
    assert await store.write(grants) == grants.version
    churn(grants, 2)
    await store.write(grants)
    assert not path.exists()  # only the journal so far: a line per change
    assert len(store.journal.read_text().splitlines()) == store.journal_lines > 0
    after, restored = restarted(path)
    assert restored == len(grants.grant_table["G"])
    assert tables(after) == tables(grants)


async def test_a_long_journal_is_folded_into_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grant_store, "MIN_COMPACT_LINES", 10)
    monkeypatch.setattr(grant_store, "COMPACT_FACTOR", 0)
    path = tmp_path / "queueGrants.json"
    grants, store = QueueGrantManager(epoch_base=0), GrantStore(path)
    for _ in range(6):
        churn(grants, 2)
        await store.write(grants)
    assert path.exists()
    assert store.journal_lines == len(store.journal.read_text().splitlines()) <= 10
    after, _ = restarted(path)
    assert tables(after) == tables(grants)


async def test_a_crash_before_the_journal_is_emptied_replays_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, grants, store = await written(tmp_path, 4)
    old_journal = store.journal.read_text()
    churn(grants, 3)
    store.snapshot_due = True  # the next write is a snapshot; it "crashes" before truncating
    monkeypatch.setattr(grant_store, "_truncate_durably", lambda path: None)
    await store.write(grants)
    assert store.journal.read_text() == old_journal  # lines the snapshot already holds
    after, _ = restarted(path)
    assert tables(after) == tables(grants)
    # And a broker that goes on after such a start journals above the snapshot's version.
    monkeypatch.undo()
    store2 = GrantStore(path)
    grants2 = QueueGrantManager(epoch_base=0)
    store2.load(grants2, now=0)
    grants2.rebind("c0", "c0-new")
    grants2.rebind("c1", "c1-new")
    grants2.rebind("c2", "c2-new")
    churn(grants2, 2)
    await store2.write(grants2)
    after2, _ = restarted(path)
    assert tables(after2) == tables(grants2)


async def test_a_torn_last_line_is_left_out_and_the_next_write_is_a_snapshot(
    tmp_path: Path,
) -> None:
    path, grants, store = await written(tmp_path, 3)
    expected = tables(grants)
    # A crash inside an append: its changes were never answered.
    store.journal.write_text(store.journal.read_text() + '{"seq": 999, "op": "gra')
    after, _ = restarted(path)
    assert tables(after) == expected
    store2 = GrantStore(path)
    grants2 = QueueGrantManager(epoch_base=0)
    store2.load(grants2, now=0)
    assert store2.snapshot_due
    await store2.write(grants2)
    assert store2.journal.read_text() == "" and path.exists()
    assert tables(restarted(path)[0]) == expected


async def test_after_a_failed_write_no_change_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, grants, store = await written(tmp_path, 2)

    def full_disk(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(grant_store, "append_durably", full_disk)
    churn(grants, 2)
    with pytest.raises(OSError):
        await store.write(grants)  # these changes were taken, and are not in the journal
    monkeypatch.undo()
    churn(grants, 1)
    await store.write(grants)  # so this one is a snapshot holding them all
    assert path.exists() and store.journal.read_text() == ""
    assert tables(restarted(path)[0]) == tables(grants)


async def test_an_unreadable_table_starts_without_it_and_sets_its_journal_aside(
    tmp_path: Path,
) -> None:
    """Its lines must not be replayed over the next run's table (a crash between that run's
    first snapshot and the journal's truncation would bring them back)."""
    path, _grants, store = await written(tmp_path, 3)
    path.write_text("{not json")
    after, restored = restarted(path)
    assert restored is None and after.grant_table == {} and after.epoch_table == {}
    assert not store.journal.exists()
    assert store.journal.with_name(store.journal.name + ".unreadable").exists()


async def test_a_malformed_change_restores_nothing_half(tmp_path: Path) -> None:
    path, _grants, store = await written(tmp_path, 3)
    store.journal.write_text(store.journal.read_text() + '{"seq": 999, "op": "move"}\n')
    after, restored = restarted(path)
    assert restored is None and after.grant_table == {} and after.channel_grant_table == {}


async def test_bytes_that_are_not_text_end_the_replay_like_a_torn_line(tmp_path: Path) -> None:
    path, grants, store = await written(tmp_path, 3)
    expected = tables(grants)
    store.journal.write_bytes(store.journal.read_bytes() + b'{"seq": 99\xff\xfe\n')
    assert tables(restarted(path)[0]) == expected


def test_nothing_on_disk_restores_nothing(tmp_path: Path) -> None:
    assert restarted(tmp_path / "queueGrants.json")[1] is None
