"""A group's retry topic: the member's first heartbeat creates it on every broker where it was
missing, and the member's route has it on all of them as soon as ``start()`` returns.

Read before the heartbeat (RocketMQ's order), the route had it only where it existed already
until the 30 s route refresh, so members that started together allocated the retry queues
differently, and fenced ones waited on queues another member held. The brokers here register
with the name server every 60 s, so only a registration made for the heartbeat can help.
"""

from __future__ import annotations

import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.validators import retry_topic
from tests.helpers import wait_until
from tests.integration.support import Received, new_consumer

TOPIC = "RetryRoute"
BROKERS = {"broker-a", "broker-b", "broker-c"}
pytestmark = pytest.mark.cluster(
    brokers=3, topic=TOPIC, queues=4, overrides={"register_name_server_period_ms": 60_000}
)


async def routed_on(cluster: LocalCluster, topic: str) -> set[str]:
    async with NameServerClient(cluster.namesrv_addr) as ns:
        try:
            route = await ns.get_route_info_by_topic(topic)
        except MQError:
            return set()
    return {q.broker_name for q in route.queue_datas}


@pytest.mark.parametrize("handoff", ["classic", "fenced"])
async def test_the_retry_topic_is_on_every_broker_once_started(
    cluster: LocalCluster, handoff: str
) -> None:
    group = f"retry-route-{handoff}"
    # As when another member's heartbeat reached one broker first: on broker-a only.
    cluster.broker("broker-a").topics.create_topic_if_absent(
        retry_topic(group), 1, PermName.READ | PermName.WRITE
    )

    async def on_broker_a_only() -> bool:
        return await routed_on(cluster, retry_topic(group)) == {"broker-a"}

    await wait_until(on_broker_a_only, message="the retry topic routed on broker-a")
    consumer = new_consumer(cluster, group, TOPIC, "c0", Received(), handoff=handoff)
    try:
        await consumer.start()
        impl = consumer._impl.rebalance_impl
        assert impl is not None
        retry_queues = impl.topic_subscribe_info_table.get(retry_topic(group), set())
        assert {mq.broker_name for mq in retry_queues} == BROKERS
    finally:
        await consumer.shutdown()
