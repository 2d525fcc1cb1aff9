"""Tag filtering vocabulary (RocketMQ's ``FilterAPI``): parse expressions, hash tags.

The broker stores ``tags_code = java_string_hash(tags)`` in each consume-queue entry and matches
a subscription by hash; the client re-checks the exact tag string to guard against collisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SUB_ALL", "SubscriptionExpression", "java_string_hash", "parse_expression"]

SUB_ALL = "*"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: signed 32-bit, over UTF-16 code units."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


@dataclass(frozen=True, slots=True)
class SubscriptionExpression:
    """A parsed tag expression: ``*`` (everything) or a set of tags and their hashes."""

    sub_string: str
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[int] = field(default_factory=frozenset)

    @property
    def matches_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def matches_code(self, tags_code: int) -> bool:
        """The broker's consume-queue check (by hash)."""
        return self.matches_all or tags_code in self.code_set

    def matches_tags(self, tags: str | None) -> bool:
        """The client's exact re-check."""
        return self.matches_all or (tags is not None and tags in self.tags_set)


def parse_expression(expression: str | None) -> SubscriptionExpression:
    """``None``, ``""`` or ``"*"`` mean everything; else tags split on ``||`` and trimmed."""
    if expression is None or expression.strip() in ("", SUB_ALL):
        return SubscriptionExpression(SUB_ALL)
    tags = [t.strip() for t in expression.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        return SubscriptionExpression(SUB_ALL)
    return SubscriptionExpression(
        expression,
        frozenset(tags),
        frozenset(java_string_hash(t) for t in tags),
    )
