"""The remoting servers over real sockets: requests, long polling, notifications and bad input.

A small client here writes frames with the codec; each bad input of the issue (garbage, a frame
over the limit, a header that is not JSON, an unknown code, a missing field, a silent client, a
client that vanishes mid-frame) must leave every other connection served and nothing lost.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import struct
from typing import Any

import pytest

from aiorocketmq.consumer import PushConsumer
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.remoting.bodies import parse_consumer_list, parse_route
from aiorocketmq.protocol.remoting.command import (
    FLAG_ONEWAY,
    FrameDecoder,
    RemotingCommand,
    encode_command,
)
from tests.helpers import wait_until
from tests.unit.test_remoting_codec import read_v1

TOPIC = "RemotingTopic"
pytestmark = pytest.mark.cluster(
    brokers=1, topic=TOPIC, queues=4, remoting=True,
    overrides={"remoting_idle_timeout_ms": 400},
)


class Client:
    """One remoting connection: requests matched by opaque, pushed requests queued."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.opaques = itertools.count(1)
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, address: str) -> Client:
        host, _, port = address.rpartition(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def _read(self) -> None:
        decoder = FrameDecoder()
        while data := await self.reader.read(65536):
            for cmd in decoder.feed(data):
                if cmd.is_response:
                    future = self.pending.pop(cmd.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(cmd)
                else:
                    self.pushed.put_nowait(cmd)
        self.closed.set()

    def send(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
             flag: int = 0) -> int:
        opaque = next(self.opaques)
        cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, language="CPP", version=63,
                              ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body)
        self.writer.write(encode_command(cmd))
        return opaque

    async def request(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
                      timeout: float = 10) -> RemotingCommand:
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        opaque = self.send(code, ext, body)
        self.pending[opaque] = future
        return await asyncio.wait_for(future, timeout)

    def raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()


def heartbeat(client_id: str, group: str) -> bytes:
    return json.dumps({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": 0, "consumeType": 1, "groupName": group, "messageModel": 1,
            "subscriptionDataSet": [{"subString": "*", "subVersion": "1", "topic": TOPIC}],
        }],
    }).encode()


@pytest.fixture
async def broker_addr(cluster: LocalCluster) -> str:
    return cluster.broker_list[0].remoting_address


async def test_route_from_the_name_server(cluster: LocalCluster) -> None:
    client = await Client.connect(cluster.namesrv_remoting_addr)
    try:
        answer = await client.request(105, {"topic": TOPIC})
        assert answer.code == 0
        assert b'"brokerAddrs":{0:"' in answer.body  # unquoted keys for a version 63 client
        route = parse_route(answer.body)
        assert route["brokerDatas"][0]["brokerAddrs"]["0"] == cluster.broker_list[0].remoting_address
        assert (await client.request(105, {"topic": "Nope"})).code == 17
        cluster_info = await client.request(106)
        assert json.loads(cluster_info.body.replace(b"{0:", b'{"0":'))["clusterAddrTable"]
        topics = json.loads((await client.request(206)).body)["topicList"]
        assert TOPIC in topics
        assert (await client.request(103)).code == 3  # a Java broker's registration: not ours
    finally:
        await client.close()


async def test_send_then_pull_and_long_polling(broker_addr: str) -> None:
    client = await Client.connect(broker_addr)
    try:
        pull = {"consumerGroup": "g", "topic": TOPIC, "queueId": 1, "queueOffset": 0,
                "maxMsgNums": 32, "sysFlag": 6, "commitOffset": -1,
                "suspendTimeoutMillis": 5000, "subscription": "*", "subVersion": 0}
        held = asyncio.ensure_future(client.request(11, pull))  # held: the queue is empty
        await asyncio.sleep(0.3)
        assert not held.done()
        props = "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01ABC\x02"
        sent = await client.request(10, {"producerGroup": "pg", "topic": TOPIC, "queueId": 1,
                                         "sysFlag": 0, "bornTimestamp": 1, "flag": 3,
                                         "properties": props}, b"hello")
        assert sent.code == 0 and sent.ext_fields["queueOffset"] == "0"
        assert len(sent.ext_fields["msgId"]) == 32
        answer = await asyncio.wait_for(held, 5)
        assert answer.code == 0 and answer.ext_fields["nextBeginOffset"] == "1"
        [record] = read_v1(answer.body)
        assert (record["body"], record["topic"], record["flag"]) == (b"hello", TOPIC, 3)
        assert record["properties"] == props
        # a pull at the end: held until its timeout, then PULL_NOT_FOUND
        pull.update(queueOffset=1, suspendTimeoutMillis=200)
        assert (await client.request(11, pull)).code == 19
        # the commit-log offset names the message for VIEW_MESSAGE_BY_ID
        view = await client.request(33, {"offset": record["physical"]})
        assert view.code == 0 and read_v1(view.body)[0]["body"] == b"hello"
        assert (await client.request(30, {"topic": TOPIC, "queueId": 1})).ext_fields == {
            "offset": "1"}
        earliest = await client.request(32, {"topic": TOPIC, "queueId": 1})
        assert int(earliest.ext_fields["timestamp"]) == record["store_ts"]
    finally:
        await client.close()


