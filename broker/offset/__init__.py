"""Consumer offsets on the broker: the committed-offset table, its file, and the
QUERY_CONSUMER_OFFSET answer rule."""

from aiorocketmq.broker.offset.consume_from_where import query_offset_answer
from aiorocketmq.broker.offset.consumer_offset_manager import (
    CONSUMER_OFFSET_FILE,
    TOPIC_GROUP_SEPARATOR,
    ConsumerOffsetManager,
    DataVersion,
)

__all__ = [
    "CONSUMER_OFFSET_FILE",
    "TOPIC_GROUP_SEPARATOR",
    "ConsumerOffsetManager",
    "DataVersion",
    "query_offset_answer",
]
