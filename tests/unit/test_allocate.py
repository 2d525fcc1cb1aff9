"""Allocation strategies: hand examples from RocketMQ's behaviour, validation, configuration."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByChosenConsumers,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueConsistentHashBounded,
    AllocateMessageQueueStrategy,
    md5_hash,
    md5_hash64,
    strategy_by_name,
)
from aiorocketmq.protocol import MessageQueue
from tests.helpers import capture_logs

G = "GID_TEST"


def queues(n: int, topic: str = "TopicTest", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def cids(c: int) -> list[str]:
    return [f"10.0.0.{i}@{1000 + i}" for i in range(c)]


def ids_of(
    strategy: AllocateMessageQueueStrategy, mq_all: list[MessageQueue], cid_all: list[str]
) -> list[list[int]]:
    """Each consumer's queue ids, in cid_all order."""
    return [[mq.queue_id for mq in strategy.allocate(G, cid, mq_all, cid_all)] for cid in cid_all]


# -- the common validation (AbstractAllocateMessageQueueStrategy.check) -------------------

CHECKED: list[AllocateMessageQueueStrategy] = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHashBounded(),
    AllocateMessageQueueByMachineRoom({"idc1"}),
    AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), object()),  # type: ignore[arg-type]
    AllocateMessageQueueByChosenConsumers({"10.0.0.0"}),
]


