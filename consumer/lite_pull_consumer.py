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
store and persists them: ``commit_sync()`` at once, and every ``auto_commit_interval_millis``
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
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any

from aiorocketmq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from aiorocketmq.consumer.client_config import ClientConfig, check_consumer_settings
from aiorocketmq.consumer.client_instance import (
    MQClientInstance,
    MQClientManager,
    consumer_client_id,
)
from aiorocketmq.consumer.fenced import FencedHandoff
from aiorocketmq.consumer.offset_store import (
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    new_offset_store,
)
from aiorocketmq.consumer.process_queue import ProcessQueue, flow_control_reason
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.rebalance_impl import RebalanceImpl
from aiorocketmq.consumer.types import ConsumeFromWhere, MessageModel, MessageQueueListener
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.client_id import local_ip
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQError, QueueFenced
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.tags import SUB_ALL, SubscriptionExpression, parse_expression
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import check_topic, is_retry_topic
from aiorocketmq.trace import tracer

__all__ = ["LitePullConsumer", "MessageQueueState", "RebalanceLitePullImpl", "SubscriptionType"]

log = get_logger("aiorocketmq.consumer.lite_pull")

PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
MIN_AUTOCOMMIT_INTERVAL_MILLIS = 1_000
CONSUME_MAX_SPAN = 2_000

SUBSCRIPTION_CONFLICT = "Subscribe and assign are mutually exclusive."


def _now_ms() -> int:
    return int(time.time() * 1000)


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


class RebalanceLitePullImpl:
    """The lite-pull ``RebalanceMode`` of ``RebalanceImpl`` (RocketMQ's RebalanceLitePullImpl)."""

    def __init__(self, consumer: LitePullConsumer) -> None:
        self.consumer = consumer
        # The start offsets the rebalance computed for queues it just added; the pull tasks
        # started by message_queue_changed take them from here.
        self.start_offsets: dict[MessageQueue, int] = {}

    @property
    def is_push(self) -> bool:
        return False  # CONSUME_ACTIVELY: the pull-expired rule never fires

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return (await self.remove_unnecessary_message_queues([(mq, pq)]))[0]

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        """Persist the dropped queues' offsets (one commit per broker), then forget them.

        Fenced: release each grant with its final offset (what ``poll`` handed out, with
        auto-commit; else what was committed), which the broker commits with the release.
        """
        store = self.consumer.offset_store
        assert store is not None
        mqs = [mq for mq, _ in items]
        fenced = self.consumer.fenced
        impl = self.consumer.rebalance_impl
        if fenced is not None and impl is not None and isinstance(store, RemoteBrokerOffsetStore):
            releases = []
            for mq in mqs:
                state = self.consumer._states.get(mq)
                final = await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
                if self.consumer.auto_commit and state is not None and state.consume_offset >= 0:
                    final = state.consume_offset
                epoch = impl.epochs.get(mq) or store.epochs.get(mq, 0)
                if epoch:
                    releases.append((mq, epoch, final))
            if releases:
                await fenced.release(releases)
            for mq in mqs:
                store.remove_offset(mq)
                store.epochs.pop(mq, None)
                self.start_offsets.pop(mq, None)
            return [True] * len(items)
        if self.consumer.auto_commit:
            for mq in mqs:
                state = self.consumer._states.get(mq)
                if state is not None and state.consume_offset >= 0:
                    store.update_offset(mq, state.consume_offset, increase_only=False)
        await store.persist_many(mqs)
        for mq in mqs:
            store.remove_offset(mq)
            self.start_offsets.pop(mq, None)
        return [True] * len(items)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The start of a newly assigned queue; -1 (retry at a later rebalance) when unknown."""
        store = self.consumer.offset_store
        assert store is not None
        store.remove_offset(mq)  # removeDirtyOffset
        return await self.consumer._compute_pull_from_where(mq)

    async def lock(self, mq: MessageQueue) -> bool:
        return True  # lite pull never locks

    async def acquire(self, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, int]] | None:
        """Fenced: the broker's grants (epoch, committed offset) for ``mqs``; None when classic."""
        fenced = self.consumer.fenced
        store = self.consumer.offset_store
        if fenced is None or not isinstance(store, RemoteBrokerOffsetStore):
            return None
        grants = await fenced.acquire(mqs)
        for mq, (epoch, committed) in grants.items():
            store.epochs[mq] = epoch
            if committed >= 0:
                store.update_offset(mq, committed, increase_only=False)
        return grants

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        """Lite pull dispatches nothing here; it keeps the start offsets for its pull tasks."""
        for request in requests:
            self.start_offsets[request.message_queue] = request.next_offset

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        self.consumer._on_message_queue_changed(topic, mq_all, mq_divided)


