"""Offset stores: the increase-only rule, freezing, persist_all's forgetting, the local file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiorocketmq.consumer.offset_store import (
    ControllableOffset,
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from aiorocketmq.protocol.errors import QueryNotFound, ServiceNotAvailable
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2

MQ = MessageQueue("T", "broker-a", 0)
MQ2 = MessageQueue("T", "broker-b", 1)


def test_controllable_offset_increase_only_and_freeze() -> None:
    o = ControllableOffset(5)
    o.update(3, increase_only=True)
    assert o.value == 5
    o.update(3, increase_only=False)
    assert o.value == 3
    o.update_and_freeze(10)
    o.update(20, increase_only=True)
    assert o.value == 10 and not o.allow_to_update


class FakeBroker:
    """Records commits; answers queries from a table."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, broker_pb2.UpdateConsumerOffsetRequest]] = []
        self.stored: dict[MessageQueue, int] = {}
        self.fail = False

    async def __call__(self, broker: str, method: str, request: Any) -> Any:
        if self.fail:
            raise ServiceNotAvailable("down")
        if method == "UpdateConsumerOffset":
            self.commits.append((broker, request))
            return broker_pb2.UpdateConsumerOffsetResponse()
        mq = MessageQueue(request.topic, broker, request.queue_id)
        if mq not in self.stored:
            raise QueryNotFound("none")
        return broker_pb2.QueryConsumerOffsetResponse(offset=self.stored[mq])


async def test_remote_store_update_is_increase_only_unless_asked() -> None:
    store = RemoteBrokerOffsetStore("g", FakeBroker())
    store.update_offset(MQ, 10, increase_only=True)
    store.update_offset(MQ, 7, increase_only=True)
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == 10
    store.update_offset(MQ, 7, increase_only=False)
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == 7


