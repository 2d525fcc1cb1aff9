"""The producer against a real name server and brokers: routes, selectors, batches, failover."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer, SelectMessageQueueByHash, SendStatus
from aiorocketmq.protocol.errors import InvalidArgument, MessageTooLarge
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.record import decode_message_id

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


async def test_batches_sent_at_once_share_requests_and_each_gets_its_own_result(
    cluster: LocalCluster,
) -> None:
    """Twenty tasks each send a batch at once: while a broker's request is out the others wait
    and go together (fewer requests than batches), each result names exactly its own messages,
    where they are stored, in the order of the batch."""
    await cluster.create_topic("Together", 4)
    async with Producer("pg", cluster.namesrv_addr) as p:
        await p.fetch_publish_message_queues("Together")
        batches = [[Message("Together", b"%d-%d" % (t, i)) for i in range(5)] for t in range(20)]
        results = await asyncio.gather(*(p.send_batch(b) for b in batches))
        coalescer = p._coalescer
        assert coalescer.batches == 20 and coalescer.requests < 20
        for batch, result in zip(batches, results, strict=True):
            assert len(result.msg_ids) == 5 and result.msg_id == result.msg_ids[0]
            store = cluster.broker(result.message_queue.broker_name).store
            for i, (msg, msg_id) in enumerate(zip(batch, result.msg_ids, strict=True)):
                stored = store.look_message_by_offset(decode_message_id(msg_id)[2])
                assert stored is not None and stored.body == msg.body
                assert stored.queue_id == result.message_queue.queue_id
                assert stored.queue_offset == result.queue_offset + i
        assert len({i for r in results for i in r.msg_ids}) == 100


@pytest.mark.cluster(brokers=1, overrides={"max_message_size": 1024})
async def test_a_bad_batch_sent_with_others_fails_only_its_sender(cluster: LocalCluster) -> None:
    """One batch of several sent together holds a message the broker refuses (larger than the
    broker's limit, under the producer's): that send fails, the others are stored."""
    await cluster.create_topic("Mixed", 1)
    async with Producer("pg", cluster.namesrv_addr) as p:
        await p.fetch_publish_message_queues("Mixed")
        good = [[Message("Mixed", b"g%d" % t)] for t in range(6)]
        outcomes = await asyncio.gather(
            *(p.send_batch(b) for b in good[:3]),
            p.send_batch([Message("Mixed", b"x" * 2048)]),
            *(p.send_batch(b) for b in good[3:]),
            return_exceptions=True,
        )
        assert p._coalescer.batches > p._coalescer.requests  # some went together first
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1 and outcomes[3] is errors[0]
    assert isinstance(errors[0], MessageTooLarge)
    stored = cluster.broker("broker-a").store.get_max_offset("Mixed", 0)
    assert stored == 6
