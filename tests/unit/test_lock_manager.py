"""RebalanceLockManager: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with a fake clock."""

from __future__ import annotations

from aiorocketmq.broker.client import RebalanceLockManager
from aiorocketmq.protocol import MessageQueue

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_locks_are_exclusive() -> None:
    locks = RebalanceLockManager()
    assert locks.try_lock_batch("G", [Q0, Q1], "c1", now=0) == {Q0, Q1}
    assert locks.try_lock_batch("G", [Q1, Q2], "c2", now=1) == {Q2}
    assert locks.get_lock_holder("G", Q1, now=1) == "c1"
    assert locks.get_lock_holder("G", Q2, now=1) == "c2"
    assert locks.is_locked("G", Q1, "c1", now=1)
    assert not locks.is_locked("G", Q1, "c2", now=1)


def test_relock_by_owner_extends_the_lock() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.try_lock_batch("G", [Q0], "c1", now=50_000) == {Q0}
    # 100 s after the first lock but only 50 s after the refresh: still c1's.
    assert locks.try_lock_batch("G", [Q0], "c2", now=100_000) == set()
    assert locks.try_lock_batch("G", [Q0], "c2", now=110_001) == {Q0}
    assert locks.get_lock_holder("G", Q0, now=110_001) == "c2"


def test_lock_expires_after_60_seconds() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.try_lock_batch("G", [Q0], "c2", now=60_000) == set()  # not yet (> 60 s)
    assert locks.get_lock_holder("G", Q0, now=60_001) is None
    assert not locks.is_locked("G", Q0, "c1", now=60_001)
    assert locks.try_lock_batch("G", [Q0], "c2", now=60_001) == {Q0}
    assert locks.get_lock_holder("G", Q0, now=60_001) == "c2"


def test_lock_max_live_is_a_setting() -> None:
    locks = RebalanceLockManager(lock_max_live_ms=100)
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.try_lock_batch("G", [Q0], "c2", now=101) == {Q0}


def test_owner_may_relock_its_own_expired_lock() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.try_lock_batch("G", [Q0], "c1", now=90_000) == {Q0}
    assert locks.is_locked("G", Q0, "c1", now=90_000)


def test_is_locked_does_not_refresh() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.is_locked("G", Q0, "c1", now=59_000)
    assert locks.try_lock("G", Q0, "c2", now=60_001) is True


def test_unlock_only_by_owner() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0, Q1], "c1", now=0)
    assert locks.unlock_batch("G", [Q0, Q1], "c2") == set()
    assert locks.get_lock_holder("G", Q0, now=1) == "c1"
    assert locks.unlock_batch("G", [Q0], "c1") == {Q0}
    assert locks.get_lock_holder("G", Q0, now=1) is None
    assert locks.try_lock_batch("G", [Q0], "c2", now=2) == {Q0}  # free at once: no 60 s wait
    assert locks.unlock_batch("G", [Q2], "c1") == set()  # never locked
    assert locks.unlock_batch("NOPE", [Q0], "c1") == set()


def test_owner_can_unlock_an_expired_entry() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now=0)
    assert locks.unlock_batch("G", [Q0], "c1") == {Q0}
    assert locks.mq_lock_table == {}


def test_groups_lock_independently() -> None:
    locks = RebalanceLockManager()
    assert locks.try_lock_batch("G1", [Q0], "c1", now=0) == {Q0}
    assert locks.try_lock_batch("G2", [Q0], "c2", now=0) == {Q0}
    assert locks.get_lock_holder("G1", Q0, now=0) == "c1"
    assert locks.get_lock_holder("G2", Q0, now=0) == "c2"
    assert locks.get_lock_holder("G3", Q0, now=0) is None
