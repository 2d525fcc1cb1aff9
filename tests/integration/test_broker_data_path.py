"""The broker's data path over real gRPC: send, pull (long polling, tags), offsets, bad input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.batch import encode_batch
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import RESPONSE_CODE_KEY
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.record import create_message_ids, decode_records, parse_host
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster(brokers=1)


@pytest.fixture
async def stub(cluster: LocalCluster) -> AsyncIterator[Any]:
    conns = BrokerConnections()
    yield conns.stub(cluster.broker_list[0].address)
    await conns.close()


def send_request(
    topic: str, queue_id: int, bodies: list[bytes], tags: str = ""
) -> broker_pb2.SendMessageRequest:
    return broker_pb2.SendMessageRequest(
        producer_group="pg",
        topic=topic,
        queue_id=queue_id,
        messages=[common_pb2.Message(topic=topic, body=b, tags=tags) for b in bodies],
    )


def pull_request(
    topic: str, queue_id: int, offset: int, **kw: Any
) -> broker_pb2.PullMessageRequest:
    return broker_pb2.PullMessageRequest(
        consumer_group="cg",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=kw.pop("max_msg_nums", 32),
        has_subscription=True,
        sub_expression=kw.pop("sub_expression", "*"),
        **kw,
    )


async def test_send_batch_then_pull_returns_it_in_order(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T1", 4)
    sent = await stub.SendMessage(send_request("T1", 2, [b"m%d" % i for i in range(5)]), timeout=3)
    assert [r.queue_offset for r in sent.results] == [0, 1, 2, 3, 4]
    assert len({r.msg_id for r in sent.results}) == 5 and all(
        len(r.msg_id) == 32 for r in sent.results
    )
    assert sent.message_queue.queue_id == 2
    got = await stub.PullMessage(pull_request("T1", 2, 0), timeout=3)
    assert got.status == broker_pb2.FOUND
    assert [m.body for m in got.messages] == [b"m%d" % i for i in range(5)]
    assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3, 4]
    assert got.next_begin_offset == 5 and got.max_offset == 5 and got.min_offset == 0
    assert got.messages[0].broker_name == "broker-a"
    assert got.messages[0].msg_id == sent.results[0].msg_id


async def test_compact_send_result_and_raw_records_agree_with_the_classic_answers(cluster: LocalCluster,
    stub: Any,
) -> None:
    await cluster.create_topic("TRaw", 4)
    classic = await stub.SendMessage(send_request("TRaw", 1, [b"c0", b"c1"]), timeout=3)
    assert classic.results and not classic.commit_log_offsets  # old clients: unchanged
    request = send_request("TRaw", 1, [b"r%d" % i for i in range(5)], tags="TagR")
    request.compact_result = True
    compact = await stub.SendMessage(request, timeout=3)
    assert not compact.results and compact.first_queue_offset == 2
    assert len(compact.commit_log_offsets) == 5 and compact.store_host
    ip, port = parse_host(compact.store_host)
    ids = create_message_ids(ip, port, compact.commit_log_offsets)

    decoded = await stub.PullMessage(pull_request("TRaw", 1, 0), timeout=3)
    raw = await stub.PullMessage(pull_request("TRaw", 1, 0, raw_records=True), timeout=3)
    assert raw.status == broker_pb2.FOUND and not raw.messages and raw.records
    assert (raw.next_begin_offset, raw.min_offset, raw.max_offset) == (7, 0, 7)
    assert raw.broker_name == decoded.broker_name == "broker-a"
    messages = decode_records(raw.records, raw.broker_name)
    assert [m.to_proto() for m in messages] == list(decoded.messages)
    assert [m.msg_id for m in messages] == [r.msg_id for r in classic.results] + ids
    assert [m.tags for m in messages] == [None, None] + ["TagR"] * 5

    filtered = await stub.PullMessage(
        pull_request("TRaw", 1, 0, raw_records=True, sub_expression="TagR", max_msg_nums=2),
        timeout=3,
    )
    assert [m.body for m in decode_records(filtered.records)] == [b"r0", b"r1"]
    assert filtered.next_begin_offset == 4
    empty = await stub.PullMessage(pull_request("TRaw", 1, 7, raw_records=True), timeout=3)
    assert empty.status == broker_pb2.NO_NEW_MSG and empty.records == b""


async def test_compact_send_with_delayed_messages_answers_each_result(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("TDelay", 4)
    request = send_request("TDelay", 0, [b"now", b"later"])
    request.messages[1].delay_time_level = 3  # 10 s
    request.compact_result = True
    sent = await stub.SendMessage(request, timeout=3)
    # The delayed message went to the schedule topic: no consecutive offsets to compact.
    assert len(sent.results) == 2 and not sent.commit_log_offsets
    got = await stub.PullMessage(pull_request("TDelay", 0, 0, raw_records=True), timeout=3)
    assert [m.body for m in decode_records(got.records)] == [b"now"]


async def test_long_poll_is_answered_when_a_message_arrives(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T2", 4)
    pull = asyncio.ensure_future(
        stub.PullMessage(
            pull_request("T2", 0, 0, suspend=True, suspend_timeout_millis=20_000), timeout=30
        )
    )
    await asyncio.sleep(0)  # let the pull reach the broker, then send; no timing is asserted
    await stub.SendMessage(send_request("T2", 0, [b"late"]), timeout=3)
    got = await asyncio.wait_for(pull, 10)  # far below the 20 s hold: answered on arrival
    assert got.status == broker_pb2.FOUND and [m.body for m in got.messages] == [b"late"]


async def test_long_poll_times_out_with_no_new_message(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T3", 4)
    got = await stub.PullMessage(
        pull_request("T3", 0, 0, suspend=True, suspend_timeout_millis=100), timeout=5
    )
    assert got.status == broker_pb2.NO_NEW_MSG and got.next_begin_offset == 0


async def test_a_pull_with_a_minimum_waits_for_it_once_a_message_is_there(
    cluster: LocalCluster, stub: Any
) -> None:
    await cluster.create_topic("TMin", 4)
    pull = asyncio.ensure_future(
        stub.PullMessage(
            pull_request(
                "TMin", 0, 0, suspend=True, suspend_timeout_millis=20_000, min_msg_nums=3,
                max_wait_millis=20_000,
            ),
            timeout=30,
        )
    )
    await asyncio.sleep(0.05)
    await stub.SendMessage(send_request("TMin", 0, [b"m0"]), timeout=3)
    await stub.SendMessage(send_request("TMin", 0, [b"m1"]), timeout=3)
    # Two of the three: the pull is still held (only a broker that answers early fails this).
    await asyncio.sleep(0.3)
    assert not pull.done()
    await stub.SendMessage(send_request("TMin", 0, [b"m2", b"m3"]), timeout=3)
    got = await asyncio.wait_for(pull, 10)
    assert got.status == broker_pb2.FOUND
    assert [m.body for m in got.messages] == [b"m0", b"m1", b"m2", b"m3"]

    # Already enough there: answered at once, capped at the pull's batch.
    got = await stub.PullMessage(
        pull_request(
            "TMin", 0, 0, suspend=True, max_msg_nums=2, min_msg_nums=500, max_wait_millis=20_000
        ),
        timeout=10,
    )
    assert [m.body for m in got.messages] == [b"m0", b"m1"]


async def test_a_pull_with_a_minimum_is_answered_with_less_when_its_wait_passes(
    cluster: LocalCluster, stub: Any
) -> None:
    await cluster.create_topic("TMinWait", 4)
    await stub.SendMessage(send_request("TMinWait", 1, [b"only"]), timeout=3)
    got = await stub.PullMessage(
        pull_request("TMinWait", 1, 0, suspend=True, min_msg_nums=100, max_wait_millis=50),
        timeout=10,
    )
    assert got.status == broker_pb2.FOUND and [m.body for m in got.messages] == [b"only"]
    # The wait ends with the hold's suspend timeout, whatever max_wait_millis says.
    got = await asyncio.wait_for(
        stub.PullMessage(
            pull_request(
                "TMinWait", 1, 0, suspend=True, suspend_timeout_millis=200, min_msg_nums=100,
                max_wait_millis=60_000,
            ),
            timeout=70,
        ),
        10,
    )
    assert [m.body for m in got.messages] == [b"only"]
    # Without suspend the minimum does not apply (as every other hold).
    got = await stub.PullMessage(
        pull_request("TMinWait", 1, 0, min_msg_nums=100, max_wait_millis=20_000), timeout=3
    )
    assert [m.body for m in got.messages] == [b"only"]


async def test_tag_filtering(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T4", 4)
    await stub.SendMessage(send_request("T4", 0, [b"a1", b"a2"], tags="TagA"), timeout=3)
    await stub.SendMessage(send_request("T4", 0, [b"b1"], tags="TagB"), timeout=3)
    await stub.SendMessage(send_request("T4", 0, [b"c1"], tags="TagC"), timeout=3)
    got = await stub.PullMessage(pull_request("T4", 0, 0, sub_expression="TagA || TagC"), timeout=3)
    assert [m.body for m in got.messages] == [b"a1", b"a2", b"c1"]
    assert got.next_begin_offset == 4
    none = await stub.PullMessage(
        pull_request("T4", 0, 2, max_msg_nums=1, sub_expression="TagA"), timeout=3
    )
    # Filtered entries are scanned past (RocketMQ scans the consume queue, not just max_nums).
    assert none.status == broker_pb2.NO_MATCHED_MSG and none.next_begin_offset == 4


async def test_offset_illegal_beyond_the_end(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T5", 4)
    await stub.SendMessage(send_request("T5", 0, [b"x"]), timeout=3)
    got = await stub.PullMessage(pull_request("T5", 0, 9), timeout=3)
    assert got.status == broker_pb2.OFFSET_ILLEGAL and got.next_begin_offset == 1


async def test_consumer_offsets_query_update_and_young_queue_rule(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T6", 4)
    await stub.SendMessage(send_request("T6", 1, [b"x", b"y"]), timeout=3)
    q = broker_pb2.QueryConsumerOffsetRequest(consumer_group="g", topic="T6", queue_id=1)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stub.QueryConsumerOffset(q, timeout=3)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert dict(e.value.trailing_metadata())[RESPONSE_CODE_KEY] == "22"
    q.set_zero_if_not_found = True  # a young queue whose head was never deleted: start at 0
    assert (await stub.QueryConsumerOffset(q, timeout=3)).offset == 0
    await stub.UpdateConsumerOffset(
        broker_pb2.UpdateConsumerOffsetRequest(
            consumer_group="g", offsets=[broker_pb2.OffsetCommit(topic="T6", queue_id=1, offset=2)]
        ),
        timeout=3,
    )
    assert (await stub.QueryConsumerOffset(q, timeout=3)).offset == 2
    mx = await stub.GetMaxOffset(broker_pb2.QueueOffsetRequest(topic="T6", queue_id=1), timeout=3)
    mn = await stub.GetMinOffset(broker_pb2.QueueOffsetRequest(topic="T6", queue_id=1), timeout=3)
    assert (mn.offset, mx.offset) == (0, 2)


async def test_pull_commit_offset_piggyback(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("T7", 4)
    await stub.SendMessage(send_request("T7", 0, [b"x"]), timeout=3)
    await stub.PullMessage(
        pull_request("T7", 0, 1, commit_offset_enabled=True, commit_offset=1), timeout=3
    )
    q = broker_pb2.QueryConsumerOffsetRequest(consumer_group="cg", topic="T7", queue_id=0)
    assert (await stub.QueryConsumerOffset(q, timeout=3)).offset == 1


async def test_offsets_survive_a_broker_restart(cluster: LocalCluster) -> None:
    conns = BrokerConnections()
    try:
        stub = conns.stub(cluster.broker_list[0].address)
        await cluster.create_topic("T8", 4)
        await stub.SendMessage(send_request("T8", 0, [b"a", b"b", b"c"]), timeout=3)
        await stub.UpdateConsumerOffset(
            broker_pb2.UpdateConsumerOffsetRequest(
                consumer_group="g",
                offsets=[broker_pb2.OffsetCommit(topic="T8", queue_id=0, offset=2)],
            ),
            timeout=3,
        )
        await cluster.restart_broker("broker-a")  # same port, same store
        # The same channel: gRPC reconnects it to the restarted broker by itself.
        q = broker_pb2.QueryConsumerOffsetRequest(consumer_group="g", topic="T8", queue_id=0)
        assert (await stub.QueryConsumerOffset(q, timeout=3)).offset == 2
        got = await stub.PullMessage(pull_request("T8", 0, 2), timeout=3)
        assert [m.body for m in got.messages] == [b"c"]
    finally:
        await conns.close()


async def test_broker_registers_its_topics_with_the_name_server(
    cluster: LocalCluster, stub: Any
) -> None:
    from aiorocketmq.nameserver.client import NameServerClient

    await cluster.create_topic("Routed", 3)
    async with NameServerClient(cluster.namesrv_addr) as ns:

        async def routed() -> bool:
            try:
                route = await ns.get_route_info_by_topic("Routed")
            except Exception:
                return False
            return [qd.read_queue_nums for qd in route.queue_datas] == [3]

        await wait_until(routed, message="the topic in the route")


async def _status(coro: Any) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await coro
    return (
        e.value.code(),
        e.value.details() or "",
        dict(e.value.trailing_metadata() or ()).get(RESPONSE_CODE_KEY, ""),
    )


async def test_bad_input_gets_clear_statuses_and_the_broker_keeps_serving(
    cluster: LocalCluster, stub: Any
) -> None:
    cluster.broker_list[0].config.auto_create_topic_enable = False
    code, details, rc = await _status(stub.SendMessage(send_request("Nope", -1, [b"x"]), timeout=3))
    assert code == grpc.StatusCode.NOT_FOUND and "Nope" in details and rc == "17"
    await cluster.create_topic("Bad", 2)
    big = b"x" * (4 * 1024 * 1024 + 1)
    code, details, _ = await _status(stub.SendMessage(send_request("Bad", 0, [big]), timeout=10))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "4194304" in details
    code, details, _ = await _status(
        stub.SendMessage(send_request("bad topic", 0, [b"x"]), timeout=3)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "illegal characters" in details
    code, details, _ = await _status(stub.SendMessage(send_request("Bad", 5, [b"x"]), timeout=3))
    assert code == grpc.StatusCode.OUT_OF_RANGE and "queue_id 5" in details
    code, details, _ = await _status(stub.PullMessage(pull_request("Bad", 0, -1), timeout=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "queue_offset" in details
    code, details, _ = await _status(
        stub.PullMessage(pull_request("Bad", 0, 0, max_msg_nums=-3), timeout=3)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "max_msg_nums" in details
    code, details, _ = await _status(
        stub.PullMessage(pull_request("Bad", 0, 0, min_msg_nums=-1), timeout=3)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "min_msg_nums" in details
    code, details, _ = await _status(stub.PullMessage(pull_request("Bad", 7, 0), timeout=3))
    assert code == grpc.StatusCode.OUT_OF_RANGE and "queueId[7]" in details
    code, details, _ = await _status(stub.SendMessage(send_request("Bad", 0, [b""]), timeout=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "body is empty" in details
    # ... and it still serves, and nothing acknowledged was lost.
    ok = await stub.SendMessage(send_request("Bad", 0, [b"fine"]), timeout=3)
    got = await stub.PullMessage(pull_request("Bad", 0, 0), timeout=3)
    assert [m.body for m in got.messages] == [b"fine"] and ok.results[0].queue_offset == 0


def body_request(topic: str, queue_id: int, messages: list[Message]) -> broker_pb2.SendMessageRequest:
    return broker_pb2.SendMessageRequest(
        producer_group="pg",
        topic=topic,
        queue_id=queue_id,
        batch_body=encode_batch(messages),
        compact_result=True,
    )


async def test_a_batch_body_is_stored_like_the_same_messages(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("TBody", 4)
    messages = [
        Message("TBody", b"b%d" % i, tags="TagB" if i % 2 else None, keys=f"k{i}",
                properties={"p": str(i)})
        for i in range(6)
    ]
    sent = await stub.SendMessage(body_request("TBody", 1, messages), timeout=3)
    assert sent.first_queue_offset == 0 and len(sent.commit_log_offsets) == 6
    raw = await stub.PullMessage(pull_request("TBody", 1, 0, raw_records=True), timeout=3)
    got = decode_records(raw.records, raw.broker_name, check_crc=True)
    assert [(m.body, m.tags, m.keys, m.properties) for m in got] == [
        (m.body, m.tags, m.keys, m.properties) for m in messages
    ]
    tagged = await stub.PullMessage(
        pull_request("TBody", 1, 0, raw_records=True, sub_expression="TagB"), timeout=3
    )
    assert [m.body for m in decode_records(tagged.records)] == [b"b1", b"b3", b"b5"]


async def test_a_batch_body_with_a_delay_level_takes_the_delayed_path(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("TBodyDelay", 4)
    request = body_request(
        "TBodyDelay", 0, [Message("TBodyDelay", b"now"), Message("TBodyDelay", b"later",
                                                                   delay_time_level=3)]
    )
    sent = await stub.SendMessage(request, timeout=3)
    assert len(sent.results) == 2 and not sent.commit_log_offsets
    got = await stub.PullMessage(pull_request("TBodyDelay", 0, 0, raw_records=True), timeout=3)
    assert [m.body for m in decode_records(got.records)] == [b"now"]


async def test_a_bad_batch_body_gets_a_clear_status_and_nothing_is_stored(cluster: LocalCluster, stub: Any) -> None:
    await cluster.create_topic("TBodyBad", 1)
    good = encode_batch([Message("TBodyBad", b"one"), Message("TBodyBad", b"two")])
    request = body_request("TBodyBad", 0, [])
    request.batch_body = good + b"\x00\x00\x00"
    code, details, _ = await _status(stub.SendMessage(request, timeout=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "batch_body item 2" in details
    request.batch_body = encode_batch([Message("TBodyBad", b"ok"), Message("TBodyBad", b"")])
    code, details, _ = await _status(stub.SendMessage(request, timeout=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "messages[1]" in details
    request.batch_body = encode_batch([Message("TBodyBad", b"x" * (4 * 1024 * 1024 + 1))])
    code, details, _ = await _status(stub.SendMessage(request, timeout=10))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "4194304" in details
    both = send_request("TBodyBad", 0, [b"x"])
    both.batch_body = good
    code, details, _ = await _status(stub.SendMessage(both, timeout=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not both" in details
    stats = await stub.GetTopicStatsInfo(
        broker_pb2.GetTopicStatsInfoRequest(topic="TBodyBad"), timeout=3
    )
    assert [o.max_offset for o in stats.offsets] == [0]
