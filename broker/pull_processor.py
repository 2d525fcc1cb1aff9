"""``PullMessageProcessor``: PULL_MESSAGE with RocketMQ's checks, statuses and long polling.

Checks, in order (spec 4.4): broker readable; names legal; topic exists and is readable; queue
id within the read queues; offset and count not negative; the subscription (the request's own
when ``has_subscription``, else the one the group's heartbeat registered, which must not be
older than the pull's ``sub_version``); in the fenced handoff, the epoch. Then the piggybacked
commit offset is applied (first arrival only), the store is read, and an empty answer is held
by the ``PullRequestHoldService`` until a message arrives or the suspend timeout passes.

Ours, off unless asked (Kafka's ``fetch.min.bytes`` / ``fetch.max.wait.ms``, in messages): a
pull with ``min_msg_nums`` and ``max_wait_millis`` that finds fewer than ``min_msg_nums``
entries after its offset, but some, waits up to ``max_wait_millis`` more for the rest, so a
consumer that keeps up with its producers takes its messages in fewer, fuller answers.

With ``raw_records`` the answer is the found records as stored, back to back in ``records``
(RocketMQ's pull body), which the client decodes with ``aiorocketmq.protocol.record.decode_records``: the
broker builds no object per message. Otherwise each message is decoded into ``messages``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Protocol

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.long_polling import PullRequestHoldService, Wake
from aiorocketmq.broker.store import GetMessageResult, GetMessageStatus, MessageStore
from aiorocketmq.broker.subscription_group_manager import SubscriptionGroupConfig
from aiorocketmq.broker.topic_config_manager import TopicConfigManager
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    NoPermission,
    OffsetOutOfRange,
    QueueFenced,
    SubscriptionNotExist,
    SubscriptionNotLatest,
    TopicNotFound,
)
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.tags import SubscriptionExpression, parse_expression
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import check_group, check_topic

__all__ = ["DEFAULT_PULL_BATCH_SIZE", "DEFAULT_SUSPEND_TIMEOUT_MS", "PullMessageProcessor"]

DEFAULT_PULL_BATCH_SIZE = 32
DEFAULT_SUSPEND_TIMEOUT_MS = 15_000


class SubscriptionLookup(Protocol):
    """What the pull needs from the consumer groups: the group's settings (may it consume?),
    the registered expression and its version."""

    def group_settings(self, group: str) -> SubscriptionGroupConfig: ...

    def registered_subscription(
        self, group: str, topic: str
    ) -> tuple[SubscriptionExpression, int] | None: ...


class EpochCheck(Protocol):
    """Fenced handoff: raise ``QueueFenced`` unless ``epoch`` is the queue's current one."""

    def check_epoch(self, group: str, mq: MessageQueue, epoch: int) -> None: ...


class QueueWatcher(Protocol):
    """Watch the queue of a pull that found nothing, for its client's channel
    (``queue_watch``); whether it is watched."""

    def watch_pull(self, request: broker_pb2.PullMessageRequest) -> bool: ...


class OffsetCommitter(Protocol):
    def commit_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None: ...

    def pending_reset(
        self, group: str, topic: str, queue_id: int, pull_offset: int
    ) -> int | None: ...


_NOT_FOUND_STATUSES = {
    GetMessageStatus.OFFSET_FOUND_NULL,
    GetMessageStatus.OFFSET_OVERFLOW_ONE,
}


def to_pull_status(result: GetMessageResult, request_offset: int) -> int:
    """The store's status as the client sees it (RocketMQ's response code, then PullStatus)."""
    status = result.status
    if status is GetMessageStatus.FOUND:
        return broker_pb2.FOUND
    if status is GetMessageStatus.NO_MATCHED_MESSAGE:
        return broker_pb2.NO_MATCHED_MSG
    if status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE):
        return broker_pb2.OFFSET_ILLEGAL if request_offset != 0 else broker_pb2.NO_NEW_MSG
    if status in _NOT_FOUND_STATUSES:
        return broker_pb2.NO_NEW_MSG
    return broker_pb2.OFFSET_ILLEGAL


