"""protocol.batch and protocol._speedups: the batch body, and the C loops against the Python ones.

The C functions must answer exactly what the Python reference answers (byte for byte, object
for object), and None wherever the Python side has something to say (then it raises or takes
the general path).
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol import batch as batch_module
from aiorocketmq.protocol import record as record_module
from aiorocketmq.protocol.batch import (
    build_records_py,
    decode_batch,
    encode_batch,
    message_properties,
    property_code,
)
from aiorocketmq.protocol.errors import MessageIllegal
from aiorocketmq.protocol.message import Message, MessageExt
from aiorocketmq.protocol.record import (
    RecordBatchEncoder,
    decode_records,
    decode_records_py,
    format_host,
)
from aiorocketmq.protocol.tags import java_string_hash

speedups = record_module._speedups
needs_c = pytest.mark.skipif(speedups is None, reason="AIOROCKETMQ_NO_EXTENSIONS is set")

TOPIC = "BatchTopic"
V4 = (bytes([10, 0, 0, 7]), 10911)
V6 = (bytes(15) + b"\x01", 9876)


def test_the_extension_is_built_and_used() -> None:
    """`make install` compiles it (gcc and the Python headers are on our machines)."""
    if os.environ.get("AIOROCKETMQ_NO_EXTENSIONS"):
        pytest.skip("switched off")
    assert speedups is not None
    assert batch_module.build_records is speedups.build_records
    assert speedups.crc32(b"x" * 1000) == zlib.crc32(b"x" * 1000)


text = st.text(
    alphabet=st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)),
    max_size=12,
)
messages_st = st.lists(
    st.builds(
        Message,
        st.just(TOPIC),
        st.binary(min_size=1, max_size=300),
        tags=st.one_of(st.none(), text.filter(bool)),
        keys=st.one_of(st.none(), text.filter(bool)),
        flag=st.integers(-(2**31), 2**31 - 1),
        properties=st.dictionaries(text.filter(bool), text, max_size=3),
    ),
    min_size=1,
    max_size=20,
)


def encoder(born: tuple[bytes, int] = V4, store: tuple[bytes, int] = V4) -> RecordBatchEncoder:
    return RecordBatchEncoder(
        topic=TOPIC.encode(), queue_id=3, born_timestamp=111, born_host=born,
        store_timestamp=222, store_host=store, reconsume_times=1,
    )


def build(fn: object, body: bytes, enc: RecordBatchEncoder, max_body: int = 4096) -> object:
    assert callable(fn)
    return fn(body, 3, 40, 5000, enc.middle, enc.topic_part, max_body, property_code, {})


def is_plain(m: Message) -> bool:
    """What build_records takes without the general path: no reserved keys among its own."""
    return not {"TAGS", "KEYS", "DELAY"} & m.properties.keys()


@given(messages_st, st.sampled_from([(V4, V4), (V6, V4), (V4, V6), (V6, V6)]))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_build_records_c_and_python_agree_and_round_trip(
    messages: list[Message], hosts: tuple[tuple[bytes, int], tuple[bytes, int]]
) -> None:
    enc = encoder(*hosts)
    body = encode_batch(messages)
    expected = build(build_records_py, body, enc)
    if speedups is not None:
        assert build(speedups.build_records, body, enc) == expected
    if not all(is_plain(m) for m in messages):
        return  # a user property named TAGS, KEYS or DELAY: the general path decides
    assert expected is not None
    end, records, units, placed, codes, keyed = expected  # type: ignore[misc]
    assert keyed == any(m.keys or "UNIQ_KEY" in m.properties for m in messages)
    assert end == 5000 + len(records) and len(units) == 20 * len(messages)
    decoded = decode_records(records, "b", check_crc=True)
    assert decoded == decode_records_py(records, "b", check_crc=True)
    assert [m.body for m in decoded] == [m.body for m in messages]
    assert [m.tags for m in decoded] == [m.tags for m in messages]
    assert [m.keys for m in decoded] == [m.keys for m in messages]
    assert [m.properties for m in decoded] == [m.properties for m in messages]
    assert [m.flag for m in decoded] == [m.flag for m in messages]
    assert [m.queue_offset for m in decoded] == list(range(40, 40 + len(messages)))
    assert [m.commit_log_offset for m in decoded] == placed
    units_read = [struct.unpack_from(">qiq", units, 20 * i) for i in range(len(messages))]
    assert [u[0] for u in units_read] == placed
    assert [u[1] for u in units_read] == [m.store_size for m in decoded]
    tag_codes = [java_string_hash(m.tags) if m.tags else 0 for m in messages]
    assert [u[2] for u in units_read] == tag_codes
    assert codes == list(dict.fromkeys(tag_codes))
    assert decode_batch(body, TOPIC) == messages


@pytest.mark.parametrize(
    ("properties", "keyed"),
    [
        ({}, False),
        ({"UNIQ_KEY": "7F00"}, True),
        ({"a": "KEYS", "KEYSX": "1", "XUNIQ_KEY": "2"}, False),  # a name is whole, a value no name
        ({"a": "1", "UNIQ_KEY": "2"}, True),
    ],
)
def test_build_records_says_whether_a_record_names_a_key(
    properties: dict[str, str], keyed: bool
) -> None:
    """What the key index reads: the log keeps the ranges of keyed records (else it searched
    every write for the names, a fifth of a microsecond a message)."""
    messages = [Message(TOPIC, b"x", properties=dict(properties)), Message(TOPIC, b"y")]
    enc = encoder()
    for fn in (build_records_py, speedups.build_records if speedups is not None else None):
        if fn is None:
            continue
        built = build(fn, encode_batch(messages), enc)
        assert built is not None and built[5] is keyed  # type: ignore[index]
        with_keys = build(fn, encode_batch([Message(TOPIC, b"z", keys="k"), *messages]), enc)
        assert with_keys is not None and with_keys[5] is True  # type: ignore[index]


@given(messages_st, st.data())
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_a_damaged_batch_body_gets_the_same_answer_from_c_and_python(
    messages: list[Message], data: st.DataObject
) -> None:
    body = bytearray(encode_batch(messages))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    damaged = bytes(body[:cut])
    enc = encoder()
    expected = build(build_records_py, damaged, enc, max_body=200)
    if speedups is not None:
        assert build(speedups.build_records, damaged, enc, max_body=200) == expected
    if expected is None:
        try:  # the general path either names the bad item or takes the messages
            decode_batch(damaged, TOPIC)
        except MessageIllegal as e:
            assert "batch_body item" in str(e)


@given(messages_st, st.data())
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_records_get_the_same_answer_from_c_and_python(
    messages: list[Message], data: st.DataObject
) -> None:
    built = build(build_records_py, encode_batch(messages), encoder(V6, V4))
    if built is None:
        return
    records = bytearray(built[1])  # type: ignore[index]
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(records) - 1))
        records[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(records)))
    damaged = bytes(records[:cut])
    try:
        expected: object = decode_records_py(damaged, "b", check_crc=True)
    except (ValueError, UnicodeDecodeError) as e:
        expected = type(e)
    try:
        got: object = decode_records(damaged, "b", check_crc=True)
    except (ValueError, UnicodeDecodeError) as e:
        got = type(e)
    assert got == expected


def test_property_code_sends_the_unusual_to_the_general_path() -> None:
    assert property_code(b"TAGS\x01TagA\x02") == java_string_hash("TagA")
    assert property_code(b"KEYS\x01k1\x02a\x01b\x02") == 0
    assert property_code(b"DELAY\x013\x02") is None  # delayed: the schedule service's job
    assert property_code(b"TAGS\x01A\x02TAGS\x01B\x02") is None  # duplicate keys
    assert property_code(b"TAGS\x01A") is None  # not key\x01value\x02 pairs
    assert property_code(b"\xff\xfe") is None  # not UTF-8


def test_message_properties_as_stored() -> None:
    m = Message(TOPIC, b"x", tags="T", keys="K", properties={"a": "1"}, delay_time_level=2)
    assert message_properties(m) == b"a\x011\x02TAGS\x01T\x02KEYS\x01K\x02DELAY\x012\x02"
    assert message_properties(Message(TOPIC, b"x")) == b""


def test_decode_batch_names_the_bad_item() -> None:
    good = encode_batch([Message(TOPIC, b"one"), Message(TOPIC, b"two")])
    with pytest.raises(MessageIllegal, match="item 2: truncated"):
        decode_batch(good + b"\x00\x00", TOPIC)
    bad_length = good[:-2] + b"\x00\x05"  # the last item's properties length is wrong
    with pytest.raises(MessageIllegal, match="item 1: properties length 5"):
        decode_batch(bad_length, TOPIC)
    not_utf8 = encode_batch([Message(TOPIC, b"x", properties={"k": "v"})])
    not_utf8 = not_utf8[:-4] + b"\xff" + not_utf8[-3:]
    with pytest.raises(MessageIllegal, match="item 0: properties are not UTF-8"):
        decode_batch(not_utf8, TOPIC)
    delayed = decode_batch(encode_batch([Message(TOPIC, b"x", delay_time_level=3)]), TOPIC)
    assert delayed == [Message(TOPIC, b"x", delay_time_level=3)]


def test_properties_over_the_int16_limit_are_refused_by_the_producer() -> None:
    with pytest.raises(MessageIllegal, match="over the limit 32767"):
        encode_batch([Message(TOPIC, b"x", properties={"big": "v" * 40000})])


@needs_c
def test_c_decoder_caches_hosts_and_properties_without_sharing_dicts() -> None:
    built = build(
        build_records_py,
        encode_batch([Message(TOPIC, b"a", properties={"k": "v"})] * 3),
        encoder(V4, V6),
    )
    messages = decode_records(built[1], "b")  # type: ignore[index]
    assert messages[0].properties is not messages[1].properties
    messages[0].properties["changed"] = "yes"
    assert messages[1].properties == {"k": "v"}
    assert messages[2].store_host == format_host(*V6) and messages[2].born_host == "10.0.0.7:10911"


@needs_c
@given(st.binary(max_size=1200), st.integers(0, 15))
def test_c_crc32_by_table_and_by_carry_less_multiplication_match_zlib(
    data: bytes, skip: int
) -> None:
    view = memoryview(data)[skip:]  # any start: the loads are unaligned
    assert speedups.crc32(view) == speedups.crc32(view, table=True) == zlib.crc32(view)


@needs_c
def test_c_decoder_fills_message_ext_directly_or_calls_another_class() -> None:
    """MessageExt's slots are filled without its __init__; any other class is called."""
    built = build(
        build_records_py, encode_batch([Message(TOPIC, b"a", tags="T")] * 2), encoder(V4, V4)
    )
    records = built[1]  # type: ignore[index]
    direct = decode_records(records, "b")
    assert direct == decode_records_py(records, "b")
    assert type(direct[0]) is MessageExt and direct[0].tags == "T"

    called: list[tuple[object, ...]] = []

    def other(*fields: object) -> tuple[object, ...]:
        called.append(fields)
        return fields

    answer = speedups.decode_records(
        records, "b", other, record_module._split_properties, {}, format_host, False
    )
    assert answer == called and len(called) == 2
    assert called[0] == tuple(getattr(direct[0], f.name) for f in dataclasses.fields(MessageExt))
    assert decode_records(records, "b") == direct  # and back to MessageExt


