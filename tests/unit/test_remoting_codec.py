"""The remoting codec without a network: frames, headers, fields, bodies and version-1 records."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.protocol.errors import InvalidArgument
from aiorocketmq.protocol.message import MessageConst
from aiorocketmq.protocol.record import (
    RecordBatchEncoder,
    encode_properties,
    iter_records,
    parse_host,
)
from aiorocketmq.protocol.remoting.bodies import (
    cluster_info_body,
    fastjson,
    parse_heartbeat,
    parse_lock_body,
    parse_route,
    route_body,
)
from aiorocketmq.protocol.remoting.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    decode_frame,
    encode_binary_header,
    encode_command,
    not_supported,
)
from aiorocketmq.protocol.remoting.fields import Fields, send_fields
from aiorocketmq.protocol.remoting.records import MESSAGE_MAGIC_CODE_V1, to_v1_records
from aiorocketmq.protocol.tags import java_string_hash
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2


def frame(header: bytes, body: bytes = b"", kind: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), kind << 24 | len(header)) + header + body


# ---- frames ----------------------------------------------------------------------------------
commands = st.builds(
    RemotingCommand,
    code=st.integers(0, 32767),
    opaque=st.integers(0, 2**31 - 1),
    flag=st.sampled_from([0, FLAG_RESPONSE, FLAG_ONEWAY]),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON", "GO"]),
    version=st.integers(0, 1000),
    remark=st.none() | st.text(max_size=40),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=30), max_size=6),
    body=st.binary(max_size=300),
)


@given(st.lists(commands, min_size=1, max_size=5), st.integers(1, 64))
def test_frames_round_trip_in_any_chunking(cmds: list[RemotingCommand], chunk: int) -> None:
    wire = b"".join(encode_command(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(0, len(wire), chunk):
        out.extend(decoder.feed(wire[i : i + chunk]))
    assert out == cmds
    assert decoder.pending == 0


@given(commands)
def test_the_binary_header_is_read_too(cmd: RemotingCommand) -> None:
    decoded = decode_frame(frame(encode_binary_header(cmd), cmd.body, kind=1)[4:])
    assert decoded.code == cmd.code
    assert decoded.opaque == cmd.opaque and decoded.flag == cmd.flag
    assert decoded.language == cmd.language and decoded.version == cmd.version
    assert decoded.remark == (cmd.remark or None)
    assert decoded.ext_fields == cmd.ext_fields and decoded.body == cmd.body


def test_golden_response_frame() -> None:
    """Exactly the bytes fastjson would write: sorted keys, strings in extFields."""
    cmd = RemotingCommand(code=0, opaque=7, flag=FLAG_RESPONSE, ext_fields={"offset": "5"})
    header = (
        b'{"code":0,"extFields":{"offset":"5"},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    assert encode_command(cmd) == frame(header)


def test_golden_cpp_request_frame() -> None:
    """A pull as Apache's C++ client 1.2.3 writes it: numbers in extFields, a trailing newline."""
    header = (
        b'{"code":11,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x",'
        b'"commitOffset":"-1","consumerGroup":"CG","maxMsgNums":32,"queueId":0,'
        b'"queueOffset":"0","subVersion":"1795528481199","subscription":"*",'
        b'"suspendTimeoutMillis":"15000","sysFlag":6,"topic":"T"},"flag":0,"language":"CPP",'
        b'"opaque":3,"remark":"","version":63}\n'
    )
    [cmd] = FrameDecoder().feed(frame(header))
    assert (cmd.code, cmd.opaque, cmd.language, cmd.version, cmd.remark) == (11, 3, "CPP", 63, "")
    f = Fields(cmd.ext_fields)
    assert f.integer("maxMsgNums") == 32 and f.integer("queueId") == 0
    assert f.integer("sysFlag") == 6 and f.integer("commitOffset") == -1
    assert not cmd.is_response and not cmd.is_oneway


