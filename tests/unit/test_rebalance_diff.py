"""The pure diff of updateProcessQueueTableInRebalance, and workingQueues."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.consumer.process_queue import PULL_MAX_IDLE_TIME, ProcessQueue
from aiorocketmq.consumer.rebalance_diff import (
    RebalanceDiff,
    RebalanceProcessQueue,
    compute_rebalance_diff,
    queues_not_my_topic,
    working_queues,
)
from aiorocketmq.protocol import MessageQueue

T = "TopicTest"
RETRY = "%RETRY%GID_TEST"
A0, A1, A2, A3 = (MessageQueue(T, "broker-a", i) for i in range(4))
B0, B1 = (MessageQueue(T, "broker-b", i) for i in range(2))
R0 = MessageQueue(RETRY, "broker-a", 0)


@dataclass
class FakePQ:
    dropped: bool = False
    expired: bool = False

    def is_pull_expired(self, pull_max_idle_ms: int = PULL_MAX_IDLE_TIME) -> bool:
        return self.expired


def table(**entries: FakePQ) -> dict[MessageQueue, RebalanceProcessQueue]:
    named = {"A0": A0, "A1": A1, "A2": A2, "A3": A3, "B0": B0, "B1": B1, "R0": R0}
    return {named[k]: v for k, v in entries.items()}


def test_no_change() -> None:
    diff = compute_rebalance_diff(table(A0=FakePQ(), A1=FakePQ()), T, {A0, A1}, push=True)
    assert diff == RebalanceDiff(to_drop=[], to_add=[], pull_expired=[])
    assert not diff


def test_first_rebalance_adds_everything_sorted() -> None:
    diff = compute_rebalance_diff({}, T, {B1, A2, A0, B0}, push=True)
    assert diff.to_add == [A0, A2, B0, B1]
    assert diff.to_drop == diff.pull_expired == []
    assert diff


def test_lost_queues_are_dropped_and_new_ones_added() -> None:
    diff = compute_rebalance_diff(
        table(A0=FakePQ(), A1=FakePQ(), B1=FakePQ()), T, [B0, A1, A2], push=True
    )
    assert diff.to_drop == [A0, B1]
    assert diff.unallocated == [A0, B1]
    assert diff.to_add == [A2, B0]
    assert diff.pull_expired == []


def test_empty_allocation_drops_every_queue_of_the_topic() -> None:
    # The consumer is not yet in the broker's list: check() fails, the allocation is empty.
    diff = compute_rebalance_diff(table(A0=FakePQ(), A1=FakePQ(), R0=FakePQ()), T, set(), push=True)
    assert diff.to_drop == [A0, A1]
    assert diff.to_add == []


def test_other_topics_are_left_alone() -> None:
    diff = compute_rebalance_diff(table(A0=FakePQ(), R0=FakePQ(expired=True)), T, {A0}, push=True)
    assert not diff
    diff = compute_rebalance_diff(table(A0=FakePQ(), R0=FakePQ()), RETRY, set(), push=True)
    assert diff.to_drop == [R0]


def test_pull_expired_queue_is_dropped_and_recreated_for_push_only() -> None:
    pqs = table(A0=FakePQ(expired=True), A1=FakePQ(), A2=FakePQ(expired=True))
    diff = compute_rebalance_diff(pqs, T, {A0, A1, A3}, push=True)
    # A0: still ours but its pull request was lost: drop it and create it again.
    # A2: no longer ours (expired or not): dropped, not re-created, not counted as expired.
    assert diff.to_drop == [A0, A2]
    assert diff.pull_expired == [A0]
    assert diff.unallocated == [A2]
    assert diff.to_add == [A0, A3]

    lite_pull = compute_rebalance_diff(pqs, T, {A0, A1, A3}, push=False)
    assert lite_pull == RebalanceDiff(to_drop=[A2], to_add=[A3], pull_expired=[])


def test_dropped_entry_still_in_the_table() -> None:
    # An orderly queue whose unlock failed stays in the table, marked dropped.
    pqs = table(A0=FakePQ(dropped=True), A1=FakePQ(dropped=True))
    diff = compute_rebalance_diff(pqs, T, {A1}, push=True)
    assert diff.to_drop == [A0]  # not ours: dropped again, the unlock is retried
    assert diff.to_add == []  # ours again: left alone (as in RocketMQ) until pull expired
    pqs[A1] = FakePQ(dropped=True, expired=True)
    diff = compute_rebalance_diff(pqs, T, {A1}, push=True)
    assert diff.to_drop == [A0, A1]
    assert diff.to_add == diff.pull_expired == [A1]


def test_pull_max_idle_reaches_real_process_queues() -> None:
    now = [0]
    pq = ProcessQueue(now_ms=lambda: now[0])
    now[0] = PULL_MAX_IDLE_TIME + 1
    assert compute_rebalance_diff({A0: pq}, T, {A0}, push=True).pull_expired == [A0]
    assert not compute_rebalance_diff({A0: pq}, T, {A0}, push=True, pull_max_idle_ms=10**9)


def test_the_input_is_not_changed() -> None:
    pqs = table(A0=FakePQ(expired=True), A1=FakePQ())
    before = dict(pqs)
    mq_set = {A0, B0}
    compute_rebalance_diff(pqs, T, mq_set, push=True)
    assert pqs == before
    assert mq_set == {A0, B0}
    assert not any(pq.dropped for pq in pqs.values())


def test_working_queues_ignores_dropped_and_other_topics() -> None:
    pqs = table(A0=FakePQ(), A1=FakePQ(dropped=True), R0=FakePQ())
    assert working_queues(pqs, T) == {A0}
    assert working_queues(pqs, RETRY) == {R0}
    assert working_queues({}, T) == set()


def test_queues_not_my_topic() -> None:
    pqs = table(B0=FakePQ(), A0=FakePQ(), R0=FakePQ())
    assert queues_not_my_topic(pqs, [RETRY]) == [A0, B0]
    assert queues_not_my_topic(pqs, {T, RETRY}) == []
    assert queues_not_my_topic(pqs, []) == [R0, A0, B0]  # "%" sorts before "T"


ALL = [A0, A1, A2, A3, B0, B1]


@settings(max_examples=100, deadline=None)
@given(
    held=st.dictionaries(st.sampled_from(ALL), st.tuples(st.booleans(), st.booleans())),
    allocated=st.sets(st.sampled_from(ALL)),
    push=st.booleans(),
)
def test_applying_the_diff_gives_the_allocation(
    held: dict[MessageQueue, tuple[bool, bool]], allocated: set[MessageQueue], push: bool
) -> None:
    pqs: dict[MessageQueue, RebalanceProcessQueue] = {
        mq: FakePQ(dropped=d, expired=e) for mq, (d, e) in held.items()
    }
    diff = compute_rebalance_diff(pqs, T, allocated, push=push)
    for part in (diff.to_drop, diff.to_add, diff.pull_expired):
        assert part == sorted(set(part))
    assert set(diff.pull_expired) <= set(diff.to_drop) & allocated
    assert set(diff.pull_expired) <= set(diff.to_add)
    # Apply it as RebalanceImpl does when every removal succeeds.
    after = {mq: pq for mq, pq in pqs.items() if mq not in diff.to_drop}
    for mq in diff.to_add:
        after.setdefault(mq, FakePQ())
    assert set(after) == allocated
    # A second rebalance with nothing expired has nothing to do.
    fresh = {mq: FakePQ() for mq in after}
    assert not compute_rebalance_diff(fresh, T, allocated, push=push)
