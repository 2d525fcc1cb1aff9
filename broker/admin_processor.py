"""Administration: UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG,
GET_TOPIC_STATS_INFO, VIEW_MESSAGE_BY_ID, GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG and
GET_BROKER_RUNTIME_INFO."""

from __future__ import annotations

from collections.abc import Callable

from aiorocketmq.broker.config import BrokerConfig, config_properties, update_properties
from aiorocketmq.broker.store import MessageStore
from aiorocketmq.broker.topic_config_manager import TopicConfig, TopicConfigManager
from aiorocketmq.protocol.errors import InvalidArgument, QueryNotFound, TopicNotFound
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import SYSTEM_TOPICS, check_topic

__all__ = ["AdminProcessor"]

# RocketMQ's defaultQueryMaxNum and maxMsgsNumBatch.
DEFAULT_QUERY_MAX_NUM = 32
MAX_MSGS_NUM_BATCH = 64


class AdminProcessor:
    """Topic administration (a change re-registers with the name servers through the manager)."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        store: MessageStore,
        on_config_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        # Called after UPDATE_BROKER_CONFIG changed settings (to refresh what copies them).
        self.on_config_change = on_config_change

    def get_broker_config(self) -> broker_pb2.GetBrokerConfigResponse:
        return broker_pb2.GetBrokerConfigResponse(
            properties=config_properties(self.config, self.store.config)
        )

    def update_broker_config(
        self, request: broker_pb2.UpdateBrokerConfigRequest
    ) -> broker_pb2.UpdateBrokerConfigResponse:
        if not request.properties:
            raise InvalidArgument("no setting to update: give at least one key and value")
        try:
            changed = update_properties(self.config, dict(request.properties))
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        self.on_config_change()
        return broker_pb2.UpdateBrokerConfigResponse(properties=changed)

    def update_and_create_topic(
        self, request: broker_pb2.UpdateAndCreateTopicRequest
    ) -> broker_pb2.UpdateAndCreateTopicResponse:
        if not request.HasField("topic_config"):
            raise InvalidArgument("topic_config is required")
        config = TopicConfig.from_proto(request.topic_config)
        self.topics.update_topic_config(config)
        return broker_pb2.UpdateAndCreateTopicResponse()

    async def delete_topic(
        self, request: broker_pb2.DeleteTopicRequest
    ) -> broker_pb2.DeleteTopicResponse:
        """DELETE_TOPIC_IN_BROKER: the config (the name servers learn it at the re-registration
        this triggers) and the consume queues; the commit-log records age out as usual."""
        check_topic(request.topic)
        if request.topic in SYSTEM_TOPICS:
            raise InvalidArgument(f"topic[{request.topic}] is a system topic; it is not deleted")
        existed = self.topics.delete_topic_config(request.topic)
        await self.store.delete_topic_queues(request.topic)
        return broker_pb2.DeleteTopicResponse(existed=existed)

    def view_message(self, request: broker_pb2.ViewMessageRequest) -> common_pb2.MessageExt:
        """VIEW_MESSAGE_BY_ID: the message stored at a commit-log offset."""
        if request.commit_log_offset < 0:
            raise InvalidArgument(
                f"commit_log_offset must be >= 0, got {request.commit_log_offset}"
            )
        message = self.store.look_message_by_offset(request.commit_log_offset)
        if message is None:
            raise QueryNotFound(
                f"no message at commit log offset {request.commit_log_offset} on broker "
                f"{self.config.broker_name} (never stored there, or aged out)"
            )
        return message.to_proto()

    async def query_message(
        self, request: broker_pb2.QueryMessageRequest
    ) -> broker_pb2.QueryMessageResponse:
        """QUERY_MESSAGE: the topic's messages with the key (KEYS or UNIQ_KEY), newest first."""
        check_topic(request.topic)
        if not request.key:
            raise InvalidArgument("key is required")
        if request.max_num < 0 or request.begin_timestamp < 0 or request.end_timestamp < 0:
            raise InvalidArgument("max_num and the timestamps must be >= 0")
        end = request.end_timestamp or None
        if end is not None and end < request.begin_timestamp:
            raise InvalidArgument(
                f"end_timestamp {request.end_timestamp} is before begin_timestamp "
                f"{request.begin_timestamp}"
            )
        max_num = min(request.max_num or DEFAULT_QUERY_MAX_NUM, MAX_MSGS_NUM_BATCH)
        found = await self.store.query_messages_by_key(
            request.topic, request.key, max_num, request.begin_timestamp, end
        )
        response = broker_pb2.QueryMessageResponse()
        for message in found:
            message.broker_name = self.config.broker_name
            response.messages.append(message.to_proto())
        return response

    async def clean_expired_consume_queue(self) -> broker_pb2.CleanExpiredConsumeQueueResponse:
        """CLEAN_EXPIRED_CONSUMEQUEUE: expired segments, and queues of topics gone from here."""
        files, topics = await self.store.clean_expired_consume_queues(
            set(self.topics.topic_config_table) | set(SYSTEM_TOPICS)
        )
        return broker_pb2.CleanExpiredConsumeQueueResponse(
            files_removed=files, topics_removed=topics
        )

    def get_all_topic_config(self) -> broker_pb2.GetAllTopicConfigResponse:
        return broker_pb2.GetAllTopicConfigResponse(
            topic_configs=[c.to_proto() for _, c in sorted(self.topics.topic_config_table.items())]
        )

    def get_topic_stats_info(
        self, request: broker_pb2.GetTopicStatsInfoRequest
    ) -> broker_pb2.GetTopicStatsInfoResponse:
        check_topic(request.topic)
        config = self.topics.select_topic_config(request.topic)
        if config is None:
            raise TopicNotFound(
                f"topic[{request.topic}] not exist on broker {self.config.broker_name}"
            )
        response = broker_pb2.GetTopicStatsInfoResponse()
        for qid in range(max(config.read_queue_nums, config.write_queue_nums)):
            max_offset = self.store.get_max_offset(request.topic, qid)
            last = (
                self.store.get_store_timestamp(request.topic, qid, max_offset - 1)
                if max_offset > 0
                else 0
            )
            response.offsets.add(
                message_queue=MessageQueue(request.topic, self.config.broker_name, qid).to_proto(),
                min_offset=self.store.get_min_offset(request.topic, qid),
                max_offset=max_offset,
                last_update_timestamp=last or 0,
            )
        return response