async def test_a_batch_as_cpp_sends_it(broker_addr: str) -> None:
    from aiorocketmq.protocol.batch import encode_batch
    from aiorocketmq.protocol.message import Message

    client = await Client.connect(broker_addr)
    try:
        body = encode_batch([Message(TOPIC, b"m%d" % i, tags="T") for i in range(3)])
        sent = await client.request(10, {"producerGroup": "pg", "topic": TOPIC, "queueId": 2,
                                         "sysFlag": 0, "bornTimestamp": 1, "flag": 0,
                                         "properties": "", "batch": 1}, body)
        assert sent.code == 0 and len(sent.ext_fields["msgId"].split(",")) == 3
        pull = await client.request(11, {"consumerGroup": "g", "topic": TOPIC, "queueId": 2,
                                         "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 4,
                                         "commitOffset": -1, "suspendTimeoutMillis": 0,
                                         "subscription": "*", "subVersion": 0})
        assert [r["body"] for r in read_v1(pull.body)] == [b"m0", b"m1", b"m2"]
    finally:
        await client.close()


async def test_the_connection_is_the_channel(cluster: LocalCluster, broker_addr: str) -> None:
    """A heartbeat joins the group; a gRPC consumer joining is notified to the remoting member
    as a one-way code 40; the socket's close leaves the group."""
    client = await Client.connect(broker_addr)
    try:
        assert (await client.request(34, body=heartbeat("1-127.0.0.1@R", "mix"))).code == 0
        pushed = await asyncio.wait_for(client.pushed.get(), 5)
        assert (pushed.code, pushed.flag, pushed.ext_fields) == (
            40, FLAG_ONEWAY, {"consumerGroup": "mix"})
        ours = PushConsumer("mix", cluster.namesrv_addr, instance_name="ours")
        ours.subscribe(TOPIC, "*")
        ours.register_message_listener(lambda msgs, ctx: None)  # type: ignore[arg-type,return-value]
        await ours.start()
        try:
            pushed = await asyncio.wait_for(client.pushed.get(), 5)
            assert pushed.code == 40
            ids = parse_consumer_list(
                (await client.request(38, {"consumerGroup": "mix"})).body)
            assert sorted(ids) == sorted(["1-127.0.0.1@R", ours.client_id])
        finally:
            await ours.shutdown()
    finally:
        await client.close()
    info = cluster.broker_list[0].client.consumer_manager
    await wait_until(lambda: info.get_consumer_group_info("mix") is None, message="group left")


