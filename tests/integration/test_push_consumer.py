"""Consumers over real gRPC: AVG splits, join and leave mid-stream, restart from offsets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.trace import tracer
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


async def test_a_fenced_consumer_is_granted_no_queue_while_it_leaves(cluster: LocalCluster) -> None:
    """A consumer still asking for a queue its previous owner holds when it shuts down: the
    queue freed during its drain is not granted to it (it would be let go by the unregister
    alone, without a final offset, while the next owner consumes it)."""
    records: list[dict[str, Any]] = []
    tracer.subscribe(records.append)
    gate, busy = asyncio.Event(), asyncio.Event()

    async def slow(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
        busy.set()
        await gate.wait()  # a batch in flight: the leave drains it
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    a = new_consumer(cluster, "leaving", TOPIC, "a", Received(), handoff="fenced")
    a.register_message_listener(slow)
    b = new_consumer(cluster, "leaving", TOPIC, "b", Received(), handoff="fenced")
    try:
        await a.start()
        await b.start()
        await wait_until(lambda: settled([a, b]), timeout=15, message="a and b settled")
        async with Producer("leaving-producer", cluster.namesrv_addr) as p:
            for i in range(32):
                await p.send(Message(TOPIC, b"m%d" % i))
        await asyncio.wait_for(busy.wait(), 10)
        # a is asking for one of b's queues (as after a pass b has not caught up with).
        theirs = min(b.assigned_queues)
        impl = a._impl.rebalance_impl
        assert impl is not None
        impl.allocation[TOPIC] = impl.allocation[TOPIC] | {theirs}
        impl._keep_acquiring(TOPIC)
        leaving = asyncio.create_task(a.shutdown())
        await asyncio.sleep(0.1)
        await b.shutdown()  # theirs is free while a still drains
        await asyncio.sleep(0.5)
        gate.set()
        await leaving
    finally:
        gate.set()
        await a.shutdown()
        await b.shutdown()
        tracer.unsubscribe(records.append)
    mine = [r for r in records if r.get("client_id") == a.client_id]
    left = next(i for i, r in enumerate(mine) if r["event"] == "consumer_shutdown")
    taken = [r for r in mine[left:] if r["event"] in ("queue_acquired", "queue_added")]
    assert taken == []
