"""protocol.record: the commit-log record format as clients decode it (raw pull records)."""

from __future__ import annotations

import struct
import zlib

import pytest

from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.record import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE,
    STOREHOSTADDRESS_V6_FLAG,
    RecordBatchEncoder,
    create_message_id,
    create_message_ids,
    decode_message,
    decode_message_id,
    decode_records,
    encode_properties,
    header_struct,
    iter_records,
    record_size,
    record_tags,
)

V4_BORN = (bytes([192, 168, 1, 2]), 50000)
V4_STORE = (bytes([10, 0, 0, 7]), 10911)
V6 = (bytes(15) + b"\x01", 9876)


def encode(
    items: list[tuple[bytes, bytes, int]],
    *,
    topic: bytes = b"TopicTest",
    queue_offset: int = 5,
    position: int = 1000,
    born: tuple[bytes, int] = V4_BORN,
    store: tuple[bytes, int] = V4_STORE,
) -> tuple[bytes, list[int]]:
    encoder = RecordBatchEncoder(
        topic=topic, queue_id=3, born_timestamp=111, born_host=born, store_timestamp=222,
        store_host=store, reconsume_times=2,
    )
    out: list[bytes] = []
    placed: list[int] = []
    end = encoder.encode(items, queue_offset, position, out, placed)
    data = b"".join(out)
    assert end == position + len(data)
    return data, placed


def props(**pairs: str) -> bytes:
    return encode_properties(pairs).encode()


def test_encoded_record_has_rocketmq_v2_layout() -> None:
    data, [position] = encode([(b"hello", props(TAGS="TagA"), 7)])
    assert len(data) == record_size(0, 5, len("TopicTest"), len("TAGS\x01TagA\x02"))
    fields = header_struct(0).unpack_from(data)
    (total, magic, crc, queue_id, flag, queue_offset, physical, sysflag, born_ts, born_ip,
     born_port, store_ts, store_ip, store_port, reconsume, prepared, body_length) = fields
    assert (total, magic, queue_id, flag, queue_offset, physical) == (
        len(data), MESSAGE_MAGIC_CODE, 3, 7, 5, 1000
    )
    assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF and position == 1000
    assert (sysflag, born_ts, born_ip, born_port) == (0, 111, *V4_BORN)
    assert (store_ts, store_ip, store_port, reconsume, prepared, body_length) == (
        222, *V4_STORE, 2, 0, 5
    )
    assert data.endswith(b"hello\x00\x09TopicTest\x00\x0aTAGS\x01TagA\x02")


def test_decode_records_round_trips_a_batch() -> None:
    items = [
        (b"a" * 10, b"", 0),
        (b"b" * 300, props(TAGS="T1", KEYS="k1 k2", color="red"), 1),
        (b"c", props(TAGS="T1"), 0),
    ]
    data, placed = encode(items)
    messages = decode_records(data, "broker-a")
    assert [m.body for m in messages] == [b"a" * 10, b"b" * 300, b"c"]
    assert [m.queue_offset for m in messages] == [5, 6, 7]
    assert [m.commit_log_offset for m in messages] == placed
    second = messages[1]
    assert (second.tags, second.keys, second.properties, second.flag) == (
        "T1", "k1 k2", {"color": "red"}, 1
    )
    assert messages[0].tags is None and messages[0].properties == {}
    for m in messages:
        assert (m.topic, m.broker_name, m.queue_id, m.reconsume_times) == (
            "TopicTest", "broker-a", 3, 2
        )
        assert (m.born_timestamp, m.born_host, m.store_timestamp, m.store_host) == (
            111, "192.168.1.2:50000", 222, "10.0.0.7:10911"
        )
        assert m.msg_id == create_message_id(*V4_STORE, m.commit_log_offset)
        assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF
    assert [m.store_size for m in messages] == [size for _, size in iter_records(data)]
    # The general decoder agrees, record by record.
    assert messages == [decode_message(data, pos, "broker-a") for pos, _ in iter_records(data)]


def test_decoded_properties_are_not_shared_between_messages() -> None:
    data, _ = encode([(b"x", props(a="1"), 0), (b"y", props(a="1"), 0)])
    first, second = decode_records(data)
    first.properties["b"] = "2"
    assert second.properties == {"a": "1"}


@pytest.mark.parametrize(
    ("born", "store", "sysflag"),
    [
        (V6, V4_STORE, BORNHOST_V6_FLAG),
        (V4_BORN, V6, STOREHOSTADDRESS_V6_FLAG),
        (V6, V6, BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
    ],
)
def test_ipv6_hosts(born: tuple[bytes, int], store: tuple[bytes, int], sysflag: int) -> None:
    data, placed = encode([(b"v6", b"", 0), (b"again", b"", 0)], born=born, store=store)
    assert struct.unpack_from(">i", data, 36)[0] == sysflag
    first, second = decode_records(data)
    assert first.body == b"v6" and second.body == b"again"
    assert first.msg_id == create_message_id(*store, placed[0])
    assert len(first.msg_id) == (56 if len(store[0]) == 16 else 32)
    host = "[::1]:9876"
    assert (first.born_host == host) == (len(born[0]) == 16)
    assert (first.store_host == host) == (len(store[0]) == 16)


def test_decode_records_of_several_topics_and_memoryviews() -> None:
    a, _ = encode([(b"1", b"", 0)], topic=b"TopicA", position=0)
    b, _ = encode([(b"2", b"", 0)], topic=b"TopicB", position=len(a))
    messages = decode_records(memoryview(a + b + a))
    assert [(m.topic, m.body) for m in messages] == [
        ("TopicA", b"1"), ("TopicB", b"2"), ("TopicA", b"1")
    ]
    assert decode_records(b"") == []


def test_decode_records_rejects_what_is_not_records() -> None:
    data, _ = encode([(b"body", b"", 0), (b"more", b"", 0)])
    with pytest.raises(ValueError, match=r"truncated|sizes"):
        decode_records(data[:-3])
    bad_magic = bytearray(data)
    bad_magic[4] ^= 0xFF
    with pytest.raises(ValueError, match="at byte 0"):
        decode_records(bytes(bad_magic))
    with pytest.raises(ValueError):
        list(iter_records(bytes(bad_magic)))
    bad_body = bytearray(data)
    bad_body[header_struct(0).size] ^= 0xFF
    assert len(decode_records(bytes(bad_body))) == 2  # the CRC is checked only on request
    with pytest.raises(ValueError, match="CRC"):
        decode_records(bytes(bad_body), check_crc=True)


def test_record_tags_reads_only_the_tags() -> None:
    data, _ = encode([(b"x", props(KEYS="k", TAGS="TagB"), 0), (b"y", b"", 0)])
    (first, _), (second, _) = iter_records(data)
    assert record_tags(data, first) == "TagB"
    assert record_tags(memoryview(data), second) is None


def test_message_ids_of_a_send() -> None:
    offsets = [0, 350, 123456789]
    assert create_message_ids(*V4_STORE, offsets) == [
        create_message_id(*V4_STORE, o) for o in offsets
    ]
    assert create_message_ids(*V6, [5]) == [create_message_id(*V6, 5)]
    assert decode_message_id(create_message_ids(*V4_STORE, [350])[0]) == ("10.0.0.7", 10911, 350)


def test_decoded_message_is_the_shared_vocabulary() -> None:
    data, _ = encode([(b"x", b"", 0)])
    [message] = decode_records(data, "b")
    assert isinstance(message, MessageExt) and message.message_queue.broker_name == "b"
