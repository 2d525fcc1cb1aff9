"""``AcquireBatcher`` against a broker: acquires asked for together go in one call, and each
caller gets what its own call would have given (its response, its typed error, its deadline)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest

from aiorocketmq.consumer.acquire_batch import AcquireBatcher
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.channels import SharedChannels
from aiorocketmq.protocol.errors import InvalidArgument, ServiceNotAvailable
from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2
from tests.integration.protocol_client import ProtocolClient, mq

TOPIC = "Batched"
G = "batched"


@pytest.fixture
async def clients(tmp_path: Path) -> AsyncIterator[tuple[AcquireBatcher, list[ProtocolClient]]]:
    async with LocalCluster(tmp_path, brokers=1) as cluster, AsyncExitStack() as stack:
        await cluster.create_topic(TOPIC, 4)
        addr = cluster.broker("broker-a").address
        joined = []
        for name in ("a", "b", "c"):
            client = await stack.enter_async_context(ProtocolClient(addr, f"127.0.0.1@{name}"))
            await client.open()
            await client.heartbeat(G, [TOPIC])
            joined.append(client)
        channel = insecure_channel(addr)
        try:
            # Batched whatever is in flight (a burst is what it batches in a process).
            yield AcquireBatcher(channel, linger_s=0.05, batch_when_unanswered=0), joined
        finally:
            await channel.close()


def asking(client: ProtocolClient, queue_id: int, wait_ms: int = 0) -> Any:
    return broker_pb2.AcquireQueuesRequest(
        consumer_group=G,
        client_id=client.client_id,
        channel_id=client.channel_id,
        mq_set=[mq(TOPIC, queue_id)],
        wait_millis=wait_ms,
    )


async def test_acquires_asked_together_go_in_one_call_each_with_its_own_answer(
    clients: tuple[AcquireBatcher, list[ProtocolClient]],
) -> None:
    batcher, (a, b, c) = clients
    stranger = asking(c, 2)
    stranger.channel_id = a.channel_id  # not c's channel: c's acquire alone is refused
    got_a, got_b, refused, got_c = await asyncio.gather(
        batcher.acquire(asking(a, 0), 3.0),
        batcher.acquire(asking(b, 1), 3.0),
        batcher.acquire(stranger, 3.0),
        batcher.acquire(asking(c, 3), 3.0),
        return_exceptions=True,
    )
    assert batcher.batches == 1
    assert isinstance(got_c, broker_pb2.AcquireQueuesResponse) and got_c.granted
    assert isinstance(got_a, broker_pb2.AcquireQueuesResponse)
    assert isinstance(got_b, broker_pb2.AcquireQueuesResponse)
    assert [g.message_queue.queue_id for g in got_a.granted] == [0]
    assert [g.message_queue.queue_id for g in got_b.granted] == [1]
    assert isinstance(refused, InvalidArgument) and a.channel_id in refused.message
    alone = await asyncio.gather(  # fewer than MIN_BATCH: each as AcquireQueues
        batcher.acquire(asking(c, 2), 3.0), batcher.acquire(asking(a, 1), 3.0)
    )
    assert [g.message_queue.queue_id for g in alone[0].granted] == [2]
    assert [d.message_queue.queue_id for d in alone[1].denied] == [1]  # b holds it
    assert batcher.batches == 1


async def test_a_caller_that_gives_up_leaves_the_others_answered(
    clients: tuple[AcquireBatcher, list[ProtocolClient]],
) -> None:
    """In one batch: an acquire waiting for a queue another holds waits at the broker only
    until half a second before its own caller's deadline (then denied); a caller cancelled
    with its pass drops its answer; another is answered at once. The cancelled one's wait
    ends: when the holder lets the queue go, nobody is handed it behind the client's back."""
    batcher, (a, b, c) = clients
    (held,) = (await a.acquire(G, [mq(TOPIC, 0)])).granted
    late = asyncio.ensure_future(batcher.acquire(asking(b, 0, wait_ms=1_500), 0.8))
    gone = asyncio.ensure_future(batcher.acquire(asking(c, 0, wait_ms=1_500), 3.0))
    quick = asyncio.ensure_future(batcher.acquire(asking(c, 3), 3.0))
    other = asyncio.ensure_future(batcher.acquire(asking(a, 2), 3.0))
    answer = await asyncio.wait_for(quick, 1.0)
    assert [g.message_queue.queue_id for g in answer.granted] == [3]
    assert [g.message_queue.queue_id for g in (await other).granted] == [2]
    gone.cancel()
    denied = await late
    assert [d.holder_client_id for d in denied.denied] == [a.client_id]
    assert batcher.batches == 1
    released = await a.release(G, mq(TOPIC, 0), held.epoch)
    assert list(released.released) == [mq(TOPIC, 0)]
    taken = await b.acquire(G, [mq(TOPIC, 0)])  # free: handed to no abandoned wait
    assert [g.message_queue.queue_id for g in taken.granted] == [0]


async def test_asking_again_ends_the_wait_of_an_acquire_given_up(
    clients: tuple[AcquireBatcher, list[ProtocolClient]],
) -> None:
    """The broker side of a caller that gave up while its acquire waits: the same channel
    asking again for the queue (a pass settling what it is unsure of, without waiting) ends
    that wait, so a release does not hand the queue to an answer nobody reads."""
    _, (a, b, _) = clients
    (held,) = (await a.acquire(G, [mq(TOPIC, 1)])).granted
    abandoned = asyncio.ensure_future(b.acquire(G, [mq(TOPIC, 1)], wait_ms=1_500))
    await asyncio.sleep(0.2)
    again = await b.acquire(G, [mq(TOPIC, 1)])
    assert [d.message_queue.queue_id for d in again.denied] == [1]
    ended = await asyncio.wait_for(abandoned, 1.0)  # answered now, not after its 1.5 s
    assert [d.message_queue.queue_id for d in ended.denied] == [1]
    await a.release(G, mq(TOPIC, 1), held.epoch)
    free = await a.acquire(G, [mq(TOPIC, 1)])
    assert [g.message_queue.queue_id for g in free.granted] == [1]


async def test_a_batch_whose_channel_closes_answers_each_caller_at_once(
    clients: tuple[AcquireBatcher, list[ProtocolClient]],
) -> None:
    """The shared channel closed by its last user before the batch went: each caller hears
    that no answer came (the queues unsure), at once, not at its deadline."""
    _, (a, b, _) = clients
    table = SharedChannels()
    channel = table.acquire(a.addr)
    batcher = table.attached(a.addr, "acquires", lambda ch: AcquireBatcher(ch, 0.5, 0))
    asked = [asyncio.ensure_future(batcher.acquire(asking(client, 2), 10.0)) for client in (a, b)]
    await asyncio.sleep(0)
    await table.release(a.addr)  # the last user: the channel closes, the batcher with it
    results = await asyncio.wait_for(asyncio.gather(*asked, return_exceptions=True), 1.0)
    assert all(isinstance(r, ServiceNotAvailable) for r in results), results
    assert channel.get_state() == grpc.ChannelConnectivity.SHUTDOWN


def test_the_batch_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="acquire_batch_ms"):
        ClientConfig(acquire_batch_ms=-1)
    with pytest.raises(ValueError, match="acquire_batch_threshold"):
        ClientConfig(acquire_batch_threshold=-1)
