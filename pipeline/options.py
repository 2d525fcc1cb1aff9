"""The data source's options, read and checked once, with messages that name the option.

Names follow Spark's Kafka source where Kafka has the concept (``startingOffsets``,
``endingOffsets``, ``minPartitions``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``) and the
RocketMQ Spark connector elsewhere (``nameServer``, ``topic``, ``subExpression``, ``group``,
``pullBatchSize``, ``pullTimeoutMs``); Spark hands options over case-insensitively, so
``nameserver`` and ``nameServer`` are the same option.

Reading: ``nameServer`` (required; ``namesrvAddr`` is accepted too); exactly one of ``topic``
(a comma list; ``subscribe`` is the same option, Kafka's name), ``subscribePattern`` (a Python
regular expression matched against the whole name of every topic the name servers know, system
and retry topics left out) and ``assign`` (JSON of queues, ``{"TopicA": {"broker-a": [0, 1]}}``);
``subExpression`` (``*``; tags as ``TagA || TagB``); where to start, first found wins as in
Kafka: ``startingTimestamp`` (ms since the epoch, every queue), ``startingOffsetsByTimestamp``
(JSON topic -> broker -> queue id -> ms), ``startingOffsets``; where to end (batch only):
``endingTimestamp``, ``endingOffsetsByTimestamp``, ``endingOffsets``; ``minPartitions``,
``maxRecordsPerPartition``, ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and
``maxTriggerDelay`` (``15m``; streaming only), ``failOnDataLoss`` (``true``), ``group`` (the
consumer group named in pulls; in a streaming query, the group whose offsets follow the query),
``pullBatchSize`` (1024, the broker's cap) and ``pullTimeoutMs`` (3000).

A timestamp gives each queue the offset of its first message stored at or after that time
(RocketMQ's SEARCH_OFFSET_BY_TIMESTAMP); a queue with none gets its latest offset (Kafka's
``startingOffsetsByTimestampStrategy=latest``, the only strategy here). A queue the by-timestamp
JSON does not name starts at ``startingOffsets``'s default and ends at the latest offset.

An option name neither list knows is refused, with the closest known name (Spark hands option
names over lower-cased; ``path``, ``paths``, ``checkpointLocation`` and ``queryName`` are
Spark's own and pass).

Writing: ``nameServer``, ``topic`` (the topic of rows without a ``topic`` column, or of every
row when the data has none), ``tags``, ``keys`` (defaults for rows whose column is null or
missing), ``producerGroup`` (``SPARK_AIOROCKETMQ_WRITER``), ``batchSize`` (messages per send,
256), ``batchBytes`` (bytes per send, 1 MiB) and ``sendTimeoutMs`` (3000).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiorocketmq.pipeline.client import DEFAULT_PULL_GROUP
from aiorocketmq.protocol.validators import check_group, check_topic, is_system_topic

__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "READ_OPTIONS",
    "WRITE_OPTIONS",
    "ReadOptions",
    "WriteOptions",
    "check_known",
    "duration_ms",
]

DEFAULT_PRODUCER_GROUP = "SPARK_AIOROCKETMQ_WRITER"

READ_OPTIONS = (
    "nameServer", "namesrvAddr", "topic", "subscribe", "subscribePattern", "assign",
    "subExpression", "startingOffsets", "endingOffsets", "startingTimestamp",
    "startingOffsetsByTimestamp", "endingTimestamp", "endingOffsetsByTimestamp",
    "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "failOnDataLoss", "group", "pullBatchSize", "pullTimeoutMs",
)  # fmt: skip
WRITE_OPTIONS = (
    "nameServer", "namesrvAddr", "topic", "tags", "keys", "producerGroup", "batchSize",
    "batchBytes", "sendTimeoutMs",
)  # fmt: skip
# Spark's own options, handed to a source or sink beside the user's.
_SPARK_OPTIONS = ("path", "paths", "checkpointLocation", "queryName")
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def check_known(options: Mapping[str, str], known: tuple[str, ...], kind: str) -> None:
    """``ValueError`` for an option ``known`` does not list, naming the closest known one."""
    names = {k.lower(): k for k in (*known, *_SPARK_OPTIONS)}
    for key in options:
        if str(key).lower() in names:
            continue
        close = difflib.get_close_matches(str(key).lower(), list(names), n=1, cutoff=0.6)
        hint = f"; did you mean {names[close[0]]!r}?" if close else ""
        raise ValueError(f"unknown {kind} option {key!r}{hint} (known: {', '.join(known)})")


def duration_ms(text: str, *, option: str) -> int:
    """Spark's duration strings: ``500ms``, ``30s``, ``15m``, ``1h``; a bare number is ms."""
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(
            f"option {option} must be a duration like 500ms, 30s, 15m or 1h, got {text!r}"
        )
    return int(found[1]) * _UNIT_MS[(found[2] or "ms").lower()]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _namesrv(opts: dict[str, str]) -> str:
    value = opts.get("nameserver") or opts.get("namesrvaddr")
    if not value or not value.strip():
        raise ValueError("option nameServer is required: the name servers, host:port[;host:port]")
    return value.strip()


