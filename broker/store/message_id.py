"""Host addresses as the commit log stores them, and RocketMQ's offset message id.

The rules and the code live in ``aiorocketmq.protocol.record`` (a producer computes the same ids from a
send's compact answer); the names stay here for the store's readers.
"""

from __future__ import annotations

from aiorocketmq.protocol.record import (
    create_message_id,
    decode_message_id,
    format_host,
    parse_host,
)

__all__ = [
    "create_message_id",
    "decode_message_id",
    "format_host",
    "parse_host",
]
