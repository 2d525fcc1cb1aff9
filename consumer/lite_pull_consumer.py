"""``LitePullConsumer``: RocketMQ's DefaultLitePullConsumer, the Kafka-like consumer.

The application asks for messages (``await poll()``) instead of registering a listener.

Theory of operation
-------------------
Queues come one of two ways, never both (``SubscriptionType``):

* ``subscribe(topic, expression)``: the group's rebalance decides. The consumer registers with
  the client instance as a ``CONSUME_ACTIVELY`` consumer; ``RebalanceImpl`` runs with the
  lite-pull mode (``RebalanceLitePullImpl``), which differs from push in four places (spec
  1.4): no pull-expired rule, a dropped queue's offset is persisted and forgotten (never any
  lock), the start offset is read ``MEMORY_FIRST_THEN_STORE`` and -1 means "retry later", and
  no pull request is dispatched: ``message_queue_changed`` updates the assigned queues itself
  (RocketMQ's ``MessageQueueListenerImpl.updateAssignQueueAndStartPullTask``).
* ``assign(mqs)``: the application decides. No rebalance; the heartbeat carries the group with
  no subscription, and each pull carries its own expression (``has_subscription``).

Each assigned queue has a ``MessageQueueState`` (RocketMQ's ``AssignedMessageQueue`` entry):
its ``ProcessQueue``, the next pull offset, the consumed offset, the paused flag and the
buffer of pulled messages not yet polled. One pull task per queue (``PullTaskImpl``) pulls
(long polling) and fills the buffer, waiting while the flow-control thresholds are exceeded.
``poll()`` hands out buffered messages of queues that are not paused and moves each queue's
consumed offset past what it returned. Committing moves the consumed offsets into the offset
store and persists them: ``commit_sync()`` at once, and every ``auto_commit_interval_ms``
when ``auto_commit`` is on (the messages ``poll()`` returned count as consumed).

Where we differ from RocketMQ (each says why):

* ``poll()`` may return messages of several queues, up to ``pull_batch_size`` in all (RocketMQ
  returns one pull's messages); a paused queue's buffered messages stay buffered until
  ``resume`` (RocketMQ only stops pulling it).
* A paused pull task waits for ``resume`` instead of re-checking every second, so resuming
  takes effect at once.
* Auto-commit is a task of its own rather than a check inside ``poll()``, so offsets are
  committed on time even when the application stops polling.
* When auto-commit is on, a queue the rebalance takes away has its consumed offset committed
  before it goes (RocketMQ persists only what the last ``commitAll`` moved into the store), so
  the next owner repeats less.
* The assigned queues follow the rebalance's process-queue table: a queue the rebalance could
  not add (its offset is unknown) gets no pull task until a later rebalance adds it, and a
  "route unknown" call (no queues at all) leaves the assignment alone, as ``RebalanceImpl``
  leaves its process queues.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from aiorocketmq.consumer.consumer_core import (
    ConsumerAPI,
    ConsumerCore,
    RebalanceModeBase,
    now_ms,
)
from aiorocketmq.consumer.offset_store import ReadOffsetType
from aiorocketmq.consumer.process_queue import ProcessQueue, flow_control_reason
from aiorocketmq.consumer.pull_api import FOUND, NO_MATCHED_MSG, NO_NEW_MSG, PullResult
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.settings import (
    Handoff,
    LitePullConsumerSettings,
    build_settings,
    check_group_name,
)
from aiorocketmq.consumer.types import MessageModel
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQError, QueueFenced
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.tags import SUB_ALL, parse_expression
from aiorocketmq.protocol.v1 import common_pb2
from aiorocketmq.protocol.validators import check_topic
from aiorocketmq.trace import tracer

__all__ = [
    "LitePullConsumer",
    "LitePullConsumerImpl",
    "MessageQueueState",
    "RebalanceLitePullImpl",
    "SubscriptionType",
]

log = get_logger("aiorocketmq.consumer.lite_pull")

PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL = 20

SUBSCRIPTION_CONFLICT = "Subscribe and assign are mutually exclusive."


class SubscriptionType(Enum):
    """How the consumer got its queues (RocketMQ's ``SubscriptionType``)."""

    NONE = "NONE"
    SUBSCRIBE = "SUBSCRIBE"
    ASSIGN = "ASSIGN"


@dataclass(eq=False)
class MessageQueueState:
    """One assigned queue: where to pull next, what was consumed, what waits to be polled.

    ``pull_offset`` is -1 until known (the pull task then computes it). ``consume_offset`` is
    the offset after the last message ``poll()`` returned, -1 before the first.
    """

    message_queue: MessageQueue
    process_queue: ProcessQueue
    pull_offset: int = -1
    consume_offset: int = -1
    paused: bool = False
    buffer: deque[MessageExt] = field(default_factory=deque)
    resumed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.resumed.set()

    @property
    def dropped(self) -> bool:
        return self.process_queue.dropped


class LitePullConsumer(ConsumerAPI):
    """An async lite pull consumer: ``subscribe`` or ``assign``, ``await start()``, ``poll``.

    ``settings`` (a ``LitePullConsumerSettings``) and keyword options configure it; every
    option is documented there with its unit, default and RocketMQ's name::

        consumer = LitePullConsumer("G", "127.0.0.1:9876", auto_commit=False)
        consumer.subscribe("TopicTest")
        async with consumer:
            msgs = await consumer.poll()
            await consumer.commit_sync()
    """

    settings: LitePullConsumerSettings
    _impl: LitePullConsumerImpl

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        settings: LitePullConsumerSettings | None = None,
        **options: Any,
    ) -> None:
        check_group_name(group)
        self.settings = build_settings(LitePullConsumerSettings, settings, options)
        self._impl = LitePullConsumerImpl(group, namesrv_addr, self.settings)

    # ---- state a user (or a test) may read: see ConsumerAPI -----------------------------------
    @property
    def subscription_type(self) -> SubscriptionType:
        return self._impl.subscription_type

    # ---- subscription ----------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = SUB_ALL) -> None:
        """Consume ``topic`` (tags matching ``expression``) from the queues the rebalance gives.

        Raises ``ValueError`` if ``assign()`` was called: the two are mutually exclusive.
        """
        self._impl.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues go at the next rebalance."""
        self._impl.unsubscribe(topic)

    def assign(self, message_queues: Iterable[MessageQueue], expression: str = SUB_ALL) -> None:
        """Consume exactly these queues (no rebalance); replaces any earlier assignment.

        ``expression`` filters by tag, for the topics of these queues. Queues no longer in
        the assignment are dropped with their buffered messages, and their consumed offsets
        are not committed: call ``commit_sync()`` first to keep that progress. Raises
        ``ValueError`` if ``subscribe()`` was called: the two are mutually exclusive.
        """
        self._impl.assign(message_queues, expression)

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return self._impl.assignment()

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Join (subscribe) or take the assigned queues, and start pulling."""
        await self._impl.start()

    async def shutdown(self) -> None:
        """Stop pulling, commit (auto-commit) or persist the offsets, leave the group."""
        await self._impl.shutdown()

    # ---- polling ---------------------------------------------------------------------------
    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Up to ``pull_batch_size`` buffered messages, waiting up to ``timeout`` seconds.

        ``timeout`` defaults to ``poll_timeout_ms``. Returns ``[]`` when nothing arrived in
        time or the consumer is shutting down. With ``auto_commit`` the messages returned count
        as consumed: the next commit moves past them.
        """
        return await self._impl.poll(timeout)

    def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for msg in consumer``: each polled message, until ``shutdown()``.

        A batch counts as consumed when ``poll()`` returns it, so with ``auto_commit`` leaving
        the loop in the middle of a batch commits past the rest of that batch.
        """
        return self._impl.iterate()

    # ---- pause, resume, seek -----------------------------------------------------------------
    def pause(self, message_queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these assigned queues; ``poll()`` returns nothing from them meanwhile.

        Queues not assigned are ignored (as in RocketMQ); a queue the rebalance gives again
        later starts unpaused.
        """
        self._impl.pause(message_queues)

    def resume(self, message_queues: Iterable[MessageQueue]) -> None:
        """Pull and deliver these queues again."""
        self._impl.resume(message_queues)

    def paused(self) -> set[MessageQueue]:
        return self._impl.paused()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next messages of ``mq`` start at ``offset``; buffered ones are discarded.

        ``offset`` must lie within [min offset, max offset] and ``mq`` must be assigned
        (``ValueError`` otherwise, naming the bounds or the assignment).
        """
        await self._impl.seek(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Seek to the queue's min offset (its oldest message still stored)."""
        await self._impl.seek_to_begin(mq)

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Seek to the queue's max offset: only messages stored from now on are polled."""
        await self._impl.seek_to_end(mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the oldest offset still stored in ``mq``."""
        return await self._impl.queue_offset(mq, "GetMinOffset")

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``mq`` will get."""
        return await self._impl.queue_offset(mq, "GetMaxOffset")

    # ---- offsets ---------------------------------------------------------------------------
    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit now: every assigned queue's consumed offset, or the given ``offsets``.

        One UPDATE_CONSUMER_OFFSET per broker (a file write for BROADCASTING). Given
        ``offsets`` must be of assigned queues and not negative (``ValueError`` otherwise).
        """
        await self._impl.commit_sync(offsets)

    async def committed(self, mq: MessageQueue) -> int:
        """The offset committed for ``mq`` (read from the broker, or the file when BROADCASTING).

        -1 when none is known. Where no offset was committed on a young queue the broker
        answers 0 (spec 5.3), as RocketMQ's does.
        """
        return await self._impl.committed(mq)


class RebalanceLitePullImpl(RebalanceModeBase):
    """The lite-pull ``RebalanceMode`` of ``RebalanceImpl`` (RocketMQ's RebalanceLitePullImpl)."""

    impl: LitePullConsumerImpl

    def __init__(self, impl: LitePullConsumerImpl) -> None:
        super().__init__(impl)
        # The start offsets the rebalance computed for queues it just added; the pull tasks
        # started by message_queue_changed take them from here.
        self.start_offsets: dict[MessageQueue, int] = {}

    @property
    def is_push(self) -> bool:
        return False  # CONSUME_ACTIVELY: the pull-expired rule never fires

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        """Persist the dropped queues' offsets (one commit per broker), then forget them.

        Fenced: release each grant with its final offset (what ``poll`` handed out, with
        auto-commit; else what was committed), which the broker commits with the release.
        """
        mqs = [mq for mq, _ in items]
        await self.impl.remove_unnecessary_message_queues(mqs, {mq: pq.epoch for mq, pq in items})
        for mq in mqs:
            self.start_offsets.pop(mq, None)
        return [True] * len(items)

    async def lock(self, mq: MessageQueue) -> bool:
        return True  # lite pull never locks

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        """Lite pull dispatches nothing here; it keeps the start offsets for its pull tasks."""
        self.impl.hold_back_unconfirmed(requests)
        for request in requests:
            self.start_offsets[request.message_queue] = request.next_offset

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        self.impl.on_message_queue_changed(topic, mq_all, mq_divided)


class LitePullConsumerImpl(ConsumerCore):
    """What the client instance drives for a lite pull consumer, and the queues' pull tasks."""

    settings: LitePullConsumerSettings
    consume_type = common_pb2.CONSUME_ACTIVELY

    def __init__(self, group: str, namesrv_addr: str, settings: LitePullConsumerSettings) -> None:
        super().__init__(group, namesrv_addr, settings)
        self.subscription_type = SubscriptionType.NONE
        self._assign_expressions: dict[str, str] = {}  # assign mode: topic -> expression
        self.states: dict[MessageQueue, MessageQueueState] = {}
        self._poll_cursor = 0
        self._arrived = asyncio.Event()
        self.rebalance_mode = RebalanceLitePullImpl(self)
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._shut_down = False

    # ---- subscription ----------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = SUB_ALL) -> None:
        """Consume ``topic`` (tags matching ``expression``) from the queues the rebalance gives.

        Raises ``ValueError`` if ``assign()`` was called: the two are mutually exclusive.
        """
        if self.subscription_type is SubscriptionType.ASSIGN:
            raise ValueError(
                f"{SUBSCRIPTION_CONFLICT} This consumer already assigned queues with assign(); "
                f"it cannot also subscribe({topic!r})."
            )
        check_topic(topic)
        parse_expression(expression)
        self.subscription_type = SubscriptionType.SUBSCRIBE
        self.subscription_inner[topic] = (expression or SUB_ALL, now_ms())
        if self.running:
            self.spawn(self._subscribed_while_running(topic))

    async def _subscribed_while_running(self, topic: str) -> None:
        assert self.client is not None
        await self.client.update_topic_route_info_from_name_server(topic)
        await self.client.send_heartbeat_to_all_broker()
        self.client.rebalance_immediately()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues go at the next rebalance."""
        self.subscription_inner.pop(topic, None)
        if self.running and self.client is not None:
            self.client.rebalance_immediately()

    def assign(self, message_queues: Iterable[MessageQueue], expression: str = SUB_ALL) -> None:
        """Consume exactly these queues (no rebalance); replaces any earlier assignment.

        ``expression`` filters by tag, for the topics of these queues. Queues no longer in
        the assignment are dropped with their buffered messages, and their consumed offsets
        are not committed: call ``commit_sync()`` first to keep that progress. Raises
        ``ValueError`` if ``subscribe()`` was called: the two are mutually exclusive.
        """
        mqs = set(message_queues)
        if self.subscription_type is SubscriptionType.SUBSCRIBE:
            raise ValueError(
                f"{SUBSCRIPTION_CONFLICT} This consumer already subscribed to "
                f"{sorted(self.subscription_inner)} with subscribe(); it cannot also assign() queues."
            )
        if not mqs:
            raise ValueError("assign() needs at least one message queue")
        for mq in mqs:
            check_topic(mq.topic)
        parse_expression(expression)
        self.subscription_type = SubscriptionType.ASSIGN
        self._assign_expressions = {mq.topic: expression or SUB_ALL for mq in mqs}
        for mq in sorted(set(self.states) - mqs):
            self._drop_state(mq, record=self.running)
        for mq in sorted(mqs - set(self.states)):
            state = MessageQueueState(mq, ProcessQueue())
            self.states[mq] = state
            if self.running:
                self._record_queue_added(state)
                self._start_pull_task(state)

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return {mq for mq, state in self.states.items() if not state.dropped}

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Join (subscribe) or take the assigned queues, and start pulling."""
        if self.running:
            return
        if self._shut_down:
            raise RuntimeError("the consumer was shut down; create a new LitePullConsumer")
        if self.subscription_type is SubscriptionType.NONE:
            raise ValueError("no subscription: subscribe() or assign() first")
        subscribed = self.subscription_type is SubscriptionType.SUBSCRIBE
        await self.start_client(
            self.rebalance_mode,
            fenced=self.settings.handoff is Handoff.FENCED and self.clustering and subscribed,
        )
        try:
            if self.settings.auto_commit:
                self._auto_commit_task = asyncio.create_task(
                    self._auto_commit_loop(), name=f"{self.client_id}-{self.consumer_group}-commit"
                )
            for state in list(self.states.values()):
                self._record_queue_added(state)
                self._start_pull_task(state)
            await self.join(rebalance=subscribed)
        except BaseException:
            self.running = False
            await self._stop_tasks()
            await self.release_client()
            raise
        log.info(
            "the consumer started",
            group=self.consumer_group,
            client_id=self.client_id,
            message_model=self.message_model.value,
            subscription_type=self.subscription_type.value,
            strategy=self.settings.allocate_strategy.name,
            handoff=self.settings.handoff.value,
        )

    async def shutdown(self) -> None:
        """Stop pulling, commit (auto-commit) or persist the offsets, leave the group."""
        if not self.running:
            return
        self.running = False
        self._shut_down = True
        self._arrived.set()  # pollers waiting return what they have
        assert self.client is not None and self.rebalance_impl is not None
        await self.rebalance_impl.stop_taking_queues()  # what is committed below is all it has
        await self._stop_tasks()
        if self.settings.auto_commit:
            await self._commit_all()
        else:
            await self.persist_consumer_offset()
        for mq in sorted(self.states):
            self._drop_state(mq, record=self.subscription_type is SubscriptionType.ASSIGN)
        await self.leave()  # UNREGISTER_CLIENT (it was sent twice: here and in leave)
        log.info("the consumer shutdown", group=self.consumer_group, client_id=self.client_id)

    async def _stop_tasks(self) -> None:
        tasks: list[asyncio.Task[Any]] = []
        if self._auto_commit_task is not None:
            tasks.append(self._auto_commit_task)
            self._auto_commit_task = None
        for state in self.states.values():
            if state.task is not None:
                tasks.append(state.task)
                state.task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.cancel_side_tasks()

    # ---- polling ---------------------------------------------------------------------------
    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Up to ``pull_batch_size`` buffered messages, waiting up to ``timeout`` seconds.

        ``timeout`` defaults to ``poll_timeout_ms``. Returns ``[]`` when nothing arrived in
        time or the consumer is shutting down. With ``auto_commit`` the messages returned count
        as consumed: the next commit moves past them.
        """
        if not self.running:
            raise RuntimeError("The consumer not running, please start it first.")
        wait_s = self.settings.poll_timeout_ms / 1000 if timeout is None else max(timeout, 0.0)
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            msgs = self._take(self.settings.pull_batch_size)
            if msgs or not self.running:
                return msgs
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return []
            self._arrived.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._arrived.wait()
            except TimeoutError:
                return self._take(self.settings.pull_batch_size) if self.running else []

    def _take(self, limit: int) -> list[MessageExt]:
        """Take up to ``limit`` buffered messages, visiting the queues in turn from a cursor."""
        states = [
            s
            for s in self.states.values()
            if s.buffer and not s.paused and not s.dropped and not s.process_queue.suspended
        ]
        if not states:
            return []
        self._poll_cursor = (self._poll_cursor + 1) % len(states)
        states = states[self._poll_cursor :] + states[: self._poll_cursor]
        result: list[MessageExt] = []
        for state in states:
            if len(result) >= limit:
                break
            taken = [
                state.buffer.popleft() for _ in range(min(limit - len(result), len(state.buffer)))
            ]
            next_offset = state.process_queue.remove_message(taken)
            state.consume_offset = max(next_offset, taken[-1].queue_offset + 1)
            result.extend(taken)
            if tracer.enabled:
                for m in taken:
                    tracer.record(
                        "consumed",
                        group=self.consumer_group,
                        client_id=self.client_id,
                        mq=str(state.message_queue),
                        offset=m.queue_offset,
                        msg_id=m.msg_id,
                    )
        return result

    async def iterate(self) -> AsyncIterator[MessageExt]:
        while self.running:
            for msg in await self.poll():
                yield msg

    # ---- pause, resume, seek -----------------------------------------------------------------
    def pause(self, message_queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these assigned queues; ``poll()`` returns nothing from them meanwhile.

        Queues not assigned are ignored (as in RocketMQ); a queue the rebalance gives again
        later starts unpaused.
        """
        for mq in message_queues:
            state = self.states.get(mq)
            if state is not None:
                state.paused = True
                state.resumed.clear()

    def resume(self, message_queues: Iterable[MessageQueue]) -> None:
        """Pull and deliver these queues again."""
        for mq in message_queues:
            state = self.states.get(mq)
            if state is not None and state.paused:
                state.paused = False
                state.resumed.set()
        self._arrived.set()

    def paused(self) -> set[MessageQueue]:
        return {mq for mq, s in self.states.items() if s.paused}

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next messages of ``mq`` start at ``offset``; buffered ones are discarded.

        Async because it asks the broker for the queue's bounds: ``offset`` must lie within
        [min offset, max offset] (the max is the next offset to be written), else
        ``ValueError`` names the bounds. ``mq`` must be assigned (``ValueError`` otherwise).
        The consumed offset is left as it is (as in RocketMQ): the next ``poll()`` moves it.
        """
        self._assigned_state(mq)
        low, high = await asyncio.gather(self.min_offset(mq), self.max_offset(mq))
        if not low <= offset <= high:
            raise ValueError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                f"max offset = {high} ({mq})"
            )
        self._seek_now(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Seek to the queue's min offset (its oldest message still stored)."""
        self._assigned_state(mq)
        self._seek_now(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Seek to the queue's max offset: only messages stored from now on are polled."""
        self._assigned_state(mq)
        self._seek_now(mq, await self.max_offset(mq))

    def _assigned_state(self, mq: MessageQueue) -> MessageQueueState:
        if not self.running:
            raise RuntimeError("The consumer not running, please start it first.")
        state = self.states.get(mq)
        if state is None or state.dropped:
            raise ValueError(
                f"The message queue is not in assigned list, may be rebalancing: {mq}; "
                f"assigned: {sorted(str(m) for m in self.assignment())}"
            )
        return state

    def _seek_now(self, mq: MessageQueue, offset: int) -> None:
        """Restart ``mq``'s pull task at ``offset``, synchronously (no pull lands in between)."""
        state = self._assigned_state(mq)  # again: the queue may have gone during the RPCs
        old = state.task
        if old is not None:
            old.cancel()
            self.track(old)
        state.task = None
        state.buffer.clear()
        state.process_queue.clear()
        state.pull_offset = offset
        log.info("seek", group=self.consumer_group, mq=str(mq), offset=offset)
        self._start_pull_task(state)

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the oldest offset still stored in ``mq``."""
        return await self.queue_offset(mq, "GetMinOffset")

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``mq`` will get."""
        return await self.queue_offset(mq, "GetMaxOffset")

    # ---- offsets ---------------------------------------------------------------------------
    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit now: every assigned queue's consumed offset, or the given ``offsets``.

        One UPDATE_CONSUMER_OFFSET per broker (a file write for BROADCASTING). Given
        ``offsets`` must be of assigned queues and not negative (``ValueError`` otherwise).
        """
        if not self.running:
            raise RuntimeError("The consumer not running, please start it first.")
        if offsets is None:
            await self._commit_all(only_changed=False)  # asked for: every offset, as RocketMQ
            return
        bad = {mq: o for mq, o in offsets.items() if o < 0}
        if bad:
            raise ValueError(f"offsets must not be negative: {bad}")
        unassigned = sorted(mq for mq in offsets if mq not in self.assignment())
        if unassigned:
            raise ValueError(
                f"cannot commit queues not assigned to this consumer: {[str(m) for m in unassigned]}"
            )
        assert self.offset_store is not None
        for mq, offset in offsets.items():
            self.offset_store.update_offset(mq, offset, increase_only=False)
        await self.offset_store.persist_many(sorted(offsets))

    async def _commit_all(self, *, only_changed: bool = True) -> None:
        """RocketMQ's ``commitAll``: consumed offsets into the store, then persist them (the
        timers: only those the brokers are not known to have)."""
        store = self.offset_store
        if store is None:
            return
        mqs: set[MessageQueue] = set()
        for mq, state in list(self.states.items()):
            if state.dropped:
                continue
            mqs.add(mq)
            if state.consume_offset >= 0:
                store.update_offset(mq, state.consume_offset, increase_only=False)
        await store.persist_all(mqs, only_changed=only_changed)

    async def _auto_commit_loop(self) -> None:
        interval = self.settings.auto_commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._commit_all()
            except Exception:
                log.exception("auto commit failed", group=self.consumer_group)

    async def committed(self, mq: MessageQueue) -> int:
        """The offset committed for ``mq`` (read from the broker, or the file when BROADCASTING).

        -1 when none is known. Where no offset was committed on a young queue the broker
        answers 0 (spec 5.3), as RocketMQ's does.
        """
        if not self.running or self.offset_store is None:
            raise RuntimeError("The consumer not running, please start it first.")
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    # ---- what the client instance asks (ConsumerInner) ---------------------------------------
    def subscribed_topics(self) -> set[str]:
        """The topics whose routes the client instance keeps (subscribed or assigned)."""
        if self.subscription_type is SubscriptionType.ASSIGN:
            return {mq.topic for mq in self.states}
        return set(self.subscription_inner)

    async def do_rebalance(self) -> bool:
        """Subscribe mode only: the group's rebalance, then forget queues it truncated."""
        if (
            not self.running
            or self.rebalance_impl is None
            or self.subscription_type is not SubscriptionType.SUBSCRIBE
        ):
            return True
        balanced = await self.rebalance_impl.do_rebalance(is_order=False)
        for mq in sorted(mq for mq, s in self.states.items() if s.dropped):
            self._drop_state(mq, record=False)
        return balanced

    async def remove_unnecessary_message_queues(
        self, mqs: list[MessageQueue], epochs: Mapping[MessageQueue, int] | None = None
    ) -> None:
        """Dropped queues: fenced, release each with its final offset (``epochs``: the grant
        each process queue was consumed under); else persist and forget.

        The final offset is what ``poll`` handed out when auto-commit is on (ours: RocketMQ
        persists only what the last ``commitAll`` moved into the store), else what was
        committed.
        """
        store = self.offset_store
        assert store is not None
        finals: list[tuple[MessageQueue, int]] = []
        for mq in mqs:
            state = self.states.get(mq)
            if self.settings.auto_commit and state is not None and state.consume_offset >= 0:
                store.update_offset(mq, state.consume_offset, increase_only=False)
            finals.append((mq, await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)))
        if self.fenced is not None:
            await self.release_fenced(finals, epochs)
        else:
            await self.persist_and_forget(mqs)

    async def persist_consumer_offset(self) -> None:
        """The client instance's timer: persist what the store holds for the assigned queues."""
        if self.offset_store is None:
            return
        await self.offset_store.persist_all(self.assignment())

    async def pull_message(self, request: PullRequest) -> None:
        """Lite pull never dispatches to the ``PullMessageService``; its own tasks pull."""
        return None

    def broker_reconnected(
        self, broker_name: str, held: dict[MessageQueue, int] | None = None
    ) -> None:
        super().broker_reconnected(broker_name, held)
        self._arrived.set()  # queues held back may have messages for a waiting poll()

    def on_queue_released(self, mq: MessageQueue) -> None:
        if self.client is not None:
            self.client.rebalance_immediately()

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: every assigned queue seeks to its new offset, and
        its consumed offset goes there too (what was buffered is discarded)."""
        for mq, offset in sorted(offsets.items()):
            state = self.states.get(mq)
            if state is not None and not state.dropped and self.running:
                self._seek_now(mq, offset)
                state.consume_offset = offset

    # ---- the assigned queues ---------------------------------------------------------------
    def on_message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """updateAssignQueueAndStartPullTask: CLUSTERING takes mq_divided, BROADCASTING mq_all."""
        if self.running and mq_all and self.rebalance_impl is not None:
            target = mq_all if self.message_model is MessageModel.BROADCASTING else mq_divided
            table = self.rebalance_impl.process_queue_table
            for mq in sorted(mq for mq in self.states if mq.topic == topic and mq not in target):
                self._drop_state(mq, record=False)  # RebalanceImpl recorded queue_dropped
            for mq in sorted(target - set(self.states)):
                pq = table.get(mq)
                if pq is None or pq.dropped:
                    continue  # the rebalance could not add it yet (offset unknown)
                state = MessageQueueState(
                    mq, pq, pull_offset=self.rebalance_mode.start_offsets.pop(mq, -1)
                )
                self.states[mq] = state
                self._start_pull_task(state)
        if self.settings.message_queue_listener is not None:
            try:
                self.settings.message_queue_listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception(
                    "messageQueueChanged listener failed", group=self.consumer_group, topic=topic
                )

    def _drop_state(self, mq: MessageQueue, *, record: bool) -> None:
        """Forget ``mq``: mark it dropped, cancel its pull task, discard its buffer."""
        state = self.states.pop(mq, None)
        if state is None:
            return
        state.process_queue.dropped = True
        state.buffer.clear()
        state.resumed.set()
        if state.task is not None:
            state.task.cancel()
            self.track(state.task)
            state.task = None
        if record:
            tracer.record(
                "queue_dropped", group=self.consumer_group, client_id=self.client_id, mq=str(mq)
            )

    def _record_queue_added(self, state: MessageQueueState) -> None:
        """Assign mode: RebalanceImpl records queue_added in subscribe mode."""
        tracer.record(
            "queue_added",
            group=self.consumer_group,
            client_id=self.client_id,
            mq=str(state.message_queue),
            offset=state.pull_offset,
            epoch=0,
        )

    def _start_pull_task(self, state: MessageQueueState) -> None:
        if not self.running or state.dropped or state.task is not None:
            return
        state.task = asyncio.create_task(
            self._pull_task(state), name=f"{self.client_id}-pull-{state.message_queue}"
        )

    # ---- pulling (PullTaskImpl) --------------------------------------------------------------
    def _flow_controlled(self, state: MessageQueueState) -> str | None:
        total = sum(s.process_queue.msg_count for s in self.states.values())
        if total > self.settings.pull_threshold_for_all:
            return "the consume request count exceeds threshold"
        reason = flow_control_reason(
            state.process_queue,
            pull_threshold_for_queue=self.settings.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.settings.pull_threshold_size_for_queue,
            consume_concurrently_max_span=self.settings.consume_max_span,
        )
        return None if reason is None else reason.value

    def _subscription(self, topic: str) -> tuple[str, int, bool]:
        """(expression, sub_version, has_subscription) for pulls of ``topic``."""
        if self.subscription_type is SubscriptionType.ASSIGN:
            return self._assign_expressions.get(topic, SUB_ALL), 0, True
        expression, version = self.subscription_inner.get(topic, (SUB_ALL, 0))
        return expression, version, False

    async def _pull_task(self, state: MessageQueueState) -> None:
        """Pull ``state``'s queue until it is dropped or the task cancelled."""
        mq = state.message_queue
        pq = state.process_queue
        exception_delay = self.settings.pull_time_delay_ms_when_exception / 1000
        while self.running and not pq.dropped:
            if state.paused:
                await state.resumed.wait()
                continue
            reason = self._flow_controlled(state)
            if reason is not None:
                log.debug("pull flow control", reason=reason, mq=str(mq))
                await asyncio.sleep(PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL / 1000)
                continue
            if state.pull_offset < 0:
                offset = await self.compute_pull_from_where(
                    mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE
                )
                if offset < 0:
                    await asyncio.sleep(exception_delay)
                    continue
                state.pull_offset = offset
            expression, sub_version, has_subscription = self._subscription(mq.topic)
            try:
                assert self.pull_api is not None
                result = await self.pull_api.pull_kernel(
                    mq,
                    state.pull_offset,
                    max_nums=self.settings.pull_batch_size,
                    expression=parse_expression(expression),
                    sub_version=sub_version,
                    suspend_timeout_ms=self.settings.broker_suspend_max_time_ms,
                    timeout_ms=self.settings.consumer_pull_timeout_ms,
                    has_subscription=has_subscription,
                    epoch=pq.epoch,
                    min_nums=self.settings.pull_min_batch_size,
                    max_wait_ms=self.settings.pull_max_wait_ms,
                )
            except QueueFenced as e:
                if await self.on_pull_fenced(mq, pq, e):
                    self._drop_state(mq, record=False)
                return
            except MQError as e:
                delay = (
                    PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL / 1000
                    if e.response_code is ResponseCode.FLOW_CONTROL
                    else exception_delay
                )
                log.debug(
                    "pull message failed", group=self.consumer_group, mq=str(mq), error=str(e)
                )
                await asyncio.sleep(delay)
                await self.refresh_route_if_unknown(mq)
                continue
            except Exception:
                log.exception("pull task failed", group=self.consumer_group, mq=str(mq))
                await asyncio.sleep(exception_delay)
                continue
            if pq.dropped or not self.running:
                return
            self._on_pull_result(state, result)

    def _on_pull_result(self, state: MessageQueueState, result: PullResult) -> None:
        mq = state.message_queue
        status = result.status
        if status == FOUND:
            msgs = result.msgs_found
            state.pull_offset = result.next_begin_offset
            if msgs:
                state.process_queue.put_message(msgs)
                state.buffer.extend(msgs)
                self.record_pull(mq, msgs, state.pull_offset)
                self._arrived.set()
        elif status in (NO_NEW_MSG, NO_MATCHED_MSG):
            state.pull_offset = result.next_begin_offset
            # Nothing waits to be polled: everything before the next pull offset is consumed
            # (or filtered out), so a commit may move there (push's correctTagsOffset).
            if not state.buffer and state.consume_offset < state.pull_offset:
                state.consume_offset = state.pull_offset
        else:  # OFFSET_ILLEGAL: lite pull moves to the broker's suggestion and goes on (4.5)
            log.warning(
                "The pull request offset illegal",
                group=self.consumer_group,
                mq=str(mq),
                offset=state.pull_offset,
                next_begin_offset=result.next_begin_offset,
                min_offset=result.min_offset,
                max_offset=result.max_offset,
            )
            state.pull_offset = result.next_begin_offset
