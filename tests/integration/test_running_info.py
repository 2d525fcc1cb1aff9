"""Consumer running info (GET_CONSUMER_RUNNING_INFO, asked through the client's channel):
consumerProgress shows the holder of every queue of a classic group and a real TPS, and
consumerStatus prints each client's running info."""

from __future__ import annotations

import asyncio
import json

import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.v1 import broker_pb2
from tests.helpers import mqadmin, wait_until
from tests.integration.support import Received, new_consumer, owners

TOPIC = "RunningInfoTopic"
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4)


async def test_holders_tps_and_consumer_status(cluster: LocalCluster) -> None:
    received = Received()
    consumers = [new_consumer(cluster, "rg", TOPIC, f"c{i}", received) for i in range(2)]
    for c in consumers:
        await c.start()
    try:
        await wait_until(
            lambda: len(owners(consumers)) == 8 and all(len(v) == 1 for v in owners(consumers).values()),
            timeout=15, message="8 queues, one holder each",
        )
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for i in range(200):
                await producer.send(Message(TOPIC, b"r%03d" % i))
                await asyncio.sleep(0.005)
        await wait_until(lambda: len(received.by_body) == 200, timeout=20, message="200 consumed")

        code, out, err = await mqadmin(
            "consumerProgress", "-n", cluster.namesrv_addr, "-g", "rg", "--json"
        )
        assert code == 0, err
        progress = json.loads(out)
        held = {c.client_id: {(q.broker_name, q.queue_id) for q in c.assigned_queues}
                for c in consumers}
        rows = [r for r in progress["offsetTable"] if r["topic"] == TOPIC]
        assert len(rows) == 8
        for row in rows:
            holder = row["clientId"]
            assert holder in held, row  # every queue of a classic group has its holder
            assert (row["brokerName"], row["queueId"]) in held[holder]
        assert progress["consumeTps"] > 0

        code, out, err = await mqadmin(
            "consumerStatus", "-n", cluster.namesrv_addr, "-g", "rg", "--json"
        )
        assert code == 0, err
        clients = json.loads(out)["clients"]
        assert sorted(c["clientId"] for c in clients) == sorted(held)
        for client in clients:
            topics = {q["topic"] for q in client["mqTable"] if not q["droped"]}
            assert TOPIC in topics
            queues = {(q["brokerName"], q["queueId"]) for q in client["mqTable"]
                      if q["topic"] == TOPIC}
            assert queues == held[client["clientId"]]
            assert client["properties"]["messageModel"] == "CLUSTERING"
            assert client["statusTable"][TOPIC]["consumeOKTPS"] > 0
            assert client["statusTable"][TOPIC]["pullTPS"] > 0

        # one client, as text
        code, out, err = await mqadmin(
            "consumerStatus", "-n", cluster.namesrv_addr, "-g", "rg", "-i", consumers[0].client_id
        )
        assert code == 0 and f"# client {consumers[0].client_id}" in out and "#Pull TPS" in out
        # bad input: a client that is not a member
        code, out, err = await mqadmin(
            "consumerStatus", "-n", cluster.namesrv_addr, "-g", "rg", "-i", "nobody@x"
        )
        assert code == 1 and len(err.strip().splitlines()) == 1 and "nobody@x" in err
    finally:
        for c in consumers:
            await c.shutdown()


async def test_a_client_that_is_not_a_member_is_named(cluster: LocalCluster) -> None:
    import grpc

    from aiorocketmq.protocol.broker_connections import BrokerConnections
    from aiorocketmq.protocol.errors import MQError, from_rpc_error

    conns = BrokerConnections()
    try:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await conns.stub(cluster.broker_list[0].address).GetConsumerRunningInfo(
                broker_pb2.GetConsumerRunningInfoRequest(consumer_group="g", client_id="x@y"),
                timeout=5,
            )
        error: MQError = from_rpc_error(raised.value)
        assert "x@y is not a live member of g" in error.message
    finally:
        await conns.close()
