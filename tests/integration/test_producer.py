"""The producer against a real name server and brokers: routes, selectors, batches, failover."""

from __future__ import annotations

import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer, SelectMessageQueueByHash, SendStatus
from aiorocketmq.protocol.errors import InvalidArgument, MessageTooLarge
from aiorocketmq.protocol.message_queue import MessageQueue

pytestmark = pytest.mark.cluster(brokers=2)


async def test_send_round_robins_over_both_brokers(cluster: LocalCluster) -> None:
    await cluster.create_topic("PT", 4)
    async with Producer("pg", cluster.namesrv_addr) as p:
        results = [await p.send(Message("PT", b"m%d" % i)) for i in range(16)]
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert {r.message_queue for r in results} == {
        MessageQueue("PT", b, q) for b in ("broker-a", "broker-b") for q in range(4)
    }


async def test_selector_keeps_one_key_on_one_queue_and_batches(cluster: LocalCluster) -> None:
    await cluster.create_topic("Ordered", 4)
    async with Producer("pg", cluster.namesrv_addr) as p:
        queues = {
            (
                await p.send(
                    Message("Ordered", b"x"), selector=SelectMessageQueueByHash(), arg="order-42"
                )
            ).message_queue
            for _ in range(5)
        }
        assert len(queues) == 1
        batch = await p.send_batch([Message("Ordered", b"%d" % i) for i in range(10)])
        assert len(batch.msg_ids) == 10
        mq = MessageQueue("Ordered", "broker-b", 3)
        direct = await p.send(Message("Ordered", b"direct"), mq)
        assert direct.message_queue == mq


async def test_unknown_topic_is_auto_created_through_the_default_route(
    cluster: LocalCluster,
) -> None:
    async with Producer("pg", cluster.namesrv_addr) as p:
        result = await p.send(Message("BrandNew", b"hello"))
    assert result.send_status is SendStatus.SEND_OK
    assert (
        cluster.broker(result.message_queue.broker_name).topics.select_topic_config("BrandNew")
        is not None
    )


async def test_producer_fails_over_when_a_broker_stops(cluster: LocalCluster) -> None:
    await cluster.create_topic("Failover", 4)
    async with Producer("pg", cluster.namesrv_addr, send_msg_timeout=5) as p:
        await p.fetch_publish_message_queues("Failover")  # the route still lists broker-b
        await cluster.broker("broker-b").shutdown()
        results = [await p.send(Message("Failover", b"m%d" % i)) for i in range(10)]
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}


async def test_producer_rejects_bad_messages_before_sending(cluster: LocalCluster) -> None:
    async with Producer("pg", cluster.namesrv_addr) as p:
        with pytest.raises(MessageTooLarge):
            await p.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
        with pytest.raises(InvalidArgument):
            await p.send(Message("bad topic", b"x"))
        with pytest.raises(InvalidArgument):
            await p.send(Message("TBW102", b"x"))
