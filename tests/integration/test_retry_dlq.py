"""CONSUMER_SEND_MSG_BACK over real gRPC: retries on %RETRY%group after a delay, then the DLQ.

A plain client of the protocol sends a message, pulls it, and sends it back as failed; the
broker holds it on the schedule topic for the delay level's time and then stores it on the
group's retry topic (one queue), with reconsume times counted and the origin in properties.
At the maximum reconsume times the next send-back dead-letters it on %DLQ%group. Delay levels
are shrunk through ``message_delay_level``, the setting a user would change.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.integration.protocol_client import RPC_TIMEOUT, ProtocolClient, response_code

TOPIC = "RetryTopic"
G = "g"
RETRY = "%RETRY%g"
DLQ = "%DLQ%g"
# Level 1..18. Retries without an explicit level use level 3 + reconsume times: 0.3 s here.
LEVELS_S = [0.1, 0.1, 0.3, 0.3, 0.3, 3] + [3] * 12
FAST = {
    "message_delay_level": " ".join(f"{s}s" for s in LEVELS_S),
    "schedule_check_interval_ms": 50,
}


def now_ms() -> int:
    return int(time.time() * 1000)


@asynccontextmanager
async def one_broker(tmp_path: Path, **overrides: Any) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(tmp_path, brokers=1, broker_overrides={**FAST, **overrides}) as c:
        await c.create_topic(TOPIC, 1)
        yield c


@asynccontextmanager
async def client(cluster: LocalCluster) -> AsyncIterator[ProtocolClient]:
    async with ProtocolClient(cluster.broker("broker-a").address, "127.0.0.1@c1") as c:
        yield c


async def send(c: ProtocolClient, body: bytes) -> broker_pb2.SendResultEntry:
    response = await c.stub.SendMessage(
        broker_pb2.SendMessageRequest(
            producer_group="pg",
            topic=TOPIC,
            queue_id=0,
            messages=[
                common_pb2.Message(
                    topic=TOPIC, body=body, tags="TagA", keys="k1", properties={"user": "u1"}
                )
            ],
        ),
        timeout=RPC_TIMEOUT,
    )
    assert response.send_status == broker_pb2.SEND_OK
    entry: broker_pb2.SendResultEntry = response.results[0]
    return entry


async def pull(
    c: ProtocolClient, topic: str, offset: int, *, wait_s: float = 0.0
) -> broker_pb2.PullMessageResponse:
    """PULL_MESSAGE of queue 0 with its own subscription; long-polls ``wait_s`` when empty."""
    response: broker_pb2.PullMessageResponse = await c.stub.PullMessage(
        broker_pb2.PullMessageRequest(
            consumer_group=G,
            topic=topic,
            queue_id=0,
            queue_offset=offset,
            max_msg_nums=32,
            has_subscription=True,
            sub_expression="*",
            expression_type="TAG",
            suspend=wait_s > 0,
            suspend_timeout_millis=int(wait_s * 1000),
        ),
        timeout=wait_s + RPC_TIMEOUT,
    )
    return response


async def pull_one(
    c: ProtocolClient, topic: str, offset: int, wait_s: float
) -> common_pb2.MessageExt:
    """The one message at ``offset`` of ``topic`` queue 0, waiting up to ``wait_s`` for it."""
    response = await pull(c, topic, offset, wait_s=wait_s)
    assert response.status == broker_pb2.FOUND, (
        f"nothing at {topic}:0@{offset} within {wait_s}s: {response}"
    )
    assert len(response.messages) == 1, response
    message: common_pb2.MessageExt = response.messages[0]
    return message


async def nothing_yet(c: ProtocolClient, topic: str, offset: int) -> bool:
    response = await pull(c, topic, offset)
    return response.status == broker_pb2.NO_NEW_MSG and not response.messages


async def send_back(
    c: ProtocolClient,
    message: common_pb2.MessageExt,
    origin: common_pb2.MessageExt,
    *,
    delay_level: int = 0,
    max_reconsume_times: int = 3,
) -> broker_pb2.ConsumerSendMsgBackResponse:
    response: broker_pb2.ConsumerSendMsgBackResponse = await c.stub.ConsumerSendMsgBack(
        broker_pb2.ConsumerSendMsgBackRequest(
            group=G,
            commit_log_offset=message.commit_log_offset,
            delay_level=delay_level,
            origin_msg_id=origin.msg_id,
            origin_topic=TOPIC,
            max_reconsume_times=max_reconsume_times,
        ),
        timeout=RPC_TIMEOUT,
    )
    return response


async def max_offset(c: ProtocolClient, topic: str) -> int:
    response = await c.stub.GetMaxOffset(
        broker_pb2.QueueOffsetRequest(topic=topic, queue_id=0), timeout=RPC_TIMEOUT
    )
    offset: int = response.offset
    return offset


async def send_and_pull(c: ProtocolClient, body: bytes) -> common_pb2.MessageExt:
    sent = await send(c, body)
    origin = await pull_one(c, TOPIC, sent.queue_offset, wait_s=0)
    assert origin.body == body
    assert origin.commit_log_offset == sent.commit_log_offset
    assert origin.msg_id == sent.msg_id
    assert origin.reconsume_times == 0
    return origin


# ---- retries, then the DLQ --------------------------------------------------------------------
async def test_send_back_retries_after_the_delay_until_the_dlq(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, client(cluster) as c:
        origin = await send_and_pull(c, b"hello")
        current = origin
        for times in (1, 2, 3):
            sent_back_at = now_ms()
            response = await send_back(c, current, origin)
            assert response.target_topic == RETRY
            assert response.reconsume_times == times
            # Held for its delay level (3 + reconsume times before this one): not there yet.
            assert await nothing_yet(c, RETRY, times - 1)

            retried = await pull_one(c, RETRY, times - 1, wait_s=5)
            delay_ms = int(LEVELS_S[3 + times - 1 - 1] * 1000)
            assert retried.store_timestamp >= sent_back_at + delay_ms
            assert retried.topic == RETRY
            assert retried.queue_id == 0
            assert retried.reconsume_times == times
            assert retried.body == b"hello"
            assert retried.tags == "TagA"
            assert retried.keys == "k1"
            props = dict(retried.properties)
            assert props["RETRY_TOPIC"] == TOPIC
            assert props["ORIGIN_MESSAGE_ID"] == origin.msg_id
            assert props["RECONSUME_TIME"] == str(times)
            assert props["MAX_RECONSUME_TIMES"] == "3"
            assert props["user"] == "u1"
            assert not {"REAL_TOPIC", "REAL_QID", "DELAY"} & set(props), props
            current = retried

        # Reconsume times reached the maximum: the next failure is dead-lettered, at once.
        response = await send_back(c, current, origin)
        assert response.target_topic == DLQ
        assert response.reconsume_times == 4
        dead = await pull_one(c, DLQ, 0, wait_s=0)
        assert dead.topic == DLQ
        assert dead.body == b"hello"
        assert dead.reconsume_times == 4
        assert dict(dead.properties)["ORIGIN_MESSAGE_ID"] == origin.msg_id
        assert dict(dead.properties)["RETRY_TOPIC"] == TOPIC
        assert await max_offset(c, RETRY) == 3
        assert await max_offset(c, DLQ) == 1

        configs = await c.stub.GetAllTopicConfig(
            broker_pb2.GetAllTopicConfigRequest(), timeout=RPC_TIMEOUT
        )
        by_name = {t.topic_name: t for t in configs.topic_configs}
        assert by_name[RETRY].read_queue_nums == by_name[RETRY].write_queue_nums == 1
        assert by_name[DLQ].read_queue_nums == 1


async def test_delay_level_minus_one_dead_letters_at_once(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, client(cluster) as c:
        origin = await send_and_pull(c, b"poison")
        response = await send_back(c, origin, origin, delay_level=-1)
        assert response.target_topic == DLQ
        dead = await pull_one(c, DLQ, 0, wait_s=0)
        assert dead.body == b"poison"
        assert dead.reconsume_times == 1


async def test_zero_max_reconsume_times_means_the_broker_default(tmp_path: Path) -> None:
    async with one_broker(tmp_path, max_reconsume_times=1) as cluster, client(cluster) as c:
        origin = await send_and_pull(c, b"once")
        first = await send_back(c, origin, origin, max_reconsume_times=0)
        assert first.target_topic == RETRY
        retried = await pull_one(c, RETRY, 0, wait_s=5)
        assert dict(retried.properties)["MAX_RECONSUME_TIMES"] == "1"
        second = await send_back(c, retried, origin, max_reconsume_times=0)
        assert second.target_topic == DLQ


async def test_explicit_delay_level_is_honoured(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, client(cluster) as c:
        origin = await send_and_pull(c, b"quick")
        sent_back_at = now_ms()
        response = await send_back(c, origin, origin, delay_level=1)
        assert response.target_topic == RETRY
        retried = await pull_one(c, RETRY, 0, wait_s=5)
        assert retried.store_timestamp >= sent_back_at + int(LEVELS_S[0] * 1000)
        # Level 1 (0.1 s), not the default level 3 + 0: well before the 3 s of level 6.
        assert retried.store_timestamp < sent_back_at + int(LEVELS_S[5] * 1000)


# ---- restart ----------------------------------------------------------------------------------
async def test_delayed_messages_survive_a_broker_restart(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster:
        long_delay_ms = int(LEVELS_S[5] * 1000)
        async with client(cluster) as c:
            origin = await send_and_pull(c, b"durable")
            # One retry delivered before the restart (level 1) ...
            await send_back(c, origin, origin, delay_level=1)
            delivered = await pull_one(c, RETRY, 0, wait_s=5)
            # ... and one still held when the broker stops (level 6).
            sent_back_at = now_ms()
            started = time.monotonic()
            response = await send_back(c, delivered, origin, delay_level=6)
            assert response.target_topic == RETRY

        await cluster.restart_broker("broker-a")
        assert time.monotonic() - started < long_delay_ms / 1000, "restart took the whole delay"

        async with client(cluster) as c:
            assert await nothing_yet(c, RETRY, 1)
            retried = await pull_one(c, RETRY, 1, wait_s=long_delay_ms / 1000 + 5)
            assert retried.store_timestamp >= sent_back_at + long_delay_ms
            assert retried.reconsume_times == 2
            assert retried.body == b"durable"
            assert dict(retried.properties)["ORIGIN_MESSAGE_ID"] == origin.msg_id
            # The retry delivered before the restart was not delivered again.
            assert await max_offset(c, RETRY) == 2


# ---- bad input --------------------------------------------------------------------------------
async def test_send_back_of_an_unknown_message_is_not_found(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, client(cluster) as c:
        origin = await send_and_pull(c, b"known")

        async def refused(offset: int, msg_id: str) -> grpc.aio.AioRpcError:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await c.stub.ConsumerSendMsgBack(
                    broker_pb2.ConsumerSendMsgBackRequest(
                        group=G,
                        commit_log_offset=offset,
                        origin_msg_id=msg_id,
                        origin_topic=TOPIC,
                        max_reconsume_times=3,
                    ),
                    timeout=RPC_TIMEOUT,
                )
            return e.value

        for offset in (10**12, origin.commit_log_offset + 1):  # past the end; inside a record
            e = await refused(offset, "")
            assert e.code() == grpc.StatusCode.NOT_FOUND
            assert f"no message at commit log offset {offset}" in (e.details() or "")
            assert response_code(e) == common_pb2.QUERY_NOT_FOUND

        # The right offset with another message's id is not that message.
        other_id = "0" * 32
        e = await refused(origin.commit_log_offset, other_id)
        assert e.code() == grpc.StatusCode.NOT_FOUND
        assert other_id in (e.details() or "")

        e = await refused(-1, "")
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "commit_log_offset" in (e.details() or "")

        with pytest.raises(grpc.aio.AioRpcError) as bad_group:
            await c.stub.ConsumerSendMsgBack(
                broker_pb2.ConsumerSendMsgBackRequest(
                    group="bad group!", commit_log_offset=origin.commit_log_offset
                ),
                timeout=RPC_TIMEOUT,
            )
        assert bad_group.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "bad group!" in (bad_group.value.details() or "")

        # Still serving: the valid send-back works.
        response = await send_back(c, origin, origin)
        assert response.target_topic == RETRY
        assert (await pull_one(c, RETRY, 0, wait_s=5)).body == b"known"
