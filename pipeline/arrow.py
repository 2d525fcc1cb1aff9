"""Messages to Arrow record batches (what the reader yields) and record batches to messages.

A reader that yields ``pyarrow.RecordBatch`` objects skips Spark's row-by-row conversion in the
Python worker; the batch's schema must be exactly Spark's Arrow form of the source's schema
(``to_arrow_schema(schema, timezone="UTC")``), which ``arrow_schema`` computes once per process.
Timestamps travel as microseconds since the epoch, UTC.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from protocol.message import MessageExt

__all__ = ["arrow_schema", "messages_to_batch", "rows_of_batch"]

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


def rows_of_batch(batch: Any, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The values of the columns ``names`` (None for a column the batch lacks), row by row."""
    present = set(batch.schema.names)
    columns = [
        batch.column(name).to_pylist() if name in present else [None] * batch.num_rows
        for name in names
    ]
    return zip(*columns, strict=True)
