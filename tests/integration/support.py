"""Shared helpers of the integration tests: topics on every broker, consumer groups."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import wait_until

__all__ = ["Received", "create_topic", "fast_client_config", "new_consumer"]


async def create_topic(cluster: LocalCluster, topic: str, queues: int = 8) -> None:
    """Create ``topic`` on every broker and wait until the name server routes all of them."""
    conns = BrokerConnections()
    try:
        for b in cluster.broker_list:
            await conns.stub(b.address).UpdateAndCreateTopic(
                broker_pb2.UpdateAndCreateTopicRequest(
                    topic_config=common_pb2.TopicConfig(
                        topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6
                    )
                ),
                timeout=3,
            )
    finally:
        await conns.close()
    async with NameServerClient(cluster.namesrv_addr) as ns:

        async def routed() -> bool:
            try:
                route = await ns.get_route_info_by_topic(topic)
            except Exception:
                return False
            return len(route.queue_datas) == len(cluster.broker_list)

        await wait_until(routed, message=f"route of {topic} on every broker")


def fast_client_config() -> ClientConfig:
    """RocketMQ's timings, shrunk where a test would otherwise wait on a timer."""
    return ClientConfig(persist_consumer_offset_interval_ms=200, rebalance_wait_interval_ms=2_000)


@dataclass
class Received:
    """What a group of consumers consumed: by body, who consumed it."""

    by_body: dict[bytes, list[str]] = field(default_factory=lambda: defaultdict(list))

    def listener(self, name: str):  # type: ignore[no-untyped-def]
        async def consume(
            msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                self.by_body[m.body].append(name)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return consume

    def missing(self, bodies: list[bytes]) -> list[bytes]:
        return [b for b in bodies if b not in self.by_body]

    def duplicates(self) -> int:
        return sum(len(v) - 1 for v in self.by_body.values())


def new_consumer(
    cluster: LocalCluster, group: str, topic: str, name: str, received: Received, **kw
) -> PushConsumer:  # type: ignore[no-untyped-def]
    c = PushConsumer(
        group, cluster.namesrv_addr, instance_name=name, client_config=fast_client_config(), **kw
    )
    c.subscribe(topic, "*")
    c.register_message_listener(received.listener(name))
    return c


def owners(consumers: list[PushConsumer]) -> dict[MessageQueue, list[str]]:
    result: dict[MessageQueue, list[str]] = defaultdict(list)
    for c in consumers:
        for mq in c.assigned_queues:
            result[mq].append(c.instance_name or c.client_id)
    return result