def test_a_response_echoes_the_opaque_and_sets_the_response_bit() -> None:
    request = RemotingCommand(code=105, opaque=41)
    answer = not_supported(request)
    assert answer.opaque == 41 and answer.is_response and answer.code == 3
    assert answer.remark == " request type 105 not supported"


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (struct.pack(">i", 17 * 1024 * 1024), "outside"),
        (struct.pack(">i", -5), "outside"),
        (struct.pack(">i", 2), "outside"),
        (frame(b"not json at all"), "not JSON"),
        (frame(b'["a list"]'), "not a JSON object"),
        (frame(b'{"opaque":1}'), "no code"),
        (frame(b'{"code":"ten"}'), "not a number"),
        (frame(b'{"code":1,"extFields":[1]}'), "extFields"),
        (struct.pack(">ii", 8, 100) + b"1234", "exceeds the frame"),
        (frame(b"{}", kind=7), "serialize type"),
        (frame(b"\x00\x01", kind=1), "binary header"),
        (frame(b"\xff\xfe{", kind=0), "not JSON"),
    ],
)
def test_unreadable_frames_are_refused_with_the_reason(wire: bytes, error: str) -> None:
    with pytest.raises(FrameError, match=error):
        list(FrameDecoder().feed(wire))
    # The same behind a frame that came whole, the bad one split in two (the buffered path).
    decoder = FrameDecoder()
    good = encode_command(RemotingCommand(code=34, body=b"{}"))
    assert [c.code for c in decoder.feed(good + wire[:3])] == [34]
    with pytest.raises(FrameError, match=error):
        list(decoder.feed(wire[3:]))


def test_the_frame_limit_is_a_setting() -> None:
    small = FrameDecoder(max_frame_length=64)
    with pytest.raises(FrameError):
        list(small.feed(encode_command(RemotingCommand(code=1, body=b"x" * 100))))


def test_a_partial_frame_waits_for_the_rest() -> None:
    wire = encode_command(RemotingCommand(code=34, body=b"{}"))
    decoder = FrameDecoder()
    assert list(decoder.feed(wire[:-1])) == []
    assert decoder.pending == len(wire) - 1
    assert [c.code for c in decoder.feed(wire[-1:])] == [34]


# ---- header fields -----------------------------------------------------------------------------
def test_fields_name_what_is_missing_or_wrong() -> None:
    f = Fields({"queueId": "x", "batch": "maybe"})
    with pytest.raises(InvalidArgument, match="'topic' is missing"):
        f.string("topic")
    with pytest.raises(InvalidArgument, match="'queueId' is not an integer"):
        f.integer("queueId")
    with pytest.raises(InvalidArgument, match="'batch' is not a boolean"):
        f.boolean("batch")
    assert f.integer("maxMsgNums", 32) == 32 and f.string("tags", "") == ""


@pytest.mark.parametrize(("text", "value"), [("1", True), ("0", False), ("true", True),
                                              ("false", False), ("TRUE", True)])
def test_booleans_from_java_and_cpp(text: str, value: bool) -> None:
    assert Fields({"b": text}).boolean("b") is value


def test_send_v2_letters_read_as_send_names() -> None:
    f = send_fields({"a": "PG", "b": "T", "e": "3", "m": "true", "z": "kept"}, 310)
    assert f.string("producerGroup") == "PG" and f.string("topic") == "T"
    assert f.integer("queueId") == 3 and f.boolean("batch") and f.string("z") == "kept"


# ---- bodies ------------------------------------------------------------------------------------
JAVA_HEARTBEAT = (
    b'{"clientID":"10.0.0.7@4242#813460932218","consumerDataSet":[{"consumeFromWhere":'
    b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG",'
    b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":'
    b'[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,'
    b'"tagsSet":["TagA"],"topic":"TopicTest"}],"unitMode":false}],"heartbeatFingerprint":0,'
    b'"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}'
)
CPP_HEARTBEAT = (
    b'{"clientID":"23998-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":4,'
    b'"consumeType":1,"groupName":"CGF","messageModel":0,"subscriptionDataSet":[{"subString":'
    b'"*","subVersion":"1795528481199","topic":"%RETRY%CGF"},{"codeSet":[0],"subString":'
    b'"TagA || TagB","subVersion":"1795528481199","tagsSet":["TagA"],"topic":"TopicTest"}]}]}\n'
)


