"""``RocketMQDataSource``: the ``aiorocketmq`` format of Spark's Python Data Source API.

Register it once per session (``aiorocketmq.pipeline.session.register`` or
``spark.dataSource.register(RocketMQDataSource)``), then::

    spark.read.format("aiorocketmq").option("nameServer", ns).option("topic", "Orders").load()
    spark.readStream.format("aiorocketmq").option(...).load()
    df.write.format("aiorocketmq").option("nameServer", ns).option("topic", "Out").save()
    df.writeStream.format("aiorocketmq").option(...).option("checkpointLocation", cp).start()

Theory of operation:

- **Where code runs.** Spark pickles the data source and its readers and writers to Python
  processes: a planner on the driver (``partitions``, the streaming offsets) and Python workers
  on the executors (``read``, ``write``). They hold settings only (``ReadOptions``,
  ``WriteOptions``, a ``SyncClient`` that pickles to its address); gRPC channels are opened in
  the process that uses them, once per process (``aiorocketmq.pipeline.client.channel``).
- **Batch read.** The planner asks every broker of each topic for its queues' min and max
  offsets (GET_TOPIC_STATS_INFO), resolves ``startingOffsets`` (default ``earliest``) and
  ``endingOffsets`` (default ``latest``), and plans one partition per queue range
  (``aiorocketmq.pipeline.offsets.plan_ranges``, split by ``minPartitions``/``maxRecordsPerPartition``).
  Each partition pulls its range (PULL_MESSAGE with the query's ``subExpression``, up to
  ``pullBatchSize`` per pull, as raw records) and yields one Arrow record batch per pull.
- **Streaming read.** Offsets (the checkpoint's JSON) are the next offset to read of every
  queue, topic -> broker -> queue id, as the RocketMQ Spark connector wrote them. The first
  batch starts at ``startingOffsets`` (default ``latest``); a restarted query resumes from its
  checkpoint. Each trigger asks the brokers for their max offsets (``latestOffset``): a queue
  that appeared since (the topic was expanded, a broker added) starts at its earliest offset;
  a queue whose broker is missing keeps its offset; ``maxOffsetsPerTrigger`` caps a batch
  (shared among queues by backlog). When retention deleted offsets the checkpoint still
  expects, the query fails (``failOnDataLoss=true``, the default) or skips them.
  ``trigger(availableNow=True)`` reads what is there when the query starts, in as many batches
  as the limit needs, then stops (``SupportsTriggerAvailableNow``).
- **The group.** With ``group``, the streaming query commits the offsets it has processed to
  the brokers as that consumer group's offsets (UPDATE_CONSUMER_OFFSET), so ``mqadmin
  consumerProgress -g GROUP`` shows the pipeline's lag. Spark calls ``commit`` for a batch only
  when it plans the next one, and never for the last batch of an ``availableNow`` run, so the
  offsets are committed when Spark next asks for the latest offsets too: its ``start`` is
  processed by then. The checkpoint, not the group, decides where a query resumes.
- **Write.** Rows need ``body`` (binary or string); ``topic`` (else the ``topic`` option),
  ``tags`` and ``keys`` are optional. Each task sends batches of messages to one queue at a
  time, queues taken round robin, a failed batch tried again on another broker; a task that
  fails is retried by Spark and may send its messages twice: at-least-once.
- **Re-run batches.** A streaming write with a ``topic`` option records, after Spark commits a
  batch, ``batchId + 1`` as the offset of the consumer group ``<producerGroup>-<queryId>`` on
  the topic's first queue. A batch Spark runs again after a restart (it had not recorded the
  batch as done) is not sent again when that mark says it was committed. A task retried inside
  one run still sends again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aiorocketmq.pipeline.arrow import (
    arrow_schema,
    messages_to_batch,
    records_to_batch,
    rows_of_batch,
)
from aiorocketmq.pipeline.client import DataLossError, SyncClient
from aiorocketmq.pipeline.offsets import (
    OffsetSpec,
    QueueKey,
    QueueStats,
    data_loss,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_option,
    plan_ranges,
    rate_limit,
    resolve_offsets,
)
from aiorocketmq.pipeline.options import ReadOptions, WriteOptions
from aiorocketmq.pipeline.sender import MessageSender, marker_group, marker_queue

try:  # PySpark 4.1+: the streaming writer may take Arrow batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - PySpark 4.0
    _StreamWriterBase = DataSourceStreamWriter

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no such mixin: availableNow then runs one batch."""


try:  # PySpark 4.2+: admission control
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
except ImportError:  # pragma: no cover - PySpark 4.0, 4.1
    ReadAllAvailable = ReadMaxRows = None