async def test_remote_store_reads() -> None:
    broker = FakeBroker()
    broker.stored[MQ] = 42
    store = RemoteBrokerOffsetStore("g", broker)
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == -1
    assert await store.read_offset(MQ, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 42
    assert await store.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == -1  # not found
    broker.fail = True
    assert await store.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == -2  # an error


async def test_persist_all_commits_assigned_queues_per_broker_and_forgets_the_rest() -> None:
    broker = FakeBroker()
    store = RemoteBrokerOffsetStore("g", broker)
    other = MessageQueue("T", "broker-a", 3)
    for mq, off in ((MQ, 1), (other, 2), (MQ2, 3)):
        store.update_offset(mq, off, increase_only=False)
    await store.persist_all({MQ, other})
    assert [b for b, _ in broker.commits] == ["broker-a"]  # one RPC for both queues of broker-a
    assert {(o.queue_id, o.offset) for o in broker.commits[0][1].offsets} == {(0, 1), (3, 2)}
    assert store.clone_offset_table("T") == {MQ: 1, other: 2}  # MQ2 (unassigned) forgotten


async def test_frozen_offset_survives_consume_acks() -> None:
    store = RemoteBrokerOffsetStore("g", FakeBroker())
    store.update_and_freeze_offset(MQ, 100)
    store.update_offset(MQ, 200, increase_only=True)
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == 100
    store.remove_offset(MQ)
    store.update_offset(MQ, 5, increase_only=True)
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == 5


async def test_local_file_store_round_trip(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("g", "127.0.0.1@i", tmp_path)
    store.update_offset(MQ, 9, increase_only=True)
    store.update_offset(MQ2, 4, increase_only=True)
    await store.persist_all({MQ, MQ2})
    assert (tmp_path / "127.0.0.1@i" / "g" / "offsets.json").exists()
    again = LocalFileOffsetStore("g", "127.0.0.1@i", tmp_path)
    await again.load()
    assert await again.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == 9
    assert await again.read_offset(MessageQueue("T", "x", 0), ReadOffsetType.READ_FROM_STORE) == -1
    store.update_offset(MQ, 11, increase_only=True)
    await store.persist(MQ)  # a later write keeps a .bak of the earlier file
    assert (tmp_path / "127.0.0.1@i" / "g" / "offsets.json.bak").exists()
    fresh = LocalFileOffsetStore("g", "127.0.0.1@i", tmp_path)
    assert await fresh.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == 11


async def test_the_periodic_commit_leaves_out_what_the_broker_has_until_it_reconnects() -> None:
    broker = FakeBroker()
    broker.stored[MQ2] = 40
    store = RemoteBrokerOffsetStore("g", broker)
    store.update_offset(MQ, 5, increase_only=False)
    assert await store.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == 40

    def committed() -> list[tuple[str, int]]:
        out = [(b, o.offset) for b, r in broker.commits for o in r.offsets]
        broker.commits.clear()
        return sorted(out)

    await store.persist_all({MQ, MQ2})
    # A query's answer does not count as stored: a broker answers 0 for a young queue
    # without storing it.
    assert committed() == [("broker-a", 5), ("broker-b", 40)]
    await store.persist_all({MQ, MQ2})
    assert committed() == []  # nothing changed: nothing to send
    store.update_offset(MQ2, 41, increase_only=True)
    broker.fail = True
    await store.persist_all({MQ, MQ2})  # not answered: still owed
    broker.fail = False
    await store.persist_all({MQ, MQ2})
    assert committed() == [("broker-b", 41)]
    await store.persist_many([MQ])  # a drop's commit is always sent
    assert committed() == [("broker-a", 5)]
    await store.persist_all({MQ, MQ2}, only_changed=False)  # a commit asked for: all
    assert committed() == [("broker-a", 5), ("broker-b", 41)]
    store.broker_reconnected("broker-a")  # it may have restarted and lost its last offsets
    await store.persist_all({MQ, MQ2})
    assert committed() == [("broker-a", 5)]
    store.remove_offset(MQ2)  # taken again later: its offset is read anew
    store.update_offset(MQ2, 41, increase_only=False)
    await store.persist_all({MQ, MQ2})
    assert committed() == [("broker-b", 41)]


async def test_remove_offsets_forgets_the_offsets_and_what_the_broker_acknowledged() -> None:
    """Queues let go: both their offsets and their last acknowledged commits are forgotten, so
    a queue taken again is read anew and its first commit is sent; the others are kept."""
    broker = FakeBroker()
    store = RemoteBrokerOffsetStore("g", broker)
    store.update_offset(MQ, 5, increase_only=False)
    store.update_offset(MQ2, 40, increase_only=False)
    await store.persist_all({MQ, MQ2})
    store.remove_offsets(mq for mq in [MQ2])
    assert store.clone_offset_table("T") == {MQ: 5}
    assert store.committed == {MQ: 5}
    local = LocalFileOffsetStore("g", "cid", Path("unused"))
    local.update_offset(MQ, 1, increase_only=False)
    local.remove_offsets([MQ])
    assert local.clone_offset_table("") == {}


async def test_a_fenced_store_commits_only_the_queues_it_holds_a_grant_for() -> None:
    """Fenced, a queue whose grant is gone (its release under way: the answer of a release
    riding with an acquire comes after the acquire's wait) is not committed: without an epoch
    the broker would not fence the commit, and it could undo the new holder's."""
    broker = FakeBroker()
    store = RemoteBrokerOffsetStore("g", broker)
    store.fenced = True
    other = MessageQueue("T", "broker-a", 3)
    store.epochs[other] = 4
    for mq, off in ((MQ, 1), (other, 2)):
        store.update_offset(mq, off, increase_only=False)
    await store.persist_all({MQ, other})
    assert [(o.queue_id, o.offset, o.epoch) for o in broker.commits[0][1].offsets] == [(3, 2, 4)]
    await store.persist(MQ)
    assert len(broker.commits) == 1  # nothing sent for MQ alone
