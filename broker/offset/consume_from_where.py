"""What the broker answers to QUERY_CONSUMER_OFFSET (14): the "zero if young" rule, and ours.

Rules, in order:

1. The group has a committed offset (``stored >= 0``): that offset, whatever the consumer's
   ConsumeFromWhere says.
2. None, and the request says ``set_zero_if_not_found = false``: QUERY_NOT_FOUND.
3. None, and the queue's head was never deleted (``min_offset_in_queue <= 0``), **empty or
   not**: **0**.
4. Otherwise (the head is gone) QUERY_NOT_FOUND, and the client applies its ConsumeFromWhere
   (LAST -> max offset, FIRST -> 0, TIMESTAMP -> search by time).

The consequence many blogs miss: a brand-new group with CONSUME_FROM_LAST_OFFSET on a young
topic (nothing deleted) consumes from the beginning, not from the tail.

Where we differ from RocketMQ, and why: RocketMQ answers 0 only when the queue's message 0 is
still in the page cache, so an *empty* queue answers QUERY_NOT_FOUND and the client asks
GET_MAX_OFFSET in a second call. A message stored between the two calls is skipped: a user
who started a consumer and then sent a message never receives it. Here a young queue answers
0 in the same step, empty or not, so the start offset of a new group is decided with no
window. (Our store has no page-cache test: a head not deleted counts as in memory.) Where the
head was deleted, rule 4 keeps RocketMQ's two steps: a group that starts from LAST on such a
queue may skip what arrives during its first rebalance, as RocketMQ's does.

Note for the wire: RocketMQ's header field is a nullable Boolean and absent means true. Our
proto3 ``set_zero_if_not_found`` is a plain bool whose default is false, so a client must set
it to true to get RocketMQ's default behaviour.
"""

from __future__ import annotations

__all__ = ["query_offset_answer"]


def query_offset_answer(
    stored: int, set_zero_if_not_found: bool, min_offset_in_queue: int
) -> int | None:
    """The offset to reply with, or None for QUERY_NOT_FOUND (22)."""
    if stored >= 0:
        return stored
    if not set_zero_if_not_found:
        return None
    if min_offset_in_queue <= 0:  # the head was never deleted: young, empty or not
        return 0
    return None