__all__ = [
    "FORMAT",
    "SCHEMA",
    "QueueRangePartition",
    "RocketMQBatchReader",
    "RocketMQBatchWriter",
    "RocketMQDataSource",
    "RocketMQStreamReader",
    "RocketMQStreamWriter",
    "SendCommit",
]

log = logging.getLogger("pipeline.source")

FORMAT = "aiorocketmq"

SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("brokerName", StringType()),
        StructField("queueId", IntegerType()),
        StructField("queueOffset", LongType()),
        StructField("msgId", StringType()),
        StructField("tags", StringType()),
        StructField("keys", StringType()),
        StructField("body", BinaryType()),
        StructField("bornTimestamp", TimestampType()),
        StructField("storeTimestamp", TimestampType()),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)
"""The rows of a read: where each message lives, its ids, tags, keys, body, times, properties."""

# Spark's local properties of a streaming task (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY).
_QUERY_ID_KEY = "sql.streaming.queryId"
_BATCH_ID_KEY = "streaming.sql.batchId"
# How stale a route a streaming query's offsets may be based on (new queues show up this late).
_ROUTE_REFRESH_S = 5.0


class RocketMQDataSource(DataSource):  # type: ignore[misc]
    """Topics of an aiorocketmq (RocketMQ protocol) cluster as a Spark source and sink."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        return RocketMQBatchReader(ReadOptions.parse(self.options), _checked(schema))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        return RocketMQStreamReader(ReadOptions.parse(self.options), _checked(schema))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        return RocketMQBatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        return RocketMQStreamWriter(WriteOptions.parse(self.options), schema)


def _checked(schema: StructType) -> StructType:
    if schema is not None and schema != SCHEMA:
        raise ValueError(
            f"the {FORMAT} source has a fixed schema and takes no other: {SCHEMA.simpleString()}"
        )
    return SCHEMA


# ---- reading ------------------------------------------------------------------------------------
@dataclass
class QueueRangePartition(InputPartition):  # type: ignore[misc]
    """Offsets ``[start, end)`` of one queue; ``skip_lost``: deleted offsets are skipped."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    broker_addr: str = ""
    skip_lost: bool = False
    value: Any = field(default=None, repr=False)  # InputPartition's own field, unused

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)


class _Reading:
    """What the batch and streaming readers share: the queues read, where a read starts or
    ends by time, the planning and the executor side."""

    opts: ReadOptions
    client: SyncClient
    schema: StructType
    _pattern_topics: list[str] | None = None
    _pattern_at: float = 0.0

    def _topics(self, *, max_age: float = 0.0) -> list[str]:
        """The topics read: given, assigned, or those ``subscribePattern`` matches now."""
        if self.opts.subscribe_pattern is None:
            return list(self.opts.topics)
        now = time.monotonic()
        if self._pattern_topics is None or now - self._pattern_at >= max_age:
            self._pattern_topics = [t for t in self.client.topic_list() if self.opts.matches(t)]
            self._pattern_at = now
        return self._pattern_topics

    def _stats(self, *, route_max_age: float = 0.0) -> dict[QueueKey, QueueStats]:
        """Min and max offsets of every queue read (``assign`` keeps only its queues)."""
        topics = self._topics(max_age=route_max_age)
        if not topics:
            raise ValueError(
                f"option subscribePattern {self.opts.subscribe_pattern!r} matches no topic "
                "(system and retry topics are never matched)"
            )
        stats = self.client.queue_stats(topics, route_max_age=route_max_age)
        if self.opts.assign is not None:
            unknown = sorted(self.opts.assign - set(stats))
            if unknown:
                known = ", ".join("/".join(map(str, k)) for k in sorted(stats)) or "none"
                raise ValueError(
                    "option assign names queues the topics do not have: "
                    + ", ".join("/".join(map(str, k)) for k in unknown)
                    + f" (known: {known})"
                )
            stats = {k: v for k, v in stats.items() if k in self.opts.assign}
        return stats

    def _offsets(
        self,
        stats: dict[QueueKey, QueueStats],
        spec: OffsetSpec,
        timestamp: int | None,
        by_timestamp: dict[QueueKey, int],
        *,
        default: Literal["earliest", "latest"],
        option: str,
    ) -> dict[QueueKey, int]:
        """Offsets of every queue of ``stats``: by one time for all (``...Timestamp``), by a
        time per queue (``...OffsetsByTimestamp``, the others at ``default``), else ``spec``."""
        if timestamp is not None:
            return self.client.search_offsets({k: timestamp for k in stats})
        if not by_timestamp:
            return resolve_offsets(spec, stats, default=default)
        unknown = sorted(set(by_timestamp) - set(stats))
        if unknown:
            raise ValueError(
                f"option {option} names queues the read does not have: "
                + ", ".join("/".join(map(str, k)) for k in unknown)
            )
        offsets = resolve_offsets(default, stats, default=default)
        offsets.update(self.client.search_offsets(by_timestamp))
        return offsets

    def _partitions(
        self, start: dict[QueueKey, int], end: dict[QueueKey, int], new: set[QueueKey]
    ) -> list[QueueRangePartition]:
        ranges = plan_ranges(
            start,
            end,
            min_partitions=self.opts.min_partitions,
            max_records_per_partition=self.opts.max_records_per_partition,
        )
        addrs: dict[tuple[str, str], str] = {}
        out = []
        for r in ranges:
            addr = addrs.get((r.topic, r.broker_name))
            if addr is None:
                addr = addrs[(r.topic, r.broker_name)] = self.client.broker_addr(
                    r.topic, r.broker_name
                )
            out.append(
                QueueRangePartition(
                    r.topic,
                    r.broker_name,
                    r.queue_id,
                    r.start,
                    r.end,
                    addr,
                    skip_lost=not self.opts.fail_on_data_loss or r.key in new,
                )
            )
        return out

    def read(self, partition: QueueRangePartition) -> Iterator[Any]:
        """The partition's messages, one Arrow record batch per pull (runs in executors)."""
        if not isinstance(partition, QueueRangePartition):
            return  # nothing to read: Spark runs one task with a partition of its own
        schema = arrow_schema(self.schema)
        for pulled in self.client.pull_range(
            partition.key,
            partition.start,
            partition.end,
            group=self.opts.pull_group,
            sub_expression=self.opts.sub_expression,
            batch_size=self.opts.pull_batch_size,
            skip_lost=partition.skip_lost,
            addr=partition.broker_addr or None,
        ):
            if pulled.records:
                batch = records_to_batch(pulled.records, partition.broker_name, pulled.end, schema)
                if batch is not None:
                    yield batch
            elif pulled.messages:
                yield messages_to_batch(pulled.messages, schema)


