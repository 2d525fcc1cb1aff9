"""``SendMessageProcessor``: SEND_MESSAGE / SEND_BATCH_MESSAGE, validated, then stored.

Rules, in order: the topic name is legal and not a system topic; the broker and the topic are
writable; an unknown topic is auto-created when ``auto_create_topic_enable`` (else NOT_FOUND);
the queue id is -1 (the broker picks) or one of the topic's write queues; each message belongs
to the request's topic, has a body, and fits ``max_message_size`` (checked by the store as it
writes, as RocketMQ's store checks the message after the processor has checked the topic).
Messages with a delay level go to the schedule topic and reach their real queue when due.
Nothing is acknowledged before the store says it holds the message (after fsync under
SYNC_FLUSH).

A batch comes as protobuf ``messages`` or, from our producer, as RocketMQ's batch body
(``batch_body``, ``aiorocketmq.protocol.batch``). The usual batch (no delay level) goes to the store as it
came off the wire: the store's one pass over the body or the protobuf messages validates and
encodes them (no ``Message`` per message), the batch is written at once, and with
``compact_result`` the answer is per batch: the first queue offset, the commit log offsets and
the store host, from which the producer makes the message ids
(``aiorocketmq.protocol.record.create_message_ids``). A batch with a delay level is refused by that pass,
validated whole, then stored message by message and answered with ``results``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.schedule import ScheduleMessageService
from aiorocketmq.broker.store import (
    DelayLevelRefused,
    MessageStore,
    PutMessageResult,
    PutMessageStatus,
)
from aiorocketmq.broker.topic_config_manager import TopicConfigManager
from aiorocketmq.protocol.batch import decode_batch
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    NoPermission,
    OffsetOutOfRange,
    TopicNotFound,
)
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.record import create_message_ids
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import SYSTEM_TOPICS, check_topic

__all__ = ["SendMessageProcessor"]


class SendMessageProcessor:
    """Validates and stores producer batches."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        store: MessageStore,
        schedule: ScheduleMessageService,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.schedule = schedule
        self._random = random.Random()
        # topic -> [messages, body bytes] stored: the metrics' messages and throughput in.
        self.stats: dict[str, list[int]] = {}

    def _count(self, topic: str, messages: int, size: int) -> None:
        counts = self.stats.get(topic)
        if counts is None:
            counts = self.stats[topic] = [0, 0]
        counts[0] += messages
        counts[1] += size

    def _choose_queue(self, topic: str, queue_id: int) -> int:
        config = self.topics.select_topic_config(topic)
        if config is None:
            if not self.config.auto_create_topic_enable:
                raise TopicNotFound(
                    f"topic[{topic}] not exist, apply first please (auto-creation is off)"
                )
            config = self.topics.create_topic_in_send_message_method(topic)
        if not PermName.is_writeable(config.perm):
            raise NoPermission(f"the topic[{topic}] sending message is forbidden")
        if queue_id == -1:
            return self._random.randrange(config.write_queue_nums)
        if not 0 <= queue_id < config.write_queue_nums:
            raise OffsetOutOfRange(
                f"queue_id {queue_id} is out of range for topic {topic}: "
                f"write queues are 0..{config.write_queue_nums - 1}"
            )
        return queue_id

    async def send(
        self, request: broker_pb2.SendMessageRequest, peer: str
    ) -> broker_pb2.SendMessageResponse:
        """Store a batch in one queue and answer its ids and offsets (or the compact result)."""
        topic = request.topic
        check_topic(topic)
        if topic in SYSTEM_TOPICS:
            raise InvalidArgument(f"topic[{topic}] is a system topic; sending to it is not allowed")
        if not PermName.is_writeable(self.config.broker_permission):
            raise NoPermission(
                f"the broker[{self.config.broker_name}] sending message is forbidden"
            )
        wire = request.messages
        body = request.batch_body
        if wire and body:
            raise InvalidArgument("a send carries messages or batch_body, not both")
        if not wire and not body:
            raise InvalidArgument("messages: a send carries at least one message")
        queue_id = self._choose_queue(topic, request.queue_id)
        born_host = request.born_host or peer
        born_timestamp = request.born_timestamp or int(time.time() * 1000)
        response = broker_pb2.SendMessageResponse(
            send_status=broker_pb2.SEND_OK,
            message_queue=MessageQueue(topic, self.config.broker_name, queue_id).to_proto(),
        )
        try:
            # One pass over the messages: validated, encoded and stored as they came.
            put = await self.store.put_batch(
                topic,
                queue_id,
                body or wire,
                born_host=born_host,
                born_timestamp=born_timestamp,
                reconsume_times=request.reconsume_times,
                check_topics=True,
                refuse_delayed=True,
            )
        except DelayLevelRefused:
            messages = decode_batch(body, topic) if body else [Message.from_proto(m) for m in wire]
            self.store.validate_messages(topic, messages, born_host=born_host, check_topics=True)
            self._check_delay_levels(messages)
            results = await self._send_delayed(
                request, messages, queue_id, born_host, born_timestamp
            )
            if any(r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT for r in results):
                response.send_status = broker_pb2.FLUSH_DISK_TIMEOUT_STATUS
            for r in results:
                response.results.add(
                    msg_id=r.msg_id,
                    queue_offset=r.queue_offset,
                    commit_log_offset=r.commit_log_offset,
                )
            self._count(topic, len(messages), sum(len(m.body) for m in messages))
            return response
        self._count(
            topic,
            len(put.commit_log_offsets),
            len(body) if body else sum(len(m.body) for m in wire),
        )
        if put.status is PutMessageStatus.FLUSH_DISK_TIMEOUT:
            # Stored, but not yet durable within sync_flush_timeout_ms (RocketMQ's answer too).
            response.send_status = broker_pb2.FLUSH_DISK_TIMEOUT_STATUS
        if request.compact_result:
            response.first_queue_offset = put.queue_offset
            response.commit_log_offsets.extend(put.commit_log_offsets)
            response.store_host = self.store.store_host
            return response
        ids = create_message_ids(*self.store.store_host_address, put.commit_log_offsets)
        add = response.results.add
        for i, (offset, msg_id) in enumerate(zip(put.commit_log_offsets, ids, strict=True)):
            add(msg_id=msg_id, queue_offset=put.queue_offset + i, commit_log_offset=offset)
        return response

    def _check_delay_levels(self, messages: Sequence[Message]) -> None:
        levels = len(self.schedule.levels_ms)
        for i, wire in enumerate(messages):
            if not 0 <= wire.delay_time_level <= levels:
                raise InvalidArgument(
                    f"messages[{i}].delay_time_level must be in 0..{levels}, "
                    f"got {wire.delay_time_level}"
                )

    async def _send_delayed(
        self,
        request: broker_pb2.SendMessageRequest,
        messages: Sequence[Message],
        queue_id: int,
        born_host: str,
        born_timestamp: int,
    ) -> list[PutMessageResult]:
        """A batch with delayed messages: each goes to the schedule topic or its queue."""
        results: list[PutMessageResult] = []
        for msg in messages:
            msg.topic = request.topic
            results.extend(
                await self.schedule.put_delayed_or_now(
                    msg,
                    queue_id,
                    born_host=born_host,
                    born_timestamp=born_timestamp,
                    reconsume_times=request.reconsume_times,
                )
            )
        return results