class LitePullConsumer:
    """An async lite pull consumer: ``subscribe`` or ``assign``, ``await start()``, ``poll``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        instance_name: str | None = None,
        client_ip: str | None = None,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_all: int = 10_000,
        consume_max_span: int = CONSUME_MAX_SPAN,
        poll_timeout_millis: int = 5_000,
        auto_commit: bool = True,
        auto_commit_interval_millis: int = 5_000,
        broker_suspend_max_time_millis: int = 20_000,
        consumer_pull_timeout_millis: int = 30_000,
        pull_time_delay_mills_when_exception: int = 1_000,
        handoff: str = "classic",
        client_config: ClientConfig | None = None,
        offset_store_dir: Path | None = None,
        message_queue_listener: MessageQueueListener | None = None,
    ) -> None:
        check_consumer_settings(
            group,
            handoff,
            (
                ("pull_batch_size", pull_batch_size, 1, 1024),
                ("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535),
                ("pull_threshold_size_for_queue", pull_threshold_size_for_queue, 1, 1024),
                ("pull_threshold_for_all", pull_threshold_for_all, 1, 2**31 - 1),
                ("consume_max_span", consume_max_span, 1, 65535),
                ("poll_timeout_millis", poll_timeout_millis, 0, 2**31 - 1),
                (
                    "pull_time_delay_mills_when_exception",
                    pull_time_delay_mills_when_exception,
                    0,
                    2**31 - 1,
                ),
            ),
        )
        if auto_commit_interval_millis < MIN_AUTOCOMMIT_INTERVAL_MILLIS:
            raise ValueError(
                f"auto_commit_interval_millis must be >= {MIN_AUTOCOMMIT_INTERVAL_MILLIS}, "
                f"got {auto_commit_interval_millis}"
            )
        if consumer_pull_timeout_millis <= broker_suspend_max_time_millis:
            raise ValueError(
                "Long polling mode, the consumer consumer_pull_timeout_millis "
                f"({consumer_pull_timeout_millis}) must be greater than "
                f"broker_suspend_max_time_millis ({broker_suspend_max_time_millis})"
            )
        self.consumer_group = group
        self.namesrv_addr = namesrv_addr
        self.message_model = message_model
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or time.strftime(
            "%Y%m%d%H%M%S", time.localtime(time.time() - 30 * 60)
        )
        self.instance_name = instance_name
        self.client_ip = client_ip or local_ip()
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_max_span = consume_max_span
        self.poll_timeout_millis = poll_timeout_millis
        self.auto_commit = auto_commit
        self.auto_commit_interval_millis = auto_commit_interval_millis
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_pull_timeout_millis = consumer_pull_timeout_millis
        self.pull_time_delay_mills_when_exception = pull_time_delay_mills_when_exception
        self.handoff = handoff
        self.fenced: FencedHandoff | None = None
        self.client_config = client_config
        self.offset_store_dir = offset_store_dir
        self.message_queue_listener = message_queue_listener

        self.subscription_type = SubscriptionType.NONE
        self._subscriptions: dict[str, tuple[str, int]] = {}  # topic -> (expression, version)
        self._assign_expressions: dict[str, str] = {}  # assign mode: topic -> expression
        self._states: dict[MessageQueue, MessageQueueState] = {}
        self._poll_cursor = 0
        self._arrived = asyncio.Event()
        self._client: MQClientInstance | None = None
        self.offset_store: OffsetStore | None = None
        self.rebalance_impl: RebalanceImpl | None = None
        self._rebalance_mode = RebalanceLitePullImpl(self)
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._side_tasks: set[asyncio.Task[Any]] = set()
        self.client_id = ""
        self.running = False
        self._shut_down = False

    # ---- subscription ----------------------------------------------------------------------
    @property
    def group_name(self) -> str:
        return self.consumer_group

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
        self._subscriptions[topic] = (expression or SUB_ALL, _now_ms())
        if self.rebalance_impl is not None:
            self.rebalance_impl.subscription_inner[topic] = self._subscriptions[topic]
        if self.running:
            self._spawn(self._subscribed_while_running(topic))

    async def _subscribed_while_running(self, topic: str) -> None:
        assert self._client is not None
        await self._client.update_topic_route_info_from_name_server(topic)
        await self._client.send_heartbeat_to_all_broker()
        self._client.rebalance_immediately()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues go at the next rebalance."""
        self._subscriptions.pop(topic, None)
        if self.rebalance_impl is not None:
            self.rebalance_impl.subscription_inner.pop(topic, None)
        if self.running and self._client is not None:
            self._client.rebalance_immediately()

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
                f"{sorted(self._subscriptions)} with subscribe(); it cannot also assign() queues."
            )
        if not mqs:
            raise ValueError("assign() needs at least one message queue")
        for mq in mqs:
            check_topic(mq.topic)
        parse_expression(expression)
        self.subscription_type = SubscriptionType.ASSIGN
        self._assign_expressions = {mq.topic: expression or SUB_ALL for mq in mqs}
        for mq in sorted(set(self._states) - mqs):
            self._drop_state(mq, record=self.running)
        for mq in sorted(mqs - set(self._states)):
            state = MessageQueueState(mq, ProcessQueue())
            self._states[mq] = state
            if self.running:
                self._record_queue_added(state)
                self._start_pull_task(state)

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return {mq for mq, state in self._states.items() if not state.dropped}

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Join (subscribe) or take the assigned queues, and start pulling."""
        if self.running:
            return
        if self._shut_down:
            raise RuntimeError("the consumer was shut down; create a new LitePullConsumer")
        if self.subscription_type is SubscriptionType.NONE:
            raise ValueError("no subscription: subscribe() or assign() first")
        self.client_id = consumer_client_id(
            self.client_ip, self.instance_name, self.message_model is MessageModel.CLUSTERING
        )
        client = MQClientManager.get_or_create(
            self.client_id, self.namesrv_addr, self.client_config
        )
        self._client = client
        try:
            self.offset_store = new_offset_store(
                self.message_model is MessageModel.BROADCASTING,
                self.consumer_group,
                self.client_id,
                client.invoke_broker,
                self.offset_store_dir,
            )
            await self.offset_store.load()
            if (
                self.handoff == "fenced"
                and self.message_model is MessageModel.CLUSTERING
                and self.subscription_type is SubscriptionType.SUBSCRIBE
            ):
                self.fenced = FencedHandoff(client, self.consumer_group)
            self.rebalance_impl = RebalanceImpl(
                self.consumer_group,
                self.message_model,
                self.allocate_strategy,
                client,
                self._rebalance_mode,
                fenced=self.fenced is not None,
            )
            self.rebalance_impl.subscription_inner.update(self._subscriptions)
            client.register_consumer(self)
            await client.start()
            self.running = True
            for topic in sorted(self.subscribed_topics()):
                await client.update_topic_route_info_from_name_server(topic)
            if self.auto_commit:
                self._auto_commit_task = asyncio.create_task(
                    self._auto_commit_loop(), name=f"{self.client_id}-{self.consumer_group}-commit"
                )
            for state in list(self._states.values()):
                self._record_queue_added(state)
                self._start_pull_task(state)
            heartbeat_sent = await client.send_heartbeat_to_all_broker()
            if heartbeat_sent and self.subscription_type is SubscriptionType.SUBSCRIBE:
                client.rebalance_immediately()
        except BaseException:
            self.running = False
            await self._stop_tasks()
            await self._release_client()
            raise
        log.info(
            "the consumer started",
            group=self.consumer_group,
            client_id=self.client_id,
            message_model=self.message_model.value,
            subscription_type=self.subscription_type.value,
            strategy=self.allocate_strategy.name,
            handoff=self.handoff,
        )

    async def shutdown(self) -> None:
        """Stop pulling, commit (auto-commit) or persist the offsets, leave the group."""
        if not self.running:
            return
        self.running = False
        self._shut_down = True
        self._arrived.set()  # pollers waiting return what they have
        assert self._client is not None and self.rebalance_impl is not None
        await self._stop_tasks()
        if self.auto_commit:
            await self._commit_all()
        else:
            await self.persist_consumer_offset()
        await self._client.unregister_consumer(self.consumer_group)
        for mq in sorted(self._states):
            self._drop_state(mq, record=self.subscription_type is SubscriptionType.ASSIGN)
        self.rebalance_impl.destroy()
        await self._release_client()
        log.info("the consumer shutdown", group=self.consumer_group, client_id=self.client_id)

    async def _stop_tasks(self) -> None:
        tasks: list[asyncio.Task[Any]] = [*self._side_tasks]
        if self._auto_commit_task is not None:
            tasks.append(self._auto_commit_task)
            self._auto_commit_task = None
        for state in self._states.values():
            if state.task is not None:
                tasks.append(state.task)
                state.task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._side_tasks.clear()

    async def _release_client(self) -> None:
        if self._client is not None:
            if self._client.consumer_table.get(self.consumer_group) is self:
                # Not another consumer's entry (a duplicate group fails register_consumer).
                del self._client.consumer_table[self.consumer_group]
            await MQClientManager.release(self.client_id)
            self._client = None

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    # ---- polling ---------------------------------------------------------------------------
    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Up to ``pull_batch_size`` buffered messages, waiting up to ``timeout`` seconds.

        ``timeout`` defaults to ``poll_timeout_millis``. Returns ``[]`` when nothing arrived in
        time or the consumer is shutting down. With ``auto_commit`` the messages returned count
        as consumed: the next commit moves past them.
        """
        if not self.running:
            raise RuntimeError("The consumer not running, please start it first.")
        wait_s = self.poll_timeout_millis / 1000 if timeout is None else max(timeout, 0.0)
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            msgs = self._take(self.pull_batch_size)
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
                return self._take(self.pull_batch_size) if self.running else []

    def _take(self, limit: int) -> list[MessageExt]:
        """Take up to ``limit`` buffered messages, visiting the queues in turn from a cursor."""
        states = [s for s in self._states.values() if s.buffer and not s.paused and not s.dropped]
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

    def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for msg in consumer``: each polled message, until ``shutdown()``.

        A batch counts as consumed when ``poll()`` returns it, so with ``auto_commit`` leaving
        the loop in the middle of a batch commits past the rest of that batch.
        """
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[MessageExt]:
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
            state = self._states.get(mq)
            if state is not None:
                state.paused = True
                state.resumed.clear()

    def resume(self, message_queues: Iterable[MessageQueue]) -> None:
        """Pull and deliver these queues again."""
        for mq in message_queues:
            state = self._states.get(mq)
            if state is not None and state.paused:
                state.paused = False
                state.resumed.set()
        self._arrived.set()

    def paused(self) -> set[MessageQueue]:
        return {mq for mq, s in self._states.items() if s.paused}

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
        state = self._states.get(mq)
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
            self._side_tasks.add(old)
            old.add_done_callback(self._side_tasks.discard)
        state.task = None
        state.buffer.clear()
        state.process_queue.clear()
        state.pull_offset = offset
        log.info("seek", group=self.consumer_group, mq=str(mq), offset=offset)
        self._start_pull_task(state)

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the oldest offset still stored in ``mq``."""
        return await self._queue_offset(mq, "GetMinOffset")

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``mq`` will get."""
        return await self._queue_offset(mq, "GetMaxOffset")

    async def _queue_offset(self, mq: MessageQueue, method: str) -> int:
        client = self._client
        if client is None:
            raise RuntimeError("The consumer not running, please start it first.")
        if client.find_broker_addr(mq.broker_name) is None:
            await client.update_topic_route_info_from_name_server(mq.topic)
        response = await client.invoke_broker(
            mq.broker_name,
            method,
            broker_pb2.QueueOffsetRequest(topic=mq.topic, queue_id=mq.queue_id),
        )
        return int(response.offset)

    # ---- offsets ---------------------------------------------------------------------------
    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit now: every assigned queue's consumed offset, or the given ``offsets``.

        One UPDATE_CONSUMER_OFFSET per broker (a file write for BROADCASTING). Given
        ``offsets`` must be of assigned queues and not negative (``ValueError`` otherwise).
        """
        if not self.running:
            raise RuntimeError("The consumer not running, please start it first.")
        if offsets is None:
            await self._commit_all()
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

    async def _commit_all(self) -> None:
        """RocketMQ's ``commitAll``: consumed offsets into the store, then persist them."""
        store = self.offset_store
        if store is None:
            return
        mqs: set[MessageQueue] = set()
        for mq, state in list(self._states.items()):
            if state.dropped:
                continue
            mqs.add(mq)
            if state.consume_offset >= 0:
                store.update_offset(mq, state.consume_offset, increase_only=False)
        await store.persist_all(mqs)

    async def _auto_commit_loop(self) -> None:
        interval = self.auto_commit_interval_millis / 1000
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

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        """RebalanceLitePullImpl.computePullFromWhere: like push, but -1 instead of raising."""
        store = self.offset_store
        client = self._client
        assert store is not None and client is not None
        last = await store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1
        try:
            if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
                return 0 if is_retry_topic(mq.topic) else await self.max_offset(mq)
            if is_retry_topic(mq.topic):
                return await self.max_offset(mq)
            stamp = int(time.mktime(time.strptime(self.consume_timestamp, "%Y%m%d%H%M%S")) * 1000)
            response = await client.invoke_broker(
                mq.broker_name,
                "SearchOffsetByTimestamp",
                broker_pb2.SearchOffsetRequest(
                    topic=mq.topic, queue_id=mq.queue_id, timestamp=stamp
                ),
            )
            return int(response.offset)
        except MQError as e:
            log.warning("compute pull from where failed", mq=str(mq), error=str(e))
            return -1

    # ---- what the client instance asks (ConsumerInner) ---------------------------------------
    def consumer_data(self) -> common_pb2.ConsumerData:
        """The heartbeat's entry: CONSUME_ACTIVELY, and the subscriptions (none when assigned)."""
        data = common_pb2.ConsumerData(
            group_name=self.consumer_group,
            consume_type=common_pb2.CONSUME_ACTIVELY,
            message_model=self.message_model.to_proto(),
            consume_from_where=self.consume_from_where.to_proto(),
        )
        inner = self.rebalance_impl.subscription_inner if self.rebalance_impl else {}
        for topic, (expression, version) in sorted(inner.items()):
            parsed = parse_expression(expression)
            data.subscription_data_set.add(
                topic=topic,
                sub_string=parsed.sub_string,
                tags_set=sorted(parsed.tags_set),
                code_set=sorted(parsed.code_set),
                sub_version=version,
                expression_type="TAG",
            )
        return data

    def subscribed_topics(self) -> set[str]:
        """The topics whose routes the client instance keeps (subscribed or assigned)."""
        if self.subscription_type is SubscriptionType.ASSIGN:
            return {mq.topic for mq in self._states}
        if self.rebalance_impl is not None:
            return set(self.rebalance_impl.subscription_inner)
        return set(self._subscriptions)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self.rebalance_impl is not None and topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = mqs

    async def do_rebalance(self) -> bool:
        """Subscribe mode only: the group's rebalance, then forget queues it truncated."""
        if (
            not self.running
            or self.rebalance_impl is None
            or self.subscription_type is not SubscriptionType.SUBSCRIBE
        ):
            return True
        balanced = await self.rebalance_impl.do_rebalance(is_order=False)
        for mq in sorted(mq for mq, s in self._states.items() if s.dropped):
            self._drop_state(mq, record=False)
        return balanced

    async def persist_consumer_offset(self) -> None:
        """The client instance's timer: persist what the store holds for the assigned queues."""
        if self.offset_store is None:
            return
        await self.offset_store.persist_all(self.assignment())

    async def pull_message(self, request: PullRequest) -> None:
        """Lite pull never dispatches to the ``PullMessageService``; its own tasks pull."""
        return None

    def on_queue_released(self, mq: MessageQueue) -> None:
        if self._client is not None:
            self._client.rebalance_immediately()

    # ---- the assigned queues ---------------------------------------------------------------
    def _on_message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """updateAssignQueueAndStartPullTask: CLUSTERING takes mq_divided, BROADCASTING mq_all."""
        if self.running and mq_all and self.rebalance_impl is not None:
            target = mq_all if self.message_model is MessageModel.BROADCASTING else mq_divided
            table = self.rebalance_impl.process_queue_table
            for mq in sorted(mq for mq in self._states if mq.topic == topic and mq not in target):
                self._drop_state(mq, record=False)  # RebalanceImpl recorded queue_dropped
            for mq in sorted(target - set(self._states)):
                pq = table.get(mq)
                if pq is None or pq.dropped:
                    continue  # the rebalance could not add it yet (offset unknown)
                state = MessageQueueState(
                    mq, pq, pull_offset=self._rebalance_mode.start_offsets.pop(mq, -1)
                )
                self._states[mq] = state
                self._start_pull_task(state)
        if self.message_queue_listener is not None:
            try:
                self.message_queue_listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception(
                    "messageQueueChanged listener failed", group=self.consumer_group, topic=topic
                )

    def _drop_state(self, mq: MessageQueue, *, record: bool) -> None:
        """Forget ``mq``: mark it dropped, cancel its pull task, discard its buffer."""
        state = self._states.pop(mq, None)
        if state is None:
            return
        state.process_queue.dropped = True
        state.buffer.clear()
        state.resumed.set()
        if state.task is not None:
            state.task.cancel()
            self._side_tasks.add(state.task)
            state.task.add_done_callback(self._side_tasks.discard)
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
        total = sum(s.process_queue.msg_count for s in self._states.values())
        if total > self.pull_threshold_for_all:
            return "the consume request count exceeds threshold"
        reason = flow_control_reason(
            state.process_queue,
            pull_threshold_for_queue=self.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
            consume_concurrently_max_span=self.consume_max_span,
        )
        return None if reason is None else reason.value

    def _subscription(self, topic: str) -> tuple[str, int, bool]:
        """(expression, sub_version, has_subscription) for pulls of ``topic``."""
        if self.subscription_type is SubscriptionType.ASSIGN:
            return self._assign_expressions.get(topic, SUB_ALL), 0, True
        expression, version = self._subscriptions.get(topic, (SUB_ALL, 0))
        return expression, version, False

    async def _pull_task(self, state: MessageQueueState) -> None:
        """Pull ``state``'s queue until it is dropped or the task cancelled."""
        mq = state.message_queue
        pq = state.process_queue
        exception_delay = self.pull_time_delay_mills_when_exception / 1000
        while self.running and not pq.dropped:
            if state.paused:
                await state.resumed.wait()
                continue
            reason = self._flow_controlled(state)
            if reason is not None:
                log.debug("pull flow control", reason=reason, mq=str(mq))
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL / 1000)
                continue
            if state.pull_offset < 0:
                await self._refresh_route_if_unknown(mq)
                offset = await self._compute_pull_from_where(mq)
                if offset < 0:
                    await asyncio.sleep(exception_delay)
                    continue
                state.pull_offset = offset
            expression, sub_version, has_subscription = self._subscription(mq.topic)
            try:
                result = await self._pull(
                    mq, state.pull_offset, expression, sub_version, has_subscription
                )
            except QueueFenced as e:
                # Fenced handoff: the queue moved on; stop pulling it at once.
                if not pq.dropped and self.rebalance_impl is not None and self._client is not None:
                    log.warning(
                        "pull fenced, dropping the queue",
                        group=self.consumer_group,
                        mq=str(mq),
                        error=e.message,
                    )
                    await self.rebalance_impl.remove_process_queue(mq)
                    self._drop_state(mq, record=False)
                    self._client.rebalance_immediately()
                return
            except MQError as e:
                delay = (
                    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL / 1000
                    if e.response_code is ResponseCode.FLOW_CONTROL
                    else exception_delay
                )
                log.debug(
                    "pull message failed", group=self.consumer_group, mq=str(mq), error=str(e)
                )
                await asyncio.sleep(delay)
                await self._refresh_route_if_unknown(mq)
                continue
            except Exception:
                log.exception("pull task failed", group=self.consumer_group, mq=str(mq))
                await asyncio.sleep(exception_delay)
                continue
            if pq.dropped or not self.running:
                return
            self._on_pull_result(state, result, parse_expression(expression))

    async def _pull(
        self,
        mq: MessageQueue,
        offset: int,
        expression: str,
        sub_version: int,
        has_subscription: bool,
    ) -> broker_pb2.PullMessageResponse:
        assert self._client is not None
        epoch = self.rebalance_impl.epochs.get(mq, 0) if self.rebalance_impl else 0
        request = broker_pb2.PullMessageRequest(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=self.pull_batch_size,
            suspend=True,
            suspend_timeout_millis=self.broker_suspend_max_time_millis,
            has_subscription=has_subscription,
            sub_expression=expression if has_subscription else "",
            expression_type="TAG",
            sub_version=sub_version,
            epoch=epoch,
            client_id=self.client_id,
        )
        result: broker_pb2.PullMessageResponse = await self._client.invoke_broker(
            mq.broker_name,
            "PullMessage",
            request,
            timeout=self.consumer_pull_timeout_millis / 1000,
        )
        return result

    async def _refresh_route_if_unknown(self, mq: MessageQueue) -> None:
        client = self._client
        if client is not None and client.find_broker_addr(mq.broker_name) is None:
            await client.update_topic_route_info_from_name_server(mq.topic)

    def _on_pull_result(
        self,
        state: MessageQueueState,
        result: broker_pb2.PullMessageResponse,
        expression: SubscriptionExpression,
    ) -> None:
        mq = state.message_queue
        status = result.status
        if status == broker_pb2.FOUND:
            msgs = [MessageExt.from_proto(m) for m in result.messages]
            if not expression.matches_all:
                msgs = [m for m in msgs if expression.matches_tags(m.tags)]
            state.pull_offset = result.next_begin_offset
            if msgs:
                state.process_queue.put_message(msgs)
                state.buffer.extend(msgs)
                tracer.record(
                    "pull",
                    group=self.consumer_group,
                    client_id=self.client_id,
                    mq=str(mq),
                    count=len(msgs),
                    first=msgs[0].queue_offset,
                    next=state.pull_offset,
                )
                self._arrived.set()
        elif status in (broker_pb2.NO_NEW_MSG, broker_pb2.NO_MATCHED_MSG):
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
