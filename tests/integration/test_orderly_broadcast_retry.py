"""Orderly consumption across a leave, broadcasting, and retries into the dead-letter queue."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    MessageModel,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.consumer.offset_store import ReadOffsetType
from aiorocketmq.consumer.types import ConsumeOrderlyContext, ConsumeOrderlyStatus
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer, SelectMessageQueueByHash
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.v1 import broker_pb2
from tests.helpers import wait_until
from tests.integration.support import Received, fast_client_config, new_consumer

TOPIC = "OrderTopic"
# Retries: 18 short delay levels (RocketMQ's are 1 s ... 2 h).
RETRY_LEVELS = {
    "message_delay_level": " ".join(["0.05s"] * 18),
    "schedule_check_interval_ms": 20,
}
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4, overrides=RETRY_LEVELS)




class OrderlyLog:
    """Per consumer and queue, the sequence numbers seen, in the order consumed."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[MessageQueue, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.bodies: set[bytes] = set()

    def listener(self, name: str):  # type: ignore[no-untyped-def]
        async def consume(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            for m in msgs:
                self.seen[name][ctx.message_queue].append(int(m.body.split(b":")[1]))
                self.bodies.add(m.body)
            await asyncio.sleep(0.001)
            return ConsumeOrderlyStatus.SUCCESS

        return consume


def orderly_consumer(cluster: LocalCluster, name: str, log: OrderlyLog) -> PushConsumer:
    c = PushConsumer(
        "orderly_group", cluster.namesrv_addr, instance_name=name, client_config=fast_client_config(),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(log.listener(name), orderly=True)
    return c


async def test_orderly_keeps_per_queue_order_across_a_graceful_leave(cluster: LocalCluster) -> None:
    log = OrderlyLog()
    c1, c2 = orderly_consumer(cluster, "o1", log), orderly_consumer(cluster, "o2", log)
    sent: list[bytes] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:

        async def produce(n: int) -> None:
            for _ in range(n):
                key = len(sent) % 8
                body = b"k%d:%d" % (key, len(sent))
                sent.append(body)
                await producer.send(Message(TOPIC, body), selector=SelectMessageQueueByHash(), arg=key)

        try:
            await c1.start()
            await c2.start()
            await wait_until(
                lambda: len(c1.assigned_queues) == 4 and len(c2.assigned_queues) == 4,
                timeout=15, message="two orderly consumers share 8 queues",
            )
            await produce(200)
            await wait_until(lambda: len(log.bodies) >= 100, timeout=15, message="half consumed")
            await c1.shutdown()  # graceful: persists, then unlocks on the broker
            # The broker lock would expire after 60 s; the survivor must not need that.
            await wait_until(
                lambda: len(c2.assigned_queues) == 8
                and all(pq.locked for pq in c2.rebalance_impl.process_queue_table.values()),  # type: ignore[union-attr]
                timeout=20, message="the survivor locks the released queues",
            )
            await produce(100)
            await wait_until(lambda: log.bodies >= set(sent), timeout=20, message="everything consumed")
        finally:
            await c1.shutdown()
            await c2.shutdown()
    for name, queues in log.seen.items():
        for mq, seqs in queues.items():
            assert seqs == sorted(seqs), f"{name} saw {mq} out of order: {seqs}"


async def test_broadcasting_delivers_everything_to_each_and_a_late_joiner_starts_at_the_tail(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    received = {name: Received() for name in ("b1", "b2", "b3")}

    def broadcaster(name: str) -> PushConsumer:
        return new_consumer(
            cluster, "bcast", TOPIC, name, received[name], message_model=MessageModel.BROADCASTING,
            offset_store_dir=tmp_path / "offsets",
        )

    b1, b2 = broadcaster("b1"), broadcaster("b2")
    b3 = broadcaster("b3")
    async with Producer("pg", cluster.namesrv_addr) as producer:
        try:
            await b1.start()
            await b2.start()
            await wait_until(lambda: len(b1.assigned_queues) == 8 and len(b2.assigned_queues) == 8,
                             timeout=15, message="broadcast consumers take every queue")
            await asyncio.sleep(0.6)  # the first pulls are dispatched 500 ms after a rebalance
            first = [b"first%d" % i for i in range(40)]
            for body in first:
                await producer.send(Message(TOPIC, body))
            for name in ("b1", "b2"):
                await wait_until(lambda n=name: not received[n].missing(first), timeout=15,
                                 message=f"{name} got every message")
            await b3.start()  # joins late, CONSUME_FROM_LAST_OFFSET
            await wait_until(lambda: len(b3.assigned_queues) == 8, timeout=15, message="b3 joined")
            await asyncio.sleep(0.6)
            later = [b"later%d" % i for i in range(20)]
            for body in later:
                await producer.send(Message(TOPIC, body))
            for name in ("b1", "b2", "b3"):
                await wait_until(lambda n=name: not received[n].missing(later), timeout=15,
                                 message=f"{name} got the later messages")
        finally:
            for c in (b1, b2, b3):
                await c.shutdown()
    assert not any(b in received["b3"].by_body for b in first), "the late joiner started at the tail"
    assert received["b1"].duplicates() == 0 and received["b2"].duplicates() == 0


def concurrent_consumer(
    cluster: LocalCluster, group: str, listener: Any, **options: Any
) -> PushConsumer:
    """A consumer of ``group`` reading TOPIC from its first offset with ``listener``."""
    c = PushConsumer(
        group, cluster.namesrv_addr, instance_name=group, client_config=fast_client_config(),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **options,
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    return c


async def test_a_failing_message_goes_through_the_retry_levels_into_the_dlq(cluster: LocalCluster) -> None:
    attempts: list[int] = []
    ok: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            if m.body == b"poison":
                attempts.append(m.reconsume_times)
                assert m.topic == TOPIC  # the retry topic is reset to the original
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            ok.append(m.body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = concurrent_consumer(cluster, "retry_group", listener, max_reconsume_times=3)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        try:
            await c.start()
            sent = await producer.send(Message(TOPIC, b"poison"))
            await producer.send(Message(TOPIC, b"fine"))
            await wait_until(lambda: len(attempts) >= 4 and b"fine" in ok, timeout=30,
                             message="the poison message retried 3 times")
            assert attempts == [0, 1, 2, 3]
            dlq = "%DLQ%retry_group"

            async def in_dlq() -> bool:
                broker = cluster.broker(sent.message_queue.broker_name)
                config = broker.topics.select_topic_config(dlq)
                if config is None:
                    return False
                conns = BrokerConnections()
                try:
                    got = await conns.stub(broker.address).PullMessage(
                        broker_pb2.PullMessageRequest(
                            consumer_group="inspect", topic=dlq, queue_id=0, queue_offset=0,
                            max_msg_nums=8, has_subscription=True, sub_expression="*",
                        ),
                        timeout=3,
                    )
                finally:
                    await conns.close()
                return any(m.body == b"poison" and m.reconsume_times == 4 for m in got.messages)

            await wait_until(in_dlq, timeout=15, message="the poison message in the DLQ")
            await asyncio.sleep(0.3)
            assert len(attempts) == 4  # not consumed again after the DLQ
        finally:
            await c.shutdown()


async def test_a_hung_listener_call_is_retried_after_the_consume_timeout(cluster: LocalCluster) -> None:
    """RocketMQ's consumeTimeout: a message whose listener call hangs is sent back and consumed
    again from the retry topic, and the committed offset moves past it while the call still
    hangs."""
    release = asyncio.Event()
    stuck: list[int] = []  # reconsume_times of each delivery of the stuck message

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            if m.body == b"stuck":
                stuck.append(m.reconsume_times)
                if m.reconsume_times == 0:
                    await release.wait()  # hangs until the test ends
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = concurrent_consumer(cluster, "timeout_group", listener, consume_timeout_ms=500)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        try:
            await c.start()
            sent = await producer.send(Message(TOPIC, b"stuck"))
            await wait_until(lambda: stuck == [0, 1], timeout=15,
                             message="the stuck message consumed again from the retry topic")
            assert c.offset_store is not None
            committed = await c.offset_store.read_offset(
                sent.message_queue, ReadOffsetType.READ_FROM_MEMORY
            )
            assert committed == sent.queue_offset + 1
            assert not release.is_set()  # the first call still hangs
        finally:
            release.set()
            await c.shutdown()
    assert stuck == [0, 1]
