"""Our clients' sends and pulls over remoting frames (``data_transport="remoting"``), on real
sockets: the client connection's failures, then a producer and consumers on a cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aiorocketmq.consumer import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.errors import MessageTooLarge, OffsetOutOfRange, ServiceNotAvailable
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.remoting.client import RemotingClient
from aiorocketmq.protocol.remoting.command import RemotingCommand
from aiorocketmq.protocol.remoting.server import RemotingConnection, RemotingServer
from tests.helpers import free_port, wait_until

TOPIC = "RemotingData"

Handler = Callable[[RemotingConnection, RemotingCommand], Awaitable[RemotingCommand | None]]


async def echo(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
    """Answers with the request's body after ``delay`` ms; ``close`` closes the connection."""
    await asyncio.sleep(int(cmd.ext_fields.get("delay", "0")) / 1000)
    if cmd.ext_fields.get("close"):
        conn.close()
        return None
    if cmd.ext_fields.get("garbage"):
        assert conn.transport is not None
        conn.transport.write(b"\x00\x00\x00\x02zz")
        return None
    return cmd.response(body=cmd.body)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    s = RemotingServer(echo, name="test")
    await s.start("127.0.0.1:0")
    try:
        yield s
    finally:
        await s.stop()


def request(body: bytes, **ext: str) -> RemotingCommand:
    return RemotingCommand(code=1, ext_fields=ext, body=body)


async def test_answers_find_their_requests_in_any_order(server: RemotingServer) -> None:
    client = RemotingClient(server.address)
    try:
        slow = asyncio.create_task(client.invoke(request(b"slow", delay="100"), 5))
        fast = await client.invoke(request(b"fast"), 5)
        assert fast.body == b"fast"
        assert (await slow).body == b"slow"
        assert len(server.connections) == 1  # both on one connection
    finally:
        await client.close()


async def test_a_deadline_fails_only_its_own_request(server: RemotingServer) -> None:
    client = RemotingClient(server.address)
    try:
        other = asyncio.create_task(client.invoke(request(b"other", delay="200"), 5))
        with pytest.raises(ServiceNotAvailable, match="no answer from"):
            await client.invoke(request(b"late", delay="1000"), 0.05)
        assert (await other).body == b"other"
    finally:
        await client.close()


async def test_a_cancelled_request_is_the_callers_alone(server: RemotingServer) -> None:
    client = RemotingClient(server.address)
    try:
        other = asyncio.create_task(client.invoke(request(b"other", delay="100"), 5))
        cancelled = asyncio.create_task(client.invoke(request(b"x", delay="50"), 5))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert (await other).body == b"other"
        await asyncio.sleep(0.1)  # its late answer arrives and is dropped
        assert (await client.invoke(request(b"after"), 5)).body == b"after"
    finally:
        await client.close()


@pytest.mark.parametrize("how", ["close", "garbage"])
async def test_a_lost_connection_fails_its_requests_and_the_next_reconnects(
    server: RemotingServer, how: str
) -> None:
    client = RemotingClient(server.address)
    try:
        waiting = asyncio.create_task(client.invoke(request(b"w", delay="500"), 5))
        await asyncio.sleep(0.05)
        with pytest.raises(ServiceNotAvailable, match=r"connection to .* was lost"):
            await client.invoke(request(b"", **{how: "1"}), 5)
        with pytest.raises(ServiceNotAvailable, match="lost"):
            await waiting
        assert (await client.invoke(request(b"again"), 5)).body == b"again"
    finally:
        await client.close()


async def test_nobody_listening_is_a_typed_error() -> None:
    client = RemotingClient(f"127.0.0.1:{free_port()}")
    with pytest.raises(ServiceNotAvailable, match="cannot connect"):
        await client.invoke(request(b""), 2)
    await client.close()
    with pytest.raises(ServiceNotAvailable, match="closed"):
        await client.invoke(request(b""), 2)


# ---- on a cluster ------------------------------------------------------------------------------
def over_remoting(data_transport: str = "remoting", **kw: Any) -> ClientConfig:
    """The tests' fast client timings, pulling over remoting (or ``data_transport``)."""
    return ClientConfig(
        persist_consumer_offset_interval_ms=200, rebalance_wait_interval_ms=2_000,
        data_transport=data_transport, **kw,
    )


