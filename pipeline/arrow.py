"""Pulled messages to Arrow record batches (what the reader yields), and batches to rows.

A reader that yields ``pyarrow.RecordBatch`` objects skips Spark's row-by-row conversion in the
Python worker; the batch's schema must be exactly Spark's Arrow form of the source's schema
(``to_arrow_schema(schema, timezone="UTC")``), which ``arrow_schema`` computes once per process.
Timestamps travel as microseconds since the epoch, UTC.

``records_to_batch`` builds the columns straight from a pull's raw commit-log records (the
format of ``protocol.record``), with no ``MessageExt`` per message: one ``struct`` unpack per
record, the body and properties sliced out, the message id made from its store host prefix,
the properties map built from flat key and value arrays. It gives the same rows as
``messages_to_batch(decode_records(...))``, which serves brokers that answer decoded messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from protocol.message import MessageConst, MessageExt
from protocol.record import (
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    header_struct,
)

__all__ = ["arrow_schema", "messages_to_batch", "records_to_batch", "rows_of_batch"]

_HEADERS = {flags: header_struct(flags) for flags in (0, 0x10, 0x20, 0x30)}
_SYSFLAG_LOW_BYTE = 39  # SYSFLAG (offset 36, int32) holds the host flags in its last byte
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS

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
    """One record batch of ``messages``, columns in the order of ``pipeline.source.SCHEMA``."""
    n = len(messages)
    first = messages[0]
    types = schema.types
    columns = [
        pa.array([first.topic] * n, types[0]),  # one pull: one queue
        pa.array([first.broker_name] * n, types[1]),
        pa.array([first.queue_id] * n, types[2]),
        pa.array([m.queue_offset for m in messages], types[3]),
        pa.array([m.msg_id for m in messages], types[4]),
        pa.array([m.tags for m in messages], types[5]),
        pa.array([m.keys for m in messages], types[6]),
        pa.array([m.body for m in messages], types[7]),
        pa.array([m.born_timestamp * 1000 for m in messages], types[8]),
        pa.array([m.store_timestamp * 1000 for m in messages], types[9]),
        pa.array([list(m.properties.items()) for m in messages], types[10]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def records_to_batch(data: bytes, broker_name: str, end: int, schema: Any) -> Any:
    """One record batch of the records of ``data`` (back to back) whose queue offset is below
    ``end``; None when there is none. ``ValueError`` names a record that is not one."""
    n = len(data)
    pos = 0
    headers = _HEADERS
    offsets: list[int] = []
    ids: list[str] = []
    tags: list[str | None] = []
    keys: list[str | None] = []
    bodies: list[bytes] = []
    born: list[int] = []
    stored: list[int] = []
    map_offsets = [0]
    map_keys: list[str] = []
    map_values: list[str] = []
    topic = ""
    queue_id = 0
    prefixes: dict[tuple[bytes, int], str] = {}
    parsed: dict[bytes, tuple[str | None, str | None, list[str], list[str]]] = {}
    while pos < n:
        if pos + MIN_RECORD_SIZE > n:
            raise ValueError(f"not a commit-log record at byte {pos}: truncated")
        header = headers[data[pos + _SYSFLAG_LOW_BYTE] & 0x30]
        (total, magic, _crc, queue_id, _flag, queue_offset, physical_offset, _sysflag,
         born_timestamp, _born_ip, _born_port, store_timestamp, store_ip, store_port, _reconsume,
         _prepared, body_length) = header.unpack_from(data, pos)  # fmt: skip
        record_end = pos + total
        if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or record_end > n:
            raise ValueError(f"not a commit-log record at byte {pos}: bad magic code or size")
        if queue_offset >= end:
            break
        body_start = pos + header.size
        topic_pos = body_start + body_length
        properties_pos = topic_pos + 2 + ((data[topic_pos] << 8) | data[topic_pos + 1])
        if properties_pos + 2 > record_end:
            raise ValueError(f"not a commit-log record at byte {pos}: bad lengths")
        if not topic:
            topic = str(data[topic_pos + 2 : properties_pos], "utf-8")
        offsets.append(queue_offset)
        prefix = prefixes.get((store_ip, store_port))
        if prefix is None:
            prefix = prefixes[(store_ip, store_port)] = (
                (store_ip + store_port.to_bytes(4, "big")).hex().upper()
            )
        ids.append(f"{prefix}{physical_offset:016X}")
        bodies.append(data[body_start:topic_pos])
        born.append(born_timestamp)
        stored.append(store_timestamp)
        raw = data[properties_pos + 2 : record_end]
        split = parsed.get(raw)
        if split is None:
            split = _split_properties(raw)
            if len(parsed) < 256:
                parsed[raw] = split
        tags.append(split[0])
        keys.append(split[1])
        map_keys.extend(split[2])
        map_values.extend(split[3])
        map_offsets.append(len(map_keys))
        pos = record_end
    count = len(offsets)
    if not count:
        return None
    types = schema.types
    ms = pa.timestamp("ms", tz="UTC")
    columns = [
        pa.array([topic] * count, types[0]),
        pa.array([broker_name] * count, types[1]),
        pa.array([queue_id] * count, types[2]),
        pa.array(offsets, types[3]),
        pa.array(ids, types[4]),
        pa.array(tags, types[5]),
        pa.array(keys, types[6]),
        pa.array(bodies, types[7]),
        pa.array(born, ms).cast(types[8]),
        pa.array(stored, ms).cast(types[9]),
        pa.MapArray.from_arrays(
            pa.array(map_offsets, pa.int32()),
            pa.array(map_keys, pa.string()),
            pa.array(map_values, pa.string()),
            type=types[10],
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _split_properties(raw: bytes) -> tuple[str | None, str | None, list[str], list[str]]:
    """``(tags, keys, other keys, their values)`` of a record's properties."""
    tags = keys = None
    names: list[str] = []
    values: list[str] = []
    if raw:
        for item in str(raw, "utf-8").split(PROPERTY_SEPARATOR):
            if item:
                name, _, value = item.partition(NAME_VALUE_SEPARATOR)
                if name == _TAGS:
                    tags = value
                elif name == _KEYS:
                    keys = value
                else:
                    names.append(name)
                    values.append(value)
    return tags, keys, names, values


def rows_of_batch(batch: Any, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The values of the columns ``names`` (None for a column the batch lacks), row by row."""
    present = set(batch.schema.names)
    columns = [
        batch.column(name).to_pylist() if name in present else [None] * batch.num_rows
        for name in names
    ]
    return zip(*columns, strict=True)
