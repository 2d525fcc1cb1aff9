"""What the broker answers to QUERY_CONSUMER_OFFSET (14): the "zero if young" rule.

Rules, in order:

1. The group has a committed offset (``stored >= 0``): that offset, whatever the consumer's
   ConsumeFromWhere says.
2. None, and the request says ``set_zero_if_not_found = false``: QUERY_NOT_FOUND.
3. None, the queue has lost nothing yet (``min_offset_in_queue <= 0``) and its first message
   is still in memory (page cache): **0**.
4. Otherwise QUERY_NOT_FOUND, and the client applies its ConsumeFromWhere (LAST -> max
   offset, FIRST -> 0, TIMESTAMP -> search by time).

The consequence many blogs miss: a brand-new group with CONSUME_FROM_LAST_OFFSET on a young
topic (nothing deleted, head still cached) consumes from the beginning, not from the tail.

Note for the wire: RocketMQ's header field is a nullable Boolean and absent means true. Our
proto3 ``set_zero_if_not_found`` is a plain bool whose default is false, so a client must set
it to true to get RocketMQ's default behaviour.
"""

from __future__ import annotations

__all__ = ["query_offset_answer"]


def query_offset_answer(
    stored: int,
    set_zero_if_not_found: bool,
    min_offset_in_queue: int,
    head_in_memory: bool,
) -> int | None:
    """The offset to reply with, or None for QUERY_NOT_FOUND (22)."""
    if stored >= 0:
        return stored
    if not set_zero_if_not_found:
        return None
    if min_offset_in_queue <= 0 and head_in_memory:
        return 0
    return None
