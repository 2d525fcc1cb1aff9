"""The reader's C path (``decode_columns``, straight into Arrow buffers) makes the batch the
Python path makes (``MessageExt`` objects, then ``messages_to_batch``), for any records."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol import record as record_module
from aiorocketmq.protocol.record import RecordBatchEncoder, decode_records_py, encode_properties

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from aiorocketmq.pipeline.arrow import arrow_schema, messages_to_batch, records_to_batch  # noqa: E402
from aiorocketmq.pipeline.source import SCHEMA  # noqa: E402

V4 = (bytes([127, 0, 0, 1]), 10911)
V6 = (bytes(range(16)), 10912)
# ASCII and not: a property that is not ASCII sends the batch down the Python path.
text = st.text(alphabet=st.sampled_from("abcTAGSKEY \u00e9-_1"), max_size=8)
record_st = st.tuples(
    st.binary(max_size=64),
    st.dictionaries(
        st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a"]), text), text, max_size=4
    ),
)


def records(items: list[tuple[bytes, dict[str, str]]], store: tuple[bytes, int]) -> bytes:
    encoder = RecordBatchEncoder(
        topic=b"Orders", queue_id=3, born_timestamp=1_700_000_000_123, born_host=V4,
        store_timestamp=1_700_000_000_456, store_host=store, reconsume_times=0,
    )  # fmt: skip
    out: list[bytes] = []
    encoder.encode(
        [(body, encode_properties(p).encode(), 0) for body, p in items], 40, 4096, out, []
    )
    return b"".join(out)


@pytest.mark.skipif(record_module._speedups is None, reason="the C speedups are not built")
@given(st.lists(record_st, min_size=1, max_size=12), st.sampled_from([V4, V6]), st.data())
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_c_columns_and_python_messages_make_the_same_batch(
    items: list[tuple[bytes, dict[str, str]]], store: tuple[bytes, int], data: st.DataObject
) -> None:
    raw = records(items, store)
    end = data.draw(st.integers(40, 40 + len(items) + 1))
    schema = arrow_schema(SCHEMA)
    batch = records_to_batch(raw, "broker-a", end, schema)
    messages = [m for m in decode_records_py(raw, "broker-a") if m.queue_offset < end]
    if not messages:
        assert batch is None
        return
    expected = messages_to_batch(messages, schema)
    assert batch.to_pylist() == expected.to_pylist()
    assert batch.schema == expected.schema
    batch.validate(full=True)


@pytest.mark.skipif(record_module._speedups is None, reason="the C speedups are not built")
def test_the_c_path_leaves_the_unusual_to_python() -> None:
    from aiorocketmq.protocol import _speedups  # type: ignore[attr-defined]

    plain = records([(b"x", {"TAGS": "t", "a": "1"})], V4)
    assert _speedups.decode_columns(plain, 10**9) is not None
    assert _speedups.decode_columns(records([(b"x", {"a": "\u00e9"})], V4), 10**9) is None
    assert _speedups.decode_columns(plain[:-1], 10**9) is None  # truncated: Python says why
    assert _speedups.decode_columns(plain, 40)[0] == 0  # nothing below the end offset