async def test_errors_are_answered_on_the_connection(broker_addr: str) -> None:
    client = await Client.connect(broker_addr)
    try:
        unknown = await client.request(9999)
        assert (unknown.code, unknown.remark) == (3, " request type 9999 not supported")
        missing = await client.request(11, {"consumerGroup": "g", "queueId": 0})
        assert missing.code == 29 and "'topic'" in (missing.remark or "")
        bad = await client.request(34, body=b"{not json")
        assert bad.code == 29 and "not JSON" in (bad.remark or "")
        nobody = await client.request(38, {"consumerGroup": "nobody"})
        assert nobody.code == 1 and "no consumer for this group" in (nobody.remark or "")
        # one-way: no answer; the next request's answer is the next frame
        client.send(15, {"consumerGroup": "g", "topic": TOPIC, "queueId": 0, "commitOffset": 0},
                    flag=FLAG_ONEWAY)
        assert (await client.request(30, {"topic": TOPIC, "queueId": 0})).code == 0
        assert not client.pending
    finally:
        await client.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        struct.pack(">i", 17 * 1024 * 1024) + b"x" * 100,
        struct.pack(">ii", 14, 10) + b"not json!!",
    ],
    ids=["http", "over-limit", "not-json"],
)
async def test_bad_frames_close_only_their_connection(broker_addr: str, garbage: bytes) -> None:
    good = await Client.connect(broker_addr)
    bad = await Client.connect(broker_addr)
    try:
        sent = await good.request(10, {"producerGroup": "pg", "topic": TOPIC, "queueId": 3,
                                       "properties": ""}, b"kept")
        assert sent.code == 0
        bad.raw(garbage)
        await asyncio.wait_for(bad.closed.wait(), 5)
        pull = await good.request(11, {"consumerGroup": "g", "topic": TOPIC, "queueId": 3,
                                       "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 4})
        assert [r["body"] for r in read_v1(pull.body)][-1] == b"kept"
    finally:
        await good.close()
        await bad.close()


async def test_silent_and_vanishing_clients(cluster: LocalCluster, broker_addr: str) -> None:
    silent = await Client.connect(broker_addr)
    await asyncio.wait_for(silent.closed.wait(), 5)  # idle timeout 400 ms here
    member = await Client.connect(broker_addr)
    assert (await member.request(34, body=heartbeat("2-127.0.0.1@V", "gone"))).code == 0
    member.raw(struct.pack(">i", 100) + b"\x00\x00")  # half a frame, then gone
    await member.close()
    info = cluster.broker_list[0].client.consumer_manager
    await wait_until(lambda: info.get_consumer_group_info("gone") is None, message="left")
    other = await Client.connect(broker_addr)
    try:
        assert (await other.request(31, {"topic": TOPIC, "queueId": 0})).code == 0
    finally:
        await other.close()


async def test_lock_and_unlock_batch(broker_addr: str) -> None:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with the C++ body (no onlyThisBroker)."""

    def body(client: str) -> bytes:
        return json.dumps({"clientId": client, "consumerGroup": "orderly", "mqSet": [
            {"brokerName": "broker-a", "queueId": 0, "topic": TOPIC}]}).encode()

    client = await Client.connect(broker_addr)
    try:
        first = await client.request(41, body=body("c1"))
        assert json.loads(first.body)["lockOKMQSet"] == [
            {"brokerName": "broker-a", "queueId": 0, "topic": TOPIC}]
        assert json.loads((await client.request(41, body=body("c2"))).body)["lockOKMQSet"] == []
        assert (await client.request(42, body=body("c1"))).code == 0
        assert len(json.loads((await client.request(41, body=body("c2"))).body)["lockOKMQSet"]) == 1
    finally:
        await client.close()


async def test_a_commit_answers_the_same_cpp_connections_held_pull(broker_addr: str) -> None:
    """Apache's C++ client 1.2.3 commits a queue as it drops it and would wait for its held
    pull if the queue came back: the commit answers that pull at once (PULL_NOT_FOUND)."""
    client = await Client.connect(broker_addr)
    other = await Client.connect(broker_addr)
    try:
        pull = {"consumerGroup": "held", "topic": TOPIC, "queueId": 0, "queueOffset": 0,
                "maxMsgNums": 32, "sysFlag": 6, "commitOffset": -1,
                "suspendTimeoutMillis": 10000, "subscription": "*", "subVersion": 0}
        mine = asyncio.ensure_future(client.request(11, pull))
        theirs = asyncio.ensure_future(other.request(11, pull))
        await asyncio.sleep(0.3)
        assert not mine.done() and not theirs.done()
        client.send(15, {"consumerGroup": "held", "topic": TOPIC, "queueId": 0,
                         "commitOffset": 0})
        answer = await asyncio.wait_for(mine, 2)
        assert (answer.code, answer.ext_fields["nextBeginOffset"]) == (19, "0")
        await asyncio.sleep(0.3)
        assert not theirs.done()  # another connection's pull stays held
    finally:
        await client.close()
        await other.close()
