"""Watched idle queues (ours): an idle queue is not pulled every 15 s; the broker pushes
MessagesArrived and the consumer pulls then. Against RocketMQ's long poll alone the same
messages arrive; what changes is how many pulls wait on the brokers meanwhile."""

from __future__ import annotations

import pytest

from aiorocketmq.consumer import MessageQueue, PushConsumer
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.v1 import broker_pb2
from tests.helpers import wait_until
from tests.integration.support import Received, new_consumer

TOPIC = "WatchedTopic"
BROKERS = ("broker-a", "broker-b")
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4)


def _queues() -> list[MessageQueue]:
    return [MessageQueue(TOPIC, b, q) for b in BROKERS for q in range(4)]


def _parked(c: PushConsumer, mqs: object) -> bool:
    client = c._impl.client
    assert client is not None
    service = client.pull_message_service
    return all(service.is_parked(c.consumer_group, mq) for mq in mqs)  # type: ignore[attr-defined]


def _held_pulls(cluster: LocalCluster) -> int:
    return sum(cluster.broker(b).hold.held_count() for b in BROKERS)


def _watches(cluster: LocalCluster) -> int:
    return sum(len(cluster.broker(b).client.watches) for b in BROKERS)


async def _send(cluster: LocalCluster, bodies: list[bytes]) -> None:
    async with Producer("watch-producer", cluster.namesrv_addr) as producer:
        for i, body in enumerate(bodies):
            mq = _queues()[i % 8]
            await producer.send(Message(TOPIC, body), mq)


async def test_an_idle_queue_is_watched_not_pulled_and_woken_by_a_message(
    cluster: LocalCluster,
) -> None:
    received = Received()
    c = new_consumer(cluster, "watching", TOPIC, "w1", received, broker_suspend_max_time_ms=300)
    try:
        await c.start()
        await wait_until(lambda: c.assigned_queues == set(_queues()), timeout=15)
        # Each long poll ends after 300 ms with nothing: from then on the queue is watched.
        await wait_until(lambda: _parked(c, _queues()), timeout=15, message="all parked")
        await wait_until(lambda: _held_pulls(cluster) == 0, timeout=5, message="no pull held")
        assert _watches(cluster) >= 8  # and the group's retry queues
        bodies = [b"w%02d" % i for i in range(24)]
        await _send(cluster, bodies)
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="consumed")
        assert received.duplicates() == 0
        # Idle again: watched again.
        await wait_until(lambda: _parked(c, _queues()), timeout=15, message="parked again")
    finally:
        await c.shutdown()
    await wait_until(lambda: _watches(cluster) == 0, timeout=5, message="watches ended")


async def test_without_watching_idle_queues_are_long_polled_as_rocketmq_does(
    cluster: LocalCluster,
) -> None:
    received = Received()
    c = new_consumer(
        cluster,
        "polling",
        TOPIC,
        "p1",
        received,
        broker_suspend_max_time_ms=300,
        watch_idle_queues=False,
    )
    try:
        await c.start()
        await wait_until(lambda: c.assigned_queues == set(_queues()), timeout=15)
        await wait_until(lambda: _held_pulls(cluster) >= 8, timeout=5, message="pulls held")
        assert _watches(cluster) == 0 and not any(_parked(c, [mq]) for mq in _queues())
        bodies = [b"p%02d" % i for i in range(8)]
        await _send(cluster, bodies)
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="consumed")
    finally:
        await c.shutdown()


@pytest.mark.parametrize("handoff", ["fenced", "classic"])
async def test_a_moved_queue_with_nothing_to_pull_is_watched_by_its_new_owner_from_the_start(
    cluster: LocalCluster, handoff: str
) -> None:
    """The new owner of an idle queue sends it no pull at all. Fenced, its grant says the
    broker watches it (the release committed the final offset); classic, its start-offset
    query asked the broker to watch it at its committed end
    (QueryConsumerOffsetsRequest.watch_channel_id). A first pull would have waited 15 s on
    the broker before being watched. The messages sent then reach it all the same."""
    received = Received()
    group, tag = f"{handoff}-watch", handoff[0].encode()
    a = new_consumer(cluster, group, TOPIC, "a", received, handoff=handoff)
    b = new_consumer(cluster, group, TOPIC, "b", received, handoff=handoff)
    try:
        await a.start()
        await wait_until(lambda: a.assigned_queues == set(_queues()), timeout=15)
        first = [tag + b"f%02d" % i for i in range(16)]
        await _send(cluster, first)
        await wait_until(lambda: not received.missing(first), timeout=15, message="consumed")
        client = a._impl.client
        assert client is not None
        await client.persist_all_consumer_offset()  # every queue committed at its end
        await b.start()
        await wait_until(
            lambda: len(b.assigned_queues) == 4 and len(a.assigned_queues) == 4,
            timeout=15,
            message="split",
        )
        await wait_until(lambda: _parked(b, b.assigned_queues), timeout=5, message="b parked")
        second = [tag + b"s%02d" % i for i in range(16)]
        await _send(cluster, second)
        await wait_until(lambda: not received.missing(second), timeout=15, message="consumed")
        assert {received.by_body[body][0] for body in second} == {"a", "b"}
        if handoff == "fenced":
            assert received.duplicates() == 0
    finally:
        await b.shutdown()
        await a.shutdown()