class PullMessageProcessor:
    """Answers pulls, holding empty ones for long polling."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        store: MessageStore,
        hold: PullRequestHoldService,
        subscriptions: SubscriptionLookup,
        offsets: OffsetCommitter,
        fences: EpochCheck,
        watcher: QueueWatcher | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.hold = hold
        self.subscriptions = subscriptions
        self.offsets = offsets
        self.fences = fences
        self.watcher = watcher
        self.pull_offset_table: dict[tuple[str, str, int], int] = {}
        # (topic, group) -> [messages, bytes] answered: the metrics' messages and throughput out.
        self.stats: dict[tuple[str, str], list[int]] = {}

    def _expression(self, request: broker_pb2.PullMessageRequest) -> SubscriptionExpression:
        if request.has_subscription:
            if request.expression_type not in ("", "TAG"):
                raise InvalidArgument(
                    f"expression_type {request.expression_type!r} is not supported; use TAG"
                )
            return parse_expression(request.sub_expression)
        registered = self.subscriptions.registered_subscription(
            request.consumer_group, request.topic
        )
        if registered is None:
            raise SubscriptionNotExist(
                f"the consumer's subscription not exist, group: {request.consumer_group}, "
                f"topic: {request.topic} (send a heartbeat first)"
            )
        expression, sub_version = registered
        if sub_version < request.sub_version:
            raise SubscriptionNotLatest(
                f"the consumer's subscription not latest, group: {request.consumer_group}, "
                f"topic: {request.topic}, broker has {sub_version}, pull has {request.sub_version}"
            )
        return expression

    def _validate(self, request: broker_pb2.PullMessageRequest) -> None:
        if not PermName.is_readable(self.config.broker_permission):
            raise NoPermission(
                f"the broker[{self.config.broker_name}] pulling message is forbidden"
            )
        check_group(request.consumer_group)
        check_topic(request.topic)
        if not self.subscriptions.group_settings(request.consumer_group).consume_enable:
            raise NoPermission(
                f"subscription group no permission, {request.consumer_group} (consumeEnable is "
                "false)"
            )
        config = self.topics.select_topic_config(request.topic)
        if config is None:
            raise TopicNotFound(f"topic[{request.topic}] not exist, apply first please")
        if not PermName.is_readable(config.perm):
            raise NoPermission(f"the topic[{request.topic}] pulling message is forbidden")
        if not 0 <= request.queue_id < config.read_queue_nums:
            raise OffsetOutOfRange(
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}]"
            )
        if request.queue_offset < 0:
            raise InvalidArgument(f"queue_offset must be >= 0, got {request.queue_offset}")
        if request.max_msg_nums < 0 or request.max_msg_bytes < 0:
            raise InvalidArgument(
                f"max_msg_nums and max_msg_bytes must be >= 0, got {request.max_msg_nums} "
                f"and {request.max_msg_bytes}"
            )
        if request.suspend_timeout_millis < 0:
            raise InvalidArgument(
                f"suspend_timeout_millis must be >= 0, got {request.suspend_timeout_millis}"
            )
        if request.min_msg_nums < 0 or request.max_wait_millis < 0:
            raise InvalidArgument(
                f"min_msg_nums and max_wait_millis must be >= 0, got {request.min_msg_nums} "
                f"and {request.max_wait_millis}"
            )

    def _check_epoch(self, request: broker_pb2.PullMessageRequest) -> None:
        """Fenced handoff: ``QueueFenced`` unless the pull's epoch (when it has one) is its
        queue's current one."""
        if request.epoch:
            mq = MessageQueue(request.topic, self.config.broker_name, request.queue_id)
            self.fences.check_epoch(request.consumer_group, mq, request.epoch)

    def _hold_timeout_ms(self, request: broker_pb2.PullMessageRequest) -> int:
        """The longest a pull is held, its minimum's wait included."""
        if self.config.long_polling_enable:
            return request.suspend_timeout_millis or DEFAULT_SUSPEND_TIMEOUT_MS
        return self.config.short_polling_time_mills

    def _max_nums(self, request: broker_pb2.PullMessageRequest) -> int:
        return min(request.max_msg_nums or DEFAULT_PULL_BATCH_SIZE, self.config.max_pull_msg_nums)

    def _lingers(self, request: broker_pb2.PullMessageRequest) -> int:
        """How many queue entries after the pull's offset it waits for (its ``min_msg_nums``
        capped at its batch), or 0: it asked to be answered at once, has its minimum, or has
        nothing (woken by a release, not by a message)."""
        if request.min_msg_nums <= 1 or not request.suspend or request.max_wait_millis <= 0:
            return 0  # the usual pull: answered at once, nothing more to look up
        want = min(request.min_msg_nums, self._max_nums(request))
        if want <= 1:
            return 0
        available = self.store.get_max_offset(request.topic, request.queue_id)
        return want if 0 < available - request.queue_offset < want else 0

    def _read(
        self, request: broker_pb2.PullMessageRequest, expression: SubscriptionExpression
    ) -> tuple[int, GetMessageResult]:
        max_nums = self._max_nums(request)
        result = self.store.get_messages(
            request.consumer_group,
            request.topic,
            request.queue_id,
            request.queue_offset,
            max_nums,
            request.max_msg_bytes or None,
            None if expression.matches_all else expression,
            raw=request.raw_records,
        )
        return to_pull_status(result, request.queue_offset), result

    def _moved_by_reset(
        self, request: broker_pb2.PullMessageRequest
    ) -> broker_pb2.PullMessageResponse | None:
        """PULL_OFFSET_MOVED to the reset offset while an administrator's reset of the queue
        is pending and the pull starts elsewhere (the consumer drops the queue and re-adds it
        from there: the OFFSET_ILLEGAL path every client has)."""
        moved_to = self.offsets.pending_reset(
            request.consumer_group, request.topic, request.queue_id, request.queue_offset
        )
        if moved_to is None:
            return None
        return broker_pb2.PullMessageResponse(
            status=broker_pb2.OFFSET_ILLEGAL,
            next_begin_offset=moved_to,
            min_offset=self.store.get_min_offset(request.topic, request.queue_id),
            max_offset=self.store.get_max_offset(request.topic, request.queue_id),
            broker_name=self.config.broker_name,
        )

    async def pull(
        self,
        request: broker_pb2.PullMessageRequest,
        peer: str,
        *,
        holder: Hashable | None = None,
    ) -> broker_pb2.PullMessageResponse:
        """One pull: validate, commit the piggybacked offset, read, hold while empty (as
        ``holder``'s, when given: see ``PullRequestHoldService.release``)."""
        self._validate(request)
        expression = self._expression(request)
        self._check_epoch(request)
        moved = self._moved_by_reset(request)
        if moved is not None:
            return moved
        if request.commit_offset_enabled:
            self.offsets.commit_offset(
                peer, request.consumer_group, request.topic, request.queue_id, request.commit_offset
            )
        status, result = self._read(request, expression)
        wake: Wake | None = None
        held_since: float | None = None  # loop time the hold began (the linger counts in it)
        if status == broker_pb2.NO_NEW_MSG and request.suspend:
            held_since = asyncio.get_running_loop().time()
            wake = await self.hold.suspend(
                request.topic,
                request.queue_id,
                request.queue_offset,
                None if expression.matches_all else expression,
                self._hold_timeout_ms(request) / 1000,
                holder,
            )
            moved = self._moved_by_reset(request)  # a reset may have woken it
            if moved is not None:
                return moved
        want = self._lingers(request) if status == broker_pb2.FOUND or wake is Wake.ARRIVED else 0
        if want:
            # Something is there but less than the pull's minimum: give the rest up to
            # max_wait_millis (within the hold's timeout) to arrive, parked as if the minimum's
            # last entry were the offset. Any entry counts, matched by the filter or not.
            now = asyncio.get_running_loop().time()
            since = now if held_since is None else held_since
            left_s = self._hold_timeout_ms(request) / 1000 - (now - since)
            wait_s = min(request.max_wait_millis / 1000, left_s)
            if wait_s > 0:
                await self.hold.suspend(
                    request.topic,
                    request.queue_id,
                    request.queue_offset + want - 1,
                    None,
                    wait_s,
                    holder,
                )
                moved = self._moved_by_reset(request)
                if moved is not None:
                    return moved
        if want or wake in (Wake.ARRIVED, Wake.RELEASED):
            self._check_epoch(request)  # the queue may have moved while we waited
            status, result = self._read(request, expression)
        self.pull_offset_table[(request.consumer_group, request.topic, request.queue_id)] = (
            result.next_begin_offset
        )
        broker_name = self.config.broker_name
        response = broker_pb2.PullMessageResponse(
            status=status,  # type: ignore[arg-type]
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            broker_name=broker_name,
        )
        if wake is Wake.TIMEOUT and request.watch and self.watcher is not None:
            # Held the whole timeout for nothing: watched from here on, not pulled again; not
            # when the queue moved on meanwhile (its new owner watches it, if anyone).
            try:
                self._check_epoch(request)
                response.watching = self.watcher.watch_pull(request)
            except QueueFenced:
                pass
        if status == broker_pb2.FOUND:
            key = (request.topic, request.consumer_group)
            counts = self.stats.get(key)
            if counts is None:
                counts = self.stats[key] = [0, 0]
            counts[0] += result.message_count
            counts[1] += result.buffer_total_size
            if request.raw_records:
                response.records = result.records
            else:
                for msg in result.messages:
                    msg.broker_name = broker_name
                    response.messages.append(msg.to_proto())
        return response