def test_heartbeats_in_java_and_cpp_shapes() -> None:
    java = parse_heartbeat(JAVA_HEARTBEAT)
    assert java.client_id == "10.0.0.7@4242#813460932218"
    [c] = java.consumer_data_set
    assert (c.consume_type, c.message_model, c.consume_from_where) == (
        common_pb2.CONSUME_PASSIVELY, common_pb2.CLUSTERING, common_pb2.CONSUME_FROM_LAST_OFFSET
    )
    assert c.subscription_data_set[0].sub_version == 1700000000000
    assert [p.group_name for p in java.producer_data_set] == ["CLIENT_INNER_PRODUCER"]

    cpp = parse_heartbeat(CPP_HEARTBEAT)
    [c] = cpp.consumer_data_set
    assert c.consume_type == common_pb2.CONSUME_PASSIVELY
    assert c.message_model == common_pb2.BROADCASTING
    assert c.consume_from_where == common_pb2.CONSUME_FROM_FIRST_OFFSET
    sub = c.subscription_data_set[1]
    # the tags and their hash codes come from subString, never from the client's codeSet
    assert sorted(sub.tags_set) == ["TagA", "TagB"]
    assert sorted(sub.code_set) == sorted([java_string_hash("TagA"), java_string_hash("TagB")])
    assert sub.sub_version == 1795528481199


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"nope", "not JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"consumerDataSet":[]}', "clientID"),
        (b'{"clientID":"c","consumerDataSet":{}}', "JSON array"),
        (b'{"clientID":"c","consumerDataSet":[{"consumeType":9}]}', "consumeType"),
        (b'{"clientID":"c","consumerDataSet":[{"subscriptionDataSet":[{"expressionType":"SQL92"}]}]}',
         "SQL92"),
    ],
)
def test_bad_heartbeats_are_named(body: bytes, error: str) -> None:
    with pytest.raises(InvalidArgument, match=error):
        parse_heartbeat(body)


def test_lock_body() -> None:
    body = (b'{"clientId":"c1","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a",'
            b'"queueId":2,"topic":"T"}]}')
    client, group, only, queues = parse_lock_body(body)
    assert (client, group, only) == ("c1", "CG", False)
    assert [(q.topic, q.broker_name, q.queue_id) for q in queues] == [("T", "broker-a", 2)]


def _route() -> common_pb2.TopicRouteData:
    route = common_pb2.TopicRouteData()
    route.broker_datas.add(cluster="C", broker_name="broker-a", broker_addrs={0: "g:1"})
    route.broker_datas.add(cluster="C", broker_name="broker-b", broker_addrs={0: "g:2"})
    route.queue_datas.add(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)
    route.queue_datas.add(broker_name="broker-b", read_queue_nums=4, write_queue_nums=4, perm=6)
    return route


def test_routes_carry_remoting_addresses_and_fastjson_keys() -> None:
    remoting = {"g:1": "127.0.0.1:10912"}  # broker-b has no remoting listener
    old = route_body(_route(), remoting.get, quote_int_keys=False)
    assert old is not None and b'"brokerAddrs":{0:"127.0.0.1:10912"}' in old
    new = route_body(_route(), remoting.get, quote_int_keys=True)
    assert new is not None and b'"brokerAddrs":{"0":"127.0.0.1:10912"}' in new
    parsed = parse_route(old)
    assert parsed == json.loads(new)
    assert [b["brokerName"] for b in parsed["brokerDatas"]] == ["broker-a"]
    assert [q["brokerName"] for q in parsed["queueDatas"]] == ["broker-a"]
    assert route_body(_route(), {}.get, quote_int_keys=True) is None


def test_cluster_info_body() -> None:
    info = nameserver_pb2.ClusterInfo()
    info.broker_addr_table["broker-a"].CopyFrom(
        common_pb2.BrokerData(cluster="C", broker_name="broker-a", broker_addrs={0: "g:1"})
    )
    info.cluster_addr_table["C"].broker_names.append("broker-a")
    body = cluster_info_body(info, {"g:1": "r:1"}.get)
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"r:1"},"brokerName":"broker-a",'
        b'"cluster":"C","enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a"]}}'
    )


