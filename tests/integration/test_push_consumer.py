"""Consumers over real gRPC: AVG splits, join and leave mid-stream, restart from offsets."""

from __future__ import annotations

import pytest

from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeFromWhere,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import wait_until
from tests.integration.support import Received, new_consumer, owners

TOPIC = "RebalanceTopic"
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=8)




def all_queues() -> list[MessageQueue]:
    return sorted(MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(8))


def settled(consumers: list[PushConsumer]) -> bool:
    """Each queue held by exactly one consumer, as AVG computes it."""
    held = owners(consumers)
    if sorted(held) != all_queues() or any(len(v) != 1 for v in held.values()):
        return False
    cids = sorted(c.client_id for c in consumers)
    avg = AllocateMessageQueueAveragely()
    return all(
        c.assigned_queues == set(avg.allocate("g", c.client_id, all_queues(), cids))
        for c in consumers
    )


@pytest.mark.parametrize("n", [1, 2, 4])
async def test_consumers_split_the_queues_as_avg_says(cluster: LocalCluster, n: int) -> None:
    received = Received()
    consumers = [new_consumer(cluster, "g", TOPIC, f"c{i}", received) for i in range(n)]
    try:
        for c in consumers:
            await c.start()
        await wait_until(lambda: settled(consumers), timeout=15, message=f"{n} consumers settled")
        sizes = sorted(len(c.assigned_queues) for c in consumers)
        assert sum(sizes) == 16 and sizes[-1] - sizes[0] <= 1
    finally:
        for c in consumers:
            await c.shutdown()


async def test_join_and_graceful_leave_mid_stream_lose_nothing(cluster: LocalCluster) -> None:
    received = Received()
    c1 = new_consumer(
        cluster,
        "g",
        TOPIC,
        "c1",
        received,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c2 = new_consumer(
        cluster,
        "g",
        TOPIC,
        "c2",
        received,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    bodies: list[bytes] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:

        async def produce(n: int) -> None:
            for _ in range(n):
                body = b"m%05d" % len(bodies)
                bodies.append(body)
                await producer.send(Message(TOPIC, body))

        try:
            await c1.start()
            await wait_until(lambda: settled([c1]), timeout=15, message="c1 alone")
            await produce(100)
            await c2.start()  # joins mid-stream
            await produce(100)
            await wait_until(lambda: settled([c1, c2]), timeout=15, message="c1 and c2 settled")
            await produce(100)
            await c1.shutdown()  # graceful leave
            await produce(100)
            await wait_until(lambda: settled([c2]), timeout=15, message="c2 alone")
            await wait_until(
                lambda: not received.missing(bodies), timeout=20, message="every message consumed"
            )
        finally:
            await c1.shutdown()
            await c2.shutdown()
    assert not received.missing(bodies)
    print(f"duplicates across join and leave: {received.duplicates()}")


async def test_a_group_restarted_from_stored_offsets_does_not_reread(cluster: LocalCluster) -> None:
    first = Received()
    c = new_consumer(cluster, "restart", TOPIC, "r1", first)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        bodies = [b"old%03d" % i for i in range(50)]
        for b in bodies:
            await producer.send(Message(TOPIC, b))
        await c.start()
        await wait_until(
            lambda: not first.missing(bodies), timeout=15, message="first run consumed all"
        )
        await c.shutdown()  # persists offsets
        second = Received()
        c2 = new_consumer(cluster, "restart", TOPIC, "r2", second)
        newer = [b"new%03d" % i for i in range(20)]
        try:
            await c2.start()
            await wait_until(
                lambda: settled([c2]), timeout=15, message="restarted consumer settled"
            )
            for b in newer:
                await producer.send(Message(TOPIC, b))
            await wait_until(
                lambda: not second.missing(newer), timeout=15, message="new messages consumed"
            )
        finally:
            await c2.shutdown()
    assert not any(b in second.by_body for b in bodies)


async def test_a_consumer_with_a_pull_minimum_gets_every_message_sent_one_by_one(
    cluster: LocalCluster,
) -> None:
    """pull_min_batch_size reaches the broker with every pull; what never makes the minimum
    still arrives once pull_max_wait_ms passes."""
    received = Received()
    c = new_consumer(
        cluster, "minimum", TOPIC, "m1", received, pull_min_batch_size=10, pull_max_wait_ms=50
    )
    try:
        await c.start()
        await wait_until(lambda: settled([c]), timeout=15, message="the consumer settled")
        bodies = [b"min%03d" % i for i in range(25)]
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for b in bodies:
                await producer.send(Message(TOPIC, b))
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="all consumed")
    finally:
        await c.shutdown()