units_st = st.lists(
    st.tuples(
        st.integers(0, 3),  # gap before the record (0: back to back with the previous one)
        st.integers(-1, 400),  # size (<= 0: a blank)
        st.sampled_from([0, 11, 22, 33]),  # tags code
    ),
    max_size=60,
)


@needs_c
@given(
    units_st,
    st.integers(1, 70),
    st.integers(-1, 5000),
    st.integers(0, 2000),
    st.one_of(st.none(), st.frozensets(st.sampled_from([0, 11, 22, 33]))),
)
@settings(max_examples=300)
def test_select_units_c_and_python_agree(
    spec: list[tuple[int, int, int]],
    max_nums: int,
    max_bytes: int,
    physical_min: int,
    code_set: frozenset[int] | None,
) -> None:
    from aiorocketmq.broker.store.consume_queue import CQ_UNIT, select_units_py

    position, parts = 0, []
    for gap, size, code in spec:
        position += gap
        parts.append(CQ_UNIT.pack(position, size, code))
        position += max(size, 0)
    units = b"".join(parts)
    expected = select_units_py(units, max_nums, max_bytes, physical_min, code_set)
    assert speedups.select_units(units, max_nums, max_bytes, physical_min, code_set) == expected
    scanned, chosen, runs = expected
    assert len(chosen) <= max_nums and scanned <= len(spec)
    assert sum(count for _, _, count in runs) == len(chosen)
    assert sum(size for _, size, _ in runs) == sum(size for _, size in chosen)