def _int(opts: dict[str, str], name: str, *, minimum: int = 1) -> int | None:
    text = opts.get(name.lower())
    if text is None or not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None or not text.strip():
        return default
    word = text.strip().lower()
    if word in ("true", "1", "yes"):
        return True
    if word in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, got {text!r}")


def _check(kind: str, value: str, check: object) -> None:
    try:
        check(value)  # type: ignore[operator]
    except Exception as e:  # protocol.errors.InvalidArgument, with the rule in its message
        raise ValueError(f"option {kind}: {getattr(e, 'message', e)}") from None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a read (batch or streaming) was asked for."""

    namesrv: str
    topics: tuple[str, ...]
    sub_expression: str = "*"
    starting_offsets: str | None = None
    ending_offsets: str | None = None
    subscribe_pattern: str | None = None
    # assign: the queues to read, (topic, broker name, queue id); None = every queue of topics
    assign: frozenset[tuple[str, str, int]] | None = None
    starting_timestamp: int | None = None
    starting_offsets_by_timestamp: dict[tuple[str, str, int], int] = field(default_factory=dict)
    ending_timestamp: int | None = None
    ending_offsets_by_timestamp: dict[tuple[str, str, int], int] = field(default_factory=dict)
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    group: str | None = None
    pull_batch_size: int = 1024
    pull_timeout_ms: int = 3000

    @property
    def pull_group(self) -> str:
        return self.group or DEFAULT_PULL_GROUP

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        check_known(options, READ_OPTIONS, "read")
        opts = _lower(options)
        topics, pattern, assign = _subscription(opts)
        group = opts.get("group", "").strip() or None
        if group is not None:
            _check("group", group, check_group)
        batch = _int(opts, "pullBatchSize") or 1024
        if batch > 1024:
            raise ValueError(
                f"option pullBatchSize must be <= 1024 (the broker's cap), got {batch}"
            )
        delay = opts.get("maxtriggerdelay", "").strip()
        return cls(
            namesrv=_namesrv(opts),
            topics=topics,
            sub_expression=opts.get("subexpression", "").strip() or "*",
            starting_offsets=opts.get("startingoffsets"),
            ending_offsets=opts.get("endingoffsets"),
            subscribe_pattern=pattern,
            assign=assign,
            starting_timestamp=_int(opts, "startingTimestamp", minimum=0),
            starting_offsets_by_timestamp=_by_timestamp(opts, "startingOffsetsByTimestamp"),
            ending_timestamp=_int(opts, "endingTimestamp", minimum=0),
            ending_offsets_by_timestamp=_by_timestamp(opts, "endingOffsetsByTimestamp"),
            min_partitions=_int(opts, "minPartitions"),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger"),
            min_offsets_per_trigger=_int(opts, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=duration_ms(delay, option="maxTriggerDelay")
            if delay
            else 15 * 60_000,
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            group=group,
            pull_batch_size=batch,
            pull_timeout_ms=_int(opts, "pullTimeoutMs") or 3000,
        )

    @property
    def has_end(self) -> bool:
        """Whether an end was asked for (batch-only options)."""
        return bool(
            self.ending_offsets
            or self.ending_timestamp is not None
            or self.ending_offsets_by_timestamp
        )

    def matches(self, topic: str) -> bool:
        """Whether ``subscribePattern`` takes ``topic`` (never a system or retry topic)."""
        return (
            self.subscribe_pattern is not None
            and not is_system_topic(topic)
            and re.fullmatch(self.subscribe_pattern, topic) is not None
        )


def _subscription(
    opts: dict[str, str],
) -> tuple[tuple[str, ...], str | None, frozenset[tuple[str, str, int]] | None]:
    """(topics, pattern, assigned queues) from exactly one of topic/subscribe,
    subscribePattern and assign."""
    given = [
        k for k in ("topic", "subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()
    ]
    names = {
        "topic": "topic",
        "subscribe": "subscribe",
        "subscribepattern": "subscribePattern",
        "assign": "assign",
    }
    if len(given) != 1:
        chosen = ", ".join(names[k] for k in given) or "none"
        raise ValueError(
            "exactly one of the options topic (or subscribe), subscribePattern and assign is "
            f"required, got {chosen}"
        )
    key = given[0]
    if key in ("topic", "subscribe"):
        topics = tuple(t.strip() for t in opts[key].split(",") if t.strip())
        for t in topics:
            _check(names[key], t, check_topic)
        if len(set(topics)) != len(topics):
            raise ValueError(f"option {names[key]} names a topic twice: {opts[key]!r}")
        return topics, None, None
    if key == "subscribepattern":
        pattern = opts[key].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"option subscribePattern is not a regular expression: {e}") from None
        return (), pattern, None
    return _assign(opts[key])


def _assign(text: str) -> tuple[tuple[str, ...], None, frozenset[tuple[str, str, int]]]:
    example = '{"TopicA": {"broker-a": [0, 1]}}'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"option assign: expected JSON like {example}, got {text!r} ({e.msg})"
        ) from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"option assign: expected JSON like {example}, got {text!r}")
    queues: set[tuple[str, str, int]] = set()
    for topic, brokers in data.items():
        _check("assign", topic, check_topic)
        if not isinstance(brokers, dict) or not brokers:
            raise ValueError(
                f"option assign: topic {topic!r} must map broker names to queue id lists"
            )
        for broker, ids in brokers.items():
            if (
                not isinstance(ids, list)
                or not ids
                or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)
            ):
                raise ValueError(
                    f"option assign: {topic}/{broker} must be a list of queue ids >= 0, got {ids!r}"
                )
            queues.update((topic, broker, i) for i in ids)
    return tuple(sorted(data)), None, frozenset(queues)


def _by_timestamp(opts: dict[str, str], option: str) -> dict[tuple[str, str, int], int]:
    """``{"T": {"broker-a": {"0": 1700000000000}}}``: a time (ms, >= 0) per queue."""
    text = opts.get(option.lower(), "").strip()
    if not text:
        return {}
    from aiorocketmq.pipeline.offsets import offsets_from_json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f'option {option}: expected JSON like {{"TopicA": {{"broker-a": {{"0": 1700000000000}}}}}}, '
            f"got {text!r} ({e.msg})"
        ) from None
    found = offsets_from_json(data, what=f"option {option}")
    negative = [k for k, ts in found.items() if ts < 0]
    if negative:
        raise ValueError(
            f"option {option}: timestamps are ms since the epoch, >= 0 "
            f"({'/'.join(map(str, negative[0]))})"
        )
    return found


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a write (batch or streaming) was asked for."""

    namesrv: str
    topic: str | None = None
    tags: str | None = None
    keys: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    batch_size: int = 256
    batch_bytes: int = 1024 * 1024
    send_timeout_ms: int = 3000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        check_known(options, WRITE_OPTIONS, "write")
        opts = _lower(options)
        topic = opts.get("topic", "").strip() or None
        if topic is not None:
            _check("topic", topic, check_topic)
        group = opts.get("producergroup", "").strip() or DEFAULT_PRODUCER_GROUP
        _check("producerGroup", group, check_group)
        return cls(
            namesrv=_namesrv(opts),
            topic=topic,
            tags=opts.get("tags") or None,
            keys=opts.get("keys") or None,
            producer_group=group,
            batch_size=_int(opts, "batchSize") or 256,
            batch_bytes=_int(opts, "batchBytes") or 1024 * 1024,
            send_timeout_ms=_int(opts, "sendTimeoutMs") or 3000,
        )
