"""``ConsumerCore``: what every consumer does the same way, and what the client instance drives.

RocketMQ splits a consumer into the user's class (``DefaultMQPushConsumer``,
``DefaultLitePullConsumer``), the implementation the client instance drives through its
``MQConsumerInner`` interface, and a rebalance subclass per consume mode. Here:

- the user's classes (``PushConsumer``, ``LitePullConsumer``) hold the user API only;
- ``ConsumerCore`` (this module) is the ``MQConsumerInner`` side they share: the client
  instance and its release, the offset store, the fenced handoff (which owns the epochs),
  ``RebalanceImpl``, the one pull path (``PullAPIWrapper``), the start-offset decision
  (``compute_pull_from_where``, spec 5.3), the heartbeat's ``ConsumerData``, side tasks;
- ``PushConsumerImpl`` and ``LitePullConsumerImpl`` extend it with what differs (the consume
  service and pull requests, or the per-queue pull tasks and the poll buffer);
- the rebalance modes (``RebalancePushImpl``, ``RebalanceLitePullImpl``) are small objects
  passed to ``RebalanceImpl``.

A consumer joining a group, from the core's side: ``start_client`` takes (or creates) the
client instance of our client id, loads the offset store, registers with the instance and
fetches the routes; ``join`` sends the heartbeat (which opens the channel stream to each
broker, and each broker notifies the group) and wakes the rebalance service, which calls
``do_rebalance``; new queues start at ``compute_pull_from_where_many``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

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
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.pull_api import PullAPIWrapper
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.rebalance_impl import RebalanceImpl, RebalanceMode
from aiorocketmq.consumer.settings import ConsumerSettings
from aiorocketmq.consumer.stats import ConsumerStatsManager
from aiorocketmq.consumer.types import ConsumeFromWhere, MessageModel
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.client_id import local_ip
from aiorocketmq.protocol.errors import MQError, QueueFenced
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.tags import parse_expression
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import is_retry_topic
from aiorocketmq.trace import tracer

__all__ = ["ConsumerAPI", "ConsumerCore", "RebalanceModeBase", "now_ms"]

log = get_logger("aiorocketmq.consumer")


def now_ms() -> int:
    return int(time.time() * 1000)


class ConsumerCore:
    """The shared half of a consumer implementation (RocketMQ's ``MQConsumerInner``)."""

    #: CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (lite pull), as the heartbeat says.
    consume_type: ClassVar[common_pb2.ConsumeType] = common_pb2.CONSUME_PASSIVELY

    def __init__(self, group: str, namesrv_addr: str, settings: ConsumerSettings) -> None:
        self.consumer_group = group
        self.namesrv_addr = namesrv_addr
        self.settings = settings
        self.client_ip = settings.client_ip or local_ip()
        self.client: MQClientInstance | None = None
        self.client_id = ""
        self.offset_store: OffsetStore | None = None
        self.rebalance_impl: RebalanceImpl | None = None
        self.fenced: FencedHandoff | None = None
        self.pull_api: PullAPIWrapper | None = None
        # topic -> (expression, subVersion): what the rebalance and the heartbeat use.
        self.subscription_inner: dict[str, tuple[str, int]] = {}
        self.running = False
        self._side_tasks: set[asyncio.Future[Any]] = set()
        # Pull and consume rates, for the running info (GET_CONSUMER_RUNNING_INFO).
        self.stats = ConsumerStatsManager(started=time.monotonic())
        self.start_timestamp = 0

    @property
    def group_name(self) -> str:
        return self.consumer_group

    @property
    def message_model(self) -> MessageModel:
        return self.settings.message_model

    @property
    def clustering(self) -> bool:
        return self.settings.message_model is MessageModel.CLUSTERING

    # ---- start and shutdown ----------------------------------------------------------------
    async def start_client(
        self,
        mode: RebalanceMode,
        *,
        fenced: bool,
        pull_max_idle_ms: int = 120_000,
        watch: bool = False,
        acquire_wait_ms: int = 0,
    ) -> MQClientInstance:
        """Client instance, offset store, fenced handoff, rebalance, routes: all but the join.

        On failure everything taken is given back before the error propagates.
        """
        s = self.settings
        self.client_id = consumer_client_id(self.client_ip, s.instance_name, self.clustering)
        client = MQClientManager.get_or_create(self.client_id, self.namesrv_addr, s.client_config)
        self.client = client
        try:
            self.offset_store = new_offset_store(
                not self.clustering,
                self.consumer_group,
                self.client_id,
                client.invoke_broker,
                s.offset_store_dir,
            )
            await self.offset_store.load()
            epochs: dict[MessageQueue, int] = {}
            if fenced and isinstance(self.offset_store, RemoteBrokerOffsetStore):
                self.fenced = FencedHandoff(
                    client,
                    self.consumer_group,
                    self.wanted_queues,
                    owed=client.rebalance_immediately,
                    watch=watch,
                )
                epochs = self.fenced.epochs
                self.offset_store.epochs = epochs  # commits present the grant's epoch
                self.offset_store.watching = self.fenced.watching  # grants say which
                self.offset_store.fenced = True
            elif watch and isinstance(self.offset_store, RemoteBrokerOffsetStore):
                self.offset_store.watch_channel = client.open_channel_id
            self.rebalance_impl = RebalanceImpl(
                self.consumer_group,
                s.message_model,
                s.allocate_strategy,
                client,
                mode,
                fenced=self.fenced is not None,
                pull_max_idle_ms=pull_max_idle_ms,
                epochs=epochs,
                acquire_wait_ms=acquire_wait_ms,
            )
            self.rebalance_impl.subscription_inner = self.subscription_inner
            self.pull_api = PullAPIWrapper(client, self.consumer_group, self.client_id)
            client.register_consumer(self)
            await client.start()
            self.running = True
            self.start_timestamp = int(time.time() * 1000)
            for topic in sorted(self.subscribed_topics()):
                await client.update_topic_route_info_from_name_server(topic)
        except BaseException:
            self.running = False
            await self.release_client()
            raise
        return client

    async def join(self, *, rebalance: bool) -> None:
        """Heartbeat every broker (the channels open, the brokers notify the group); rebalance."""
        assert self.client is not None
        if await self.client.send_heartbeat_to_all_broker() and rebalance:
            self.client.rebalance_immediately()

    async def leave(self, finals: Sequence[tuple[MessageQueue, int]] = ()) -> None:
        """UNREGISTER_CLIENT everywhere, forget the rebalance state, stop side tasks, release.

        Fenced: the grants of ``finals`` (queue, final offset) are released with it, riding
        with each broker's unregister (``FencedHandoff.leaving``).
        """
        assert self.client is not None and self.rebalance_impl is not None
        if self.fenced is not None and finals:
            riding = await self.fenced.leaving(list(finals))
            answers = await self.client.unregister_consumer(
                self.consumer_group, self.fenced.riders(riding)
            )
            unanswered = self.fenced.left(riding, answers)
            if unanswered:
                # Refused or lost: each release alone, then the unregister again, there.
                await self.fenced.release_each(unanswered)
                await self.client.unregister_consumer(self.consumer_group, only=set(unanswered))
            if self.offset_store is not None:
                self.offset_store.remove_offsets(mq for mq, _ in finals)
        else:
            await self.client.unregister_consumer(self.consumer_group)
        self.rebalance_impl.destroy()
        if self.fenced is not None:
            self.fenced.close()
        await self.cancel_side_tasks()
        await self.release_client()

    async def release_client(self) -> None:
        if self.client is not None:
            if self.client.consumer_table.get(self.consumer_group) is self:
                # Not another consumer's entry (a duplicate group fails register_consumer).
                del self.client.consumer_table[self.consumer_group]
            await MQClientManager.release(self.client_id)
            self.client = None

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a side task this consumer cancels at shutdown."""
        self.track(asyncio.ensure_future(coro))

    def track(self, task: asyncio.Future[Any]) -> None:
        """Keep ``task`` (cancelled or not) until it ends, and wait for it at shutdown."""
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def cancel_side_tasks(self) -> None:
        side = [t for t in self._side_tasks if t is not asyncio.current_task()]
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        self._side_tasks.clear()

    # ---- what the client instance asks (MQConsumerInner) -----------------------------------
    def consumer_data(self) -> common_pb2.ConsumerData:
        """The heartbeat's entry for this group: its type, model and subscriptions."""
        data = common_pb2.ConsumerData(
            group_name=self.consumer_group,
            consume_type=self.consume_type,
            message_model=self.settings.message_model.to_proto(),
            consume_from_where=self.settings.consume_from_where.to_proto(),
        )
        for topic, (expression, version) in sorted(self.subscription_inner.items()):
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
        return set(self.subscription_inner)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self.rebalance_impl is not None and topic in self.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = mqs

    def is_balanced(self) -> bool:
        """Every topic's process queues equal its last allocation (no RPC)."""
        return self.rebalance_impl is None or self.rebalance_impl.is_balanced()

    # What each consumer does its own way (the client instance calls these too).
    async def do_rebalance(self) -> bool:
        raise NotImplementedError

    async def persist_consumer_offset(self) -> None:
        raise NotImplementedError

    def allocated_by(self, members: list[str]) -> bool:
        """The last rebalance used exactly these (sorted) members and still holds its
        allocation (a notification carrying them needs no pass)."""
        if self.fenced is not None and self.fenced.owes():
            return False  # a pass would first retry releases and settle unsure grants
        return self.rebalance_impl is not None and self.rebalance_impl.allocated_by(members)

    def broker_channel_lost(self, broker_name: str) -> None:
        """Our channel to ``broker_name`` ended (the broker may have closed it and given our
        grants away). Fenced, the queues of that broker hand no more batches to the listener
        until a new channel says which grants are still ours (``broker_reconnected``)."""
        if self.fenced is None or self.rebalance_impl is None:
            return
        held_back = 0
        for mq, pq in self.rebalance_impl.process_queue_table.items():
            if mq.broker_name == broker_name and not pq.dropped:
                pq.suspend()
                held_back += 1
        if held_back:
            log.info(
                "channel to broker lost, queues held back until their grants are confirmed",
                group=self.consumer_group,
                broker=broker_name,
                queues=held_back,
            )

    def broker_reconnected(
        self, broker_name: str, held: dict[MessageQueue, int] | None = None
    ) -> None:
        """A channel of ours to ``broker_name`` opened (it may have restarted, or moved): the
        offsets it was known to have are sent again at the next commit. ``held``: the grants of
        our group the new channel holds (None: not listed). Fenced, a queue of that broker we
        consume and do not find there with its epoch was given away while we were not
        connected (the broker closed our channel): dropped now, none of what we had pulled
        consumed (its next pull or commit would have been refused). The others go on."""
        if isinstance(self.offset_store, RemoteBrokerOffsetStore):
            self.offset_store.broker_reconnected(broker_name)
        if self.fenced is None or self.rebalance_impl is None:
            return
        epochs = self.fenced.epochs
        for mq, pq in list(self.rebalance_impl.process_queue_table.items()):
            if mq.broker_name != broker_name or pq.dropped:
                continue
            if held is None or held.get(mq) == epochs.get(mq):
                pq.resume()
                continue
            log.warning(
                "queue grant lost with our channel, dropping the queue",
                group=self.consumer_group,
                mq=str(mq),
                epoch=epochs.get(mq),
                broker_epoch=held.get(mq),
            )
            self.lose_queue(mq, pq)

    def hold_back_unconfirmed(self, requests: Iterable[PullRequest]) -> None:
        """Fenced: a queue added while our channel to its broker is down (its pass got the
        grant before the channel ended: the broker may give it away when it hears of that end)
        hands no batch to the listener until a new channel confirms the grant, as the queues
        held when the channel ended (``broker_channel_lost``, ``broker_reconnected``)."""
        if self.fenced is None or self.client is None:
            return
        for request in requests:
            if not self.client.open_channel_id(request.message_queue.broker_name):
                request.process_queue.suspend()

    def lose_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A fenced queue we no longer hold (its commit refused, or not held by our new
        channel): none of its pulled messages goes to the listener from now on; it is removed
        in a side task."""
        pq.dropped = True
        self.spawn(self._drop_queue(mq, pq))

    async def _drop_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A fenced queue we no longer hold: ``pq`` removed now (not a process queue that
        replaced it), and a pass asked for (it may be ours again, under a new grant)."""
        assert self.rebalance_impl is not None and self.client is not None
        await self.rebalance_impl.remove_process_queue(mq, pq)
        self.client.rebalance_immediately()

    def is_current(self, mq: MessageQueue, pq: ProcessQueue, epoch: int) -> bool:
        """Whether a refusal of a request made for ``pq`` under ``epoch`` is about the grant
        we hold now: ``pq`` is still the queue's, not dropped, and consumed under that epoch.
        A refusal of a request sent before the queue was dropped and granted to us again
        arrives late; it says nothing of the new grant."""
        current = self.rebalance_impl.process_queue_table.get(mq) if self.rebalance_impl else None
        return current is pq and not pq.dropped and pq.epoch == epoch

    async def pull_message(self, request: PullRequest) -> None:
        raise NotImplementedError

    def on_queue_released(self, mq: MessageQueue) -> None:
        raise NotImplementedError

    async def renew_watches(
        self, broker_name: str, requests: list[PullRequest]
    ) -> set[MessageQueue]:
        """Ours: the parked queues of ``broker_name`` watched again from their next offsets,
        in one WatchQueues request (not a pull each); the queues the broker watches now. The
        others (something to pull, no open channel, the request failed) are pulled."""
        client = self.client
        channel_id = client.open_channel_id(broker_name) if client is not None else ""
        if client is None or not channel_id:
            return set()
        request = broker_pb2.WatchQueuesRequest(
            consumer_group=self.consumer_group,
            client_id=client.client_id,
            channel_id=channel_id,
            queues=[
                broker_pb2.QueueWatch(
                    topic=r.message_queue.topic,
                    queue_id=r.message_queue.queue_id,
                    offset=r.next_offset,
                    epoch=r.epoch,
                )
                for r in requests
            ],
        )
        try:
            response = await client.invoke_broker(broker_name, "WatchQueues", request)
        except MQError as e:
            log.warning(
                "renewing watched queues failed: pulling them",
                group=self.consumer_group,
                broker=broker_name,
                error=str(e),
            )
            return set()
        watched = {r.message_queue for r, w in zip(requests, response.watching, strict=False) if w}
        for r in requests:
            if r.message_queue in watched:
                r.process_queue.last_pull_timestamp = r.process_queue.now_ms()  # idle by choice
        return watched

    def wanted_queues(self) -> set[MessageQueue]:
        """The queues the last allocation gives us, every topic."""
        rebalance = self.rebalance_impl
        return set().union(*rebalance.allocation.values()) if rebalance is not None else set()

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """An administrator reset the group's offsets (RESET_CONSUMER_CLIENT_OFFSET): the
        queues held here start over from there."""
        raise NotImplementedError

    # ---- offsets: where a queue starts -----------------------------------------------------
    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        """``compute_pull_from_where`` of many queues: stored offsets in one RPC per broker."""
        store = self.offset_store
        if not isinstance(store, RemoteBrokerOffsetStore):
            return list(await asyncio.gather(*(self.compute_pull_from_where(mq) for mq in mqs)))
        store.remove_offsets(mqs)  # removeDirtyOffset
        stored = await store.read_offsets_from_store(mqs)
        return list(await asyncio.gather(*(self.pull_from_where(mq, stored[mq]) for mq in mqs)))

    async def compute_pull_from_where(
        self, mq: MessageQueue, read_type: ReadOffsetType = ReadOffsetType.READ_FROM_STORE
    ) -> int:
        """Where a newly assigned queue starts: the committed offset, else ConsumeFromWhere.

        With READ_FROM_STORE the cached offset is dropped first (``removeDirtyOffset``).
        """
        assert self.offset_store is not None
        if read_type is ReadOffsetType.READ_FROM_STORE:
            self.offset_store.remove_offset(mq)
        last = await self.offset_store.read_offset(mq, read_type)
        return await self.pull_from_where(mq, last)

    async def pull_from_where(self, mq: MessageQueue, last: int) -> int:
        """Spec 5.3: a stored offset wins; none (-1): ConsumeFromWhere; an error (-2): -1.

        The broker answers 0 for a queue whose head was never deleted (docs/protocol.md), so
        a new group reads a young queue from its start in one step; ConsumeFromWhere decides
        only where the head is gone.
        """
        if last >= 0:
            return last
        if last != -1:
            return -1
        where = self.settings.consume_from_where
        try:
            if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
                return (
                    0 if is_retry_topic(mq.topic) else await self.queue_offset(mq, "GetMaxOffset")
                )
            if is_retry_topic(mq.topic):
                return await self.queue_offset(mq, "GetMaxOffset")
            stamp = time.strptime(self.settings.consume_timestamp, "%Y%m%d%H%M%S")
            return await self.search_offset(mq, int(time.mktime(stamp) * 1000))
        except MQError as e:
            log.warning("compute pull from where failed", mq=str(mq), error=str(e))
            return -1

    async def queue_offset(self, mq: MessageQueue, method: str) -> int:
        """GET_MAX_OFFSET / GET_MIN_OFFSET of ``mq`` (the route is fetched if unknown)."""
        client = self.client
        if client is None:
            raise RuntimeError("The consumer not running, please start it first.")
        await self.refresh_route_if_unknown(mq)
        response = await client.invoke_broker(
            mq.broker_name,
            method,
            broker_pb2.QueueOffsetRequest(topic=mq.topic, queue_id=mq.queue_id),
        )
        return int(response.offset)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        assert self.client is not None
        response = await self.client.invoke_broker(
            mq.broker_name,
            "SearchOffsetByTimestamp",
            broker_pb2.SearchOffsetRequest(
                topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms
            ),
        )
        return int(response.offset)

    async def refresh_route_if_unknown(self, mq: MessageQueue) -> None:
        client = self.client
        if client is not None and client.find_broker_addr(mq.broker_name) is None:
            await client.update_topic_route_info_from_name_server(mq.topic)

    # ---- the fenced handoff ----------------------------------------------------------------
    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]] | None:
        """Fenced: the broker's grants (epoch, committed offset) for ``mqs``; None when classic.
        ``wait_ms``: how long the broker may wait for queues still held.

        ``FencedHandoff`` keeps each grant's epoch; the committed offset goes into the store.
        """
        if self.fenced is None or self.offset_store is None:
            return None
        grants = await self.fenced.acquire(mqs, wait_ms=wait_ms)
        for mq, (_, committed) in grants.items():
            # removeDirtyOffset, as the classic path does before it reads the stored offset: an
            # entry left from before (frozen by an offset reset that raced the queue's drop)
            # would otherwise keep the queue's commits at that offset for good.
            self.offset_store.remove_offset(mq)
            if committed >= 0:
                self.offset_store.update_offset(mq, committed, increase_only=False)
                if isinstance(self.offset_store, RemoteBrokerOffsetStore):
                    # The broker holds it (a grant's offset is a stored one, never a default):
                    # the periodic commit need not send it back.
                    self.offset_store.committed[mq] = committed
        return grants

    async def release_fenced(
        self,
        finals: list[tuple[MessageQueue, int]],
        epochs: Mapping[MessageQueue, int] | None = None,
    ) -> None:
        """Release each queue's grant (``epochs``: the one each was consumed under) with its
        final offset, then forget the queue's offset."""
        assert self.fenced is not None and self.offset_store is not None
        await self.fenced.release(finals, epochs=epochs)
        self.offset_store.remove_offsets(mq for mq, _ in finals)

    async def on_pull_fenced(self, mq: MessageQueue, pq: ProcessQueue, error: QueueFenced) -> bool:
        """A pull of ``pq`` (under its epoch) was refused (fenced handoff): the queue moved on;
        stop pulling it at once. A late refusal, ``pq`` dropped or replaced since, changes
        nothing (False)."""
        if not self.is_current(mq, pq, pq.epoch):
            log.info(
                "pull fenced under an earlier grant, ignored",
                group=self.consumer_group,
                mq=str(mq),
                epoch=pq.epoch,
            )
            return False
        log.warning(
            "pull fenced, dropping the queue",
            group=self.consumer_group,
            mq=str(mq),
            error=error.message,
        )
        await self._drop_queue(mq, pq)
        return True

    def record_pull(self, mq: MessageQueue, msgs: list[MessageExt], next_offset: int) -> None:
        """The trace's ``pull`` record: what one pull brought, and where the next one starts."""
        self.stats.pulled(mq.topic, len(msgs), time.monotonic())
        if tracer.wants("pull"):
            tracer.record(
                "pull",
                group=self.consumer_group,
                client_id=self.client_id,
                mq=str(mq),
                count=len(msgs),
                first=msgs[0].queue_offset,
                next=next_offset,
            )

    def running_info(self) -> broker_pb2.ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO: what this consumer holds, its settings and its rates."""
        s = self.settings
        info = broker_pb2.ConsumerRunningInfo(
            client_id=self.client_id,
            consumer_group=self.consumer_group,
            start_timestamp=self.start_timestamp,
            language="PYTHON",
        )
        info.properties.update(
            {
                "consumeType": common_pb2.ConsumeType.Name(self.consume_type),
                "messageModel": self.message_model.value,
                "consumeFromWhere": s.consume_from_where.name,
                "allocateMessageQueueStrategy": s.allocate_strategy.name,
                "handoff": s.handoff.value,
                "namesrvAddr": self.namesrv_addr,
            }
        )
        info.subscriptions.extend(self.consumer_data().subscription_data_set)
        rebalance = self.rebalance_impl
        offsets = getattr(self.offset_store, "offset_table", {})
        now = time.monotonic()
        topics: set[str] = set(self.subscription_inner)
        if rebalance is not None:
            for mq, pq in sorted(rebalance.process_queue_table.items()):
                held = offsets.get(mq)
                info.mq_table.add(
                    message_queue=mq.to_proto(),
                    commit_offset=int(held.value) if held is not None else -1,
                    cached_msg_count=pq.msg_count,
                    cached_msg_size_bytes=pq.msg_size,
                    locked=pq.locked,
                    dropped=pq.dropped,
                    last_pull_timestamp=pq.last_pull_timestamp,
                    last_consume_timestamp=pq.last_consume_timestamp,
                    epoch=rebalance.epochs.get(mq, 0),
                )
                topics.add(mq.topic)
        for topic in sorted(topics):
            info.status_table.append(self.stats.status(topic, now))
        return info

    async def persist_and_forget(self, mqs: list[MessageQueue]) -> None:
        """A dropped queue's offset, persisted (one commit per broker), then forgotten."""
        assert self.offset_store is not None
        await self.offset_store.persist_many(mqs)
        self.offset_store.remove_offsets(mqs)


