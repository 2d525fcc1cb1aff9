"""Offsets: QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP.

Rules: a query with no committed offset gets the zero-if-young answer (spec 5.3): 0 when asked
to and the queue's head was never deleted (empty or not: ours, RocketMQ needs a message at
offset 0, see ``offset/consume_from_where.py``), else QUERY_NOT_FOUND, so a new group with
CONSUME_FROM_LAST_OFFSET on a young topic reads from the beginning, in one step. Commits are
plain puts (not monotonic), one batch per broker; in the fenced handoff a commit must carry the
queue's current epoch.
"""

from __future__ import annotations

from typing import Protocol

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.offset.consume_from_where import query_offset_answer
from aiorocketmq.broker.store import MessageStore
from aiorocketmq.broker.topic_config_manager import TopicConfigManager
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    OffsetOutOfRange,
    QueryNotFound,
    TopicNotFound,
)
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import check_group, check_topic

__all__ = ["OffsetProcessor"]


class OffsetTable(Protocol):
    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None: ...


class EpochCheck(Protocol):
    def check_epoch(self, group: str, mq: MessageQueue, epoch: int) -> None: ...


class OffsetProcessor:
    """Consumer offsets and queue offsets."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        store: MessageStore,
        offsets: OffsetTable,
        fences: EpochCheck,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.offsets = offsets
        self.fences = fences

    def check_queue(self, topic: str, queue_id: int) -> None:
        """Raise unless ``topic`` exists here and ``queue_id`` is one of its queues."""
        check_topic(topic)
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotFound(f"topic[{topic}] not exist on broker {self.config.broker_name}")
        limit = max(config.read_queue_nums, config.write_queue_nums)
        if not 0 <= queue_id < limit:
            raise OffsetOutOfRange(
                f"queue_id {queue_id} is out of range for topic {topic}: queues are 0..{limit - 1}"
            )

    def query_consumer_offset(
        self, request: broker_pb2.QueryConsumerOffsetRequest
    ) -> broker_pb2.QueryConsumerOffsetResponse:
        check_group(request.consumer_group)
        offset = self._query(
            request.consumer_group, request.topic, request.queue_id, request.set_zero_if_not_found
        )
        if offset < 0:
            raise QueryNotFound(
                f"no committed offset for group {request.consumer_group} in "
                f"{MessageQueue(request.topic, self.config.broker_name, request.queue_id)}"
            )
        return broker_pb2.QueryConsumerOffsetResponse(offset=offset)

    def query_consumer_offsets(
        self, request: broker_pb2.QueryConsumerOffsetsRequest
    ) -> broker_pb2.QueryConsumerOffsetsResponse:
        """The batched query: -1 where the single query would answer QUERY_NOT_FOUND."""
        check_group(request.consumer_group)
        return broker_pb2.QueryConsumerOffsetsResponse(
            offsets=[
                self._query(
                    request.consumer_group, q.topic, q.queue_id, request.set_zero_if_not_found
                )
                for q in request.queues
            ]
        )

    def _query(self, group: str, topic: str, queue_id: int, set_zero_if_not_found: bool) -> int:
        """The committed offset, the zero-if-young answer, or -1 (QUERY_NOT_FOUND).

        One step: a young queue (its head never deleted) answers 0 even while it is empty, so
        a new group never skips what arrives during its first rebalance (consume_from_where.py).
        """
        self.check_queue(topic, queue_id)
        stored = self.offsets.query_offset(group, topic, queue_id)
        min_offset = self.store.get_min_offset(topic, queue_id) if stored < 0 else 0
        answer = query_offset_answer(stored, set_zero_if_not_found, min_offset)
        return -1 if answer is None else answer

    def update_consumer_offset(
        self, request: broker_pb2.UpdateConsumerOffsetRequest, peer: str
    ) -> broker_pb2.UpdateConsumerOffsetResponse:
        check_group(request.consumer_group)
        for i, entry in enumerate(request.offsets):
            self.check_queue(entry.topic, entry.queue_id)
            if entry.offset < 0:
                raise InvalidArgument(f"offsets[{i}].offset must be >= 0, got {entry.offset}")
        for entry in request.offsets:  # all checked first: a bad entry commits nothing
            if entry.epoch:
                mq = MessageQueue(entry.topic, self.config.broker_name, entry.queue_id)
                self.fences.check_epoch(request.consumer_group, mq, entry.epoch)
        for entry in request.offsets:
            self.offsets.commit_offset(
                peer, request.consumer_group, entry.topic, entry.queue_id, entry.offset
            )
        return broker_pb2.UpdateConsumerOffsetResponse()

    def min_offset(self, request: broker_pb2.QueueOffsetRequest) -> broker_pb2.QueueOffsetResponse:
        self.check_queue(request.topic, request.queue_id)
        return broker_pb2.QueueOffsetResponse(
            offset=self.store.get_min_offset(request.topic, request.queue_id)
        )

    def max_offset(self, request: broker_pb2.QueueOffsetRequest) -> broker_pb2.QueueOffsetResponse:
        self.check_queue(request.topic, request.queue_id)
        return broker_pb2.QueueOffsetResponse(
            offset=self.store.get_max_offset(request.topic, request.queue_id)
        )

    def search_offset(
        self, request: broker_pb2.SearchOffsetRequest
    ) -> broker_pb2.QueueOffsetResponse:
        self.check_queue(request.topic, request.queue_id)
        if request.timestamp < 0:
            raise InvalidArgument(f"timestamp must be >= 0, got {request.timestamp}")
        offset = self.store.get_offset_in_queue_by_time(
            request.topic, request.queue_id, request.timestamp
        )
        return broker_pb2.QueueOffsetResponse(offset=offset)