@given(messages_st)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_encode_batch_c_and_python_agree(messages: list[Message]) -> None:
    expected = batch_module.encode_batch_py(messages)
    assert encode_batch(messages) == expected
    assert encode_batch(iter(messages)) == expected  # any iterable, read once
    if speedups is not None:
        assert speedups.encode_batch(messages, message_properties, 32767) == expected


@needs_c
def test_the_c_encoder_leaves_what_it_does_not_expect_to_python() -> None:
    """A body not bytes, a flag out of int32, properties over the limit: None, and the Python
    encoder answers (or names the fault)."""
    assert speedups is not None
    odd = [Message(TOPIC, bytearray(b"x")), Message(TOPIC, b"y", flag=2**31)]  # type: ignore[arg-type]
    for m in odd:
        assert speedups.encode_batch([m], message_properties, 32767) is None
    big = Message(TOPIC, b"x", properties={"big": "v" * 40000})
    assert speedups.encode_batch([big], message_properties, 32767) is None
    with pytest.raises(MessageIllegal, match="messages\\[1\\]: message properties"):
        encode_batch([Message(TOPIC, b"ok"), big])


@given(st.lists(st.integers(0, 2**63 - 1), max_size=50), st.sampled_from([V4, V6]))
def test_message_ids_c_and_python_agree(offsets: list[int], host: tuple[bytes, int]) -> None:
    ids = record_module.create_message_ids(*host, offsets)
    assert ids == [record_module.create_message_id(*host, o) for o in offsets]
    if speedups is not None:
        with pytest.raises(OverflowError):
            speedups.message_ids("00", [2**64])
