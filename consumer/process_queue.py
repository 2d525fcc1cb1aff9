"""``ProcessQueue``: the messages of one queue that this consumer pulled and has not yet acked.

Rules
-----
* One ``ProcessQueue`` per (consumer group, message queue) this consumer owns, created by
  ``RebalanceImpl`` and shared by the pull loop (which fills it), the consume service (which
  empties it) and the rebalance (which marks it ``dropped``).
* **No I/O and no locks.** Every method is synchronous and runs to completion before another
  asyncio task can run, so the message map needs no lock (RocketMQ guards it with a
  read-write lock). ``consume_lock`` is the exception on purpose: the orderly consume service
  holds it across a batch (which awaits the listener), and the rebalance takes it before it
  unlocks a queue it gives away, so it never unlocks in the middle of a batch.
* **The clock is injected** (``now_ms``, milliseconds); the default is the wall clock, as in
  RocketMQ, whose timestamps are epoch milliseconds.

Theory of operation
-------------------
Messages are kept by queue offset. ``put_message`` adds a pulled batch. In concurrent mode the
consume service hands messages to the listener and, when they are acked, ``remove_message``
returns the *low-water mark*: the smallest offset still held, or ``queue_offset_max + 1`` once
the map is empty. That is the offset to commit: committing any higher would skip a message
that is still being consumed if the consumer crashed. In orderly mode ``take_messages`` moves
the head of the map to an in-flight map; ``commit`` forgets the in-flight messages and returns
the offset after them; ``rollback`` and ``make_message_to_consume_again`` put them back to be
consumed again.

Invariant: ``msg_count`` is the number of messages held (in the map plus in flight), and
``msg_size`` the sum of their body lengths (reset to 0 whenever ``remove_message`` empties the
count, as RocketMQ does).

The pull loop stops pulling a queue while it holds too much: ``flow_control_reason`` says
which of RocketMQ's thresholds is hit (count, size, or the span between the lowest and highest
offset held, the last for concurrent consumers only).
"""

from __future__ import annotations

import asyncio
import bisect
import enum
import time
from collections.abc import Callable, Iterable, Sequence

from aiorocketmq.protocol.message import MessageConst, MessageExt

__all__ = [
    "CONSUME_CONCURRENTLY_MAX_SPAN",
    "PULL_MAX_IDLE_TIME",
    "PULL_THRESHOLD_FOR_QUEUE",
    "PULL_THRESHOLD_SIZE_FOR_QUEUE",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "FlowControlReason",
    "ProcessQueue",
    "flow_control_reason",
]

REBALANCE_LOCK_MAX_LIVE_TIME = 30_000
"""ms after the last successful lock at which the client considers its queue lock expired."""
REBALANCE_LOCK_INTERVAL = 20_000
"""ms between two ``lockAll`` of the orderly consume service."""
PULL_MAX_IDLE_TIME = 120_000
"""ms without a pull after which a push consumer's rebalance drops and re-creates the queue."""

PULL_THRESHOLD_FOR_QUEUE = 1000
"""Flow control: most messages held per queue (``pullThresholdForQueue``)."""
PULL_THRESHOLD_SIZE_FOR_QUEUE = 100
"""Flow control: most MiB of bodies held per queue (``pullThresholdSizeForQueue``)."""
CONSUME_CONCURRENTLY_MAX_SPAN = 2000
"""Flow control, concurrent only: most offsets between the first and last message held."""

_MIB = 1024 * 1024
# RocketMQ's MessageConst.PROPERTY_MAX_OFFSET: the broker's max offset, set on pulled messages.
_PROPERTY_MAX_OFFSET = "MAX_OFFSET"


def _current_time_millis() -> int:
    return time.time_ns() // 1_000_000


class FlowControlReason(enum.Enum):
    """Which threshold made the pull loop wait (RocketMQ logs each with its own message)."""

    CACHED_MESSAGE_COUNT = "the cached message count exceeds the threshold"
    CACHED_MESSAGE_SIZE = "the cached message size exceeds the threshold"
    MAX_SPAN = "the queue's max span exceeds the threshold"


