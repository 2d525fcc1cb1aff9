"""``Message`` (what a producer sends) and ``MessageExt`` (what a consumer receives).

Plain dataclasses beside the wire types: users build and read these; ``to_proto``/``from_proto``
convert at the edges. Property names follow RocketMQ's ``MessageConst``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["Message", "MessageConst", "MessageExt"]


class MessageConst:
    """Property keys with RocketMQ's names."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"


@dataclass(slots=True)
class Message:
    """A message to send: topic, body, and optional tags, keys and properties."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | None = None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    delay_time_level: int = 0

    def to_proto(self) -> common_pb2.Message:
        return common_pb2.Message(
            topic=self.topic,
            body=self.body,
            tags=self.tags or "",
            keys=self.keys or "",
            flag=self.flag,
            properties=self.properties,
            delay_time_level=self.delay_time_level,
        )

    @classmethod
    def from_proto(cls, m: common_pb2.Message) -> Message:
        return cls(
            topic=m.topic,
            body=m.body,
            tags=m.tags or None,
            keys=m.keys or None,
            flag=m.flag,
            properties=dict(m.properties),
            delay_time_level=m.delay_time_level,
        )


@dataclass(slots=True)
class MessageExt:
    """A stored message, with where and when it was stored.

    Those a pull decodes (``aiorocketmq.protocol.record.decode_records``, in C) are not tracked by the
    cyclic garbage collector: they hold only strings, bytes, ints and a dict of strings, and a
    consumer holds many. So do not build a reference cycle through one (a field or property
    that refers back to it): such a cycle is freed only when broken.
    """

    topic: str
    body: bytes
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    tags: str | None = None
    keys: str | None = None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    born_timestamp: int = 0
    born_host: str = ""
    store_timestamp: int = 0
    store_host: str = ""
    reconsume_times: int = 0
    store_size: int = 0
    body_crc: int = 0

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def to_proto(self) -> common_pb2.MessageExt:
        return common_pb2.MessageExt(
            topic=self.topic,
            body=self.body,
            tags=self.tags or "",
            keys=self.keys or "",
            flag=self.flag,
            properties=self.properties,
            broker_name=self.broker_name,
            queue_id=self.queue_id,
            queue_offset=self.queue_offset,
            commit_log_offset=self.commit_log_offset,
            msg_id=self.msg_id,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_timestamp=self.store_timestamp,
            store_host=self.store_host,
            reconsume_times=self.reconsume_times,
            store_size=self.store_size,
            body_crc=self.body_crc,
        )

    @classmethod
    def from_proto(cls, m: common_pb2.MessageExt) -> MessageExt:
        return cls(
            topic=m.topic,
            body=m.body,
            broker_name=m.broker_name,
            queue_id=m.queue_id,
            queue_offset=m.queue_offset,
            commit_log_offset=m.commit_log_offset,
            msg_id=m.msg_id,
            tags=m.tags or None,
            keys=m.keys or None,
            flag=m.flag,
            properties=dict(m.properties),
            born_timestamp=m.born_timestamp,
            born_host=m.born_host,
            store_timestamp=m.store_timestamp,
            store_host=m.store_host,
            reconsume_times=m.reconsume_times,
            store_size=m.store_size,
            body_crc=m.body_crc,
        )
