"""Lite pull consumers over real gRPC: subscribe splits, commits, assign, seek, pause, iterate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeFromWhere,
    LitePullConsumer,
    MessageExt,
    MessageModel,
    MessageQueue,
)
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import wait_until
from tests.integration.support import fast_client_config

TOPIC = "LitePullTopic"
QUEUES = 4
BROKERS = ("broker-a", "broker-b")
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=QUEUES)
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture
async def producer(cluster: LocalCluster) -> AsyncIterator[Producer]:
    async with Producer("lite-pg", cluster.namesrv_addr) as p:
        yield p


def all_queues() -> list[MessageQueue]:
    return sorted(MessageQueue(TOPIC, b, q) for b in BROKERS for q in range(QUEUES))


def lite(cluster: LocalCluster, group: str, name: str, **kw: Any) -> LitePullConsumer:
    return LitePullConsumer(
        group,
        cluster.namesrv_addr,
        instance_name=name,
        client_config=fast_client_config(),
        **kw,
    )


async def send(
    producer: Producer, prefix: str, n: int, mq: MessageQueue | None = None
) -> list[bytes]:
    bodies = [f"{prefix}-{i:03d}".encode() for i in range(n)]
    for body in bodies:
        await producer.send(Message(TOPIC, body), mq)
    return bodies


async def poll_until(c: LitePullConsumer, count: int, *, timeout: float = 10) -> list[MessageExt]:
    """Poll until ``count`` messages arrived; fail after ``timeout`` s."""
    got: list[MessageExt] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while len(got) < count:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise AssertionError(f"polled {len(got)} of {count} messages in {timeout}s")
        got.extend(await c.poll(timeout=min(remaining, 0.5)))
    return got


async def drain(
    consumers: list[LitePullConsumer], count: int, *, timeout: float = 15
) -> dict[str, list[MessageExt]]:
    """Every consumer polls at once until ``count`` messages arrived in all."""
    got: dict[str, list[MessageExt]] = {c.client_id: [] for c in consumers}

    async def run(c: LitePullConsumer) -> None:
        while sum(len(v) for v in got.values()) < count:
            got[c.client_id].extend(await c.poll(timeout=0.2))

    async with asyncio.timeout(timeout):
        await asyncio.gather(*(run(c) for c in consumers))
    return got


def offsets_of(msgs: list[MessageExt]) -> list[int]:
    return [m.queue_offset for m in msgs]


def split_as_avg(consumers: list[LitePullConsumer]) -> bool:
    """Each queue held by exactly one consumer, as AVG computes it."""
    cids = sorted(c.client_id for c in consumers)
    avg = AllocateMessageQueueAveragely()
    return all(
        c.assignment() == set(avg.allocate("g", c.client_id, all_queues(), cids)) for c in consumers
    )


# ---- subscribe ---------------------------------------------------------------------------------


async def test_two_subscribers_split_the_queues_and_poll_every_message_once(
    cluster: LocalCluster, producer: Producer
) -> None:
    c1 = lite(cluster, "lite-split", "c1", consume_from_where=FIRST)
    c2 = lite(cluster, "lite-split", "c2", consume_from_where=FIRST)
    c1.subscribe(TOPIC)
    c2.subscribe(TOPIC)
    try:
        await c1.start()
        await c2.start()
        await wait_until(lambda: split_as_avg([c1, c2]), timeout=15, message="AVG split")
        assert len(c1.assignment()) == len(c2.assignment()) == QUEUES
        bodies = await send(producer, "split", 100)
        got = await drain([c1, c2], len(bodies))
        for c in (c1, c2):
            assert await c.poll(timeout=0.3) == []
            mine = c.assignment()
            assert all(m.message_queue in mine for m in got[c.client_id])
            assert got[c.client_id], "each consumer polled some messages"
        polled = [m.body for msgs in got.values() for m in msgs]
        assert sorted(polled) == sorted(bodies)  # every message exactly once
        # Balanced once they hold their share, as a push consumer says it: the client
        # instance skips a rebalance that is not due.
        for c in (c1, c2):
            assert c._impl.is_balanced()
            assert c._impl.client is not None and c._impl.client.all_consumers_balanced()
    finally:
        await c1.shutdown()
        await c2.shutdown()


async def test_join_and_graceful_leave_mid_stream_lose_nothing(
    cluster: LocalCluster, producer: Producer
) -> None:
    received: dict[bytes, list[str]] = {}
    c1 = lite(cluster, "lite-join", "j1", consume_from_where=FIRST)
    c2 = lite(cluster, "lite-join", "j2", consume_from_where=FIRST)
    c1.subscribe(TOPIC)
    c2.subscribe(TOPIC)

    async def poll_forever(c: LitePullConsumer) -> None:
        async for msg in c:
            received.setdefault(msg.body, []).append(c.client_id)

    pollers: list[asyncio.Task[None]] = []
    bodies: list[bytes] = []
    try:
        await c1.start()
        pollers.append(asyncio.create_task(poll_forever(c1)))
        await wait_until(lambda: c1.assignment() == set(all_queues()), message="c1 holds all")
        bodies += await send(producer, "before-join", 50)
        await c2.start()  # joins mid-stream
        pollers.append(asyncio.create_task(poll_forever(c2)))
        bodies += await send(producer, "during-join", 50)
        await wait_until(lambda: split_as_avg([c1, c2]), timeout=15, message="AVG split")
        bodies += await send(producer, "split", 50)
        await c1.shutdown()  # graceful leave: commits what it polled
        bodies += await send(producer, "after-leave", 50)
        await wait_until(lambda: c2.assignment() == set(all_queues()), message="c2 holds all")
        await wait_until(
            lambda: all(b in received for b in bodies), timeout=15, message="every message polled"
        )
    finally:
        await c1.shutdown()
        await c2.shutdown()
        async with asyncio.timeout(5):
            await asyncio.gather(*pollers)
    duplicates = sum(len(v) - 1 for v in received.values())
    print(f"lite pull duplicates across join and leave: {duplicates}")


async def test_commit_sync_then_a_new_consumer_resumes_after_the_committed_offsets(
    cluster: LocalCluster, producer: Producer
) -> None:
    c1 = lite(cluster, "lite-commit", "c1", consume_from_where=FIRST, auto_commit=False)
    c1.subscribe(TOPIC)
    try:
        await c1.start()
        await wait_until(lambda: c1.assignment() == set(all_queues()), message="c1 holds all")
        committed_bodies = await send(producer, "committed", 20)
        got = await poll_until(c1, 20)
        assert sorted(m.body for m in got) == sorted(committed_bodies)
        await c1.commit_sync()
        per_queue = {mq: await c1.committed(mq) for mq in all_queues()}
        counts = {mq: sum(1 for m in got if m.message_queue == mq) for mq in all_queues()}
        assert per_queue == counts  # offsets start at 0: committed = messages polled
        uncommitted = await send(producer, "uncommitted", 10)
        assert sorted(m.body for m in await poll_until(c1, 10)) == sorted(uncommitted)
    finally:
        await c1.shutdown()  # no auto-commit: the last 10 are not committed

    c2 = lite(cluster, "lite-commit", "c2", consume_from_where=FIRST)
    c2.subscribe(TOPIC)
    try:
        await c2.start()
        await wait_until(lambda: c2.assignment() == set(all_queues()), message="c2 holds all")
        again = await poll_until(c2, 10)
        assert sorted(m.body for m in again) == sorted(uncommitted)
        assert await c2.poll(timeout=0.5) == []
    finally:
        await c2.shutdown()


async def test_broadcasting_consumers_each_poll_everything(
    cluster: LocalCluster, producer: Producer, tmp_path: Path
) -> None:
    consumers = [
        lite(
            cluster,
            "lite-broadcast",
            name,
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=tmp_path / "offsets",
        )
        for name in ("b1", "b2")
    ]
    try:
        for c in consumers:
            c.subscribe(TOPIC)
            await c.start()
        await wait_until(
            lambda: all(c.assignment() == set(all_queues()) for c in consumers),
            message="every broadcasting consumer holds every queue",
        )
        bodies = await send(producer, "bc", 16)
        for c in consumers:
            assert sorted(m.body for m in await poll_until(c, 16)) == sorted(bodies)
    finally:
        for c in consumers:
            await c.shutdown()


# ---- assign, seek, pause -----------------------------------------------------------------------


async def test_assign_polls_only_the_assigned_queues(
    cluster: LocalCluster, producer: Producer
) -> None:
    queues = all_queues()
    mine = [MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-b", 1)]
    for mq in queues:
        await send(producer, f"{mq.broker_name}-{mq.queue_id}", 3, mq)
    c = lite(cluster, "lite-assign", "a1", consume_from_where=FIRST)
    c.assign(mine)
    assert c.assignment() == set(mine)
    try:
        await c.start()
        got = await poll_until(c, 6)
        assert await c.poll(timeout=0.5) == []
        assert {m.message_queue for m in got} == set(mine)
        for mq in mine:
            assert offsets_of([m for m in got if m.message_queue == mq]) == [0, 1, 2]
        assert c.assignment() == set(mine)
    finally:
        await c.shutdown()


async def test_seek_to_an_earlier_offset_redelivers_from_there(
    cluster: LocalCluster, producer: Producer
) -> None:
    mq = MessageQueue(TOPIC, "broker-b", 2)
    await send(producer, "seek", 10, mq)
    c = lite(cluster, "lite-seek", "s1", consume_from_where=FIRST)
    c.assign([mq])
    try:
        await c.start()
        assert offsets_of(await poll_until(c, 10)) == list(range(10))
        await c.seek(mq, 3)
        assert offsets_of(await poll_until(c, 7)) == list(range(3, 10))
        assert await c.poll(timeout=0.3) == []
    finally:
        await c.shutdown()


async def test_seek_to_end_skips_old_messages_and_seek_to_begin_rereads(
    cluster: LocalCluster, producer: Producer
) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 3)
    old = await send(producer, "old", 5, mq)
    c = lite(cluster, "lite-seek-end", "e1", consume_from_where=FIRST)
    c.assign([mq])
    try:
        await c.start()
        await c.seek_to_end(mq)
        new = await send(producer, "new", 3, mq)
        assert [m.body for m in await poll_until(c, 3)] == new
        assert await c.poll(timeout=0.3) == []
        await c.seek_to_begin(mq)
        assert [m.body for m in await poll_until(c, 8)] == old + new
    finally:
        await c.shutdown()


async def test_pause_stops_delivery_from_a_queue_and_resume_restarts_it(
    cluster: LocalCluster, producer: Producer
) -> None:
    q1 = MessageQueue(TOPIC, "broker-a", 1)
    q2 = MessageQueue(TOPIC, "broker-b", 0)
    await send(producer, "q1", 5, q1)
    await send(producer, "q2", 5, q2)
    c = lite(cluster, "lite-pause", "p1", consume_from_where=FIRST)
    c.assign([q1, q2])
    try:
        await c.start()
        c.pause([q1])
        assert c.paused() == {q1}
        got = await poll_until(c, 5)
        assert {m.message_queue for m in got} == {q2}
        await send(producer, "q1-late", 2, q1)
        assert await c.poll(timeout=0.5) == []
        c.resume([q1])
        resumed = await poll_until(c, 7)
        assert {m.message_queue for m in resumed} == {q1}
        assert offsets_of(resumed) == list(range(7))
    finally:
        await c.shutdown()


# ---- offsets -----------------------------------------------------------------------------------


async def test_committed_reflects_commit_sync_with_explicit_offsets(
    cluster: LocalCluster, producer: Producer
) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 2)
    await send(producer, "explicit", 6, mq)
    c = lite(cluster, "lite-explicit", "x1", consume_from_where=FIRST, auto_commit=False)
    c.assign([mq])
    try:
        await c.start()
        await poll_until(c, 6)
        await c.commit_sync({mq: 2})
        assert await c.committed(mq) == 2
        await c.commit_sync()
        assert await c.committed(mq) == 6
    finally:
        await c.shutdown()


async def test_auto_commit_commits_polled_messages_within_the_interval(
    cluster: LocalCluster, producer: Producer
) -> None:
    mq = MessageQueue(TOPIC, "broker-b", 3)
    await send(producer, "auto", 5, mq)
    c = lite(
        cluster, "lite-auto", "ac1", consume_from_where=FIRST, auto_commit_interval_millis=1000
    )
    c.assign([mq])
    try:
        await c.start()
        await poll_until(c, 5)

        async def committed_all() -> bool:
            return await c.committed(mq) == 5

        await wait_until(committed_all, timeout=3, message="auto-commit within 1 s")
        await send(producer, "auto-more", 2, mq)
        await poll_until(c, 2)
    finally:
        await c.shutdown()  # auto-commit: commits the last 2 as well

    c2 = lite(cluster, "lite-auto", "ac2", consume_from_where=FIRST)
    c2.assign([mq])
    try:
        await c2.start()
        assert await c2.committed(mq) == 7
        assert await c2.poll(timeout=0.5) == []
    finally:
        await c2.shutdown()


# ---- iteration and errors ----------------------------------------------------------------------


async def test_async_iteration_yields_messages_until_shutdown(
    cluster: LocalCluster, producer: Producer
) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 0)
    bodies = await send(producer, "iter", 5, mq)
    c = lite(cluster, "lite-iter", "i1", consume_from_where=FIRST)
    c.assign([mq])
    got: list[bytes] = []
    seen: list[bytes] = []

    async def iterate_all() -> None:
        async for msg in c:
            seen.append(msg.body)

    task: asyncio.Task[None] | None = None
    try:
        await c.start()
        async with asyncio.timeout(10):
            async for msg in c:
                got.append(msg.body)
                if len(got) == len(bodies):
                    break
        assert got == bodies
        task = asyncio.create_task(iterate_all())
        more = await send(producer, "iter-more", 2, mq)
        await wait_until(lambda: seen == more, message="the iterator yields new messages")
    finally:
        await c.shutdown()
        if task is not None:
            async with asyncio.timeout(5):
                await task  # the iteration ends with the consumer, without waiting out a poll


async def test_bad_input_raises_clear_errors(cluster: LocalCluster, producer: Producer) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 1)
    other = MessageQueue(TOPIC, "broker-b", 1)
    await send(producer, "bad", 3, mq)

    assigned = lite(cluster, "lite-bad", "bad1")
    assigned.assign([mq])
    with pytest.raises(ValueError, match="mutually exclusive"):
        assigned.subscribe(TOPIC)
    subscribed = lite(cluster, "lite-bad2", "bad2")
    subscribed.subscribe(TOPIC)
    with pytest.raises(ValueError, match="mutually exclusive"):
        subscribed.assign([mq])
    with pytest.raises(ValueError, match=r"auto_commit_interval_ms out of range \[1000, "):
        lite(cluster, "lite-bad", "bad3", auto_commit_interval_millis=500)
    with pytest.raises(RuntimeError, match="not running"):
        await assigned.poll(timeout=0)
    with pytest.raises(ValueError, match="no subscription"):
        await lite(cluster, "lite-bad", "bad4").start()

    try:
        await assigned.start()
        with pytest.raises(ValueError, match="min offset = 0, max offset = 3"):
            await assigned.seek(mq, 10)
        with pytest.raises(ValueError, match="not in assigned list"):
            await assigned.seek(other, 0)
        with pytest.raises(ValueError, match="not assigned"):
            await assigned.commit_sync({other: 1})
        with pytest.raises(ValueError, match="negative"):
            await assigned.commit_sync({mq: -1})
        duplicate = lite(cluster, "lite-bad", "bad1")  # same group, same client id
        duplicate.assign([other])
        with pytest.raises(ValueError, match="has been created before"):
            await duplicate.start()
        assert assigned._impl.client is not None  # the failed start left the first one registered
        assert assigned._impl.client.consumer_table["lite-bad"] is assigned._impl
        assert len(await poll_until(assigned, 3)) == 3
    finally:
        await assigned.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        await assigned.start()


async def test_a_shutdown_unregisters_once_from_each_broker(cluster: LocalCluster) -> None:
    """One UNREGISTER_CLIENT per broker (it went twice: before the states were dropped, and
    again in the common leave)."""
    from aiorocketmq.trace import tracer

    c = lite(cluster, "lite-once", "c1")
    c.subscribe(TOPIC)
    await c.start()
    await wait_until(lambda: len(c.assignment()) == 2 * QUEUES, timeout=15, message="assigned")
    seen: list[dict[str, Any]] = []
    tracer.subscribe(seen.append)
    try:
        await c.shutdown()
    finally:
        tracer.unsubscribe(seen.append)
    brokers = sorted(r["broker"] for r in seen if r["event"] == "client_unregistered")
    assert brokers == sorted(BROKERS)