def remoting_consumer(
    cluster: LocalCluster, name: str, seen: dict[bytes, list[str]], **kw: object
) -> PushConsumer:
    """A consumer pulling over remoting (or ``data_transport``) that keeps, per body, the
    message ids it consumed."""

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            seen.setdefault(m.body, []).append(m.msg_id)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = over_remoting(
        str(kw.pop("data_transport", "remoting")),
        share_connections=bool(kw.pop("share_connections", False)),
    )
    c = PushConsumer(
        "rg", cluster.namesrv_addr, instance_name=name, client_config=config,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", **kw,  # type: ignore[arg-type]
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    return c


def python_connections(cluster: LocalCluster) -> int:
    """Our clients' connections to the brokers' remoting servers."""
    return sum(
        1
        for b in cluster.broker_list
        if b.remoting is not None
        for c in b.remoting.connections
        if c.language == "PYTHON"
    )


async def produce(producer: Producer, n: int, first: int = 0) -> dict[bytes, list[str]]:
    """``n`` messages from number ``first``, in batches of 10 and one by one: body -> the id
    the send answered."""
    ids: dict[bytes, list[str]] = {}
    for i in range(first, first + n, 20):
        batch = [Message(TOPIC, b"b%05d" % j) for j in range(i, i + 10)]
        result = await producer.send_batch(batch)
        for m, msg_id in zip(batch, result.msg_ids, strict=True):
            ids[m.body] = [msg_id]
        for j in range(i + 10, i + 20):
            body = b"s%05d" % j
            ids[body] = [(await producer.send(Message(TOPIC, body))).msg_id]
    return ids


@pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4, remoting=True)
@pytest.mark.parametrize("handoff", ["classic", "fenced"])
async def test_produce_and_consume_over_remoting(cluster: LocalCluster, handoff: str) -> None:
    """Every message consumed once, by the id its send answered, on remoting connections."""
    seen: dict[bytes, list[str]] = {}
    consumers = [remoting_consumer(cluster, f"c{i}", seen, handoff=handoff) for i in range(2)]
    async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as producer:
        try:
            await consumers[0].start()
            sent = await produce(producer, 100)
            await consumers[1].start()  # a join mid-stream
            sent |= await produce(producer, 100, 100)
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="all consumed")
            if handoff == "fenced":
                assert seen == sent  # each once, by the id its send answered
            else:
                assert all(set(v) == set(sent[b]) for b, v in seen.items())
            # The producer holds a connection to each broker, each consumer one to each broker
            # it pulls from (at least one).
            assert python_connections(cluster) >= 4
        finally:
            for c in consumers:
                await c.shutdown()


@pytest.mark.cluster(brokers=1, topic=TOPIC, queues=2)
async def test_a_broker_without_remoting_is_reached_over_grpc(cluster: LocalCluster) -> None:
    seen: dict[bytes, list[str]] = {}
    consumer = remoting_consumer(cluster, "c", seen)
    async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as producer:
        try:
            await consumer.start()
            sent = await produce(producer, 40)
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="all consumed")
            assert seen == sent
        finally:
            await consumer.shutdown()


@pytest.mark.cluster(
    brokers=1, topic=TOPIC, queues=2, remoting=True, overrides={"remoting_idle_timeout_ms": 400}
)
async def test_a_connection_the_broker_closed_reopens_at_the_next_send(
    cluster: LocalCluster,
) -> None:
    async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as producer:
        await producer.send(Message(TOPIC, b"first"))
        assert python_connections(cluster) == 1
        await wait_until(lambda: python_connections(cluster) == 0, timeout=5,
                         message="the broker closes the idle connection")
        result = await producer.send(Message(TOPIC, b"second"))
        assert result.msg_id and python_connections(cluster) == 1


@pytest.mark.cluster(brokers=2, topic=TOPIC, queues=2, remoting=True)
async def test_a_lite_pull_consumer_polls_over_remoting(cluster: LocalCluster) -> None:
    consumer = LitePullConsumer(
        "rlg", cluster.namesrv_addr, instance_name="lite", client_config=over_remoting(),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",  # type: ignore[arg-type]
    )
    consumer.subscribe(TOPIC)
    # Sent over gRPC, pulled over remoting: both meet.
    async with Producer("rpg", cluster.namesrv_addr, data_transport="grpc") as producer:
        sent = await produce(producer, 40)
    await consumer.start()
    try:
        got: dict[bytes, list[str]] = {}
        async with asyncio.timeout(20):
            while len(got) < len(sent):
                for m in await consumer.poll(timeout=0.5):
                    got.setdefault(m.body, []).append(m.msg_id)
        assert got == sent
        assert python_connections(cluster) == 2
    finally:
        await consumer.shutdown()


