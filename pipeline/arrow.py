"""Pulled messages to Arrow record batches (what the reader yields), and batches to rows.

A reader that yields ``pyarrow.RecordBatch`` objects skips Spark's row-by-row conversion in the
Python worker; the batch's schema must be exactly Spark's Arrow form of the source's schema
(``to_arrow_schema(schema, timezone="UTC")``), which ``arrow_schema`` computes once per process.
Timestamps travel as microseconds since the epoch, UTC.

``records_to_batch`` makes the columns of a pull's raw commit-log records (the format of
``aiorocketmq.protocol.record``), cut at the read's end offset. Where the C speedups are built,
``decode_columns`` writes the records straight into the columns' Arrow buffers (offsets, data,
validity), with no Python object per message: the reader's Python workers had spent more time
making ``MessageExt`` objects and lists of their fields than the plain client spent reading.
Otherwise, and for anything unusual (a property that is not ASCII or is named twice, a
malformed record), ``decode_records`` makes the messages and ``messages_to_batch`` their
columns: the same batch, and the errors that name the problem. ``messages_to_batch`` also
serves brokers that answer decoded messages.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

import pyarrow as pa

from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.record import _speedups, decode_records

__all__ = ["arrow_schema", "messages_to_batch", "records_to_batch", "rows_of_batch"]

_queue_offset = attrgetter("queue_offset")
_MS_UTC = pa.timestamp("ms", tz="UTC")

_schemas: dict[str, Any] = {}


def arrow_schema(spark_schema: Any) -> Any:
    """Spark's Arrow form of ``spark_schema`` (a ``StructType``), as the worker checks it."""
    key = spark_schema.json()
    schema = _schemas.get(key)
    if schema is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        try:
            schema = to_arrow_schema(spark_schema, timezone="UTC")
        except TypeError:  # PySpark releases whose to_arrow_schema has no timezone
            schema = to_arrow_schema(spark_schema)
        _schemas[key] = schema
    return schema


def messages_to_batch(messages: Sequence[MessageExt], schema: Any) -> Any:
    """One record batch of ``messages`` (of one queue, at least one), columns in the order of
    ``aiorocketmq.pipeline.source.SCHEMA``."""
    count = len(messages)
    first = messages[0]
    types = schema.types
    map_offsets = [0]
    names: list[str] = []
    values: list[str] = []
    add_offset = map_offsets.append
    for m in messages:
        properties = m.properties
        if properties:
            names.extend(properties)
            values.extend(properties.values())
        add_offset(len(names))
    columns = [
        *_queue_columns(first.topic, first.broker_name, first.queue_id, count, types),
        pa.array([m.queue_offset for m in messages], types[3]),
        pa.array([m.msg_id for m in messages], types[4]),
        pa.array([m.tags for m in messages], types[5]),
        pa.array([m.keys for m in messages], types[6]),
        pa.array([m.body for m in messages], types[7]),
        pa.array([m.born_timestamp for m in messages], _MS_UTC).cast(types[8]),
        pa.array([m.store_timestamp for m in messages], _MS_UTC).cast(types[9]),
        pa.MapArray.from_arrays(
            pa.array(map_offsets, pa.int32()),
            pa.array(names, pa.string()),
            pa.array(values, pa.string()),
            type=types[10],
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _queue_columns(
    topic: str, broker_name: str, queue_id: int, count: int, types: Sequence[Any]
) -> list[Any]:
    """The first three columns: one pull is of one queue, so each repeats one value."""
    return [
        pa.repeat(pa.scalar(topic, types[0]), count),
        pa.repeat(pa.scalar(broker_name, types[1]), count),
        pa.repeat(pa.scalar(queue_id, types[2]), count),
    ]


def records_to_batch(data: bytes, broker_name: str, end: int, schema: Any) -> Any:
    """One record batch of the records of ``data`` (back to back) whose queue offset is below
    ``end``; None when there is none. ``ValueError`` names a record that is not one."""
    decode_columns = getattr(_speedups, "decode_columns", None)  # None: not built, or older
    if decode_columns is not None:
        columns = decode_columns(data, end)
        if columns is not None:
            return _columns_to_batch(columns, broker_name, schema) if columns[0] else None
    messages = decode_records(data, broker_name)
    count = bisect.bisect_left(messages, end, key=_queue_offset)  # a pull's offsets ascend
    if not count:
        return None
    return messages_to_batch(messages if count == len(messages) else messages[:count], schema)


_US_UTC = pa.timestamp("us", tz="UTC")


def _columns_to_batch(columns: tuple[Any, ...], broker_name: str, schema: Any) -> Any:
    """The record batch of ``decode_columns``'s buffers (columns as ``messages_to_batch``)."""
    count, topic, queue_id, offsets, ids, tags, keys, bodies, born, stored, entries = columns[:11]
    names, values = columns[11:]
    types = schema.types
    buf = pa.py_buffer

    def strings(type_: Any, column: tuple[bytes, bytes, bytes], length: int = count) -> Any:
        valid, offsets_, data = column
        return pa.Array.from_buffers(type_, length, [buf(valid), buf(offsets_), buf(data)])

    def times(data: bytes, type_: Any) -> Any:
        array = pa.Array.from_buffers(_US_UTC, count, [None, buf(data)])
        return array if array.type == type_ else array.cast(type_)

    entry_count = len(names[1]) // 4 - 1  # int32 offsets, one more than the entries
    arrays = [
        *_queue_columns(topic, broker_name, queue_id, count, types),
        pa.Array.from_buffers(types[3], count, [None, buf(offsets)]),
        strings(types[4], ids),
        strings(types[5], tags),
        strings(types[6], keys),
        strings(types[7], bodies),
        times(born, types[8]),
        times(stored, types[9]),
        pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), count + 1, [None, buf(entries)]),
            strings(pa.string(), names, entry_count),
            strings(pa.string(), values, entry_count),
            type=types[10],
        ),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_of_batch(batch: Any, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The values of the columns ``names`` (None for a column the batch lacks), row by row."""
    present = set(batch.schema.names)
    columns = [
        batch.column(name).to_pylist() if name in present else [None] * batch.num_rows
        for name in names
    ]
    return zip(*columns, strict=True)