async def test_watches_are_renewed_in_one_request_per_broker_not_a_pull_per_queue(
    cluster: LocalCluster,
) -> None:
    """Ours: WatchQueues renews a consumer's watched queues on a broker together; no queue is
    pulled for its renewal, and a message after several renewals still wakes its queue."""
    received = Received()
    c = new_consumer(
        cluster,
        "renewing",
        TOPIC,
        "r1",
        received,
        broker_suspend_max_time_ms=300,
        watch_renew_ms=200,
    )
    impl = c._impl
    pulls: list[MessageQueue] = []
    renewals: list[tuple[str, int]] = []
    pull, renew = impl.pull_message, impl.renew_watches

    async def counted_pull(request: PullRequest) -> None:
        pulls.append(request.message_queue)
        await pull(request)

    async def counted_renew(broker_name: str, requests: list[PullRequest]) -> set[MessageQueue]:
        watched = await renew(broker_name, requests)
        renewals.append((broker_name, len(watched)))
        return watched

    impl.pull_message = counted_pull  # type: ignore[method-assign]
    impl.renew_watches = counted_renew  # type: ignore[method-assign]
    try:
        await c.start()
        await wait_until(lambda: c.assigned_queues == set(_queues()), timeout=15)
        await wait_until(lambda: _parked(c, _queues()), timeout=15, message="all parked")
        pulled, renewed = len(pulls), len(renewals)
        await wait_until(lambda: len(renewals) >= renewed + 6, timeout=10, message="renewed")
        assert len(pulls) == pulled  # renewed, not pulled
        assert {b for b, _ in renewals[renewed:]} >= set(BROKERS)
        assert all(n >= 4 for b, n in renewals[renewed:] if b in BROKERS)  # its 4 queues at once
        assert _parked(c, _queues())
        bodies = [b"r%02d" % i for i in range(16)]
        await _send(cluster, bodies)
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="consumed")

        # What the broker answers: none for another client's channel; a bad queue is refused.
        client = impl.client
        assert client is not None
        channel_id = client.open_channel_id("broker-a")
        request = broker_pb2.WatchQueuesRequest(
            consumer_group="renewing",
            client_id="someone-else",
            channel_id=channel_id,
            queues=[broker_pb2.QueueWatch(topic=TOPIC, queue_id=0, offset=0)],
        )
        answer = await client.invoke_broker("broker-a", "WatchQueues", request)
        assert list(answer.watching) == [False]
        request.client_id = client.client_id
        broker = cluster.broker("broker-a").client
        request.queues[0].offset = broker.store.get_max_offset(TOPIC, 0)
        answer = await client.invoke_broker("broker-a", "WatchQueues", request)
        assert list(answer.watching) == [True]  # nothing after it: watched
        request.queues[0].epoch = 12345  # not a grant of ours
        answer = await client.invoke_broker("broker-a", "WatchQueues", request)
        assert list(answer.watching) == [False]
        request.queues[0].epoch = 0
        request.consumer_group = "another-group"  # our channel is no member of it
        answer = await client.invoke_broker("broker-a", "WatchQueues", request)
        assert list(answer.watching) == [False]
        request.consumer_group = "renewing"
        # An administrator's reset waits for the queue's next pull: pulled, not watched, so
        # that the pull moves it (a renewal would otherwise hide a reset whose push was lost).
        broker.offsets.reset_offset("renewing", TOPIC, 0, 0, pending=True)
        answer = await client.invoke_broker("broker-a", "WatchQueues", request)
        assert list(answer.watching) == [False]
        request.queues[0].queue_id = 99
        with pytest.raises(MQError, match=r"queues\[0\].queue_id 99 is out of range"):
            await client.invoke_broker("broker-a", "WatchQueues", request)
    finally:
        await c.shutdown()