@pytest.mark.cluster(brokers=1, topic=TOPIC, queues=1, remoting=True)
async def test_large_messages_fit_the_frames(cluster: LocalCluster) -> None:
    """Pulls ask for at most half a frame of records (12 messages of 1.5 MiB, 18 MiB in one
    queue, come in several pulls), and a send too large for a frame is refused by name."""
    seen: dict[bytes, list[str]] = {}
    consumer = remoting_consumer(cluster, "c", seen)
    big = 1536 * 1024
    async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as producer:
        sent = {}
        for i in range(12):
            body = b"%02d" % i + bytes(big)
            sent[body] = [(await producer.send(Message(TOPIC, body))).msg_id]
        with pytest.raises(MessageTooLarge, match="does not fit a remoting frame"):
            await producer.send_batch([Message(TOPIC, bytes(3 * 1024 * 1024))] * 6)
        try:
            await consumer.start()
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="all consumed")
            assert seen == sent
        finally:
            await consumer.shutdown()


@pytest.mark.cluster(brokers=1, topic=TOPIC, queues=2, remoting=True)
async def test_auto_takes_remoting_and_falls_back_to_grpc(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The default, "auto": remoting where the broker serves it; a send too large for a frame
    goes over gRPC; a remoting port that stops answering is set aside, logged once, and the
    messages go on over gRPC (where "remoting" fails them)."""
    seen: dict[bytes, list[str]] = {}
    consumer = remoting_consumer(cluster, "auto", seen, data_transport="auto")
    async with Producer("apg", cluster.namesrv_addr) as producer:
        try:
            await consumer.start()
            sent = await produce(producer, 40)
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="all consumed")
            assert python_connections(cluster) == 2  # the producer's and the consumer's
            big = [Message(TOPIC, b"%d" % i + bytes(3 * 1024 * 1024)) for i in range(6)]
            assert len((await producer.send_batch(big)).msg_ids) == 6  # 18 MiB, over gRPC

            remoting = cluster.broker_list[0].remoting
            assert remoting is not None
            await remoting.stop()  # the route still names it; nobody answers there now
            sent |= await produce(producer, 40, 40)
            await wait_until(lambda: len(seen) == len(sent) + 6, timeout=20,
                             message="consumed over gRPC")
            assert all(seen[body] == ids for body, ids in sent.items())
            unreachable = [r for r in caplog.records
                           if "remoting address unreachable" in r.getMessage()]
            assert len(unreachable) == 2  # once by the producer, once by the consumer
            async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as only:
                with pytest.raises(ServiceNotAvailable, match="cannot connect"):
                    await only.send(Message(TOPIC, b"x"), MessageQueue(TOPIC, "broker-a", 0))
        finally:
            await consumer.shutdown()


@pytest.mark.cluster(brokers=1, topic=TOPIC, queues=2, remoting=True)
async def test_delayed_messages_and_typed_errors_over_remoting(cluster: LocalCluster) -> None:
    seen: dict[bytes, list[str]] = {}
    consumer = remoting_consumer(cluster, "c", seen)
    async with Producer("rpg", cluster.namesrv_addr, data_transport="remoting") as producer:
        await consumer.start()
        try:
            result = await producer.send(Message(TOPIC, b"later", delay_time_level=1))
            assert len(result.msg_id) == 32 and result.queue_offset >= 0
            await wait_until(lambda: b"later" in seen, timeout=10, message="the delayed message")
            # A queue the topic does not have: the broker's own error, by its class.
            with pytest.raises(OffsetOutOfRange, match="out of range"):
                await producer.send(Message(TOPIC, b"x"), MessageQueue(TOPIC, "broker-a", 9))
        finally:
            await consumer.shutdown()


@pytest.mark.cluster(brokers=2, topic=TOPIC, queues=2, remoting=True)
async def test_client_instances_sharing_connections_share_the_remoting_ones(
    cluster: LocalCluster,
) -> None:
    """With ``share_connections`` the consumers of a process pull over one connection per
    broker; it stays open while one of them still uses it."""
    seen: dict[bytes, list[str]] = {}
    consumers = [
        remoting_consumer(cluster, f"c{i}", seen, share_connections=True) for i in range(3)
    ]
    async with Producer("rpg", cluster.namesrv_addr, data_transport="grpc") as producer:
        try:
            for c in consumers:
                await c.start()
            sent = await produce(producer, 40)
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="all consumed")
            assert python_connections(cluster) == 2
            await consumers[0].shutdown()
            await consumers[1].shutdown()
            sent |= await produce(producer, 40, 40)
            await wait_until(lambda: len(seen) == len(sent), timeout=20, message="the last one")
            assert python_connections(cluster) == 2
            await consumers[2].shutdown()
            await wait_until(lambda: python_connections(cluster) == 0, timeout=5,
                             message="the last owner closes them")
        finally:
            for c in consumers:
                await c.shutdown()
