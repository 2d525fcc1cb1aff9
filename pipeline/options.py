"""The data source's options, read and checked once, with messages that name the option.

Names follow Spark's Kafka source where Kafka has the concept (``startingOffsets``,
``endingOffsets``, ``minPartitions``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``) and the
RocketMQ Spark connector elsewhere (``nameServer``, ``topic``, ``subExpression``, ``group``,
``pullBatchSize``, ``pullTimeoutMs``); Spark hands options over case-insensitively, so
``nameserver`` and ``nameServer`` are the same option.

Reading: ``nameServer`` (required; ``namesrvAddr`` is accepted too), ``topic`` (required, a
comma list), ``subExpression`` (``*``; tags as ``TagA || TagB``), ``startingOffsets``,
``endingOffsets`` (batch only), ``minPartitions``, ``maxRecordsPerPartition``,
``maxOffsetsPerTrigger`` (streaming only), ``failOnDataLoss`` (``true``), ``group`` (the
consumer group named in pulls; in a streaming query, the group whose offsets follow the query),
``pullBatchSize`` (1024, the broker's cap) and ``pullTimeoutMs`` (3000).

Writing: ``nameServer``, ``topic`` (the topic of rows without a ``topic`` column, or of every
row when the data has none), ``tags``, ``keys`` (defaults for rows whose column is null or
missing), ``producerGroup`` (``SPARK_AIOROCKETMQ_WRITER``), ``batchSize`` (messages per send,
256), ``batchBytes`` (bytes per send, 1 MiB) and ``sendTimeoutMs`` (3000).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiorocketmq.pipeline.client import DEFAULT_PULL_GROUP
from aiorocketmq.protocol.validators import check_group, check_topic

__all__ = ["DEFAULT_PRODUCER_GROUP", "ReadOptions", "WriteOptions"]

DEFAULT_PRODUCER_GROUP = "SPARK_AIOROCKETMQ_WRITER"


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
        opts = _lower(options)
        topics = tuple(t.strip() for t in opts.get("topic", "").split(",") if t.strip())
        if not topics:
            raise ValueError("option topic is required: one topic, or a comma list")
        for t in topics:
            _check("topic", t, check_topic)
        if len(set(topics)) != len(topics):
            raise ValueError(f"option topic names a topic twice: {opts['topic']!r}")
        group = opts.get("group", "").strip() or None
        if group is not None:
            _check("group", group, check_group)
        batch = _int(opts, "pullBatchSize") or 1024
        if batch > 1024:
            raise ValueError(
                f"option pullBatchSize must be <= 1024 (the broker's cap), got {batch}"
            )
        return cls(
            namesrv=_namesrv(opts),
            topics=topics,
            sub_expression=opts.get("subexpression", "").strip() or "*",
            starting_offsets=opts.get("startingoffsets"),
            ending_offsets=opts.get("endingoffsets"),
            min_partitions=_int(opts, "minPartitions"),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger"),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            group=group,
            pull_batch_size=batch,
            pull_timeout_ms=_int(opts, "pullTimeoutMs") or 3000,
        )


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
