"""``RebalanceImpl``: each consumer decides alone which queues are its own (spec 1.4).

Theory of operation, for each subscribed topic (CLUSTERING):

1. ``mq_all`` = the topic's readable queues from the route; ``cid_all`` = the group's client ids
   from one broker. Both sorted, so every consumer feeds the strategy the same input.
2. The strategy (AVG by default) answers this consumer's share.
3. ``update_process_queue_table_in_rebalance``: queues no longer ours are dropped (their pull
   request dies, their offset is persisted, then they are removed); new queues get a
   ``ProcessQueue`` and a ``PullRequest`` starting at ``compute_pull_from_where``.
4. ``message_queue_changed``: tell the consumer (thresholds, heartbeat, user listener).

BROADCASTING takes every queue. A topic is *balanced* when the process queues equal the
allocation; otherwise the rebalance service comes back in 1 s. Consumers do not coordinate, so
during a change two consumers may pull one queue for a while: delivery is at least once.

The consume mode (push concurrently, push orderly, lite pull) is a small ``RebalanceMode``
object passed in (composition, not RocketMQ's subclasses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from aiorocketmq.consumer.allocate import AllocateMessageQueueStrategy
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.rebalance_diff import (
    compute_rebalance_diff,
    queues_not_my_topic,
    working_queues,
)
from aiorocketmq.consumer.types import MessageModel
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.validators import is_retry_topic
from aiorocketmq.trace import tracer

__all__ = ["RebalanceImpl", "RebalanceMode"]

log = get_logger("aiorocketmq.consumer.rebalance")

# Fenced: how long a retry's acquire may wait at the broker (a pass's waits acquire_wait_ms).
# Retries come every 50 ms while a pass is unbalanced: without a wait, each consumer whose pass
# ended unbalanced sent twenty acquires a second for up to 3 s; with one, at most four.
RETRY_ACQUIRE_WAIT_MS = 250


def _queue_order(mq: MessageQueue) -> tuple[str, str, int]:
    """RocketMQ's order of queues (topic, broker, id), as a key: sorting by it is several times
    faster than by the dataclass's own comparisons."""
    return (mq.topic, mq.broker_name, mq.queue_id)


class RebalanceMode(Protocol):
    """What differs between push (concurrent/orderly) and lite pull consumers."""

    @property
    def is_push(self) -> bool: ...
    async def remove_unnecessary_message_queue(
        self, mq: MessageQueue, pq: ProcessQueue
    ) -> bool: ...
    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]: ...
    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...
    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]: ...
    async def lock(self, mq: MessageQueue) -> bool: ...
    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]] | None: ...
    def abandon_grants(self, mqs: Iterable[MessageQueue]) -> None: ...
    def pair_releases(self, brokers: Iterable[str]) -> None: ...
    def unpair_releases(self) -> None: ...
    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None: ...
    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...
    async def before_rebalance(self) -> None: ...
    def handoff_owed(self) -> bool: ...


class ConsumerIdSource(Protocol):
    client_id: str

    def take_notified_consumer_ids(self, group: str) -> list[str] | None: ...
    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None: ...


def _answered(future: asyncio.Future[Any]) -> bool:
    """Whether ``future`` ended with a result (not cancelled, no exception)."""
    return future.done() and not future.cancelled() and future.exception() is None


