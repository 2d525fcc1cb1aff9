"""The fenced handoff on lite-pull consumers: a join and a graceful leave repeat nothing."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from aiorocketmq.consumer import ConsumeFromWhere, LitePullConsumer
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import wait_until
from tests.integration.support import fast_client_config

TOPIC = "FencedLite"


pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4)


def lite(cluster: LocalCluster, name: str, shared: bool = False) -> LitePullConsumer:
    config = fast_client_config()
    config.share_connections = shared  # then acquires asked for together go in one call
    c = LitePullConsumer(
        "fenced_lite",
        cluster.namesrv_addr,
        instance_name=name,
        handoff="fenced",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=config,
    )
    c.subscribe(TOPIC, "*")
    return c


@pytest.mark.parametrize("shared", [False, True], ids=["own", "shared_connections"])
async def test_fenced_lite_pull_join_and_leave_repeat_nothing(
    cluster: LocalCluster, shared: bool
) -> None:
    seen: Counter[bytes] = Counter()
    stop = asyncio.Event()

    async def drain(c: LitePullConsumer) -> None:
        while not stop.is_set() and c.running:
            for m in await c.poll(timeout=0.1):
                seen[m.body] += 1

    c1, c2 = lite(cluster, "l1", shared), lite(cluster, "l2", shared)
    sent: list[bytes] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:

        async def produce(n: int) -> None:
            for _ in range(n):
                body = b"f%05d" % len(sent)
                await producer.send(Message(TOPIC, body))
                sent.append(body)

        await c1.start()
        t1 = asyncio.create_task(drain(c1))
        await wait_until(
            lambda: len(c1.assignment()) == 8, timeout=15, message="c1 holds every queue"
        )
        await produce(100)
        await c2.start()  # joins: c1 releases half, c2 acquires them at the released offsets
        t2 = asyncio.create_task(drain(c2))
        await wait_until(
            lambda: len(c1.assignment()) == 4 and len(c2.assignment()) == 4,
            timeout=15,
            message="split 4/4",
        )
        await produce(100)
        await c1.shutdown()  # graceful leave: releases with the final offsets
        await wait_until(lambda: len(c2.assignment()) == 8, timeout=15, message="c2 takes over")
        await produce(100)
        await wait_until(
            lambda: all(b in seen for b in sent), timeout=20, message="everything polled"
        )
        stop.set()
        await asyncio.gather(t1, t2)
        await c2.shutdown()
    assert [b for b, n in seen.items() if n > 1] == []
