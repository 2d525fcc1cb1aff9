"""``SubscriptionData``: one topic subscription of a consumer group, as the broker stores it.

Rules (RocketMQ's ``SubscriptionData`` and ``FilterAPI.buildSubscriptionData``):

- ``sub_string`` is ``"*"`` (everything) or tags joined by ``||``; ``tags_set`` holds the tags
  and ``code_set`` their Java ``String.hashCode()``, which the broker matches against the
  consume-queue ``tagsCode``.
- ``sub_version`` is set by the client when it builds the subscription and bumped to "now" on
  every rebalance change; the broker replaces its stored copy only for a larger one.
- Values are immutable: the broker replaces an entry, it never edits one.

Where we differ: RocketMQ's ``equals`` includes ``subVersion`` while ``hashCode`` leaves it out;
this frozen dataclass compares and hashes every field, which is consistent and enough for a
value that is never used as a key.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiorocketmq.protocol.tags import SUB_ALL, parse_expression
from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["EXPRESSION_TYPE_TAG", "SubscriptionData"]

EXPRESSION_TYPE_TAG = "TAG"


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A group's subscription to one topic."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG

    @classmethod
    def build(cls, topic: str, expression: str | None, sub_version: int) -> SubscriptionData:
        """Parse a tag expression the way ``FilterAPI.buildSubscriptionData`` does."""
        parsed = parse_expression(expression)
        return cls(
            topic=topic,
            sub_string=parsed.sub_string,
            tags_set=parsed.tags_set,
            code_set=parsed.code_set,
            sub_version=sub_version,
        )

    @classmethod
    def from_proto(cls, sub: common_pb2.SubscriptionData) -> SubscriptionData:
        """Read the wire form (as the client computed it; an empty string means ``*``/TAG)."""
        return cls(
            topic=sub.topic,
            sub_string=sub.sub_string or SUB_ALL,
            tags_set=frozenset(sub.tags_set),
            code_set=frozenset(sub.code_set),
            sub_version=sub.sub_version,
            expression_type=sub.expression_type or EXPRESSION_TYPE_TAG,
        )

    def to_proto(self) -> common_pb2.SubscriptionData:
        """The wire form (sets in sorted order, so the bytes are stable)."""
        return common_pb2.SubscriptionData(
            topic=self.topic,
            sub_string=self.sub_string,
            tags_set=sorted(self.tags_set),
            code_set=sorted(self.code_set),
            sub_version=self.sub_version,
            expression_type=self.expression_type,
        )
