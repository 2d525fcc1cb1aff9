"""``PullAPIWrapper``: the one pull path of every consumer (RocketMQ's class of the same name).

It builds PULL_MESSAGE, sends it to the queue's master with the long-poll deadline, and turns
the answer into a ``PullResult`` whose messages are decoded (the C decoder when it was built)
and filtered by tag (``processPullResult``). The push and the lite-pull consumer differ only in
what they do with the result: push hands it to the consume service, lite pull buffers it for
``poll()``. Errors are the typed ``MQError`` of the call (``QueueFenced`` in the fenced
handoff, FLOW_CONTROL, SERVICE_NOT_AVAILABLE, ...); each consumer decides its delay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from aiorocketmq.protocol.message import MessageConst, MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.record import decode_records
from aiorocketmq.protocol.tags import SubscriptionExpression
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import is_retry_topic

__all__ = [
    "FOUND",
    "NO_MATCHED_MSG",
    "NO_NEW_MSG",
    "OFFSET_ILLEGAL",
    "PullAPIWrapper",
    "PullResult",
]

FOUND = broker_pb2.FOUND
NO_NEW_MSG = broker_pb2.NO_NEW_MSG
NO_MATCHED_MSG = broker_pb2.NO_MATCHED_MSG
OFFSET_ILLEGAL = broker_pb2.OFFSET_ILLEGAL


class _Invoker(Protocol):
    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any: ...
    def open_channel_id(self, broker_name: str) -> str: ...
    async def pull(
        self, broker_name: str, request: broker_pb2.PullMessageRequest, timeout: float
    ) -> broker_pb2.PullMessageResponse: ...


@dataclass(slots=True)
class PullResult:
    """A pull's answer: status, where to pull next, and the messages that passed the filter."""

    status: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msgs_found: list[MessageExt] = field(default_factory=list)
    # NO_NEW_MSG, and the broker watches the queue: pull it again when it says so.
    watching: bool = False


class PullAPIWrapper:
    """Pulls for one consumer group of one client (``pull_kernel``)."""

    def __init__(self, client: _Invoker, consumer_group: str, client_id: str) -> None:
        self.client = client
        self.consumer_group = consumer_group
        self.client_id = client_id

    async def pull_kernel(
        self,
        mq: MessageQueue,
        offset: int,
        *,
        max_nums: int,
        expression: SubscriptionExpression,
        sub_version: int,
        suspend_timeout_ms: int,
        timeout_ms: int,
        commit_offset: int = 0,
        has_subscription: bool = False,
        epoch: int = 0,
        min_nums: int = 1,
        max_wait_ms: int = 0,
        watch: bool = False,
    ) -> PullResult:
        """One PULL_MESSAGE of ``mq`` from ``offset``; raises the call's ``MQError``.

        ``commit_offset`` > 0 piggybacks an offset commit (the COMMIT_OFFSET flag);
        ``has_subscription`` sends ``expression`` with the pull (assigned queues) instead of
        relying on the heartbeat's subscription. ``min_nums`` > 1 lets the broker wait up to
        ``max_wait_ms`` for that many messages once one is there. ``watch``: a long poll that
        ends with nothing leaves the queue watched by the broker (the result says ``watching``).
        """
        request = broker_pb2.PullMessageRequest(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            commit_offset_enabled=commit_offset > 0,
            commit_offset=max(commit_offset, 0),
            suspend=True,
            suspend_timeout_millis=suspend_timeout_ms,
            has_subscription=has_subscription,
            sub_expression=expression.sub_string if has_subscription else "",
            expression_type="TAG",
            sub_version=sub_version,
            epoch=epoch,
            client_id=self.client_id,
            raw_records=True,
            min_msg_nums=min_nums,
            max_wait_millis=max_wait_ms,
            watch=watch,
            channel_id=self.client.open_channel_id(mq.broker_name) if watch else "",
        )
        response = await self.client.pull(mq.broker_name, request, timeout_ms / 1000)
        return self.process_pull_result(mq, response, expression)

    @staticmethod
    def process_pull_result(
        mq: MessageQueue,
        response: broker_pb2.PullMessageResponse,
        expression: SubscriptionExpression,
    ) -> PullResult:
        """Decode FOUND's records, keep the messages whose tag matches, restore retry topics."""
        result = PullResult(
            response.status,
            response.next_begin_offset,
            response.min_offset,
            response.max_offset,
            watching=response.watching,
        )
        if response.status != FOUND:
            return result
        if response.records:  # the stored records, as RocketMQ's pull body carries them
            msgs = decode_records(response.records, response.broker_name or mq.broker_name)
        else:
            msgs = [MessageExt.from_proto(m) for m in response.messages]
        if not expression.matches_all:
            msgs = [m for m in msgs if expression.matches_tags(m.tags)]
        if is_retry_topic(mq.topic):  # a record's topic is its queue's: else none is a retry
            for m in msgs:
                retry_of = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
                if retry_of and is_retry_topic(m.topic):
                    m.topic = retry_of  # resetRetryAndNamespace
        result.msgs_found = msgs
        return result