@pytest.mark.parametrize("strategy", CHECKED, ids=lambda s: s.name)
def test_validation_messages_in_rocketmq_order(strategy: AllocateMessageQueueStrategy) -> None:
    # Everything wrong at once: the first check wins.
    with pytest.raises(ValueError, match=r"^currentCID is empty$"):
        strategy.allocate(G, "", [], [])
    with pytest.raises(ValueError, match=r"^currentCID is empty$"):
        strategy.allocate(G, None, [], [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^mqAll is null or mqAll empty$"):
        strategy.allocate(G, "c1", [], [])
    with pytest.raises(ValueError, match=r"^mqAll is null or mqAll empty$"):
        strategy.allocate(G, "c1", None, ["c1"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^cidAll is null or cidAll empty$"):
        strategy.allocate(G, "c1", queues(1), [])
    with pytest.raises(ValueError, match=r"^cidAll is null or cidAll empty$"):
        strategy.allocate(G, "c1", queues(1), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", CHECKED, ids=lambda s: s.name)
def test_current_cid_not_in_cid_all_allocates_nothing_and_logs_bug(
    strategy: AllocateMessageQueueStrategy,
) -> None:
    with capture_logs() as logs:
        assert strategy.allocate(G, "stranger", queues(4), cids(2)) == []
    assert len(logs) == 1
    assert logs[0]["log_level"] == "info"
    assert logs[0]["event"].startswith("[BUG] ")
    assert logs[0]["consumer_group"] == G
    assert logs[0]["consumer_id"] == "stranger"
    assert logs[0]["cid_all"] == cids(2)


# -- AVG -------------------------------------------------------------------------------


def test_avg_extra_queues_go_to_the_lowest_indices() -> None:
    avg = AllocateMessageQueueAveragely()
    assert avg.name == "AVG"
    assert ids_of(avg, queues(5), cids(2)) == [[0, 1, 2], [3, 4]]
    assert ids_of(avg, queues(8), cids(3)) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert ids_of(avg, queues(6), cids(3)) == [[0, 1], [2, 3], [4, 5]]
    assert ids_of(avg, queues(1), cids(1)) == [[0]]


def test_avg_seed_example_nine_queues_four_consumers() -> None:
    # The worked example of the load-balancing article: 3 brokers x 3 queues, 4 consumers.
    mq_all = sorted(MessageQueue("topic_demo", f"broker_{b}", q) for b in "abc" for q in range(3))
    cid_all = ["192.168.0.6@15956", "192.168.0.7@15957", "192.168.0.8@15958", "192.168.0.9@15959"]
    avg = AllocateMessageQueueAveragely()
    got = [
        [(mq.broker_name, mq.queue_id) for mq in avg.allocate(G, c, mq_all, cid_all)]
        for c in cid_all
    ]
    assert got == [
        [("broker_a", 0), ("broker_a", 1), ("broker_a", 2)],
        [("broker_b", 0), ("broker_b", 1)],
        [("broker_b", 2), ("broker_c", 0)],
        [("broker_c", 1), ("broker_c", 2)],
    ]


def test_avg_fewer_queues_than_consumers() -> None:
    assert ids_of(AllocateMessageQueueAveragely(), queues(3), cids(5)) == [[0], [1], [2], [], []]
    assert ids_of(AllocateMessageQueueAveragely(), queues(2), cids(2)) == [[0], [1]]


def test_avg_uses_the_callers_order_and_does_not_sort() -> None:
    mq_all = list(reversed(queues(4)))
    assert ids_of(AllocateMessageQueueAveragely(), mq_all, ["b", "a"]) == [[3, 2], [1, 0]]


# -- AVG_BY_CIRCLE -----------------------------------------------------------------------


def test_avg_by_circle_is_round_robin() -> None:
    circle = AllocateMessageQueueAveragelyByCircle()
    assert circle.name == "AVG_BY_CIRCLE"
    assert ids_of(circle, queues(5), cids(2)) == [[0, 2, 4], [1, 3]]
    assert ids_of(circle, queues(8), cids(3)) == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert ids_of(circle, queues(2), cids(4)) == [[0], [1], [], []]


# -- CONSISTENT_HASH ---------------------------------------------------------------------


def test_md5_hash_is_the_first_four_digest_bytes_big_endian_unsigned() -> None:
    assert md5_hash("") == 0xD41D8CD9  # md5("") = d41d8cd98f00b204...
    key = "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]"
    digest = hashlib.md5(key.encode()).digest()
    assert md5_hash(key) == (digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]
    assert 0 <= md5_hash("é-0") < 2**32  # UTF-8, unsigned


def _table_hash(table: dict[str, int]) -> object:
    def h(key: str) -> int:
        return table[key]

    return h


def test_consistent_hash_ring_is_inclusive_and_wraps() -> None:
    mq_at = {
        100: MessageQueue("T", "b", 0),
        150: MessageQueue("T", "b", 1),
        250: MessageQueue("T", "b", 2),
    }
    table = {"a-0": 100, "b-0": 200} | {str(mq): point for point, mq in mq_at.items()}
    ch = AllocateMessageQueueConsistentHash(1, _table_hash(table))  # type: ignore[arg-type]
    mq_all = sorted(mq_at.values())
    # 100 is exactly a's point (tailMap is inclusive); 150 -> b at 200; 250 wraps to a at 100.
    assert ch.allocate(G, "a", mq_all, ["a", "b"]) == [mq_at[100], mq_at[250]]
    assert ch.allocate(G, "b", mq_all, ["a", "b"]) == [mq_at[150]]


def test_consistent_hash_collision_later_consumer_wins() -> None:
    mq = MessageQueue("T", "b", 0)
    table = {"a-0": 100, "b-0": 100, str(mq): 50}
    ch = AllocateMessageQueueConsistentHash(1, _table_hash(table))  # type: ignore[arg-type]
    assert ch.allocate(G, "a", [mq], ["a", "b"]) == []
    assert ch.allocate(G, "b", [mq], ["a", "b"]) == [mq]


def test_consistent_hash_ring_keys_and_routing_key_are_rocketmq_strings() -> None:
    seen: list[str] = []

    def spy(key: str) -> int:
        seen.append(key)
        return md5_hash(key)

    mq = MessageQueue("TopicTest", "broker-a", 3)
    AllocateMessageQueueConsistentHash(2, spy).allocate(G, "c2", [mq], ["c1", "c2"])
    assert seen == [
        "c1-0",
        "c1-1",
        "c2-0",
        "c2-1",
        "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]",
    ]


def test_consistent_hash_default_matches_md5_ring_by_hand() -> None:
    mq_all = queues(8)
    cid_all = cids(3)
    ring = sorted((md5_hash(f"{c}-{i}"), c) for c in cid_all for i in range(10))
    expected: dict[str, list[MessageQueue]] = {c: [] for c in cid_all}
    for mq in mq_all:
        h = md5_hash(str(mq))
        owner = next((c for point, c in ring if point >= h), ring[0][1])
        expected[owner].append(mq)
    ch = AllocateMessageQueueConsistentHash()
    assert ch.name == "CONSISTENT_HASH"
    assert ch.virtual_node_cnt == 10
    for c in cid_all:
        assert ch.allocate(G, c, mq_all, cid_all) == expected[c]


def test_consistent_hash_virtual_node_count() -> None:
    with pytest.raises(ValueError, match=r"^illegal virtualNodeCnt :-1$"):
        AllocateMessageQueueConsistentHash(-1)
    # Zero points: an empty ring, and no one gets anything (as in RocketMQ).
    zero = AllocateMessageQueueConsistentHash(0)
    assert all(zero.allocate(G, c, queues(4), cids(2)) == [] for c in cids(2))


# -- CONSISTENT_HASH_BOUNDED -------------------------------------------------------------


def _bounded_by_table(
    table: dict[str, int], epsilon: float
) -> AllocateMessageQueueConsistentHashBounded:
    """The strategy on a ring of one point per consumer, placed by ``table``: keys ``cid-0``
    for the consumers' points and ``str(mq)`` for the queues."""
    return AllocateMessageQueueConsistentHashBounded(
        1, epsilon=epsilon, hash_function=table.__getitem__
    )


def test_bounded_parameters() -> None:
    bounded = AllocateMessageQueueConsistentHashBounded()
    assert bounded.name == "CONSISTENT_HASH_BOUNDED"
    assert bounded.epsilon == 0.25
    assert bounded.virtual_node_cnt == 100
    assert bounded.hash_function is md5_hash64
    assert bounded.capacity(128, 32) == 5
    assert bounded.capacity(128, 31) == 6
    assert bounded.capacity(3, 5) == 1
    assert AllocateMessageQueueConsistentHashBounded(epsilon=0.1).capacity(10, 11) == 1  # not 2
    assert AllocateMessageQueueConsistentHashBounded(epsilon=0.5).epsilon == 0.5
    # (virtual_node_cnt, epsilon, hash_function), positionally, as CONSISTENT_HASH takes them.
    assert AllocateMessageQueueConsistentHashBounded(7, 0.5, md5_hash).virtual_node_cnt == 7
    with pytest.raises(ValueError, match=r"^illegal epsilon :-0.1$"):
        AllocateMessageQueueConsistentHashBounded(epsilon=-0.1)
    with pytest.raises(ValueError, match=r"^illegal epsilon :nan$"):
        AllocateMessageQueueConsistentHashBounded(epsilon=float("nan"))
    with pytest.raises(ValueError, match=r"^illegal virtualNodeCnt :0$"):
        AllocateMessageQueueConsistentHashBounded(0)


def test_md5_hash64_is_the_first_8_bytes_of_md5() -> None:
    key = "MessageQueue [topic=T, brokerName=b, queueId=0]|10.0.0.1@1"
    digest = hashlib.md5(key.encode("utf-8")).digest()
    assert md5_hash64(key) == int.from_bytes(digest[:8], "big")
    assert md5_hash64(key) >> 32 == md5_hash(key)  # RocketMQ's MD5Hash is the first 4 of them
    assert md5_hash64("\u00e9") == int.from_bytes(hashlib.md5(b"\xc3\xa9").digest()[:8], "big")


@pytest.mark.parametrize("virtual_node_cnt", [1, 10, 100])
def test_bounded_with_room_for_all_is_consistent_hash_on_the_same_ring(
    virtual_node_cnt: int,
) -> None:
    # A capacity of at least n never binds: every queue goes to the first point of its walk.
    mq_all, cid_all = queues(64), cids(8)
    roomy = AllocateMessageQueueConsistentHashBounded(virtual_node_cnt, 100.0, md5_hash)
    assert roomy.capacity(64, 8) >= 64
    ring = AllocateMessageQueueConsistentHash(virtual_node_cnt, md5_hash)
    for c in cid_all:
        assert roomy.allocate(G, c, mq_all, cid_all) == ring.allocate(G, c, mq_all, cid_all)


def test_bounded_a_full_consumer_keeps_its_nearest_queues() -> None:
    # a's point is 100, b's 200; the queues sit at 10, 20 and 30, so all three walk to a
    # first. With capacity ceil(1.0 * 3 / 2) = 2, a keeps the two nearest (30 and 20) and the
    # farthest walks on to b.
    mq_all = queues(3)
    table = {"a-0": 100, "b-0": 200} | {str(mq): 10 * (mq.queue_id + 1) for mq in mq_all}
    assert ids_of(_bounded_by_table(table, 0.0), mq_all, ["a", "b"]) == [[1, 2], [0]]
    # The ring decides, not the order of the queues: move queue 0 next to a.
    table = table | {str(mq_all[0]): 95}  # a new table: strategies cache by hash function
    assert ids_of(_bounded_by_table(table, 0.0), mq_all, ["a", "b"]) == [[0, 2], [1]]
    # Without the bound a takes all three.
    assert ids_of(_bounded_by_table(table, 1.0), mq_all, ["a", "b"]) == [[0, 1, 2], []]


def test_bounded_walks_past_the_top_of_the_ring() -> None:
    # A queue beyond the last point wraps to the first one, at the distance of the wrap: the
    # queue at 250 is farther from a (100) than the one at 50, and is the one a rejects.
    mq_all = queues(2)
    table = {"a-0": 100, "b-0": 200, str(mq_all[0]): 50, str(mq_all[1]): 250}
    assert ids_of(_bounded_by_table(table, 0.0), mq_all, ["a", "b"]) == [[0], [1]]
    assert ids_of(_bounded_by_table(table, 1.0), mq_all, ["a", "b"]) == [[0, 1], []]


def test_bounded_orders_equal_distances_by_queue_then_consumer() -> None:
    mq_all = queues(2)
    # Both queues at 50: a keeps the smaller str(mq) (queue 0), queue 1 walks on to b.
    table = {"a-0": 100, "b-0": 200, str(mq_all[0]): 50, str(mq_all[1]): 50}
    assert ids_of(_bounded_by_table(table, 0.0), mq_all, ["a", "b"]) == [[0], [1]]
    assert ids_of(_bounded_by_table(table, 0.0), mq_all[::-1], ["b", "a"]) == [[1], [0]]
    # Two consumers on one point: the walk meets the smaller id first.
    table = {"a-0": 100, "b-0": 100, str(mq_all[0]): 50, str(mq_all[1]): 60}
    assert ids_of(_bounded_by_table(table, 1.0), mq_all, ["b", "a"]) == [[], [0, 1]]


def test_bounded_assignment_is_the_union_of_the_shares() -> None:
    bounded = AllocateMessageQueueConsistentHashBounded()
    mq_all, cid_all = queues(20), cids(6)
    owners = bounded.assignment(mq_all, cid_all)
    assert set(owners) == set(mq_all)
    for c in cid_all:
        assert bounded.allocate(G, c, mq_all, cid_all) == [mq for mq in mq_all if owners[mq] == c]


def test_bounded_a_topic_and_its_retry_topic_each_keep_their_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass allocates the topic and the group's retry topic with the same members: both
    answers are kept, so the consumers of a process compute each once, not at every pass."""
    import aiorocketmq.consumer.allocate as allocate

    computed: list[str] = []
    real = allocate._bounded_shares

    def counting(mqs: tuple[MessageQueue, ...], *args: object) -> object:
        computed.append(mqs[0].topic)
        return real(mqs, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(allocate, "_bounded_shares", counting)
    bounded = AllocateMessageQueueConsistentHashBounded()
    topic = [MessageQueue.interned("KeptTopic", "b", i) for i in range(16)]
    retry = [MessageQueue.interned("%RETRY%kept", "b", 0)]
    members = cids(5)
    for _ in range(3):  # three passes of every member
        for c in members:
            bounded.allocate(G, c, topic, members)
            bounded.allocate(G, c, retry, members)
    assert computed == ["KeptTopic", "%RETRY%kept"]


# -- CONFIG ----------------------------------------------------------------------------


def test_by_config_returns_the_configured_list_as_is() -> None:
    configured = [MessageQueue("T", "broker-b", 7), MessageQueue("T", "broker-a", 1)]
    by_config = AllocateMessageQueueByConfig(configured)
    assert by_config.name == "CONFIG"
    assert by_config.allocate(G, "c1", queues(3), ["c1", "c2"]) == configured
    # No validation at all, not even of the current consumer.
    assert by_config.allocate(G, "", [], []) == configured
    assert by_config.allocate(G, "stranger", queues(3), ["c1"]) == configured
    result = by_config.allocate(G, "c1", [], [])
    result.append(MessageQueue("T", "x", 0))  # the caller's copy
    assert by_config.allocate(G, "c1", [], []) == configured


# -- MACHINE_ROOM ----------------------------------------------------------------------


def test_machine_room_block_plus_remainder() -> None:
    mq_all = [MessageQueue("T", "idc1@broker-a", i) for i in range(5)]
    room = AllocateMessageQueueByMachineRoom({"idc1"})
    assert room.name == "MACHINE_ROOM"
    assert ids_of(room, mq_all, cids(2)) == [[0, 1, 4], [2, 3]]
    assert ids_of(AllocateMessageQueueAveragely(), mq_all, cids(2)) == [[0, 1, 2], [3, 4]]
    assert ids_of(room, mq_all[:2], cids(3)) == [[0], [1], []]


def test_machine_room_only_listed_idcs_and_well_formed_names() -> None:
    mq_all = sorted(
        [
            MessageQueue("T", "idc1@a", 0),
            MessageQueue("T", "idc2@b", 0),
            MessageQueue("T", "plain", 0),
            MessageQueue("T", "idc1@a@x", 0),  # three parts: not eligible
            MessageQueue("T", "idc1@c@", 0),  # Java's split drops the trailing empty part
            MessageQueue("T", "idc1@", 0),  # ... leaving one part: not eligible
        ]
    )
    room = AllocateMessageQueueByMachineRoom(["idc1"])
    got = room.allocate(G, "c1", mq_all, ["c1"])
    assert [mq.broker_name for mq in got] == ["idc1@a", "idc1@c@"]


def test_machine_room_unset_idcs_fails_after_validation() -> None:
    room = AllocateMessageQueueByMachineRoom()
    assert room.allocate(G, "stranger", queues(2), ["c1"]) == []
    with pytest.raises(ValueError, match="currentCID is empty"):
        room.allocate(G, "", queues(2), ["c1"])
    with pytest.raises(TypeError, match="consumeridcs"):
        room.allocate(G, "c1", queues(2), ["c1"])


# -- MACHINE_ROOM_NEARBY ---------------------------------------------------------------


@dataclass
class RoomByPrefix:
    """Brokers named ``room-broker``; consumers named ``room-client``."""

    def broker_deploy_in(self, mq: MessageQueue) -> str:
        return mq.broker_name.split("-", 1)[0]

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("-", 1)[0]


def test_machine_room_nearby_constructor_and_name() -> None:
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragelyByCircle(), RoomByPrefix())
    assert nearby.name == "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE"
    with pytest.raises(TypeError, match=r"^allocateMessageQueueStrategy is null$"):
        AllocateMachineRoomNearby(None, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^machineRoomResolver is null$"):
        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), None)  # type: ignore[arg-type]


def test_machine_room_nearby_own_room_first_and_orphan_rooms_shared() -> None:
    mq_all = sorted(
        [MessageQueue("T", "hz-broker", i) for i in range(4)]
        + [MessageQueue("T", "sh-broker", i) for i in range(2)]
        + [MessageQueue("T", "bj-broker", i) for i in range(3)]  # no consumer in bj
        + [MessageQueue("T", "gz-broker", i) for i in range(2)]  # no consumer in gz
    )
    cid_all = sorted(["hz-c1", "hz-c2", "sh-c1"])  # hz-c1, hz-c2, sh-c1
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    got = {
        c: [(mq.broker_name[:2], mq.queue_id) for mq in nearby.allocate(G, c, mq_all, cid_all)]
        for c in cid_all
    }
    # Own room split among its consumers, then each orphan room (bj, then gz) among everyone.
    assert got == {
        "hz-c1": [("hz", 0), ("hz", 1), ("bj", 0), ("gz", 0)],
        "hz-c2": [("hz", 2), ("hz", 3), ("bj", 1), ("gz", 1)],
        "sh-c1": [("sh", 0), ("sh", 1), ("bj", 2)],
    }
    owned = [mq for c in cid_all for mq in nearby.allocate(G, c, mq_all, cid_all)]
    assert sorted(owned) == mq_all


def test_machine_room_nearby_consumer_in_a_room_without_queues() -> None:
    mq_all = [MessageQueue("T", "hz-broker", i) for i in range(2)]
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    assert nearby.allocate(G, "sh-c1", mq_all, ["hz-c1", "sh-c1"]) == []
    assert nearby.allocate(G, "hz-c1", mq_all, ["hz-c1", "sh-c1"]) == mq_all


def test_machine_room_nearby_empty_rooms_are_errors() -> None:
    class Blank:
        def __init__(self, broker: str, consumer: str) -> None:
            self.broker, self.consumer = broker, consumer

        def broker_deploy_in(self, mq: MessageQueue) -> str:
            return self.broker

        def consumer_deploy_in(self, client_id: str) -> str:
            return self.consumer

    mq = MessageQueue("T", "b", 0)
    with pytest.raises(
        ValueError,
        match=r"^Machine room is null for mq MessageQueue \[topic=T, brokerName=b, queueId=0\]$",
    ):
        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), Blank("", "r")).allocate(
            G, "c1", [mq], ["c1"]
        )
    with pytest.raises(ValueError, match=r"^Machine room is null for consumer id c1$"):
        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), Blank("r", "")).allocate(
            G, "c1", [mq], ["c1"]
        )


# -- a user strategy: consume only on chosen machines ----------------------------------


def test_chosen_consumers_split_everything_among_themselves() -> None:
    cid_all = sorted(["10.0.0.5@111", "10.0.0.6@222", "10.0.0.7@333", "10.0.0.8@444"])
    chosen = AllocateMessageQueueByChosenConsumers({"10.0.0.6", "10.0.0.8@444"})
    assert chosen.name == "CHOSEN-AVG"
    got = {c: [mq.queue_id for mq in chosen.allocate(G, c, queues(5), cid_all)] for c in cid_all}
    assert got == {
        "10.0.0.5@111": [],
        "10.0.0.6@222": [0, 1, 2],  # chosen by ip
        "10.0.0.7@333": [],
        "10.0.0.8@444": [3, 4],  # chosen by client id
    }


def test_chosen_consumers_with_no_chosen_one_alive_nobody_consumes() -> None:
    chosen = AllocateMessageQueueByChosenConsumers({"10.9.9.9"})
    assert all(chosen.allocate(G, c, queues(3), cids(3)) == [] for c in cids(3))


def test_chosen_consumers_inner_strategy() -> None:
    chosen = AllocateMessageQueueByChosenConsumers(
        cids(3)[1:], AllocateMessageQueueAveragelyByCircle()
    )
    assert chosen.name == "CHOSEN-AVG_BY_CIRCLE"
    assert ids_of(chosen, queues(5), cids(3)) == [[], [0, 2, 4], [1, 3]]


# -- the registry and the protocol -----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("AVG", AllocateMessageQueueAveragely),
        ("AVG_BY_CIRCLE", AllocateMessageQueueAveragelyByCircle),
        ("CONSISTENT_HASH", AllocateMessageQueueConsistentHash),
        ("CONSISTENT_HASH_BOUNDED", AllocateMessageQueueConsistentHashBounded),
    ],
)
def test_strategy_by_name(name: str, cls: type) -> None:
    strategy = strategy_by_name(name)
    assert isinstance(strategy, cls)
    assert strategy.name == name
    assert strategy_by_name(name) is not strategy  # a new one each time


@pytest.mark.parametrize("name", ["CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-AVG"])
def test_strategy_by_name_refuses_strategies_that_need_arguments(name: str) -> None:
    with pytest.raises(ValueError, match="needs arguments"):
        strategy_by_name(name)


def test_strategy_by_name_unknown() -> None:
    with pytest.raises(ValueError, match=r"unknown allocate strategy 'STICKY'.*AVG, AVG_BY_CIRCLE"):
        strategy_by_name("STICKY")


def test_every_strategy_satisfies_the_protocol() -> None:
    for strategy in [*CHECKED, AllocateMessageQueueByConfig([])]:
        assert isinstance(strategy, AllocateMessageQueueStrategy)


# -- the examples in docs/allocation.md are the code's answers ----------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "allocation.md"
EXAMPLE = re.compile(r"^(\S+)\s+(\d+) queues (\d+) consumers: (.*)$")


def test_docs_examples() -> None:
    block = DOCS.read_text().split("```allocation-examples\n", 1)[1].split("```", 1)[0]
    lines = block.strip().splitlines()
    assert len(lines) >= 5
    by_name: dict[str, AllocateMessageQueueStrategy] = {
        "AVG": AllocateMessageQueueAveragely(),
        "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle(),
        "MACHINE_ROOM": AllocateMessageQueueByMachineRoom({"idc1"}),
    }
    for line in lines:
        match = EXAMPLE.match(line)
        assert match, line
        name, n, c, shares = match.groups()
        broker = "idc1@broker-a" if name == "MACHINE_ROOM" else "broker-a"
        expected = [
            [int(i) for i in s.split(",") if i.strip()] for s in re.findall(r"\[([^]]*)\]", shares)
        ]
        assert ids_of(by_name[name], queues(int(n), broker=broker), cids(int(c))) == expected, line


def test_unhashable_hash_function_is_computed_without_the_cache() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self, hash_function: Callable[[str], int]) -> None:
            self.hash_function = hash_function

        def __call__(self, key: str) -> int:
            return self.hash_function(key)

    mq_all, cid_all = queues(10), cids(3)
    for plain, custom in [
        (
            AllocateMessageQueueConsistentHash(),
            AllocateMessageQueueConsistentHash(10, Unhashable(md5_hash)),
        ),
        (
            AllocateMessageQueueConsistentHashBounded(),
            AllocateMessageQueueConsistentHashBounded(
                epsilon=0.25, hash_function=Unhashable(md5_hash64)
            ),
        ),
    ]:
        assert ids_of(custom, mq_all, cid_all) == ids_of(plain, mq_all, cid_all)
