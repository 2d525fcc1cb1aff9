"""The broker's message store: a commit log, consume queues, and ``MessageStore`` over them.

Layout on disk (under ``store_path_root_dir``), as RocketMQ's::

    commitlog/00000000000000000000            segments named by start offset
    consumequeue/<topic>/<queueId>/000...000  20-byte entries: offset, size, tag hash
    checkpoint                                how far the consume queues are durable

See ``message_store`` for the theory of operation, ``commit_log`` and ``consume_queue`` for the
file formats.
"""

from aiorocketmq.broker.store.commit_log import CommitLog, DispatchRequest, decode_message
from aiorocketmq.broker.store.config import CQ_STORE_UNIT_SIZE, FlushDiskType, MessageStoreConfig
from aiorocketmq.broker.store.consume_queue import ConsumeQueue
from aiorocketmq.broker.store.message_id import create_message_id, decode_message_id
from aiorocketmq.broker.store.message_store import (
    ArrivalListener,
    DelayLevelRefused,
    GetMessageResult,
    GetMessageStatus,
    MessageStore,
    PutBatchResult,
    PutMessageResult,
    PutMessageStatus,
    StorableMessage,
)

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "ArrivalListener",
    "CommitLog",
    "ConsumeQueue",
    "DelayLevelRefused",
    "DispatchRequest",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "MessageStoreConfig",
    "PutBatchResult",
    "PutMessageResult",
    "PutMessageStatus",
    "StorableMessage",
    "create_message_id",
    "decode_message",
    "decode_message_id",
]
