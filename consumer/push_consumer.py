"""``PushConsumer``: RocketMQ's DefaultMQPushConsumer, end to end.

The path from joining to the first message (docs/protocol.md draws it):
``start()`` registers the group with the client instance, fetches the routes, sends a
heartbeat (which opens the channel stream to each broker and makes each broker notify the
group) and wakes the rebalance. ``RebalanceImpl`` allocates queues; each new queue gets a
``ProcessQueue`` and a ``PullRequest``; ``pull_message`` pulls (long-polling, through the
shared ``PullAPIWrapper``) and hands what it found to the consume service, which calls the
listener and moves the committed offset. ``shutdown()`` persists offsets and unregisters (the
brokers notify the group).

Three objects, as in RocketMQ: ``PushConsumer`` is the user's API; ``PushConsumerImpl`` (a
``ConsumerCore``) is what the client instance drives, with the pull requests, the consume
services and the orderly locks; ``RebalancePushImpl`` is the push mode of ``RebalanceImpl``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from aiorocketmq.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from aiorocketmq.consumer.consume_orderly import ConsumeMessageOrderlyService
from aiorocketmq.consumer.consumer_core import (
    ConsumerAPI,
    ConsumerCore,
    RebalanceModeBase,
    now_ms,
)
from aiorocketmq.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from aiorocketmq.consumer.process_queue import ProcessQueue, flow_control_reason
from aiorocketmq.consumer.pull_api import FOUND, NO_MATCHED_MSG, NO_NEW_MSG, PullResult
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.settings import (
    Handoff,
    PushConsumerSettings,
    build_settings,
    check_group_name,
)
from aiorocketmq.consumer.types import (
    MessageListenerConcurrently,
    MessageListenerOrderly,
)
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQError, QueueFenced
from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.tags import parse_expression
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import check_topic, is_retry_topic, retry_topic
from aiorocketmq.trace import tracer

__all__ = ["PushConsumer", "PushConsumerImpl", "RebalancePushImpl"]

log = get_logger("aiorocketmq.consumer")

PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MS_WHEN_SUSPEND = 1_000


class PushConsumer(ConsumerAPI):
    """An async push consumer: subscribe, register a listener, ``await start()``.

    ``settings`` (a ``PushConsumerSettings``) and keyword options configure it; every option
    is documented there with its unit, default and RocketMQ's name::

        consumer = PushConsumer("G", "127.0.0.1:9876", pull_batch_size=64)
        consumer.subscribe("TopicTest", "TagA || TagB")
        consumer.register_message_listener(on_messages)
        async with consumer:
            ...
    """

    settings: PushConsumerSettings
    _impl: PushConsumerImpl

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        settings: PushConsumerSettings | None = None,
        **options: Any,
    ) -> None:
        check_group_name(group)
        self.settings = build_settings(PushConsumerSettings, settings, options)
        self._impl = PushConsumerImpl(group, namesrv_addr, self.settings)

    # ---- state a user (or a test) may read: see ConsumerAPI -----------------------------------
    @property
    def on_consumed(self) -> Callable[[MessageQueue, list[MessageExt]], None] | None:
        """Called after each consumed batch (tests and the demo watch consumption with it)."""
        return self._impl.on_consumed

    @on_consumed.setter
    def on_consumed(self, hook: Callable[[MessageQueue, list[MessageExt]], None] | None) -> None:
        self._impl.on_consumed = hook

    @property
    def is_fenced(self) -> bool:
        """The fenced handoff applies: asked for, CLUSTERING, not orderly (which already locks)."""
        return self._impl.is_fenced

    @property
    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this consumer holds now (its process queues not dropped), all topics."""
        impl = self._impl.rebalance_impl
        if impl is None:
            return set()
        return {mq for mq in impl.assigned_queues() if not is_retry_topic(mq.topic)}

    # ---- configuration ---------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``expression`` (``*`` or ``A || B``)."""
        check_topic(topic)
        parse_expression(expression)
        impl = self._impl
        impl.subscription_inner[topic] = (expression or "*", now_ms())
        if impl.running and impl.client is not None:
            impl.spawn(impl.client.send_heartbeat_to_all_broker())

    def unsubscribe(self, topic: str) -> None:
        self._impl.subscription_inner.pop(topic, None)

    def register_message_listener(
        self,
        listener: MessageListenerConcurrently | MessageListenerOrderly,
        *,
        orderly: bool = False,
    ) -> None:
        """The async listener ``(msgs, context) -> status``.

        Concurrent (default): returns ``ConsumeConcurrentlyStatus``. ``orderly=True``: a
        ``MessageListenerOrderly`` returning ``ConsumeOrderlyStatus``; each queue is then consumed
        one batch at a time, in order, only while this client holds the broker's lock on it.
        """
        self._impl.listener = listener
        self._impl.consume_orderly = orderly

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        """Same as ``register_message_listener(listener, orderly=True)``."""
        self.register_message_listener(listener, orderly=True)

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Join the group: routes, heartbeat (the brokers notify the group), first rebalance."""
        await self._impl.start()

    async def shutdown(self, await_terminate_s: float = 0.0) -> None:
        """Stop consuming, persist offsets, leave the group (UNREGISTER_CLIENT)."""
        await self._impl.shutdown(await_terminate_s)

    def suspend(self) -> None:
        """Pause pulling (RocketMQ's ``suspend``)."""
        self._impl.paused = True

    def resume(self) -> None:
        self._impl.paused = False
        if self._impl.client is not None:
            self._impl.client.rebalance_immediately()


class PushConsumerImpl(ConsumerCore):
    """What the client instance drives for a push consumer (``DefaultMQPushConsumerImpl``)."""

    settings: PushConsumerSettings

    def __init__(self, group: str, namesrv_addr: str, settings: PushConsumerSettings) -> None:
        super().__init__(group, namesrv_addr, settings)
        self.listener: MessageListenerConcurrently | MessageListenerOrderly | None = None
        self.consume_orderly = False
        self.consume_service: ConsumeMessageConcurrentlyService | None = None
        self.consume_orderly_service: ConsumeMessageOrderlyService | None = None
        self.paused = False
        self.on_consumed: Callable[[MessageQueue, list[MessageExt]], None] | None = None
        # Per-queue thresholds: the topic-wide ones split across our queues.
        self.pull_threshold_for_queue = settings.pull_threshold_for_queue
        self.pull_threshold_size_for_queue = settings.pull_threshold_size_for_queue
        self.rebalance_mode = RebalancePushImpl(self)

    @property
    def max_reconsume_times(self) -> int:
        """-1 means 16 for concurrent consumption and unlimited for orderly."""
        setting = self.settings.max_reconsume_times
        if setting != -1:
            return setting
        return 2**31 - 1 if self.consume_orderly else 16

    @property
    def is_fenced(self) -> bool:
        return (
            self.settings.handoff is Handoff.FENCED and self.clustering and not self.consume_orderly
        )

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self.running:
            return
        if self.listener is None:
            raise ValueError("messageListener is null: register_message_listener() first")
        if not self.subscription_inner:
            raise ValueError("no subscription: subscribe() first")
        if self.clustering:
            self.subscription_inner[retry_topic(self.consumer_group)] = ("*", now_ms())
        await self.start_client(
            self.rebalance_mode,
            fenced=self.is_fenced,
            pull_max_idle_ms=self.settings.pull_max_idle_time_ms,
            watch=self.settings.watch_idle_queues,
            acquire_wait_ms=self.settings.handoff_acquire_wait_ms,
        )
        try:
            if isinstance(self.offset_store, RemoteBrokerOffsetStore) and self.fenced is not None:
                self.offset_store.on_fenced = self._on_commit_fenced
            self._start_consume_service()
            await self.join(rebalance=True)
        except BaseException:
            self.running = False
            await self.cancel_side_tasks()
            await self.release_client()
            raise
        tracer.record("consumer_started", group=self.consumer_group, client_id=self.client_id)
        log.info(
            "the consumer started",
            group=self.consumer_group,
            client_id=self.client_id,
            message_model=self.message_model.value,
            strategy=self.settings.allocate_strategy.name,
            handoff=self.settings.handoff.value,
        )

    def _start_consume_service(self) -> None:
        s = self.settings
        if self.consume_orderly:
            rebalance_impl = self.rebalance_impl
            assert rebalance_impl is not None
            self.consume_orderly_service = ConsumeMessageOrderlyService(
                self.consumer_group,
                cast(MessageListenerOrderly, self.listener),
                self.message_model,
                process_queue_of=lambda mq: rebalance_impl.process_queue_table.get(mq),
                update_offset=self._update_offset_orderly,
                lock=self.lock,
                lock_all=self.lock_all,
                send_to_dlq=lambda m: self.send_message_back(m, -1),
                consume_message_batch_max_size=s.consume_message_batch_max_size,
                suspend_current_queue_time_ms=s.suspend_current_queue_time_ms,
                max_reconsume_times=self.max_reconsume_times,
                lock_interval_ms=s.lock_interval_ms,
                lock_max_live_ms=s.lock_max_live_ms,
                on_consumed=self._on_consumed,
            )
            self.consume_orderly_service.stats = self.stats
            self.consume_orderly_service.start()
        else:
            self.consume_service = ConsumeMessageConcurrentlyService(
                self.consumer_group,
                cast(MessageListenerConcurrently, self.listener),
                self.message_model,
                update_offset=self._update_offset_after_consume,
                send_message_back=self.send_message_back,
                consume_message_batch_max_size=s.consume_message_batch_max_size,
                consume_thread_max=s.consume_thread_max,
                on_consumed=self._on_consumed,
            )
            self.consume_service.stats = self.stats
            self.spawn(self._clean_expired_loop(self.consume_service))

    async def _clean_expired_loop(self, service: ConsumeMessageConcurrentlyService) -> None:
        """Every ``consume_timeout_ms``, each queue's messages consumed for longer than that
        are sent back and let go (``ConsumeMessageConcurrentlyService.clean_expired``)."""
        timeout_ms = self.settings.consume_timeout_ms
        while True:
            await asyncio.sleep(timeout_ms / 1000)
            if self.rebalance_impl is None:
                continue
            for mq, pq in list(self.rebalance_impl.process_queue_table.items()):
                try:
                    await service.clean_expired(pq, mq, timeout_ms)
                except Exception:
                    log.exception("cleaning expired messages failed", mq=str(mq))

    async def shutdown(self, await_terminate_s: float = 0.0) -> None:
        if not self.running:
            return
        self.running = False
        tracer.record("consumer_shutdown", group=self.consumer_group, client_id=self.client_id)
        assert self.client is not None and self.rebalance_impl is not None
        await self.rebalance_impl.stop_taking_queues()  # what is let go below is the whole table
        finals: list[tuple[MessageQueue, int]] = []  # fenced: released with the unregister
        if self.consume_service is not None and self.fenced is None:
            await self.consume_service.shutdown(await_terminate_s)
        if self.consume_orderly_service is not None:
            # Ours: wait for each queue's batch in flight (500 ms at most) and keep the queues
            # from starting another, persist, and only then unlock, so the next owner starts
            # from the committed offset. RocketMQ unlocks first and persists after.
            held = await self._hold_consume_locks(0.5)
            await self.consume_orderly_service.shutdown(await_terminate_s)
            await self.persist_consumer_offset()
            if self.clustering:
                await self.unlock_all()
            for pq in held:
                pq.dropped = True
                pq.consume_lock.release()
        elif self.fenced is not None:
            # Every grant is released with its final offset once the batches in flight are
            # done, riding with the unregister to its broker (``leave``).
            items = list(self.rebalance_impl.process_queue_table.items())
            for _, pq in items:
                pq.dropped = True
            finals = await self._drain_fenced(items)
            if self.consume_service is not None:
                await self.consume_service.shutdown(await_terminate_s)
        else:
            await self.persist_consumer_offset()
        await self.leave(finals)
        log.info("the consumer shutdown", group=self.consumer_group, client_id=self.client_id)

    # ---- what the client instance asks -----------------------------------------------------
    async def do_rebalance(self) -> bool:
        if self.paused or self.rebalance_impl is None or not self.running:
            return not self.paused
        return await self.rebalance_impl.do_rebalance(is_order=self.consume_orderly)

    async def persist_consumer_offset(self) -> None:
        if self.offset_store is None or self.rebalance_impl is None:
            return
        await self.offset_store.persist_all(set(self.rebalance_impl.process_queue_table))

    def on_queue_released(self, mq: MessageQueue) -> None:
        """Fenced handoff: a queue of the group was released; take it now if it is ours."""
        if self.rebalance_impl is not None and self.running:
            self.spawn(self.rebalance_impl.try_acquire_released(mq))

    # ---- dropping queues -------------------------------------------------------------------
    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        """Persist the dropped queues' offsets (one commit per broker), then forget them.

        Orderly in CLUSTERING also waits for the batch in flight (500 ms at most), persists,
        and unlocks on the broker; a queue whose batch is still running stays (False) and is
        dropped again at the next rebalance, unless its lock is 20 s old (force unlock).
        """
        if self.fenced is not None:
            await self._release_fenced(items)
        elif self.consume_orderly and self.clustering:
            return list(
                await asyncio.gather(
                    *(self._try_remove_order_message_queue(mq, pq) for mq, pq in items)
                )
            )
        else:
            await self.persist_and_forget([mq for mq, _ in items])
        return [True] * len(items)

    async def _release_fenced(self, items: list[tuple[MessageQueue, ProcessQueue]]) -> None:
        """Fenced drop: pulls stopped (dropped); let batches in flight ack; release each grant
        its process queue was consumed under, with the final offset."""
        epochs = {mq: pq.epoch for mq, pq in items}
        await self.release_fenced(await self._drain_fenced(items), epochs)

    async def _drain_fenced(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[tuple[MessageQueue, int]]:
        """Let the batches in flight of these dropped queues ack (``handoff_drain_timeout_ms``
        at most); each queue's final offset then."""
        assert self.offset_store is not None
        for _, pq in items:
            pq.draining = True
        busy = [pq for _, pq in items if pq.inflight]
        if busy:  # else no wait at all: a gather costs the pass loop turns behind the others
            try:
                async with asyncio.timeout(self.settings.handoff_drain_timeout_ms / 1000):
                    await asyncio.gather(*(pq.wait_idle() for pq in busy))
            except TimeoutError:
                pass
        stuck = [str(mq) for mq, pq in items if pq.inflight]
        if stuck:
            log.warning(
                "handoff drain timed out; releasing with what was committed",
                group=self.consumer_group,
                queues=stuck,
            )
        finals = []
        for mq, pq in items:
            pq.draining = False
            finals.append(
                (mq, await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY))
            )
        return finals

    def _on_commit_fenced(self, mq: MessageQueue, epoch: int) -> None:
        """The broker refused our commit for ``mq`` under ``epoch``: the queue moved on; drop
        it now. A late refusal of a commit made under an earlier grant changes nothing."""
        pq = self.rebalance_impl.process_queue_table.get(mq) if self.rebalance_impl else None
        if pq is None or not self.is_current(mq, pq, epoch):
            log.info(
                "offset commit fenced under an earlier grant, ignored",
                group=self.consumer_group,
                mq=str(mq),
                epoch=epoch,
            )
            return
        log.warning(
            "offset commit fenced, dropping the queue", group=self.consumer_group, mq=str(mq)
        )
        self.lose_queue(mq, pq)

    async def _try_remove_order_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        assert self.offset_store is not None
        force_unlock = (
            pq.dropped and pq.now_ms() > pq.last_lock_timestamp + self.settings.unlock_delay_ms
        )
        got_lock = False
        if not force_unlock:
            try:
                async with asyncio.timeout(0.5):
                    await pq.consume_lock.acquire()
                got_lock = True
            except TimeoutError:
                pq.inc_try_unlock_times()
                log.warning(
                    "the message queue is being consumed, try to unlock it later",
                    group=self.consumer_group,
                    mq=str(mq),
                    try_unlock_times=pq.try_unlock_times,
                )
                return False
        try:
            await self.offset_store.persist(mq)
            self.offset_store.remove_offset(mq)
            pq.locked = False
            await self.unlock([mq])
            return True
        finally:
            if got_lock:
                pq.consume_lock.release()

    async def _hold_consume_locks(self, timeout_s: float) -> list[ProcessQueue]:
        """Take every queue's consume lock (waiting out batches in flight) and keep it."""
        assert self.rebalance_impl is not None
        held: list[ProcessQueue] = []

        async def take(pq: ProcessQueue) -> None:
            try:
                async with asyncio.timeout(timeout_s):
                    await pq.consume_lock.acquire()
                held.append(pq)
            except TimeoutError:
                pass

        await asyncio.gather(*(take(pq) for pq in self.rebalance_impl.process_queue_table.values()))
        return held

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue on its master (orderly); True when we hold it."""
        if not self.clustering or self.client is None:
            return True
        locked = await self._lock_batch(mq.broker_name, [mq])
        return mq in locked

    async def _lock_batch(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        assert self.client is not None and self.rebalance_impl is not None
        request = broker_pb2.LockBatchRequest(
            consumer_group=self.consumer_group,
            client_id=self.client_id,
            only_this_broker=True,
            mq_set=[mq.to_proto() for mq in mqs],
        )
        try:
            response = await self.client.invoke_broker(
                broker_name, "LockBatchMQ", request, timeout=1.0
            )
        except MQError as e:
            log.warning(
                "lockBatchMQ failed", group=self.consumer_group, broker=broker_name, error=str(e)
            )
            return set()
        locked = {MessageQueue.from_proto(m) for m in response.lock_ok_mq_set}
        now = now_ms()
        for mq in mqs:
            pq = self.rebalance_impl.process_queue_table.get(mq)
            if pq is None:
                continue
            if mq in locked:
                if not pq.locked:
                    log.info("the message queue locked OK", group=self.consumer_group, mq=str(mq))
                pq.locked = True
                pq.last_lock_timestamp = now
            else:
                pq.locked = False
        return locked

    async def lock_all(self) -> None:
        """Re-lock every queue we hold, one request per broker (every 20 s)."""
        assert self.rebalance_impl is not None
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq, pq in self.rebalance_impl.process_queue_table.items():
            if not pq.dropped:
                by_broker[mq.broker_name].append(mq)
        await asyncio.gather(*(self._lock_batch(b, mqs) for b, mqs in by_broker.items()))

    async def unlock(self, mqs: list[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ, one request per broker."""
        if self.client is None or not self.clustering:
            return
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        for broker_name, queues in by_broker.items():
            request = broker_pb2.UnlockBatchRequest(
                consumer_group=self.consumer_group,
                client_id=self.client_id,
                only_this_broker=True,
                mq_set=[mq.to_proto() for mq in queues],
            )
            try:
                await self.client.invoke_broker(broker_name, "UnlockBatchMQ", request, timeout=1.0)
            except MQError as e:
                log.warning(
                    "unlockBatchMQ failed",
                    group=self.consumer_group,
                    broker=broker_name,
                    error=str(e),
                )

    async def unlock_all(self) -> None:
        assert self.rebalance_impl is not None
        await self.unlock(sorted(self.rebalance_impl.process_queue_table))
        for pq in self.rebalance_impl.process_queue_table.values():
            pq.locked = False

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        """The new queues' first pulls; a queue granted with nothing to pull (the broker
        watches it) is parked until a message arrives."""
        if self.client is None or not self.running:
            return
        self.hold_back_unconfirmed(requests)
        service = self.client.pull_message_service
        store = self.offset_store
        watching = store.watching if isinstance(store, RemoteBrokerOffsetStore) else {}
        for request in requests:
            mq = request.message_queue
            channel_id = watching.pop(mq, None)
            # Parked only if the channel it is watched for is still the open one: a channel
            # that reopened since the answer has no watches (the queue would wait for renewal).
            if channel_id and channel_id == self.client.open_channel_id(mq.broker_name):
                service.park(request, self.watch_renew_ms)
            else:
                service.execute_pull_request_later(
                    request, self.settings.rebalance_dispatch_delay_ms
                )

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """A rebalance changed our queues: thresholds, listener (and with
        ``heartbeat_on_queue_change``, RocketMQ's new subVersion and heartbeat)."""
        assert self.rebalance_impl is not None and self.client is not None
        s = self.settings
        renew = s.heartbeat_on_queue_change and topic in self.subscription_inner
        if renew:
            expression, _ = self.subscription_inner[topic]
            self.subscription_inner[topic] = (expression, now_ms())
        n = len(self.rebalance_impl.process_queue_table)
        if n:
            if s.pull_threshold_for_topic != -1:
                self.pull_threshold_for_queue = max(1, s.pull_threshold_for_topic // n)
            if s.pull_threshold_size_for_topic != -1:
                self.pull_threshold_size_for_queue = max(1, s.pull_threshold_size_for_topic // n)
        if renew or self.client.heartbeat_missing({mq.broker_name for mq in mq_divided}):
            # Ours without ``renew``: only when a broker of our queues has had no heartbeat on
            # its channel (one new in the routes): its pulls would fail until the 30 s one.
            await self.client.send_heartbeat_to_all_broker()
        listener = s.message_queue_listener
        if listener is not None and not is_retry_topic(topic):
            try:
                listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception(
                    "messageQueueChanged listener failed", group=self.consumer_group, topic=topic
                )

    @property
    def watch_renew_ms(self) -> int:
        """How long a watched queue's watch goes unrenewed at most: ``watch_renew_ms``, capped
        at half of ``pull_max_idle_time_ms`` (a queue neither pulled nor renewed for that long
        is taken as stuck)."""
        s = self.settings
        return max(1, min(s.watch_renew_ms, s.pull_max_idle_time_ms // 2))

    # ---- pulling ---------------------------------------------------------------------------
    async def pull_message(self, request: PullRequest) -> None:
        """One pull of one queue (spec 4.3): flow control, the RPC, then the outcome."""
        pq = request.process_queue
        if pq.dropped:
            return
        pq.last_pull_timestamp = pq.now_ms()
        client = self.client
        if client is None or not self.running:
            return
        service = client.pull_message_service
        s = self.settings
        if self.paused:
            service.execute_pull_request_later(request, PULL_TIME_DELAY_MS_WHEN_SUSPEND)
            return
        reason = flow_control_reason(
            pq,
            pull_threshold_for_queue=self.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
            consume_concurrently_max_span=s.consume_concurrently_max_span,
            consume_orderly=self.consume_orderly,
        )
        if reason is not None:
            service.execute_pull_request_later(request, PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL)
            return
        assert self.rebalance_impl is not None and self.offset_store is not None
        assert self.pull_api is not None
        mq = request.message_queue
        if self.consume_orderly and self.clustering:
            if not pq.locked:
                service.execute_pull_request_later(request, s.pull_time_delay_ms_when_exception)
                return
            if not request.previously_locked:
                # The first pull after the lock re-reads the committed offset from the broker.
                offset = await self.compute_pull_from_where(mq)
                if offset < 0:
                    service.execute_pull_request_later(request, s.pull_time_delay_ms_when_exception)
                    return
                request.next_offset = offset
                request.previously_locked = True
        sub = self.subscription_inner.get(mq.topic)
        if sub is None:
            service.execute_pull_request_later(request, s.pull_time_delay_ms_when_exception)
            return
        commit_offset = 0
        if self.clustering:
            commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        try:
            result = await self.pull_api.pull_kernel(
                mq,
                request.next_offset,
                max_nums=s.pull_batch_size,
                expression=parse_expression(sub[0]),
                sub_version=sub[1],
                suspend_timeout_ms=s.broker_suspend_max_time_ms,
                timeout_ms=s.consumer_pull_timeout_ms,
                commit_offset=commit_offset,
                epoch=request.epoch,
                min_nums=s.pull_min_batch_size,
                max_wait_ms=s.pull_max_wait_ms,
                watch=s.watch_idle_queues,
            )
        except QueueFenced as e:
            await self.on_pull_fenced(mq, pq, e)
            return
        except MQError as e:
            delay = (
                PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL
                if e.response_code is ResponseCode.FLOW_CONTROL
                else s.pull_time_delay_ms_when_exception
            )
            log.debug("pull message failed", group=self.consumer_group, mq=str(mq), error=str(e))
            service.execute_pull_request_later(request, delay)
            return
        await self._on_pull_result(request, result)

    async def _on_pull_result(self, request: PullRequest, result: PullResult) -> None:
        assert (
            self.client is not None
            and self.offset_store is not None
            and self.rebalance_impl is not None
        )
        service = self.client.pull_message_service
        pq = request.process_queue
        mq = request.message_queue
        if result.status == FOUND:
            request.next_offset = result.next_begin_offset
            msgs = result.msgs_found
            if not msgs:
                service.execute_pull_request_immediately(request)
                return
            if pq.dropped:
                return
            dispatch_to_consume = pq.put_message(msgs)
            self.record_pull(mq, msgs, request.next_offset)
            if self.consume_orderly_service is not None:
                self.consume_orderly_service.submit_consume_request(
                    msgs, pq, mq, dispatch_to_consume
                )
            else:
                assert self.consume_service is not None
                self.consume_service.submit_consume_request(msgs, pq, mq)
            service.execute_pull_request_later(request, self.settings.pull_interval_ms)
        elif result.status in (NO_NEW_MSG, NO_MATCHED_MSG):
            request.next_offset = result.next_begin_offset
            if pq.msg_count == 0 and not pq.dropped:
                self.offset_store.update_offset(mq, request.next_offset, increase_only=True)
            if result.watching and not pq.dropped:
                # Ours: the broker watches the queue now; no pull until it has something.
                pq.last_pull_timestamp = pq.now_ms()  # idle by choice, not stuck
                service.park(request, self.watch_renew_ms)
            else:
                service.execute_pull_request_immediately(request)
        else:  # OFFSET_ILLEGAL: fix the offset now, then re-add the queue (spec 4.5)
            log.warning(
                "the pull request offset illegal",
                group=self.consumer_group,
                mq=str(mq),
                offset=request.next_offset,
                next_begin_offset=result.next_begin_offset,
            )
            request.next_offset = result.next_begin_offset
            await self._move_queue(mq, pq, result.next_begin_offset)

    async def _move_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Drop ``mq`` and re-add it from ``offset`` at once: what is in flight is discarded,
        the offset is frozen there and persisted (an OFFSET_ILLEGAL answer, an offset reset)."""
        assert (
            self.client is not None
            and self.offset_store is not None
            and self.rebalance_impl is not None
        )
        pq.dropped = True
        self.offset_store.update_and_freeze_offset(mq, offset)
        await self.offset_store.persist(mq)
        await self.rebalance_impl.remove_process_queue(mq)
        self.client.rebalance_immediately()

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: every queue held here starts over at its new offset."""
        if self.rebalance_impl is None or not self.running:
            return
        for mq, offset in sorted(offsets.items()):
            pq = self.rebalance_impl.process_queue_table.get(mq)
            if pq is not None and not pq.dropped:
                log.info("reset offset", group=self.consumer_group, mq=str(mq), offset=offset)
                await self._move_queue(mq, pq, offset)

    # ---- consuming -------------------------------------------------------------------------
    def _update_offset_after_consume(self, mq: MessageQueue, offset: int) -> None:
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, increase_only=True)

    def _update_offset_orderly(self, mq: MessageQueue, offset: int) -> None:
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, increase_only=False)

    def _on_consumed(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        if tracer.enabled:
            for m in msgs:
                tracer.record(
                    "consumed",
                    group=self.consumer_group,
                    client_id=self.client_id,
                    mq=str(mq),
                    offset=m.queue_offset,
                    msg_id=m.msg_id,
                )
        if self.on_consumed is not None:
            self.on_consumed(mq, msgs)

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the message's broker; False if that failed."""
        if self.client is None:
            return False
        request = broker_pb2.ConsumerSendMsgBackRequest(
            group=self.consumer_group,
            commit_log_offset=msg.commit_log_offset,
            delay_level=delay_level,
            origin_msg_id=msg.properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id),
            origin_topic=msg.topic,
            max_reconsume_times=self.max_reconsume_times,
        )
        try:
            await self.client.invoke_broker(
                msg.broker_name, "ConsumerSendMsgBack", request, timeout=5.0
            )
        except MQError as e:
            log.warning(
                "send message back failed",
                group=self.consumer_group,
                msg_id=msg.msg_id,
                error=str(e),
            )
            return False
        return True


class RebalancePushImpl(RebalanceModeBase):
    """The push mode of ``RebalanceImpl`` (RocketMQ's ``RebalancePushImpl``)."""

    impl: PushConsumerImpl

    @property
    def is_push(self) -> bool:
        return True

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        return await self.impl.remove_unnecessary_message_queues(items)

    async def lock(self, mq: MessageQueue) -> bool:
        return await self.impl.lock(mq)

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        self.impl.dispatch_pull_requests(requests)

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        await self.impl.message_queue_changed(topic, mq_all, mq_divided)
