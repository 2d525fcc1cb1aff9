"""``SendMessageProcessor``: SEND_MESSAGE / SEND_BATCH_MESSAGE, validated, then stored.

Rules, in order: the topic name is legal and not a system topic; the broker and the topic are
writable; an unknown topic is auto-created when ``auto_create_topic_enable`` (else NOT_FOUND);
the queue id is -1 (the broker picks) or one of the topic's write queues; each message belongs
to the request's topic, has a body, and fits ``max_message_size``. Messages with a delay level
go to the schedule topic and reach their real queue when due. Nothing is acknowledged before the
store says it holds the message (after fsync under SYNC_FLUSH).
"""

from __future__ import annotations

import random
import time

from broker.config import BrokerConfig
from broker.schedule import ScheduleMessageService
from broker.store import MessageStore, PutMessageStatus
from broker.topic_config_manager import TopicConfigManager
from protocol.errors import (
    InvalidArgument,
    MessageIllegal,
    MessageTooLarge,
    NoPermission,
    OffsetOutOfRange,
    TopicNotFound,
)
from protocol.message import Message
from protocol.message_queue import MessageQueue
from protocol.perm import PermName
from protocol.v1 import broker_pb2
from protocol.validators import SYSTEM_TOPICS, check_topic

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
        """Store a batch in one queue and answer its ids and offsets."""
        topic = request.topic
        check_topic(topic)
        if topic in SYSTEM_TOPICS:
            raise InvalidArgument(f"topic[{topic}] is a system topic; sending to it is not allowed")
        if not PermName.is_writeable(self.config.broker_permission):
            raise NoPermission(
                f"the broker[{self.config.broker_name}] sending message is forbidden"
            )
        if not request.messages:
            raise InvalidArgument("messages: a send carries at least one message")
        for i, wire in enumerate(request.messages):
            if wire.topic and wire.topic != topic:
                raise MessageIllegal(
                    f"messages[{i}].topic is {wire.topic!r} but the batch is for topic {topic!r}"
                )
            if not wire.body:
                raise MessageIllegal(f"messages[{i}].body is empty")
            if len(wire.body) > self.store.config.max_message_size:
                raise MessageTooLarge(
                    f"messages[{i}].body is {len(wire.body)} bytes, over the limit of "
                    f"{self.store.config.max_message_size} bytes"
                )
            if not 0 <= wire.delay_time_level <= len(self.schedule.levels_ms):
                raise InvalidArgument(
                    f"messages[{i}].delay_time_level must be in 0..{len(self.schedule.levels_ms)}, "
                    f"got {wire.delay_time_level}"
                )
        queue_id = self._choose_queue(topic, request.queue_id)
        born_timestamp = request.born_timestamp or int(time.time() * 1000)
        born_host = request.born_host or peer
        messages = [Message.from_proto(m) for m in request.messages]
        for msg in messages:
            msg.topic = topic
        response = broker_pb2.SendMessageResponse(
            send_status=broker_pb2.SEND_OK,
            message_queue=MessageQueue(topic, self.config.broker_name, queue_id).to_proto(),
        )
        if any(msg.delay_time_level > 0 for msg in messages):
            results = []
            for msg in messages:
                results.extend(
                    await self.schedule.put_delayed_or_now(
                        msg,
                        queue_id,
                        born_host=born_host,
                        born_timestamp=born_timestamp,
                        reconsume_times=request.reconsume_times,
                    )
                )
        else:
            results = await self.store.put_messages(
                topic,
                queue_id,
                messages,
                born_host=born_host,
                born_timestamp=born_timestamp,
                reconsume_times=request.reconsume_times,
            )
        if any(r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT for r in results):
            # Stored, but not yet durable within sync_flush_timeout_ms (RocketMQ's answer too).
            response.send_status = broker_pb2.FLUSH_DISK_TIMEOUT_STATUS
        for r in results:
            response.results.add(
                msg_id=r.msg_id, queue_offset=r.queue_offset, commit_log_offset=r.commit_log_offset
            )
        return response
