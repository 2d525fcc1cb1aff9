"""The rebalance diff: which process queues of a topic to drop and which to create.

Rules
-----
* **Pure.** The functions here read a snapshot of the process queue table and the new
  allocation and return values; they change nothing, send nothing, read no clock of their own
  (a process queue answers ``is_pull_expired()`` with its injected clock). ``RebalanceImpl``
  applies the diff: it marks queues dropped, persists offsets, unlocks orderly queues, computes
  pull offsets and dispatches pull requests.
* **Deterministic.** Every list is sorted in ``MessageQueue`` order, so a trace of a rebalance
  reads the same on every run.

Theory of operation
-------------------
RocketMQ's ``updateProcessQueueTableInRebalance(topic, mqSet, needLockMq)`` does, for one
topic:

1. For each queue of the topic in the table: if it is no longer allocated, drop it; else, for a
   push consumer (``CONSUME_PASSIVELY``) only, if its process queue is *pull expired* (no pull
   started for 120 s: its pull request was lost), drop it too ("[BUG] ... because pull is
   pause, so try to fixed it"). Dropping means ``pq.dropped = True``, then
   ``removeUnnecessaryMessageQueue`` (persist the offset, unlock if orderly), and removing the
   entry only if that succeeded: an orderly queue whose unlock failed stays in the table,
   marked dropped, and is dropped again at the next rebalance.
2. For each allocated queue that is not in the table: lock it if orderly, compute where to
   pull from, create a process queue and a pull request.

:func:`compute_rebalance_diff` is steps 1 and 2 without their effects. A pull-expired queue is
both in ``to_drop`` and in ``to_add``: when its removal succeeds, it is re-created in the same
rebalance with a fresh pull request, which is how RocketMQ repairs a lost pull request. The
caller applies ``to_drop`` first and then adds each queue of ``to_add`` that is absent from the
table (``putIfAbsent``), so a queue that could not be removed is not added twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from aiorocketmq.consumer.process_queue import PULL_MAX_IDLE_TIME
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = [
    "RebalanceDiff",
    "RebalanceProcessQueue",
    "compute_rebalance_diff",
    "queues_not_my_topic",
    "working_queues",
]


class RebalanceProcessQueue(Protocol):
    """What the diff reads of a process queue (``ProcessQueue`` provides it)."""

    @property
    def dropped(self) -> bool: ...

    def is_pull_expired(self, pull_max_idle_ms: int = ...) -> bool: ...


@dataclass(frozen=True, slots=True)
class RebalanceDiff:
    """What a rebalance of one topic changes; every list sorted.

    ``to_drop``: queues to mark dropped and remove (no longer allocated, or pull expired).
    ``to_add``: allocated queues to create a process queue and a pull request for (absent
    from the table, or pull expired and about to be removed).
    ``pull_expired``: the queues of ``to_drop`` dropped by the pull-expired rule, though still
    allocated; the caller logs them as RocketMQ's "[BUG]" line.
    """

    to_drop: list[MessageQueue]
    to_add: list[MessageQueue]
    pull_expired: list[MessageQueue]

    @property
    def unallocated(self) -> list[MessageQueue]:
        """The queues of ``to_drop`` that are no longer allocated to this consumer."""
        expired = set(self.pull_expired)
        return [mq for mq in self.to_drop if mq not in expired]

    def __bool__(self) -> bool:
        """Whether the rebalance has anything to do."""
        return bool(self.to_drop or self.to_add)


def compute_rebalance_diff(
    process_queue_table: Mapping[MessageQueue, RebalanceProcessQueue],
    topic: str,
    mq_set: Collection[MessageQueue],
    *,
    push: bool,
    pull_max_idle_ms: int = PULL_MAX_IDLE_TIME,
) -> RebalanceDiff:
    """The diff of ``updateProcessQueueTableInRebalance`` for ``topic``.

    ``process_queue_table`` is the consumer's table (all topics; only ``topic`` is looked
    at); ``mq_set`` the queues now allocated to this consumer for ``topic``; ``push`` whether
    the consumer is a push consumer (``CONSUME_PASSIVELY``), the only kind to which the
    pull-expired rule applies (a lite pull consumer pulls on its own schedule).

    As in RocketMQ, ``dropped`` is not consulted: a dropped entry still in the table (its
    orderly unlock failed) is dropped again if it is not allocated, and otherwise left alone
    until it is pull expired.
    """
    allocated = mq_set if isinstance(mq_set, (set, frozenset)) else set(mq_set)
    to_drop: list[MessageQueue] = []
    pull_expired: list[MessageQueue] = []
    for mq, pq in process_queue_table.items():
        if mq.topic != topic:
            continue
        if mq not in allocated:
            to_drop.append(mq)
        elif push and pq.is_pull_expired(pull_max_idle_ms):
            to_drop.append(mq)
            pull_expired.append(mq)
    to_add = [mq for mq in allocated if mq not in process_queue_table]
    to_add += pull_expired
    return RebalanceDiff(
        to_drop=sorted(to_drop), to_add=sorted(to_add), pull_expired=sorted(pull_expired)
    )


def working_queues(
    process_queue_table: Mapping[MessageQueue, RebalanceProcessQueue], topic: str
) -> set[MessageQueue]:
    """RocketMQ's ``workingQueues``: the queues of ``topic`` whose process queue is live.

    A topic is balanced when this equals the allocation; otherwise the rebalance service
    retries in 1 s rather than 20 s.
    """
    return {mq for mq, pq in process_queue_table.items() if mq.topic == topic and not pq.dropped}


def queues_not_my_topic(
    process_queue_table: Mapping[MessageQueue, RebalanceProcessQueue],
    subscribed_topics: Iterable[str],
) -> list[MessageQueue]:
    """RocketMQ's ``truncateMessageQueueNotMyTopic``: queues of topics no longer subscribed.

    The caller marks them dropped and removes them, without ``removeUnnecessaryMessageQueue``
    (no offset persist, no unlock), as RocketMQ does.
    """
    topics = set(subscribed_topics)
    return sorted(mq for mq in process_queue_table if mq.topic not in topics)
