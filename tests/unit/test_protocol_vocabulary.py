"""The shared vocabulary: MessageQueue, PermName, names, client id, codes, tags, routes."""

from __future__ import annotations

import pytest

from aiorocketmq.protocol import MessageQueue, PermName, ResponseCode, build_client_id
from aiorocketmq.protocol.client_id import default_instance_name
from aiorocketmq.protocol.errors import InvalidArgument
from aiorocketmq.protocol.route import route_to_publish_queues, route_to_subscribe_queues
from aiorocketmq.protocol.tags import java_string_hash, parse_expression
from aiorocketmq.protocol.v1 import common_pb2
from aiorocketmq.protocol.validators import check_group, check_topic, dlq_topic, retry_topic


def test_message_queue_str_is_rocketmqs_tostring() -> None:
    mq = MessageQueue("TopicTest", "broker-a", 3)
    assert str(mq) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"


def test_message_queue_orders_by_topic_then_broker_then_id() -> None:
    mqs = [
        MessageQueue("b", "a", 0),
        MessageQueue("a", "b", 0),
        MessageQueue("a", "a", 10),
        MessageQueue("a", "a", 2),
    ]
    assert sorted(mqs) == [
        MessageQueue("a", "a", 2),
        MessageQueue("a", "a", 10),
        MessageQueue("a", "b", 0),
        MessageQueue("b", "a", 0),
    ]


def test_message_queue_is_immutable_and_hashable() -> None:
    mq = MessageQueue("t", "b", 1)
    assert {mq: 1}[MessageQueue("t", "b", 1)] == 1
    with pytest.raises(AttributeError):
        mq.queue_id = 2  # type: ignore[misc]


def test_message_queue_wire_round_trip() -> None:
    mq = MessageQueue("t", "b", 7)
    assert MessageQueue.from_proto(mq.to_proto()) == mq


def test_perm_name_bits() -> None:
    assert (PermName.READ, PermName.WRITE, PermName.INHERIT, PermName.PRIORITY) == (4, 2, 1, 8)
    assert PermName.is_readable(6) and PermName.is_writeable(6)
    assert not PermName.is_readable(2) and not PermName.is_writeable(4)
    assert PermName.is_valid(7) and not PermName.is_valid(8) and not PermName.is_valid(-1)
    assert PermName.to_string(6) == "RW-"


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%g", "a|b", "A-Z_0-9"])
def test_legal_topic_names(name: str) -> None:
    check_topic(name)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("has space", "illegal characters"),
        ("tópico", "illegal characters"),
        ("t" * 128, "max length 127"),
    ],
)
def test_illegal_topic_names(name: str, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        check_topic(name)


def test_group_max_length_is_120() -> None:
    check_group("g" * 120)
    with pytest.raises(InvalidArgument, match="max length 120"):
        check_group("g" * 121)


def test_retry_and_dlq_topics() -> None:
    assert retry_topic("g") == "%RETRY%g"
    assert dlq_topic("g") == "%DLQ%g"
    check_topic(retry_topic("g" * 120))  # retry topics may exceed 127


def test_client_id() -> None:
    assert build_client_id("10.0.0.5", "DEFAULT") == "10.0.0.5@DEFAULT"
    assert build_client_id("10.0.0.5", "i", "unit") == "10.0.0.5@i@unit"
    pid, _, nanos = default_instance_name().partition("#")
    assert pid.isdigit() and nanos.isdigit()


def test_response_codes_match_the_proto_enum() -> None:
    wire = dict(common_pb2.ResponseCode.items())
    assert wire == {c.name: c.value for c in ResponseCode}


def test_java_string_hash() -> None:
    # Values of Java's "x".hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("polygenelubricants") == -2147483648


def test_parse_expression() -> None:
    assert parse_expression(None).matches_all
    assert parse_expression("*").matches_all
    assert parse_expression("").matches_all
    e = parse_expression("TagA || TagB ||  ")
    assert e.tags_set == {"TagA", "TagB"}
    assert e.matches_code(java_string_hash("TagA"))
    assert not e.matches_code(java_string_hash("TagC"))
    assert e.matches_tags("TagB") and not e.matches_tags(None)


def _route() -> common_pb2.TopicRouteData:
    return common_pb2.TopicRouteData(
        queue_datas=[
            common_pb2.QueueData(broker_name="b", read_queue_nums=2, write_queue_nums=1, perm=6),
            common_pb2.QueueData(broker_name="a", read_queue_nums=1, write_queue_nums=2, perm=6),
            common_pb2.QueueData(broker_name="c", read_queue_nums=3, write_queue_nums=3, perm=2),
        ],
        broker_datas=[
            common_pb2.BrokerData(broker_name="a", broker_addrs={0: "h:1"}),
            common_pb2.BrokerData(broker_name="b", broker_addrs={1: "h:2"}),  # slave only
            common_pb2.BrokerData(broker_name="c", broker_addrs={0: "h:3"}),
        ],
    )


def test_route_to_subscribe_queues_takes_readable_read_queues() -> None:
    assert route_to_subscribe_queues("T", _route()) == {
        MessageQueue("T", "a", 0),
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
    }


def test_route_to_publish_queues_takes_writable_queues_of_masters_sorted() -> None:
    assert route_to_publish_queues("T", _route()) == [
        MessageQueue("T", "a", 0),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "c", 0),
        MessageQueue("T", "c", 1),
        MessageQueue("T", "c", 2),
    ]