class ConsumerAPI:
    """What both user-facing consumers show of their implementation, and ``async with``."""

    settings: ConsumerSettings
    _impl: ConsumerCore

    @property
    def consumer_group(self) -> str:
        return self._impl.consumer_group

    @property
    def namesrv_addr(self) -> str:
        return self._impl.namesrv_addr

    @property
    def client_id(self) -> str:
        """``ip@instance``, known once started."""
        return self._impl.client_id

    @property
    def instance_name(self) -> str | None:
        return self.settings.instance_name

    @property
    def message_model(self) -> MessageModel:
        return self.settings.message_model

    @property
    def running(self) -> bool:
        return self._impl.running

    @property
    def offset_store(self) -> OffsetStore | None:
        return self._impl.offset_store

    @property
    def rebalance_impl(self) -> RebalanceImpl | None:
        return self._impl.rebalance_impl

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()


class RebalanceModeBase:
    """What both rebalance modes answer the same way, from their consumer's core."""

    def __init__(self, impl: ConsumerCore) -> None:
        self.impl = impl

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return (await self.remove_unnecessary_message_queues([(mq, pq)]))[0]

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        raise NotImplementedError

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The start of a newly assigned queue; -1 (retry at a later rebalance) when unknown."""
        return await self.impl.compute_pull_from_where(mq)

    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        return await self.impl.compute_pull_from_where_many(mqs)

    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]] | None:
        return await self.impl.acquire(mqs, wait_ms=wait_ms)

    def abandon_grants(self, mqs: Iterable[MessageQueue]) -> None:
        """Fenced: grants a pass got but did not take (it failed first) are unsure: the next
        acquire settles them (kept if still ours, else released), as a lost answer's."""
        if self.impl.fenced is not None:
            self.impl.fenced.abandon(mqs)

    def pair_releases(self, brokers: Iterable[str]) -> None:
        """Fenced: the pass's next release to each of ``brokers`` rides with its acquire there
        (``FencedHandoff.pair``)."""
        if self.impl.fenced is not None:
            self.impl.fenced.pair(brokers)

    def unpair_releases(self) -> None:
        if self.impl.fenced is not None:
            self.impl.fenced.unpair()

    def handoff_owed(self) -> bool:
        """Fenced: a release still owed or a grant unsure. The pass then does not count as
        balanced (the client does not report the group settled, and a notification of the same
        members wakes a pass); the retry itself is the owed wake-up's (``FencedHandoff``)."""
        return self.impl.fenced is not None and self.impl.fenced.owes()

    async def before_rebalance(self) -> None:
        """Fenced: releases a broker missed go again first (it still counts us as holder)."""
        fenced = self.impl.fenced
        if fenced is not None:
            # The last allocation, only when there are unsure grants to weigh against it: a
            # union of every held queue at every pass is work for the rare case.
            await fenced.retry_pending(self.impl.wanted_queues() if fenced.unsure else ())
