"""Topic and group name validation with RocketMQ's rules (``Validators``, ``TopicValidator``).

Names use only ``[%|a-zA-Z0-9_-]``; a topic is at most 127 characters, a group at most 120;
blank names are rejected. Each failure raises ``InvalidArgument`` naming the field.
"""

from __future__ import annotations

import re

from aiorocketmq.protocol.errors import InvalidArgument

__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "GROUP_MAX_LENGTH",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIXES",
    "TOPIC_MAX_LENGTH",
    "check_group",
    "check_topic",
    "dlq_topic",
    "is_retry_topic",
    "is_system_topic",
    "retry_topic",
]

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 120
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
# Topics a producer may not send to (TopicValidator.isNotAllowedSendTopic, the ones we know).
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"})

_LEGAL = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def _check_name(kind: str, name: str, max_length: int) -> None:
    if not name or not name.strip():
        raise InvalidArgument(f"the specified {kind} is blank")
    if not _LEGAL.match(name):
        raise InvalidArgument(
            f"the specified {kind}[{name}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if len(name) > max_length:
        raise InvalidArgument(
            f"the specified {kind}[{name[:20]}...] is longer than {kind} max length {max_length}."
        )


def check_topic(topic: str) -> None:
    """Raise ``InvalidArgument`` unless ``topic`` is a legal topic name."""
    limit = (
        RETRY_OR_DLQ_TOPIC_MAX_LENGTH
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
        else TOPIC_MAX_LENGTH
    )
    _check_name("topic", topic, limit)


def check_group(group: str) -> None:
    """Raise ``InvalidArgument`` unless ``group`` is a legal group name."""
    _check_name("group", group, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where messages go after max reconsume times."""
    return DLQ_GROUP_TOPIC_PREFIX + group


# Names of RocketMQ's own topics: per-group retry and dead-letter topics, system topics.
SYSTEM_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, "RMQ_SYS_", "rmq_sys_")


def is_system_topic(topic: str) -> bool:
    """A retry, dead-letter or system topic (not an application's)."""
    return topic.startswith(SYSTEM_TOPIC_PREFIXES) or topic in SYSTEM_TOPICS


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
