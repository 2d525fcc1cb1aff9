"""``PushConsumer``: RocketMQ's DefaultMQPushConsumer, end to end.

The path from joining to the first message (docs/protocol.md draws it):
``start()`` registers the group with the client instance, fetches the routes, sends a
heartbeat (which opens the channel stream to each broker and makes each broker notify the
group) and wakes the rebalance. ``RebalanceImpl`` allocates queues; each new queue gets a
``ProcessQueue`` and a ``PullRequest``; ``pull_message`` pulls (long-polling) and hands what it
found to the consume service, which calls the listener and moves the committed offset.
``shutdown()`` persists offsets and unregisters (the brokers notify the group).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, cast

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
from aiorocketmq.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from aiorocketmq.consumer.consume_orderly import ConsumeMessageOrderlyService
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
from aiorocketmq.consumer.types import (
    ConsumeFromWhere,
    MessageListenerConcurrently,
    MessageListenerOrderly,
    MessageModel,
    MessageQueueListener,
)
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.client_id import local_ip
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQError, QueueFenced
from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.record import decode_records
from aiorocketmq.protocol.tags import parse_expression
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import check_topic, is_retry_topic, retry_topic
from aiorocketmq.trace import tracer

__all__ = ["PushConsumer"]

log = get_logger("aiorocketmq.consumer")

PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1_000


def _now_ms() -> int:
    return int(time.time() * 1000)


class PushConsumer:
    """An async push consumer: subscribe, register a listener, ``await start()``."""

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
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval_ms: int = 0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic: int = -1,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        pull_time_delay_mills_when_exception: int = 1_000,
        broker_suspend_max_time_millis: int = 15_000,
        consumer_timeout_millis_when_suspend: int = 30_000,
        pull_max_idle_time_ms: int = 120_000,
        rebalance_dispatch_delay_ms: int = 500,
        suspend_current_queue_time_millis: int = 1_000,
        lock_interval_ms: int = 20_000,
        lock_max_live_ms: int = 30_000,
        unlock_delay_ms: int = 20_000,
        handoff_drain_timeout_ms: int = 5_000,
        handoff: str = "classic",
        client_config: ClientConfig | None = None,
        offset_store_dir: Path | None = None,
        message_queue_listener: MessageQueueListener | None = None,
    ) -> None:
        check_consumer_settings(
            group,
            handoff,
            (
                ("consume_thread_max", consume_thread_max, 1, 1000),
                ("consume_message_batch_max_size", consume_message_batch_max_size, 1, 1024),
                ("pull_batch_size", pull_batch_size, 1, 1024),
                ("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535),
                ("pull_threshold_size_for_queue", pull_threshold_size_for_queue, 1, 1024),
                ("consume_concurrently_max_span", consume_concurrently_max_span, 1, 65535),
                ("pull_interval_ms", pull_interval_ms, 0, 65535),
            ),
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
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_interval_ms = pull_interval_ms
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        self.consume_concurrently_max_span = consume_concurrently_max_span
        # -1: 16 for concurrent consumption, unlimited for orderly (fixed at registration).
        self._max_reconsume_times_setting = max_reconsume_times
        self.max_reconsume_times = 16 if max_reconsume_times == -1 else max_reconsume_times
        self.pull_time_delay_mills_when_exception = pull_time_delay_mills_when_exception
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.pull_max_idle_time_ms = pull_max_idle_time_ms
        self.rebalance_dispatch_delay_ms = rebalance_dispatch_delay_ms
        self.unlock_delay_ms = unlock_delay_ms
        self.handoff_drain_timeout_ms = handoff_drain_timeout_ms
        self.fenced: FencedHandoff | None = None
        self.handoff = handoff
        self.client_config = client_config
        self.offset_store_dir = offset_store_dir
        self.message_queue_listener = message_queue_listener
        self._subscriptions: dict[str, str] = {}
        self._sub_versions: dict[str, int] = {}
        self._listener: MessageListenerConcurrently | MessageListenerOrderly | None = None
        self._client: MQClientInstance | None = None
        self.offset_store: OffsetStore | None = None
        self.rebalance_impl: RebalanceImpl | None = None
        self.consume_service: ConsumeMessageConcurrentlyService | None = None
        self.consume_orderly_service: ConsumeMessageOrderlyService | None = None
        self.consume_orderly = False
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self.lock_interval_ms = lock_interval_ms
        self.lock_max_live_ms = lock_max_live_ms
        self.client_id = ""
        self.running = False
        self.paused = False
        self.on_consumed: Callable[[MessageQueue, list[MessageExt]], None] | None = None
        self._side_tasks: set[asyncio.Future[Any]] = set()

    # ---- configuration ---------------------------------------------------------------------
    @property
    def group_name(self) -> str:
        return self.consumer_group

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``expression`` (``*`` or ``A || B``)."""
        check_topic(topic)
        parse_expression(expression)
        self._subscriptions[topic] = expression or "*"
        self._sub_versions[topic] = _now_ms()
        if self.rebalance_impl is not None:
            self.rebalance_impl.subscription_inner[topic] = (expression, self._sub_versions[topic])
        if self.running and self._client is not None:
            task = asyncio.ensure_future(self._client.send_heartbeat_to_all_broker())
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self.rebalance_impl is not None:
            self.rebalance_impl.subscription_inner.pop(topic, None)

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
        self._listener = listener
        self.consume_orderly = orderly
        if orderly and self._max_reconsume_times_setting == -1:
            self.max_reconsume_times = 2**31 - 1
        elif self._max_reconsume_times_setting == -1:
            self.max_reconsume_times = 16

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        """Same as ``register_message_listener(listener, orderly=True)``."""
        self.register_message_listener(listener, orderly=True)

    @property
    def is_fenced(self) -> bool:
        """The fenced handoff applies: asked for, CLUSTERING, not orderly (which already locks)."""
        return (
            self.handoff == "fenced"
            and self.message_model is MessageModel.CLUSTERING
            and not self.consume_orderly
        )

    @property
    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this consumer holds now (its process queues not dropped), all topics."""
        if self.rebalance_impl is None:
            return set()
        return {mq for mq in self.rebalance_impl.assigned_queues() if not is_retry_topic(mq.topic)}

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self.running:
            return
        if self._listener is None:
            raise ValueError("messageListener is null: register_message_listener() first")
        if not self._subscriptions:
            raise ValueError("no subscription: subscribe() first")
        inner = {t: (e, self._sub_versions[t]) for t, e in self._subscriptions.items()}
        if self.message_model is MessageModel.CLUSTERING:
            inner[retry_topic(self.consumer_group)] = ("*", _now_ms())
            self._sub_versions[retry_topic(self.consumer_group)] = inner[
                retry_topic(self.consumer_group)
            ][1]
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
            if self.is_fenced:
                self.fenced = FencedHandoff(client, self.consumer_group)
                assert isinstance(self.offset_store, RemoteBrokerOffsetStore)
                self.offset_store.on_fenced = self._on_commit_fenced
            self.rebalance_impl = RebalanceImpl(
                self.consumer_group,
                self.message_model,
                self.allocate_strategy,
                client,
                self,
                fenced=self.handoff == "fenced",
                pull_max_idle_ms=self.pull_max_idle_time_ms,
            )
            self.rebalance_impl.subscription_inner.update(inner)
            if self.consume_orderly:
                rebalance_impl = self.rebalance_impl
                self.consume_orderly_service = ConsumeMessageOrderlyService(
                    self.consumer_group,
                    cast(MessageListenerOrderly, self._listener),
                    self.message_model,
                    process_queue_of=lambda mq: rebalance_impl.process_queue_table.get(mq),
                    update_offset=self._update_offset_orderly,
                    lock=self.lock,
                    lock_all=self.lock_all,
                    send_to_dlq=lambda m: self.send_message_back(m, -1),
                    consume_message_batch_max_size=self.consume_message_batch_max_size,
                    suspend_current_queue_time_millis=self.suspend_current_queue_time_millis,
                    max_reconsume_times=self.max_reconsume_times,
                    lock_interval_ms=self.lock_interval_ms,
                    lock_max_live_ms=self.lock_max_live_ms,
                    on_consumed=self._on_consumed,
                )
                self.consume_orderly_service.start()
            else:
                self.consume_service = ConsumeMessageConcurrentlyService(
                    self.consumer_group,
                    cast(MessageListenerConcurrently, self._listener),
                    self.message_model,
                    update_offset=self._update_offset_after_consume,
                    send_message_back=self.send_message_back,
                    consume_message_batch_max_size=self.consume_message_batch_max_size,
                    consume_thread_max=self.consume_thread_max,
                    on_consumed=self._on_consumed,
                )
            client.register_consumer(self)
            await client.start()
            self.running = True
            for topic in inner:
                await client.update_topic_route_info_from_name_server(topic)
            if await client.send_heartbeat_to_all_broker():
                client.rebalance_immediately()
        except BaseException:
            await self._release_client()
            raise
        tracer.record("consumer_started", group=self.consumer_group, client_id=self.client_id)
        log.info(
            "the consumer started",
            group=self.consumer_group,
            client_id=self.client_id,
            message_model=self.message_model.value,
            strategy=self.allocate_strategy.name,
            handoff=self.handoff,
        )

    async def shutdown(self, await_terminate_s: float = 0.0) -> None:
        """Stop consuming, persist offsets, leave the group (UNREGISTER_CLIENT)."""
        if not self.running:
            return
        self.running = False
        tracer.record("consumer_shutdown", group=self.consumer_group, client_id=self.client_id)
        assert self._client is not None and self.rebalance_impl is not None
        if self.consume_service is not None and self.fenced is None:
            await self.consume_service.shutdown(await_terminate_s)
        if self.consume_orderly_service is not None:
            # Ours: wait for each queue's batch in flight (500 ms at most) and keep the queues
            # from starting another, persist, and only then unlock, so the next owner starts
            # from the committed offset. RocketMQ unlocks first and persists after.
            held = await self._hold_consume_locks(0.5)
            await self.consume_orderly_service.shutdown(await_terminate_s)
            await self.persist_consumer_offset()
            if self.message_model is MessageModel.CLUSTERING:
                await self.unlock_all()
            for pq in held:
                pq.dropped = True
                pq.consume_lock.release()
        elif self.fenced is not None:
            # Release every grant with its final offset once the batches in flight are done.
            items = list(self.rebalance_impl.process_queue_table.items())
            for _, pq in items:
                pq.dropped = True
            await self.remove_unnecessary_message_queues(items)
            if self.consume_service is not None:
                await self.consume_service.shutdown(await_terminate_s)
        else:
            await self.persist_consumer_offset()
        await self._client.unregister_consumer(self.consumer_group)
        self.rebalance_impl.destroy()
        side = [t for t in self._side_tasks if t is not asyncio.current_task()]
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        await self._release_client()
        log.info("the consumer shutdown", group=self.consumer_group, client_id=self.client_id)

    async def _release_client(self) -> None:
        if self._client is not None:
            if self._client.consumer_table.get(self.consumer_group) is self:
                del self._client.consumer_table[self.consumer_group]
            await MQClientManager.release(self.client_id)
            self._client = None

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    def suspend(self) -> None:
        """Pause pulling (RocketMQ's ``suspend``)."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        if self._client is not None:
            self._client.rebalance_immediately()

    # ---- what the client instance asks -----------------------------------------------------
    def consumer_data(self) -> common_pb2.ConsumerData:
        assert self.rebalance_impl is not None
        data = common_pb2.ConsumerData(
            group_name=self.consumer_group,
            consume_type=common_pb2.CONSUME_PASSIVELY,
            message_model=self.message_model.to_proto(),
            consume_from_where=self.consume_from_where.to_proto(),
        )
        for topic, (expression, version) in sorted(self.rebalance_impl.subscription_inner.items()):
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
        return (
            set(self.rebalance_impl.subscription_inner)
            if self.rebalance_impl
            else set(self._subscriptions)
        )

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self.rebalance_impl is not None and topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = mqs

    async def do_rebalance(self) -> bool:
        if self.paused or self.rebalance_impl is None or not self.running:
            return not self.paused
        return await self.rebalance_impl.do_rebalance(is_order=self.consume_orderly)

    async def persist_consumer_offset(self) -> None:
        if self.offset_store is None or self.rebalance_impl is None:
            return
        await self.offset_store.persist_all(set(self.rebalance_impl.process_queue_table))

    def is_balanced(self) -> bool:
        return self.rebalance_impl is None or self.rebalance_impl.is_balanced()

    def on_queue_released(self, mq: MessageQueue) -> None:
        """Fenced handoff: a queue of the group was released; take it now if it is ours."""
        if self.rebalance_impl is not None and self.running:
            self._spawn_side(self.rebalance_impl.try_acquire_released(mq))

    # ---- RebalanceMode ---------------------------------------------------------------------
    @property
    def is_push(self) -> bool:
        return True

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return (await self.remove_unnecessary_message_queues([(mq, pq)]))[0]

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        """Persist the dropped queues' offsets (one commit per broker), then forget them.

        Orderly in CLUSTERING also waits for the batch in flight (500 ms at most), persists,
        and unlocks on the broker; a queue whose batch is still running stays (False) and is
        dropped again at the next rebalance, unless its lock is 20 s old (force unlock).
        """
        assert self.offset_store is not None
        if self.fenced is not None:
            return await self._release_fenced(items)
        if self.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            return list(
                await asyncio.gather(
                    *(self._try_remove_order_message_queue(mq, pq) for mq, pq in items)
                )
            )
        mqs = [mq for mq, _ in items]
        await self.offset_store.persist_many(mqs)
        for mq in mqs:
            self.offset_store.remove_offset(mq)
        return [True] * len(items)

    async def _release_fenced(self, items: list[tuple[MessageQueue, ProcessQueue]]) -> list[bool]:
        """Fenced drop: pulls stopped (dropped); let batches in flight ack; release with the offset."""
        assert (
            self.offset_store is not None
            and self.fenced is not None
            and self.rebalance_impl is not None
        )
        for _, pq in items:
            pq.draining = True
        try:
            async with asyncio.timeout(self.handoff_drain_timeout_ms / 1000):
                await asyncio.gather(*(pq.wait_idle() for _, pq in items))
        except TimeoutError:
            pass
        stuck = [str(mq) for mq, pq in items if pq.inflight]
        if stuck:
            log.warning(
                "handoff drain timed out; releasing with what was committed",
                group=self.consumer_group,
                queues=stuck,
            )
        releases = []
        for mq, pq in items:
            pq.draining = False
            final = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            epoch = self.rebalance_impl.epochs.get(mq) or self.offset_store.epochs.get(mq, 0)  # type: ignore[attr-defined]
            if epoch:
                releases.append((mq, epoch, final))
        if releases:
            await self.fenced.release(releases)
        for mq, _ in items:
            self.offset_store.remove_offset(mq)
            self.offset_store.epochs.pop(mq, None)  # type: ignore[attr-defined]
        return [True] * len(items)

    def _on_commit_fenced(self, mq: MessageQueue) -> None:
        """The broker refused our commit for ``mq``: the queue moved on; drop it now."""
        log.warning(
            "offset commit fenced, dropping the queue", group=self.consumer_group, mq=str(mq)
        )
        if self.rebalance_impl is not None and mq in self.rebalance_impl.process_queue_table:
            self.rebalance_impl.process_queue_table[mq].dropped = True
            self._spawn_side(self.rebalance_impl.remove_process_queue(mq))

    def _spawn_side(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _try_remove_order_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        assert self.offset_store is not None
        force_unlock = pq.dropped and pq.now_ms() > pq.last_lock_timestamp + self.unlock_delay_ms
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

    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        """``compute_pull_from_where`` for many queues: the stored offsets in one RPC per broker."""
        store = self.offset_store
        if not isinstance(store, RemoteBrokerOffsetStore):
            return list(await asyncio.gather(*(self.compute_pull_from_where(mq) for mq in mqs)))
        for mq in mqs:
            store.remove_offset(mq)  # removeDirtyOffset
        stored = await store.read_offsets_from_store(mqs)
        return list(await asyncio.gather(*(self._pull_from_where(mq, stored[mq]) for mq in mqs)))

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly assigned queue starts: the committed offset, else ConsumeFromWhere."""
        assert self.offset_store is not None and self._client is not None
        self.offset_store.remove_offset(mq)  # removeDirtyOffset
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        return await self._pull_from_where(mq, last)

    async def _pull_from_where(self, mq: MessageQueue, last: int) -> int:
        """Spec 5.3: a stored offset wins; with none (-1), ConsumeFromWhere; an error (-2): -1."""
        assert self._client is not None
        if last >= 0:
            return last
        if last != -1:
            return -1
        try:
            if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if is_retry_topic(mq.topic):
                if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
                    return 0
                return await self._queue_offset(mq, "GetMaxOffset")
            if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
                return await self._queue_offset(mq, "GetMaxOffset")
            stamp = int(time.mktime(time.strptime(self.consume_timestamp, "%Y%m%d%H%M%S")) * 1000)
            response = await self._client.invoke_broker(
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

    async def _queue_offset(self, mq: MessageQueue, method: str) -> int:
        assert self._client is not None
        response = await self._client.invoke_broker(
            mq.broker_name,
            method,
            broker_pb2.QueueOffsetRequest(topic=mq.topic, queue_id=mq.queue_id),
        )
        return int(response.offset)

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue on its master (orderly); True when we hold it."""
        if self.message_model is MessageModel.BROADCASTING or self._client is None:
            return True
        locked = await self._lock_batch(mq.broker_name, [mq])
        return mq in locked

    async def _lock_batch(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        assert self._client is not None and self.rebalance_impl is not None
        request = broker_pb2.LockBatchRequest(
            consumer_group=self.consumer_group,
            client_id=self.client_id,
            only_this_broker=True,
            mq_set=[mq.to_proto() for mq in mqs],
        )
        try:
            response = await self._client.invoke_broker(
                broker_name, "LockBatchMQ", request, timeout=1.0
            )
        except MQError as e:
            log.warning(
                "lockBatchMQ failed", group=self.consumer_group, broker=broker_name, error=str(e)
            )
            return set()
        locked = {MessageQueue.from_proto(m) for m in response.lock_ok_mq_set}
        now = _now_ms()
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
        if self._client is None or self.message_model is MessageModel.BROADCASTING:
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
                await self._client.invoke_broker(broker_name, "UnlockBatchMQ", request, timeout=1.0)
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

    async def acquire(self, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, int]] | None:
        """Fenced: the broker's grants (epoch, committed offset) for ``mqs``; None when classic."""
        if self.fenced is None:
            return None
        assert isinstance(self.offset_store, RemoteBrokerOffsetStore)
        grants = await self.fenced.acquire(mqs)
        for mq, (epoch, committed) in grants.items():
            self.offset_store.epochs[mq] = epoch
            if committed >= 0:
                self.offset_store.update_offset(mq, committed, increase_only=False)
        return grants

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        if self._client is None or not self.running:
            return
        for request in requests:
            self._client.pull_message_service.execute_pull_request_later(
                request, self.rebalance_dispatch_delay_ms
            )

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """A rebalance changed our queues: new subVersion, thresholds, heartbeat, listener."""
        assert self.rebalance_impl is not None and self._client is not None
        if topic in self.rebalance_impl.subscription_inner:
            expression, _ = self.rebalance_impl.subscription_inner[topic]
            self.rebalance_impl.subscription_inner[topic] = (expression, _now_ms())
        n = len(self.rebalance_impl.process_queue_table)
        if n:
            if self.pull_threshold_for_topic != -1:
                self.pull_threshold_for_queue = max(1, self.pull_threshold_for_topic // n)
            if self.pull_threshold_size_for_topic != -1:
                self.pull_threshold_size_for_queue = max(1, self.pull_threshold_size_for_topic // n)
        await self._client.send_heartbeat_to_all_broker()
        if self.message_queue_listener is not None and not is_retry_topic(topic):
            try:
                self.message_queue_listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception(
                    "messageQueueChanged listener failed", group=self.consumer_group, topic=topic
                )

    # ---- pulling ---------------------------------------------------------------------------
    async def pull_message(self, request: PullRequest) -> None:
        """One pull of one queue (spec 4.3): flow control, the RPC, then the outcome."""
        pq = request.process_queue
        if pq.dropped:
            return
        pq.last_pull_timestamp = pq.now_ms()
        client = self._client
        if client is None or not self.running:
            return
        service = client.pull_message_service
        if self.paused:
            service.execute_pull_request_later(request, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND)
            return
        reason = flow_control_reason(
            pq,
            pull_threshold_for_queue=self.pull_threshold_for_queue,
            pull_threshold_size_for_queue=self.pull_threshold_size_for_queue,
            consume_concurrently_max_span=self.consume_concurrently_max_span,
            consume_orderly=self.consume_orderly,
        )
        if reason is not None:
            service.execute_pull_request_later(
                request, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
            )
            return
        assert self.rebalance_impl is not None and self.offset_store is not None
        mq = request.message_queue
        if self.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            if not pq.locked:
                service.execute_pull_request_later(
                    request, self.pull_time_delay_mills_when_exception
                )
                return
            if not request.previously_locked:
                # The first pull after the lock re-reads the committed offset from the broker.
                offset = await self.compute_pull_from_where(mq)
                if offset < 0:
                    service.execute_pull_request_later(
                        request, self.pull_time_delay_mills_when_exception
                    )
                    return
                request.next_offset = offset
                request.previously_locked = True
        sub = self.rebalance_impl.subscription_inner.get(mq.topic)
        if sub is None:
            service.execute_pull_request_later(request, self.pull_time_delay_mills_when_exception)
            return
        commit_offset = 0
        if self.message_model is MessageModel.CLUSTERING:
            commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        pull = broker_pb2.PullMessageRequest(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=request.next_offset,
            max_msg_nums=self.pull_batch_size,
            commit_offset_enabled=commit_offset > 0,
            commit_offset=max(commit_offset, 0),
            suspend=True,
            suspend_timeout_millis=self.broker_suspend_max_time_millis,
            sub_version=sub[1],
            epoch=request.epoch,
            client_id=self.client_id,
            raw_records=True,
        )
        try:
            result = await client.invoke_broker(
                mq.broker_name,
                "PullMessage",
                pull,
                timeout=self.consumer_timeout_millis_when_suspend / 1000,
            )
        except QueueFenced as e:
            if pq.dropped:
                return  # a pull of a queue we already gave away: nothing to do
            log.warning(
                "pull fenced, dropping the queue",
                group=self.consumer_group,
                mq=str(mq),
                error=e.message,
            )
            await self.rebalance_impl.remove_process_queue(mq)
            client.rebalance_immediately()
            return
        except MQError as e:
            delay = (
                PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
                if e.response_code is ResponseCode.FLOW_CONTROL
                else self.pull_time_delay_mills_when_exception
            )
            log.debug("pull message failed", group=self.consumer_group, mq=str(mq), error=str(e))
            service.execute_pull_request_later(request, delay)
            return
        await self._on_pull_result(request, result, sub[0])

    async def _on_pull_result(self, request: PullRequest, result: Any, expression: str) -> None:
        assert (
            self._client is not None
            and self.offset_store is not None
            and self.rebalance_impl is not None
        )
        service = self._client.pull_message_service
        pq = request.process_queue
        mq = request.message_queue
        status = result.status
        if status == broker_pb2.FOUND:
            request.next_offset = result.next_begin_offset
            parsed = parse_expression(expression)
            if result.records:  # the stored records, as RocketMQ's pull body carries them
                msgs = decode_records(result.records, result.broker_name or mq.broker_name)
            else:
                msgs = [MessageExt.from_proto(m) for m in result.messages]
            if not parsed.matches_all:
                msgs = [m for m in msgs if parsed.matches_tags(m.tags)]
            for m in msgs:
                retry_of = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
                if retry_of and is_retry_topic(m.topic):
                    m.topic = retry_of  # resetRetryAndNamespace
            if not msgs:
                service.execute_pull_request_immediately(request)
                return
            if pq.dropped:
                return
            dispatch_to_consume = pq.put_message(msgs)
            tracer.record(
                "pull",
                group=self.consumer_group,
                client_id=self.client_id,
                mq=str(mq),
                count=len(msgs),
                first=msgs[0].queue_offset,
                next=request.next_offset,
            )
            if self.consume_orderly_service is not None:
                self.consume_orderly_service.submit_consume_request(
                    msgs, pq, mq, dispatch_to_consume
                )
            else:
                assert self.consume_service is not None
                self.consume_service.submit_consume_request(msgs, pq, mq)
            service.execute_pull_request_later(request, self.pull_interval_ms)
        elif status in (broker_pb2.NO_NEW_MSG, broker_pb2.NO_MATCHED_MSG):
            request.next_offset = result.next_begin_offset
            if pq.msg_count == 0 and not pq.dropped:
                self.offset_store.update_offset(mq, request.next_offset, increase_only=True)
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
            pq.dropped = True
            self.offset_store.update_and_freeze_offset(mq, request.next_offset)
            await self.offset_store.persist(mq)
            await self.rebalance_impl.remove_process_queue(mq)
            self._client.rebalance_immediately()

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
        if self._client is None:
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
            await self._client.invoke_broker(
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
