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
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.message_queue import MessageQueue
from tests.helpers import fast_client_config

__all__ = ["Received", "fast_client_config", "new_consumer"]


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
