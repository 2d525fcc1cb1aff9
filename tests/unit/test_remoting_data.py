"""The data path in remoting frames (``protocol/remoting/data.py``), both ends, no network:
what a client writes is what the broker reads, and what the broker answers is what the client
reads back."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.producer import Producer
from aiorocketmq.protocol.batch import encode_batch
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.data_path import check_data_transport
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MessageIllegal,
    MessageTooLarge,
    MQError,
    OffsetOutOfRange,
    SubscriptionNotExist,
)
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.record import create_message_ids, parse_host
from aiorocketmq.protocol.remoting.command import FrameDecoder, RemotingCommand, encode_command
from aiorocketmq.protocol.remoting.data import (
    PULL_MAX_BYTES,
    pull_answer,
    pull_command,
    pull_request,
    pull_response,
    send_answer,
    send_command,
    send_request,
    send_response,
)
from aiorocketmq.protocol.remoting.fields import Fields
from aiorocketmq.protocol.v1 import broker_pb2
from tests.unit.test_remoting_codec import _records, read_v1

STORE_HOST = parse_host("127.0.0.1:10911")


def over_the_wire(cmd: RemotingCommand) -> RemotingCommand:
    """``cmd`` as the other end reads it: encoded, then decoded."""
    (decoded,) = FrameDecoder().feed(encode_command(cmd))
    return decoded


names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), max_size=20)
longs = st.integers(0, 2**63 - 1)
ints = st.integers(0, 2**31 - 1)


@given(
    group=names.filter(bool), topic=names.filter(bool), queue_id=ints, offset=longs,
    max_nums=st.integers(1, 1024), max_bytes=ints, commit=st.booleans(), commit_offset=longs,
    suspend=st.booleans(), suspend_ms=longs, has_sub=st.booleans(), sub=names,
    sub_version=longs, epoch=longs, client_id=names, min_nums=st.integers(0, 1024),
    max_wait=longs, watch=st.booleans(), channel_id=names,
)
def test_a_pull_reads_back_as_it_was_written(
    group: str, topic: str, queue_id: int, offset: int, max_nums: int, max_bytes: int,
    commit: bool, commit_offset: int, suspend: bool, suspend_ms: int, has_sub: bool, sub: str,
    sub_version: int, epoch: int, client_id: str, min_nums: int, max_wait: int, watch: bool,
    channel_id: str,
) -> None:
    request = broker_pb2.PullMessageRequest(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_nums, max_msg_bytes=max_bytes, commit_offset_enabled=commit,
        commit_offset=commit_offset, suspend=suspend, suspend_timeout_millis=suspend_ms,
        has_subscription=has_sub, sub_expression=sub, expression_type="TAG",
        sub_version=sub_version, epoch=epoch, client_id=client_id,
        min_msg_nums=min_nums if min_nums > 1 else 0,
        max_wait_millis=max_wait if min_nums > 1 else 0,
        watch=watch, channel_id=channel_id if watch else "", raw_records=True,
    )
    cmd = over_the_wire(pull_command(request))
    assert cmd.code == 11
    read = pull_request(Fields(cmd.ext_fields, cmd.code))
    # The bytes asked for are capped so that the answer fits a frame.
    request.max_msg_bytes = max_bytes if 0 < max_bytes <= PULL_MAX_BYTES else PULL_MAX_BYTES
    if not sub:  # an empty expression reads as RocketMQ's default, all tags
        read.sub_expression = ""
    assert read == request


def test_a_pull_from_apache_clients_reads_as_before() -> None:
    """Without our fields: not fenced, no minimum, no watch (C++'s header)."""
    read = pull_request(Fields({
        "consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "5",
        "maxMsgNums": "32", "sysFlag": "3", "commitOffset": "4", "suspendTimeoutMillis": "15000",
        "subscription": "a || b", "subVersion": "7",
    }))
    assert (read.consumer_group, read.queue_offset, read.max_msg_nums) == ("g", 5, 32)
    assert read.commit_offset_enabled and read.suspend and not read.has_subscription
    assert (read.epoch, read.client_id, read.min_msg_nums, read.watch) == (0, "", 0, False)


def test_a_send_reads_back_as_it_was_written() -> None:
    body = encode_batch([Message("T", b"one"), Message("T", b"two", tags="t")])
    request = broker_pb2.SendMessageRequest(
        producer_group="pg", topic="T", queue_id=3, batch_body=body, born_timestamp=1234,
        reconsume_times=2, max_reconsume_times=5, compact_result=True, born_host="10.0.0.7",
    )
    cmd = over_the_wire(send_command(request))
    assert cmd.code == 320
    assert send_request(cmd, "10.0.0.1:5555") == request
    # Without a born host of its own (Apache's clients): where the broker saw it come from.
    request.born_host = ""
    read = send_request(over_the_wire(send_command(request)), "10.0.0.1:5555")
    assert read.born_host == "10.0.0.1:5555"


def stored(queue_id: int = 3, first: int = 40, offsets: tuple[int, ...] = (0, 350, 700)) -> (
    broker_pb2.SendMessageResponse
):
    answer = broker_pb2.SendMessageResponse(
        send_status=broker_pb2.FLUSH_DISK_TIMEOUT_STATUS, first_queue_offset=first,
        store_host="127.0.0.1:10911", commit_log_offsets=offsets,
    )
    answer.message_queue.queue_id = queue_id
    return answer


def test_a_compact_send_answer_reads_back_as_the_grpc_one() -> None:
    request = broker_pb2.SendMessageRequest(topic="T", queue_id=3, compact_result=True)
    asked = over_the_wire(send_command(request))
    answer = over_the_wire(send_answer(asked, stored(), STORE_HOST))
    assert "msgId" not in answer.ext_fields  # the producer makes the ids
    read = send_response(answer, request, "broker-a")
    assert read.send_status == broker_pb2.FLUSH_DISK_TIMEOUT_STATUS
    assert list(read.commit_log_offsets) == [0, 350, 700]
    assert (read.first_queue_offset, read.store_host) == (40, "127.0.0.1:10911")
    assert (read.message_queue.topic, read.message_queue.broker_name) == ("T", "broker-a")
    assert read.message_queue.queue_id == 3


def test_apache_clients_get_message_ids() -> None:
    asked = RemotingCommand(code=310, ext_fields={"b": "T", "e": "3"})
    answer = send_answer(asked, stored(), STORE_HOST)
    assert answer.ext_fields["msgId"].split(",") == create_message_ids(*STORE_HOST, [0, 350, 700])
    assert (answer.ext_fields["queueId"], answer.ext_fields["queueOffset"]) == ("3", "40")
    assert answer.code == ResponseCode.FLUSH_DISK_TIMEOUT


def test_pull_answers_raw_records_to_us_and_version_1_to_apache_clients() -> None:
    records = _records("10.1.2.3:5555")
    answer = broker_pb2.PullMessageResponse(
        status=broker_pb2.FOUND, next_begin_offset=9, min_offset=1, max_offset=12,
        records=records, watching=False,
    )
    ours = over_the_wire(pull_answer(pull_command(broker_pb2.PullMessageRequest()), answer,
                                     STORE_HOST))
    read = pull_response(ours, "broker-a")
    assert read.records == records
    assert (read.status, read.next_begin_offset, read.min_offset, read.max_offset) == (
        broker_pb2.FOUND, 9, 1, 12,
    )
    assert read.broker_name == "broker-a"
    theirs = pull_answer(RemotingCommand(code=11), answer, STORE_HOST)
    assert theirs.body != records and read_v1(theirs.body)


@pytest.mark.parametrize(
    ("status", "watching"),
    [(broker_pb2.NO_NEW_MSG, True), (broker_pb2.NO_MATCHED_MSG, False),
     (broker_pb2.OFFSET_ILLEGAL, False)],
)
def test_pull_statuses_read_back(status: Any, watching: bool) -> None:
    answer = broker_pb2.PullMessageResponse(status=status, next_begin_offset=4, watching=watching)
    read = pull_response(over_the_wire(pull_answer(RemotingCommand(code=11), answer, STORE_HOST)),
                         "b")
    assert (read.status, read.next_begin_offset, read.watching) == (status, 4, watching)
    assert not read.records


def test_error_responses_raise_their_typed_errors() -> None:
    pull = RemotingCommand(code=11).response(
        ResponseCode.SUBSCRIPTION_NOT_EXIST, remark="the consumer's subscription not exist"
    )
    with pytest.raises(SubscriptionNotExist, match="subscription not exist"):
        pull_response(pull, "b")
    send = RemotingCommand(code=320).response(ResponseCode.MESSAGE_ILLEGAL, remark="too long")
    with pytest.raises(MessageIllegal, match="too long"):
        send_response(send, broker_pb2.SendMessageRequest(topic="T"), "b")
    torn = RemotingCommand(code=320).response(body=b"\x00" * 12)
    with pytest.raises(MQError, match="not int64 offsets"):
        send_response(torn, broker_pb2.SendMessageRequest(topic="T"), "b")


def test_an_unknown_data_transport_is_refused_by_name() -> None:
    assert check_data_transport("remoting") == "remoting"
    assert check_data_transport("auto") == "auto"
    with pytest.raises(ValueError, match="data_transport must be one of"):
        check_data_transport("http")
    with pytest.raises(ValueError, match="data_transport"):
        Producer("pg", "127.0.0.1:9876", data_transport="http")
    with pytest.raises(ValueError, match="data_transport"):
        ClientConfig(data_transport="udp")


def test_delayed_messages_are_answered_one_by_one() -> None:
    """Each delayed message is stored in its level's schedule queue: ids and queue offsets
    travel per message, as gRPC's results."""
    request = broker_pb2.SendMessageRequest(topic="T", queue_id=1, compact_result=True)
    answer = broker_pb2.SendMessageResponse()
    answer.message_queue.queue_id = 1
    answer.results.add(msg_id="A" * 32, queue_offset=7, commit_log_offset=100)
    answer.results.add(msg_id="B" * 32, queue_offset=3, commit_log_offset=200)
    asked = over_the_wire(send_command(request))
    read = send_response(over_the_wire(send_answer(asked, answer, STORE_HOST)), request, "b")
    assert [(r.msg_id, r.queue_offset, r.commit_log_offset) for r in read.results] == [
        ("A" * 32, 7, 100), ("B" * 32, 3, 200),
    ]
    assert not read.commit_log_offsets
    torn = over_the_wire(send_answer(asked, answer, STORE_HOST))
    torn.ext_fields["queueOffsets"] = "7"
    with pytest.raises(MQError, match="2 ids, 1 queue offsets"):
        send_response(torn, request, "b")


@pytest.mark.parametrize(
    ("code", "error_type", "expected"),
    [
        (ResponseCode.MESSAGE_ILLEGAL, "MessageTooLarge", MessageTooLarge),
        (ResponseCode.MESSAGE_ILLEGAL, None, MessageIllegal),
        (ResponseCode.INVALID_PARAMETER, "OffsetOutOfRange", OffsetOutOfRange),
        (ResponseCode.INVALID_PARAMETER, "NoSuchError", InvalidArgument),
    ],
)
def test_our_servers_name_the_error_where_the_code_is_ambiguous(
    code: ResponseCode, error_type: str | None, expected: type[MQError]
) -> None:
    answer = RemotingCommand(code=11).response(code, remark="why")
    if error_type:
        answer.ext_fields["errorType"] = error_type
    with pytest.raises(expected, match="why") as raised:
        pull_response(over_the_wire(answer), "b")
    assert type(raised.value) is expected
    assert raised.value.response_code == code