class RebalanceImpl:
    """The rebalance state of one consumer group in one client."""

    def __init__(
        self,
        consumer_group: str,
        message_model: MessageModel,
        strategy: AllocateMessageQueueStrategy,
        client: ConsumerIdSource,
        mode: RebalanceMode,
        *,
        fenced: bool = False,
        fenced_retry_ms: int = 50,
        fenced_retry_window_ms: int = 3_000,
        pull_max_idle_ms: int = 120_000,
        new_process_queue: Callable[[], ProcessQueue] = ProcessQueue,
        epochs: dict[MessageQueue, int] | None = None,
        acquire_wait_ms: int = 0,
    ) -> None:
        self.consumer_group = consumer_group
        self.message_model = message_model
        self.allocate_message_queue_strategy = strategy
        self.client = client
        self.mode = mode
        self.fenced = fenced
        self.fenced_retry_ms = fenced_retry_ms
        self.fenced_retry_window_ms = fenced_retry_window_ms
        # Fenced: how long a pass's acquire may wait at the broker for queues still held.
        self.acquire_wait_ms = acquire_wait_ms
        self._acquire_tasks: dict[str, asyncio.Task[None]] = {}
        self.pull_max_idle_ms = pull_max_idle_ms
        self._new_pq = new_process_queue
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        # Queues this consumer took and gave up so far (the client's metrics).
        self.queues_added = 0
        self.queues_dropped = 0
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        # topic -> the subscription's expression and version (kept by the consumer).
        self.subscription_inner: dict[str, tuple[str, int]] = {}
        # Fenced handoff: the epoch of each queue we hold (the dict ``FencedHandoff`` owns).
        self.epochs: dict[MessageQueue, int] = {} if epochs is None else epochs
        # The last allocation per topic (the fenced handoff acquires a released queue from it).
        self.allocation: dict[str, set[MessageQueue]] = {}
        self._cid_cache: dict[None, list[str] | None] = {}
        # The members (sorted) of the last pass, when it ended balanced; else None.
        self.last_members: list[str] | None = None
        self._passing = False  # a pass is running (between do_rebalance's start and end)
        self._pass_topics: frozenset[str] = frozenset()  # the topics of the last or running pass
        self._sorted_mq_all: dict[str, tuple[set[MessageQueue], list[MessageQueue]]] = {}
        self._bad_members_logged = False
        # One table update at a time (the periodic rebalance and a QueueReleased may overlap).
        self._table_lock = asyncio.Lock()
        # Set by ``destroy`` (the consumer left): a rebalance pass still running adds nothing.
        self.destroyed = False
        # Set by ``stop_taking_queues`` (the consumer is leaving): the table changes no more.
        self.leaving = False

    # ---- entry -----------------------------------------------------------------------------
    async def do_rebalance(self, is_order: bool) -> bool:
        """Rebalance every subscribed topic; True when all are balanced."""
        balanced = True
        self._cid_cache = {}
        self.last_members = None  # until this pass ends: its members are not applied yet
        self._passing = True
        topics = list(self.subscription_inner)
        self._pass_topics = frozenset(topics)
        try:
            await self.mode.before_rebalance()
            for topic in topics:
                try:
                    if not await self.rebalance_by_topic(topic, is_order):
                        balanced = False
                except Exception:
                    log.exception(
                        "rebalance by topic failed", group=self.consumer_group, topic=topic
                    )
                    if not is_retry_topic(topic):
                        balanced = False
            if self.mode.handoff_owed():
                balanced = False  # a release owed or a grant unsure: not settled yet
        finally:
            self._passing = False
        self.truncate_message_queue_not_my_topic()
        self.last_members = self._cid_cache.get(None) if balanced else None
        return balanced

    def allocated_by(self, members: list[str]) -> bool:
        """Whether a pass by exactly these (sorted) members would change nothing: the last
        pass allocated by them, from the routes it used, and the queues held are still its
        allocation; or the pass running now allocates by them, from those routes (it ends
        balanced, or the service runs it again within a second).

        The second case is the other brokers' notifications of one change, read while the
        first one's pass awaits its commits and queries: each woke a pass of its own, which
        ran a second later and changed nothing (at 1,000 consumers under AVG, 1.3 passes per
        consumer and change; 0.8 to 1.0 since)."""
        if self._passing:
            if self._cid_cache.get(None) != members:  # not known yet (None), or others
                return False
        elif self.last_members is None or self.last_members != members:
            return False
        if self._pass_topics != frozenset(self.subscription_inner):
            return False  # a topic subscribed (or dropped) since that pass began
        for topic in self.subscription_inner:  # a route changed since: the pass must see it
            used = self._sorted_mq_all.get(topic)
            if used is not None and used[0] is not self.topic_subscribe_info_table.get(topic):
                return False
        return self._passing or self.is_balanced()

    async def rebalance_by_topic(self, topic: str, is_order: bool) -> bool:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if self.message_model is MessageModel.BROADCASTING:
            if mq_set is None:
                await self.mode.message_queue_changed(topic, set(), set())
                log.warning(
                    "doRebalance, but the topic's route is unknown",
                    group=self.consumer_group,
                    topic=topic,
                )
                return True
            if await self.update_process_queue_table_in_rebalance(topic, mq_set, need_lock=False):
                await self.mode.message_queue_changed(topic, mq_set, mq_set)
            return mq_set == working_queues(self.process_queue_table, topic)

        cid_all = await self._consumer_ids(topic)
        if mq_set is None:
            if not is_retry_topic(topic):
                await self.mode.message_queue_changed(topic, set(), set())
                log.warning(
                    "doRebalance, but the topic's route is unknown",
                    group=self.consumer_group,
                    topic=topic,
                )
            return True
        if cid_all is None:
            log.warning(
                "doRebalance, but the group's consumer ids are unknown",
                group=self.consumer_group,
                topic=topic,
            )
            return True
        if self.client.client_id not in cid_all:
            # Empty, or stale (a broker that has not seen our heartbeat yet, or lost it in a
            # restart): an allocation from it would give us nothing and drop every queue we
            # hold. Make none; the next pass (1 s, or the next notification) asks again.
            if not self._bad_members_logged:
                self._bad_members_logged = True
                log.warning(
                    "doRebalance, but the group's consumer ids do not include this client: "
                    "no allocation from them, queues kept, asking again",
                    group=self.consumer_group,
                    topic=topic,
                    client_id=self.client.client_id,
                    members=len(cid_all),
                )
            return False
        self._bad_members_logged = False
        mq_all = self._sorted_queues(topic, mq_set)
        cid_all = sorted(cid_all)
        strategy = self.allocate_message_queue_strategy
        try:
            result = strategy.allocate(self.consumer_group, self.client.client_id, mq_all, cid_all)
        except Exception as e:
            log.error(
                "allocate message queue failed",
                strategy=strategy.name,
                group=self.consumer_group,
                error=str(e),
            )
            return False
        allocate_result_set = set(result or [])
        self.allocation[topic] = allocate_result_set
        # Its fields cost a sort and a string per queue: built only for a sink that takes it.
        if tracer.wants("rebalance_result"):
            tracer.record(
                "rebalance_result",
                group=self.consumer_group,
                client_id=self.client.client_id,
                topic=topic,
                strategy=strategy.name,
                cid_all=cid_all,
                mq_all=len(mq_all),
                result=sorted(str(mq) for mq in allocate_result_set),
            )
        changed = await self.update_process_queue_table_in_rebalance(
            topic, allocate_result_set, need_lock=is_order, wait_ms=self.acquire_wait_ms
        )
        if changed:
            log.info(
                "rebalanced result changed",
                allocateMessageQueueStrategyName=strategy.name,
                group=self.consumer_group,
                topic=topic,
                clientId=self.client.client_id,
                mqAllSize=len(mq_all),
                cidAllSize=len(cid_all),
                rebalanceResultSize=len(allocate_result_set),
                rebalanceResultSet=sorted(str(mq) for mq in allocate_result_set),
            )
            await self.mode.message_queue_changed(topic, mq_set, allocate_result_set)
        balanced = allocate_result_set == working_queues(self.process_queue_table, topic)
        if self.fenced and not balanced:
            self._keep_acquiring(topic)
        return balanced

    def _sorted_queues(self, topic: str, mq_set: set[MessageQueue]) -> list[MessageQueue]:
        """``mq_set`` sorted, kept until the route gives a new set: a pass at 4,096 queues
        would otherwise spend tens of milliseconds sorting the same queues again."""
        cached = self._sorted_mq_all.get(topic)
        if cached is None or cached[0] is not mq_set:
            cached = self._sorted_mq_all[topic] = (mq_set, sorted(mq_set, key=_queue_order))
        return cached[1]

    async def _consumer_ids(self, topic: str) -> list[str] | None:
        """The group's client ids, asked once per rebalance pass (not once per topic).

        Where we differ from RocketMQ: it asks a broker of each topic; every broker keeps the
        same group membership, so one answer serves all the topics of the pass. And when the
        pass follows a notification that carried the members (our brokers send them), it uses
        those: a change among 1,000 consumers is then not followed by 1,000 requests.
        """
        if None not in self._cid_cache:
            ids = self.client.take_notified_consumer_ids(self.consumer_group)
            if ids is None:
                ids = await self.client.find_consumer_id_list(topic, self.consumer_group)
            # Sorted once for the pass (each topic's allocation sorts them again, a single
            # pass over a sorted list); at 1,000 members a sort is a tenth of a millisecond.
            self._cid_cache[None] = sorted(ids) if ids is not None else None
        return self._cid_cache[None]

    # ---- the table -------------------------------------------------------------------------
    async def update_process_queue_table_in_rebalance(
        self, topic: str, mq_set: set[MessageQueue], *, need_lock: bool, wait_ms: int = 0
    ) -> bool:
        """Drop what is no longer ours, create what is new; True when the table changed.

        ``wait_ms`` (fenced): how long the acquire may wait at the broker for queues their
        holders are about to let go. A pass waits ``acquire_wait_ms``; a retry briefly
        (``RETRY_ACQUIRE_WAIT_MS``: it holds the table lock, which the next pass needs); the
        take-over after QueueReleased not at all (the queue is free).
        """
        async with self._table_lock:
            if self.leaving:
                return False
            return await self._update_process_queue_table(
                topic, mq_set, need_lock=need_lock, wait_ms=wait_ms
            )

    async def stop_taking_queues(self) -> None:
        """The consumer is leaving: no pass, retry or take-over changes the table from now on;
        returns once one changing it now is done.

        What the leave lets go (fenced: with each queue's final offset) is then the whole
        table. A queue taken after the leave read it would be let go by the unregister alone:
        without its final offset (what was consumed of it meanwhile comes again), and, in the
        trace, held by the leaver until its last request while the next owner has it.
        """
        self.leaving = True
        async with self._table_lock:
            pass

    def _keep_acquiring(self, topic: str) -> None:
        """Fenced: some allocated queues are still held by their previous owners; ask again.

        Every ``fenced_retry_ms`` for up to ``fenced_retry_window_ms``, without waiting for the
        rebalance service's next pass (a QueueReleased push can race with our own pass; this
        makes the take-over not depend on winning that race).
        """
        task = self._acquire_tasks.get(topic)
        if task is not None and not task.done():
            return

        async def again() -> None:
            deadline = asyncio.get_running_loop().time() + self.fenced_retry_window_ms / 1000
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(self.fenced_retry_ms / 1000)
                if self.leaving:
                    return
                allocated = self.allocation.get(topic)
                if allocated is None or allocated == working_queues(
                    self.process_queue_table, topic
                ):
                    return
                missing = [mq for mq in allocated if mq not in self.process_queue_table]
                if missing:
                    wait_ms = min(self.acquire_wait_ms, RETRY_ACQUIRE_WAIT_MS)
                    await self.try_acquire_released(missing[0], wait_ms=wait_ms)

        self._acquire_tasks[topic] = asyncio.create_task(again())

    async def try_acquire_released(self, mq: MessageQueue, *, wait_ms: int = 0) -> bool:
        """Fenced: ``mq`` was released; take it now if our last allocation says it is ours."""
        allocated = self.allocation.get(mq.topic)
        if (
            not self.fenced
            or self.leaving
            or allocated is None
            or mq not in allocated
            or mq in self.process_queue_table
        ):
            return False
        changed = await self.update_process_queue_table_in_rebalance(
            mq.topic, allocated, need_lock=False, wait_ms=wait_ms
        )
        if changed:
            await self.mode.message_queue_changed(
                mq.topic, self.topic_subscribe_info_table.get(mq.topic, allocated), allocated
            )
        return changed

    async def _update_process_queue_table(
        self, topic: str, mq_set: set[MessageQueue], *, need_lock: bool, wait_ms: int = 0
    ) -> bool:
        """The body of ``update_process_queue_table_in_rebalance``.

        Where we differ from RocketMQ: the dropped queues' offsets are committed in one RPC per
        broker, and the new queues' start offsets are queried concurrently, rather than one
        blocking call per queue; the result is the same, reached in one round trip.
        """
        diff = compute_rebalance_diff(
            self.process_queue_table,
            topic,
            mq_set,
            push=self.mode.is_push,
            pull_max_idle_ms=self.pull_max_idle_ms,
        )
        changed = False
        drops = [(mq, self.process_queue_table[mq]) for mq in diff.to_drop]
        for mq, pq in drops:
            pq.dropped = True
            if mq in diff.pull_expired:
                log.warning(
                    "[BUG] doRebalance, remove unnecessary mq because pull is pause, so try to fixed it",
                    group=self.consumer_group,
                    mq=str(mq),
                )
        fenced = self.fenced and self.message_model is MessageModel.CLUSTERING
        # Unlocked: the new queues do not depend on the dropped ones (other queues), so both
        # go to the brokers at once, and a pass that gives queues away and takes others costs
        # one round trip, not two. Classic asks the new queues' start offsets ahead; fenced,
        # their grants (a release of ours and our acquire of another queue are independent;
        # an acquire abandoned with the pass leaves its queues unsure, asked again). Not when
        # a queue is dropped and re-added (pull expired): it starts where its commit left it.
        ahead: asyncio.Future[list[int]] | None = None
        grants_ahead: asyncio.Future[dict[MessageQueue, tuple[int, int]] | None] | None = None
        early = [mq for mq in diff.to_add if mq not in self.process_queue_table]
        if drops and early and not need_lock and not diff.pull_expired:
            if fenced:
                if not any(pq.inflight for _, pq in drops):
                    # The releases come at once (nothing to drain): each rides with the
                    # acquire to its broker, one request rather than two.
                    self.mode.pair_releases(
                        {mq.broker_name for mq, _ in drops} & {mq.broker_name for mq in early}
                    )
                grants_ahead = asyncio.ensure_future(self.mode.acquire(early, wait_ms=wait_ms))
            else:
                ahead = asyncio.ensure_future(self._start_offsets([(mq, 0, -1) for mq in early]))
        grants: dict[MessageQueue, tuple[int, int]] | None = None
        try:
            removed = await self.mode.remove_unnecessary_message_queues(drops) if drops else []
            if grants_ahead is not None:
                self.mode.unpair_releases()  # an acquire no release rode with goes alone
            for (mq, pq), ok in zip(drops, removed, strict=True):
                if not ok:
                    continue  # an orderly queue whose unlock failed stays, marked dropped
                self.process_queue_table.pop(mq, None)
                self._forget_epoch(mq, pq)
                changed = True
                self.queues_dropped += 1
                self._record_dropped(mq)
                log.debug(
                    "doRebalance, remove unnecessary mq", group=self.consumer_group, mq=str(mq)
                )

            if ahead is not None:
                candidates = [(mq, 0, -1) for mq in early]
                offsets = await ahead
            else:
                to_add = [mq for mq in diff.to_add if mq not in self.process_queue_table]
                if grants_ahead is not None:
                    to_add, grants = early, await grants_ahead or {}
                elif fenced and to_add:
                    grants = await self.mode.acquire(to_add, wait_ms=wait_ms) or {}
                candidates = await self._candidates(to_add, need_lock=need_lock, grants=grants)
                offsets = await self._start_offsets(candidates)
            return self._add_queues(candidates, offsets) or changed
        finally:
            if grants_ahead is not None:
                self.mode.unpair_releases()
            for future in (ahead, grants_ahead):
                if future is not None and not future.done():
                    future.cancel()  # the pass failed first (an abandoned acquire: unsure)
            if grants is None and grants_ahead is not None and _answered(grants_ahead):
                grants = grants_ahead.result()  # granted while the releases failed
            # A granted queue not taken (the pass failed, its start offset is unknown, or the
            # consumer left): held on the broker in our name, denied to everyone, unknown to our
            # next pass. Unsure, it is asked for again, and released if it is no longer ours.
            untaken = [mq for mq in grants or () if mq not in self.process_queue_table]
            if untaken:
                self.mode.abandon_grants(untaken)

    def _add_queues(
        self, candidates: list[tuple[MessageQueue, int, int]], offsets: list[int]
    ) -> bool:
        """A process queue and a pull request for each candidate whose start is known;
        whether any was added."""
        changed = False
        requests: list[PullRequest] = []
        if self.destroyed:  # the consumer left while this pass awaited its brokers
            return False
        for (mq, epoch, _), next_offset in zip(candidates, offsets, strict=True):
            if next_offset < 0:
                log.warning(
                    "doRebalance, add new mq failed, the pull offset is unknown",
                    group=self.consumer_group,
                    mq=str(mq),
                )
                continue
            if mq in self.process_queue_table:
                continue
            pq = self._new_pq()
            pq.locked = True
            pq.epoch = epoch
            self.process_queue_table[mq] = pq
            if epoch:
                self.epochs[mq] = epoch
            requests.append(PullRequest(self.consumer_group, mq, pq, next_offset))
            changed = True
            self.queues_added += 1
            tracer.record(
                "queue_added",
                group=self.consumer_group,
                client_id=self.client.client_id,
                mq=str(mq),
                offset=next_offset,
                epoch=epoch,
            )
            log.debug(
                "doRebalance, add a new mq",
                group=self.consumer_group,
                mq=str(mq),
                next_offset=next_offset,
            )
        self.mode.dispatch_pull_requests(requests)
        return changed

    async def _candidates(
        self,
        to_add: list[MessageQueue],
        *,
        need_lock: bool,
        grants: dict[MessageQueue, tuple[int, int]] | None,
    ) -> list[tuple[MessageQueue, int, int]]:
        """The new queues this pass may take, as (queue, epoch, committed offset or -1):
        orderly, those whose broker lock we got; fenced, those granted to us."""
        candidates: list[tuple[MessageQueue, int, int]] = []
        for mq in to_add:
            if need_lock and not await self.mode.lock(mq):
                log.warning(
                    "doRebalance, add a new mq failed, because lock failed",
                    group=self.consumer_group,
                    mq=str(mq),
                )
                continue
            epoch, committed = 0, -1
            if grants is not None:
                if mq not in grants:
                    continue  # still held by its previous owner: unbalanced, retried in 1 s
                epoch, committed = grants[mq]
            candidates.append((mq, epoch, committed))
        return candidates

    async def _start_offsets(self, candidates: list[tuple[MessageQueue, int, int]]) -> list[int]:
        """Where each new queue starts: a grant's committed offset, else the mode's answer,
        asked for all the queues at once when the mode can (one RPC per broker)."""
        unknown = [mq for mq, _, committed in candidates if committed < 0]
        answers: dict[MessageQueue, int] = {}
        if unknown:
            answers = dict(
                zip(unknown, await self.mode.compute_pull_from_where_many(unknown), strict=True)
            )
        return [committed if committed >= 0 else answers[mq] for mq, _, committed in candidates]

    def truncate_message_queue_not_my_topic(self) -> None:
        for mq in queues_not_my_topic(self.process_queue_table, self.subscription_inner):
            pq = self.process_queue_table.pop(mq)
            pq.dropped = True
            self.epochs.pop(mq, None)
            self._record_dropped(mq)
            log.info(
                "doRebalance, truncateMessageQueueNotMyTopic", group=self.consumer_group, mq=str(mq)
            )

    async def remove_process_queue(self, mq: MessageQueue, pq: ProcessQueue | None = None) -> None:
        """Remove the queue now (its next rebalance re-adds it): the OFFSET_ILLEGAL fix, and a
        fenced queue no longer ours. ``pq``: only that process queue; one that replaced it
        since (a new grant) stays."""
        current = self.process_queue_table.get(mq)
        if pq is not None and current is not pq:
            return
        if current is None:
            self.epochs.pop(mq, None)
            return
        del self.process_queue_table[mq]
        current.dropped = True
        self._record_dropped(mq)
        await self.mode.remove_unnecessary_message_queue(mq, current)
        self._forget_epoch(mq, current)

    def _record_dropped(self, mq: MessageQueue, **fields: Any) -> None:
        """The trace's ``queue_dropped`` record: ``mq`` is no longer ours."""
        tracer.record(
            "queue_dropped",
            group=self.consumer_group,
            client_id=self.client.client_id,
            mq=str(mq),
            **fields,
        )

    def _forget_epoch(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Forget ``pq``'s grant: only if it is still the one held for ``mq``. While its drop
        awaited the broker, a pass may have acquired the queue again under a new epoch; erased,
        that grant would be neither committed under nor released, and the broker would keep
        the queue ours and unconsumed."""
        if self.epochs.get(mq) == pq.epoch:
            del self.epochs[mq]

    def is_balanced(self) -> bool:
        """Every topic's process queues are exactly its last allocation."""
        return all(
            allocated == working_queues(self.process_queue_table, topic)
            for topic, allocated in self.allocation.items()
            if topic in self.subscription_inner
        )

    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this consumer holds now (process queues not dropped)."""
        return {mq for mq, pq in self.process_queue_table.items() if not pq.dropped}

    def destroy(self) -> None:
        self.destroyed = True
        for task in self._acquire_tasks.values():
            task.cancel()
        self._acquire_tasks.clear()
        for mq, pq in sorted(self.process_queue_table.items()):
            pq.dropped = True
            self._record_dropped(mq)
        # Granted (fenced) but not added yet: the consumer left mid-acquisition. The broker
        # forgot the grant at UNREGISTER_CLIENT; the trace says the holding ended too.
        for mq in sorted(set(self.epochs) - set(self.process_queue_table)):
            self._record_dropped(mq, granted_only=True)
        self.process_queue_table.clear()
        self.epochs.clear()