class ProcessQueue:
    """RocketMQ's ``ProcessQueue``: messages held for one queue, and its rebalance state.

    Public state, read and written by the rebalance, pull and consume services:
    ``dropped`` (the queue is no longer ours: the pull request dies), ``locked`` (orderly: we
    hold the broker's queue lock; every new process queue starts locked, as in RocketMQ),
    ``consuming`` (orderly: a consume request is scheduled), ``last_pull_timestamp``,
    ``last_consume_timestamp``, ``last_lock_timestamp``, ``try_unlock_times``, ``msg_acc_cnt``
    (messages on the broker beyond the last pulled one), ``suspended`` (fenced: its batches
    held back from the listener while its grant is unconfirmed). Set timestamps with
    ``now_ms()``.
    """

    def __init__(self, *, now_ms: Callable[[], int] = _current_time_millis) -> None:
        self.now_ms = now_ms
        self._msg_tree: dict[int, MessageExt] = {}  # msgTreeMap, by queue offset
        self._offsets: list[int] = []  # the keys of _msg_tree, sorted
        self._consuming_msgs: dict[int, MessageExt] = {}  # consumingMsgOrderlyTreeMap
        self._msg_count = 0
        self._msg_size = 0
        self.queue_offset_max = 0
        self.locked = False
        self.consuming = False
        now = now_ms()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0
        self._dropped = False
        # Clear while suspended (``suspend``); set again by ``resume`` or a drop.
        self._resumed = asyncio.Event()
        self._resumed.set()
        self.consume_lock = asyncio.Lock()
        # Concurrent batches being consumed now (the fenced handoff drains them before release).
        self.inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # Fenced handoff: dropped, but batches in flight still ack until the queue is released.
        self.draining = False
        # Fenced handoff: the epoch of the grant this queue is consumed under (0: classic). A
        # refusal or a drop names it, so that one of an earlier grant leaves a newer one alone.
        self.epoch = 0

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(msg_count={self._msg_count}, msg_size={self._msg_size}, "
            f"min_offset={self.min_offset}, queue_offset_max={self.queue_offset_max}, "
            f"dropped={self.dropped}, locked={self.locked}, consuming={self.consuming})"
        )

    # -- state ---------------------------------------------------------------------------

    @property
    def dropped(self) -> bool:
        """The queue is no longer ours: its pull request dies, its messages go nowhere."""
        return self._dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self._dropped = value
        if value:
            self._resumed.set()  # batches held back by ``suspend`` end, seeing it dropped

    @property
    def suspended(self) -> bool:
        """Fenced: our channel to the queue's broker ended, and its grant is not known to be
        ours until the new channel lists it: no batch of it goes to the listener."""
        return not self._resumed.is_set()

    def suspend(self) -> None:
        """Hold back every batch not handed to the listener yet, until ``resume`` or a drop."""
        self._resumed.clear()

    def resume(self) -> None:
        """Let the batches held back by ``suspend`` go on."""
        self._resumed.set()

    async def wait_resumed(self) -> None:
        """Until the queue is resumed or dropped (the caller looks which)."""
        await self._resumed.wait()

    @property
    def msg_count(self) -> int:
        """Messages held: waiting in the map plus in flight (orderly)."""
        return self._msg_count

    @property
    def msg_size(self) -> int:
        """Sum of the body lengths of the messages held, in bytes."""
        return self._msg_size

    @property
    def min_offset(self) -> int:
        """The smallest offset waiting in the map, or -1 when none."""
        return self._offsets[0] if self._offsets else -1

    def get_max_span(self) -> int:
        """Highest minus lowest offset waiting in the map; 0 when it is empty."""
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def has_temp_message(self) -> bool:
        """Whether any message waits in the map (in-flight orderly messages do not count)."""
        return bool(self._offsets)

    def head_message(self) -> MessageExt | None:
        """The message with the smallest offset waiting in the map, if any."""
        return self._msg_tree[self._offsets[0]] if self._offsets else None

    def expired_head(self, consume_timeout_ms: int) -> MessageExt | None:
        """The head message if its listener call started more than ``consume_timeout_ms`` ago,
        else None (also for a head not yet handed to the listener). RocketMQ's
        ``cleanExpiredMsg`` looks at the head only: it is what holds the committed offset back."""
        head = self.head_message()
        if head is None:
            return None
        started = head.properties.get(MessageConst.PROPERTY_CONSUME_START_TIMESTAMP)
        try:
            started_ms = int(started) if started else None
        except ValueError:
            return None
        if started_ms is None or self.now_ms() - started_ms <= consume_timeout_ms:
            return None
        return head

    def is_pull_expired(self, pull_max_idle_ms: int = PULL_MAX_IDLE_TIME) -> bool:
        """No pull started for more than ``pull_max_idle_ms``: the pull request was lost."""
        return self.now_ms() - self.last_pull_timestamp > pull_max_idle_ms

    def is_lock_expired(self, lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME) -> bool:
        """The broker's queue lock was last confirmed more than ``lock_max_live_ms`` ago."""
        return self.now_ms() - self.last_lock_timestamp > lock_max_live_ms

    def inc_try_unlock_times(self) -> None:
        """Count a failed attempt to unlock the queue while giving it away (orderly)."""
        self.try_unlock_times += 1

    # -- pull side -----------------------------------------------------------------------

    def consume_started(self) -> None:
        """A concurrent batch of this queue is being consumed."""
        self.inflight += 1
        self._idle.clear()

    def consume_finished(self) -> None:
        """That batch is done (acked or failed)."""
        self.inflight -= 1
        if self.inflight <= 0:
            self.inflight = 0
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until no batch of this queue is being consumed."""
        await self._idle.wait()

    def put_message(self, msgs: Sequence[MessageExt]) -> bool:
        """Add pulled messages; True when the caller must dispatch a consume request.

        A message whose offset is already held is ignored. Returns True (and sets
        ``consuming``) when messages wait and no consume request is under way: RocketMQ's
        ``dispatchToConsume``, which the orderly service uses to run one request at a time.

        Where we differ from RocketMQ: a duplicate is also recognised while it is in flight
        (RocketMQ checks only the waiting map and would count it twice), and
        ``queue_offset_max`` only grows (RocketMQ sets it to the last new offset, the same
        thing for the increasing offsets a pull returns).
        """
        if not self._append_run(msgs):
            self._put_one_by_one(msgs)
        dispatch_to_consume = False
        if self._msg_tree and not self.consuming:
            dispatch_to_consume = True
            self.consuming = True
        if msgs:
            last = msgs[-1]
            max_offset = last.properties.get(_PROPERTY_MAX_OFFSET)
            if max_offset is not None:
                try:
                    acc_total = int(max_offset) - last.queue_offset
                except ValueError:
                    acc_total = 0
                if acc_total > 0:
                    self.msg_acc_cnt = acc_total
        return dispatch_to_consume

    def _append_run(self, msgs: Sequence[MessageExt]) -> bool:
        """The usual pull: offsets strictly increasing and all past what is held, added in one
        step (a dict update and a list extend instead of a Python loop per message). False,
        with nothing changed, when ``msgs`` is not such a run."""
        if not msgs or self._consuming_msgs:
            return False
        new = [m.queue_offset for m in msgs]
        offsets = self._offsets
        if offsets and new[0] <= offsets[-1]:
            return False  # may overlap what is held: one by one
        run = dict(zip(new, msgs, strict=True))
        if len(run) != len(new) or sorted(new) != new:
            return False
        self._msg_tree.update(run)
        offsets.extend(new)
        self._msg_count += len(new)
        self._msg_size += sum([len(m.body) for m in msgs])
        self.queue_offset_max = max(self.queue_offset_max, new[-1])
        return True

    def _put_one_by_one(self, msgs: Sequence[MessageExt]) -> None:
        offsets = self._offsets
        for msg in msgs:
            offset = msg.queue_offset
            if offset in self._msg_tree or offset in self._consuming_msgs:
                continue
            self._msg_tree[offset] = msg
            if not offsets or offset > offsets[-1]:
                offsets.append(offset)
            else:
                bisect.insort(offsets, offset)
            self._msg_count += 1
            self._msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)

    # -- concurrent consumption ------------------------------------------------------------

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; return the offset to commit (the low-water mark).

        That is the smallest offset still waiting, or ``queue_offset_max + 1`` when none
        remains; -1 when nothing was held before the call (nothing to commit).
        """
        self.last_consume_timestamp = self.now_ms()
        if not self._msg_tree:
            return -1
        result = self.queue_offset_max + 1
        pop = self._msg_tree.pop
        offsets = [m.queue_offset for m in msgs]
        held = [prev for prev in [pop(offset, None) for offset in offsets] if prev is not None]
        if len(held) != len(offsets):  # some were not held (or named twice): only those that were
            removed = [m.queue_offset for m in held]
        else:
            removed = offsets  # the usual case: every one was held
        self._msg_size -= sum([len(prev.body) for prev in held])
        self._remove_offsets(removed)
        self._msg_count -= len(removed)
        if self._msg_count == 0:
            self._msg_size = 0
        if self._offsets:
            result = self._offsets[0]
        return result

    def _remove_offsets(self, removed: list[int]) -> None:
        """Drop ``removed`` (already gone from ``_msg_tree``) from the sorted offsets."""
        offsets = self._offsets
        k = len(removed)
        if k and offsets[0] == min(removed) and offsets[k - 1] == max(removed):
            del offsets[:k]  # the usual case: the oldest batch acked first (distinct, sorted)
            return
        if len(removed) * 8 > len(offsets):
            self._offsets = [o for o in offsets if o in self._msg_tree]
            return
        for offset in removed:
            del offsets[bisect.bisect_left(offsets, offset)]

    # -- orderly consumption -------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` messages, lowest offsets first, to the in-flight map.

        When none waits, clear ``consuming``: the orderly consume request ends, and the next
        ``put_message`` dispatches a new one.
        """
        self.last_consume_timestamp = self.now_ms()
        count = min(max(batch_size, 0), len(self._offsets))
        taken = self._offsets[:count]
        del self._offsets[:count]
        result = [self._msg_tree.pop(offset) for offset in taken]
        self._consuming_msgs.update(zip(taken, result, strict=True))
        if not result:
            self.consuming = False
        return result

    def commit(self) -> int:
        """Forget the in-flight messages; return the offset after the highest, to commit.

        Returns -1 when nothing is in flight, where RocketMQ's ``lastKey()`` would throw.
        """
        if not self._consuming_msgs:
            return -1
        offset = max(self._consuming_msgs)
        self._msg_count -= len(self._consuming_msgs)
        self._msg_size -= sum(len(m.body) for m in self._consuming_msgs.values())
        self._consuming_msgs.clear()
        return offset + 1

    def rollback(self) -> None:
        """Put every in-flight message back, to be taken again."""
        if not self._consuming_msgs:
            return
        self._msg_tree.update(self._consuming_msgs)
        # Two sorted runs: the in-flight offsets usually all precede the waiting ones.
        self._offsets = sorted([*sorted(self._consuming_msgs), *self._offsets])
        self._consuming_msgs.clear()

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put these in-flight messages back (``SUSPEND_CURRENT_QUEUE_A_MOMENT``).

        A message that was not held at all is added and counted, so that ``msg_count`` stays
        the number of messages held (RocketMQ would add it without counting it).
        """
        for msg in msgs:
            offset = msg.queue_offset
            was_in_flight = self._consuming_msgs.pop(offset, None) is not None
            if offset not in self._msg_tree:
                bisect.insort(self._offsets, offset)
                if not was_in_flight:
                    self._msg_count += 1
                    self._msg_size += len(msg.body)
            else:
                self._msg_size += len(msg.body) - len(self._msg_tree[offset].body)
                if was_in_flight:  # the same offset was held twice: count it once
                    self._msg_count -= 1
            self._msg_tree[offset] = msg

    def clear(self) -> None:
        """Forget every message (lite pull ``seek``)."""
        self._msg_tree.clear()
        self._offsets.clear()
        self._consuming_msgs.clear()
        self._msg_count = 0
        self._msg_size = 0
        self.queue_offset_max = 0


def flow_control_reason(
    pq: ProcessQueue,
    *,
    pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE,
    pull_threshold_size_for_queue: int = PULL_THRESHOLD_SIZE_FOR_QUEUE,
    consume_concurrently_max_span: int = CONSUME_CONCURRENTLY_MAX_SPAN,
    consume_orderly: bool = False,
) -> FlowControlReason | None:
    """The first threshold ``pq`` exceeds, in RocketMQ's order, or None to pull now.

    Count first (``msg_count > pull_threshold_for_queue``), then size (whole MiB held >
    ``pull_threshold_size_for_queue``), then, for a concurrent consumer only, the span. The
    pull loop retries 50 ms later when one is hit.
    """
    if pq.msg_count > pull_threshold_for_queue:
        return FlowControlReason.CACHED_MESSAGE_COUNT
    if pq.msg_size // _MIB > pull_threshold_size_for_queue:
        return FlowControlReason.CACHED_MESSAGE_SIZE
    if not consume_orderly and pq.get_max_span() > consume_concurrently_max_span:
        return FlowControlReason.MAX_SPAN
    return None