class RocketMQBatchReader(_Reading, DataSourceReader):  # type: ignore[misc]
    """A batch read of ``startingOffsets`` .. ``endingOffsets``."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.client = SyncClient(opts.namesrv, timeout=opts.pull_timeout_ms / 1000)
        self.starting: OffsetSpec = parse_offsets_option(
            opts.starting_offsets,
            option="startingOffsets",
            default="earliest",
            allow_latest=False,
        )
        self.ending: OffsetSpec = parse_offsets_option(
            opts.ending_offsets, option="endingOffsets", default="latest", allow_earliest=False
        )

    def partitions(self) -> Sequence[QueueRangePartition]:
        o = self.opts
        stats = self._stats()
        start = self._offsets(
            stats, self.starting, o.starting_timestamp, o.starting_offsets_by_timestamp,
            default="earliest", option="startingOffsetsByTimestamp",
        )  # fmt: skip
        end = self._offsets(
            stats, self.ending, o.ending_timestamp, o.ending_offsets_by_timestamp,
            default="latest", option="endingOffsetsByTimestamp",
        )  # fmt: skip
        lost = {k: o for k, o in start.items() if o < stats[k].min_offset}
        if lost and self.opts.fail_on_data_loss:
            raise DataLossError(
                "startingOffsets asks for offsets the queues no longer have: "
                + "; ".join(data_loss(lost, stats))
                + " (set failOnDataLoss=false to start at the earliest offsets there are)"
            )
        start = {k: max(o, stats[k].min_offset) for k, o in start.items()}
        end = {k: min(o, stats[k].max_offset) for k, o in end.items()}
        return self._partitions(start, end, set())


class RocketMQStreamReader(
    _Reading,
    DataSourceStreamReader,  # type: ignore[misc]
    SupportsTriggerAvailableNow,  # type: ignore[misc]
):
    """Micro-batches of the queues' offsets; see the module notes."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        if opts.has_end:
            raise ValueError(
                "options endingOffsets, endingTimestamp and endingOffsetsByTimestamp are for "
                "batch queries only"
            )
        self.opts = opts
        self.schema = schema
        self.client = SyncClient(opts.namesrv, timeout=opts.pull_timeout_ms / 1000)
        self.starting: OffsetSpec = parse_offsets_option(
            opts.starting_offsets, option="startingOffsets", default="latest"
        )
        # Driver-side state (the stream reader lives as long as its query on the driver).
        self._target: dict[QueueKey, int] | None = None
        self._last_end: dict[QueueKey, int] | None = None
        self._committed: dict[QueueKey, int] | None = None
        self._last_batch_at: float | None = None  # minOffsetsPerTrigger: the last data batch

    def initialOffset(self) -> dict[str, Any]:
        o = self.opts
        stats = self._stats()
        start = self._offsets(
            stats, self.starting, o.starting_timestamp, o.starting_offsets_by_timestamp,
            default="latest", option="startingOffsetsByTimestamp",
        )  # fmt: skip
        if self.opts.fail_on_data_loss:
            problems = data_loss(start, stats)
            if problems:
                raise DataLossError(
                    "startingOffsets asks for offsets the queues no longer have: "
                    + "; ".join(problems)
                    + " (set failOnDataLoss=false to skip them)"
                )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is None:  # pragma: no cover - before PySpark 4.2
            raise NotImplementedError
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        stats = self._stats()
        self._target = {k: s.max_offset for k, s in stats.items()}

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        if start is not None:
            begin = offsets_from_json(start, what="checkpoint offsets")
        else:  # PySpark before 4.2 does not say where the next batch starts
            begin = dict(self._last_end or {})
        self._commit_group(begin)  # everything before ``begin`` is processed (module notes)
        # Spark asks again every few milliseconds when idle: routes (new queues) are looked up
        # again every few seconds, offsets every time.
        stats = self._stats(route_max_age=_ROUTE_REFRESH_S)
        if self.opts.fail_on_data_loss:
            problems = data_loss(begin, stats)
            if problems:
                raise DataLossError(
                    "the checkpoint expects offsets the queues no longer have: "
                    + "; ".join(problems)
                    + " (retention deleted them, or the store was reset; set "
                    "failOnDataLoss=false to skip what is gone)"
                )
        latest = dict(begin)  # a queue whose broker is missing keeps its offset
        effective = dict(begin)
        for key, s in stats.items():
            if key in begin:
                latest[key] = max(begin[key], s.max_offset)
                # Offsets already deleted (failOnDataLoss=false) count for nothing in the limit.
                effective[key] = max(begin[key], s.min_offset)
            else:  # a new queue: from its earliest offset
                latest[key] = s.max_offset
                effective[key] = s.min_offset
        if self._target is not None:
            for key in list(latest):
                if key in self._target:
                    latest[key] = max(begin.get(key, 0), min(latest[key], self._target[key]))
                elif key in begin:
                    latest[key] = begin[key]
                else:
                    del latest[key]
        if self._too_little(effective, latest):
            latest = dict(begin)  # no batch yet: minOffsetsPerTrigger is not reached
        cap = self._cap(limit)
        if cap is not None:
            latest = rate_limit(effective, latest, cap)
        self._last_end = latest
        return offsets_to_json(latest)

    def _too_little(self, effective: dict[QueueKey, int], latest: dict[QueueKey, int]) -> bool:
        """``minOffsetsPerTrigger``: wait while fewer new messages are there, unless
        ``maxTriggerDelay`` passed since the last batch (availableNow reads what is there)."""
        minimum = self.opts.min_offsets_per_trigger
        if not minimum or self._target is not None:
            return False
        now = time.monotonic()
        if self._last_batch_at is None:
            self._last_batch_at = now  # the query's start counts as the last batch
        available = sum(max(0, latest[k] - effective.get(k, latest[k])) for k in latest)
        waited_ms = (now - self._last_batch_at) * 1000
        if available < minimum and waited_ms < self.opts.max_trigger_delay_ms:
            return True
        if available:
            self._last_batch_at = now
        return False

    def _cap(self, limit: Any) -> int | None:
        if limit is None:
            return self.opts.max_offsets_per_trigger
        max_rows = getattr(limit, "max_rows", None)
        return int(max_rows) if max_rows is not None else None

    def partitions(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Sequence[QueueRangePartition]:
        begin = offsets_from_json(start, what="start offsets")
        stop = offsets_from_json(end, what="end offsets")
        return self._partitions(begin, stop, set(stop) - set(begin))

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(offsets_from_json(end, what="committed offsets"))

    def _commit_group(self, offsets: dict[QueueKey, int]) -> None:
        if not self.opts.group or not offsets or offsets == self._committed:
            return
        try:
            self.client.with_retries(
                lambda: self.client.commit_offsets(self.opts.group or "", offsets)
            )
        except Exception as e:  # the group's offsets are a view; the checkpoint is the truth
            log.warning("committing offsets of group %s failed: %s", self.opts.group, e)
            return
        self._committed = dict(offsets)

    def stop(self) -> None:
        pass


# ---- writing ------------------------------------------------------------------------------------
@dataclass
class SendCommit(WriterCommitMessage):  # type: ignore[misc]
    """What one write task did."""

    sent: int = 0
    skipped: bool = False
    query_id: str | None = None
    batch_id: int | None = None


_STRING_COLUMNS = ("topic", "tags", "keys")


def _check_write_schema(schema: StructType, opts: WriteOptions) -> list[str]:
    """The columns the writer reads (body, topic, tags, keys); others are ignored."""
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise ValueError(
            f"writing to {FORMAT} needs a 'body' column (binary or string); "
            f"the data has {', '.join(fields) or 'no columns'}"
        )
    if not isinstance(fields["body"], (BinaryType, StringType)):
        raise ValueError(
            f"column 'body' must be binary or string, not {fields['body'].simpleString()}"
        )
    for name in _STRING_COLUMNS:
        if name in fields and not isinstance(fields[name], StringType):
            raise ValueError(f"column {name!r} must be a string, not {fields[name].simpleString()}")
    if "topic" not in fields and opts.topic is None:
        raise ValueError(f"writing to {FORMAT} needs a 'topic' column or the topic option")
    return ["body", "topic", "tags", "keys"]


class _Writing:
    opts: WriteOptions
    columns: list[str]

    def _send(self, items: Iterator[Any]) -> int:
        """Send every row of ``items`` (Arrow record batches or Rows); how many were sent."""
        sender = MessageSender(
            SyncClient(self.opts.namesrv, timeout=self.opts.send_timeout_ms / 1000), self.opts
        )
        for item in items:
            if hasattr(item, "num_rows"):  # a pyarrow.RecordBatch
                for body, topic, tags, keys in rows_of_batch(item, self.columns):
                    sender.add(body, topic, tags, keys)
            else:  # a Row
                values = item.asDict()
                sender.add(
                    values.get("body"), values.get("topic"), values.get("tags"), values.get("keys")
                )
        return sender.close()


class RocketMQBatchWriter(_Writing, DataSourceArrowWriter):  # type: ignore[misc]
    """A batch write: every row becomes a message."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = _check_write_schema(schema, opts)

    def write(self, iterator: Iterator[Any]) -> SendCommit:
        return SendCommit(sent=self._send(iterator))

    def commit(self, messages: list[SendCommit | None]) -> None:
        pass

    def abort(self, messages: list[SendCommit | None]) -> None:
        pass


class RocketMQStreamWriter(_Writing, _StreamWriterBase):  # type: ignore[misc]
    """A streaming write; a batch Spark runs again after a restart is not re-sent (module notes)."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = _check_write_schema(schema, opts)

    def write(self, iterator: Iterator[Any]) -> SendCommit:
        query_id, batch_id = _streaming_ids()
        if self.opts.topic and query_id and batch_id is not None:
            client = SyncClient(self.opts.namesrv, timeout=self.opts.send_timeout_ms / 1000)
            mark = client.with_retries(
                lambda: client.query_offset(
                    marker_group(self.opts, query_id), marker_queue(client, self.opts.topic or "")
                )
            )
            if batch_id < mark:
                for _ in iterator:  # committed before: consume the input, send nothing
                    pass
                log.info(
                    "batch %s of query %s was committed before: not sent again", batch_id, query_id
                )
                return SendCommit(skipped=True, query_id=query_id, batch_id=batch_id)
        return SendCommit(sent=self._send(iterator), query_id=query_id, batch_id=batch_id)

    def commit(self, messages: list[SendCommit | None], batchId: int) -> None:
        query_ids = {m.query_id for m in messages if m is not None and m.query_id}
        if not self.opts.topic or len(query_ids) != 1:
            return
        client = SyncClient(self.opts.namesrv, timeout=self.opts.send_timeout_ms / 1000)
        group = marker_group(self.opts, query_ids.pop())
        key = marker_queue(client, self.opts.topic)
        started = time.monotonic()
        client.with_retries(lambda: client.commit_offsets(group, {key: batchId + 1}))
        log.debug("batch %s committed in %.3f s", batchId, time.monotonic() - started)

    def abort(self, messages: list[SendCommit | None], batchId: int) -> None:
        pass


def _streaming_ids() -> tuple[str | None, int | None]:
    """The query id and batch id of the running streaming task, from Spark's local properties."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None, None
    query_id = ctx.getLocalProperty(_QUERY_ID_KEY)
    batch = ctx.getLocalProperty(_BATCH_ID_KEY)
    return query_id, int(batch) if batch is not None else None
