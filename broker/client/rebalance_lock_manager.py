"""``RebalanceLockManager``: LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) queue locks.

The only coordination primitive of classic RocketMQ: an orderly consumer locks the queues its
rebalance gave it before pulling them, so two members never process one queue at once.

Rules (RocketMQ's ``RebalanceLockManager`` and ``AdminBrokerProcessor.lockBatchMQ``):

- ``mq_lock_table``: group -> (MessageQueue -> ``LockEntry(client_id, last_update_timestamp)``).
- An entry is expired when ``now - last_update_timestamp > lock_max_live_ms`` (60 s,
  ``rocketmq.broker.rebalance.lockMaxLiveTime``); it is *locked by* a client when the client
  ids match and it is not expired.
- ``try_lock_batch``: for each queue, locked by the caller -> refresh, OK; no entry -> create
  for the caller, OK; expired -> the caller takes it over, OK; held alive by another -> not OK.
  Answers the set of OK queues. Re-locking is how an owner keeps its lock (clients re-lock
  every 20 s and consider their own lock gone after 30 s).
- ``unlock_batch`` removes an entry only if the caller owns it (expired or not).
- Locks do not vanish when a channel closes: a crashed consumer's queues become lockable by
  others when its entries expire (60 s). A graceful shutdown unlocks at once.

Pure: ``now`` (ms) is an argument, and one event loop means no mutex is needed where RocketMQ
takes one. Strict mode (quorum locking across replicas) is not implemented: we run one
broker per name, so the local answer is the answer (RocketMQ's default, ``lockInStrictMode``
false).

Where we differ: RocketMQ's private ``isLocked`` also refreshes the entry's timestamp as a side
effect; ours is a pure query and only ``try_lock_batch`` refreshes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["REBALANCE_LOCK_MAX_LIVE_MS", "LockEntry", "RebalanceLockManager"]

log = get_logger("aiorocketmq.broker.client.rebalance_lock_manager")

# rocketmq.broker.rebalance.lockMaxLiveTime
REBALANCE_LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class LockEntry:
    """Who holds a queue lock, and when they last (re)locked it."""

    client_id: str
    last_update_timestamp: int

    def is_expired(self, now: int, max_live_ms: int) -> bool:
        return now - self.last_update_timestamp > max_live_ms

    def is_locked_by(self, client_id: str, now: int, max_live_ms: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now, max_live_ms)


class RebalanceLockManager:
    """Per-group queue locks with expiry."""

    def __init__(self, lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_MS) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def try_lock(self, group: str, mq: MessageQueue, client_id: str, now: int) -> bool:
        """Lock one queue; True when the caller holds it afterwards."""
        return mq in self.try_lock_batch(group, (mq,), client_id, now)

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now: int
    ) -> set[MessageQueue]:
        """Lock what can be locked for ``client_id``; the queues it holds afterwards."""
        table = self.mq_lock_table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                locked.add(mq)
                log.info(
                    "tryLockBatch, message queue not locked, I got it",
                    group=group,
                    client_id=client_id,
                    mq=str(mq),
                )
            elif entry.is_locked_by(client_id, now, self.lock_max_live_ms):
                entry.last_update_timestamp = now
                locked.add(mq)
            elif entry.is_expired(now, self.lock_max_live_ms):
                old_client_id = entry.client_id
                entry.client_id = client_id
                entry.last_update_timestamp = now
                locked.add(mq)
                log.warning(
                    "tryLockBatch, message queue lock expired, I got it",
                    group=group,
                    old_client_id=old_client_id,
                    client_id=client_id,
                    mq=str(mq),
                )
            else:
                log.warning(
                    "tryLockBatch, message queue locked by other client",
                    group=group,
                    other_client_id=entry.client_id,
                    client_id=client_id,
                    mq=str(mq),
                )
        if not table:
            del self.mq_lock_table[group]
        return locked

    def unlock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Remove the caller's locks on ``mqs``; the queues actually unlocked."""
        table = self.mq_lock_table.get(group)
        if table is None:
            log.warning("unlockBatch, group not exist", group=group, client_id=client_id)
            return set()
        unlocked: set[MessageQueue] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                log.warning(
                    "unlockBatch, but mq not locked", group=group, client_id=client_id, mq=str(mq)
                )
            elif entry.client_id != client_id:
                log.warning(
                    "unlockBatch, but mq locked by other client",
                    group=group,
                    other_client_id=entry.client_id,
                    client_id=client_id,
                    mq=str(mq),
                )
            else:
                del table[mq]
                unlocked.add(mq)
                log.info("unlockBatch", group=group, client_id=client_id, mq=str(mq))
        if not table:
            del self.mq_lock_table[group]
        return unlocked

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now: int) -> bool:
        """Whether ``client_id`` holds a live lock on ``mq`` (no refresh)."""
        entry = self.mq_lock_table.get(group, {}).get(mq)
        return entry is not None and entry.is_locked_by(client_id, now, self.lock_max_live_ms)

    def get_lock_holder(self, group: str, mq: MessageQueue, now: int) -> str | None:
        """The client id holding a live lock on ``mq``, or None when free or expired."""
        entry = self.mq_lock_table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(now, self.lock_max_live_ms):
            return None
        return entry.client_id