def test_fastjson_leaves_out_nulls_and_sorts() -> None:
    assert fastjson({"b": 1, "a": None, "c": [1, "x"]}) == b'{"b":1,"c":[1,"x"]}'


# ---- version-1 records -------------------------------------------------------------------------
def read_v1(data: bytes) -> list[dict[str, object]]:
    """A reader written from the spec's table, as Apache's C++ client walks a record."""
    out = []
    pos = 0
    while pos < len(data):
        start = pos
        total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(
            ">iiiiiqqiq", data, pos
        )
        pos += 48
        born = data[pos : pos + 4]
        pos += 8
        (store_ts,) = struct.unpack_from(">q", data, pos)
        pos += 8
        store_ip, store_port = data[pos : pos + 4], struct.unpack_from(">i", data, pos + 4)[0]
        pos += 8
        reconsume, _prepared, body_len = struct.unpack_from(">iqi", data, pos)
        pos += 16
        body = data[pos : pos + body_len]
        pos += body_len
        topic_len = data[pos]
        topic = data[pos + 1 : pos + 1 + topic_len].decode()
        pos += 1 + topic_len
        (props_len,) = struct.unpack_from(">h", data, pos)
        props = data[pos + 2 : pos + 2 + props_len].decode()
        pos += 2 + props_len
        assert total == pos - start, "TOTALSIZE must be the exact sum of the fields"
        out.append(dict(magic=magic, crc=crc, queue_id=qid, flag=flag, queue_offset=qoff,
                        physical=phys, sysflag=sysflag, born=born, store_ip=store_ip,
                        store_port=store_port, body=body, topic=topic, properties=props,
                        reconsume=reconsume, store_ts=store_ts, born_ts=born_ts))
    return out


def _records(born_host: str, topic: str = "TopicTest") -> bytes:
    encoder = RecordBatchEncoder(
        topic=topic.encode(), queue_id=2, born_timestamp=111, born_host=parse_host(born_host),
        store_timestamp=222, store_host=parse_host("127.0.0.1:10911"), reconsume_times=1,
    )
    props = encode_properties({MessageConst.PROPERTY_TAGS: "TagA", "KEYS": "k1"}).encode()
    out: list[bytes] = []
    encoder.encode([(b"hello", props, 5), (b"", b"", 0)], 10, 1000, out, [])
    return b"".join(out)


@pytest.mark.parametrize("born", ["10.1.2.3:5555", "[::ffff:10.1.2.3]:5555", "[2001:db8::1]:5555"])
def test_records_become_version_1_with_the_remoting_store_host(born: str) -> None:
    v1 = to_v1_records(_records(born), parse_host("127.0.0.1:10912"))
    first, second = read_v1(v1)
    assert first["magic"] == MESSAGE_MAGIC_CODE_V1
    assert first["topic"] == "TopicTest" and first["body"] == b"hello"
    assert first["crc"] == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert (first["queue_id"], first["flag"], first["queue_offset"]) == (2, 5, 10)
    assert (first["store_ip"], first["store_port"]) == (bytes([127, 0, 0, 1]), 10912)
    assert first["sysflag"] == 0  # IPv4 hosts only
    assert first["born"] == (bytes([10, 1, 2, 3]) if "10.1" in born else bytes(4))
    assert first["properties"] == "TAGS\x01TagA\x02KEYS\x01k1\x02"
    assert (first["reconsume"], first["born_ts"], first["store_ts"]) == (1, 111, 222)
    assert second["body"] == b"" and second["queue_offset"] == 11
    [(_, first_size), _] = list(iter_records(_records(born)))
    assert (first["physical"], second["physical"]) == (1000, 1000 + first_size)


def test_a_topic_over_127_bytes_keeps_its_version_2_record() -> None:
    raw = _records("10.1.2.3:5555", topic="t" * 200)
    assert to_v1_records(raw, None) == raw
