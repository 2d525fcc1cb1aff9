"""Consumer groups on the broker, spoken by plain clients of the protocol over real gRPC.

Each client is a ``ProtocolClient``: raw stubs, its own connection, one OpenChannel stream.
What is checked is what the broker pushes on those streams (NOTIFY_CONSUMER_IDS_CHANGED) and
what GetConsumerListByGroup answers, on join, stream cut, lost connection, expiry and unregister,
with the switches that silence notifications, and the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ locks.

"Nothing was pushed" is checked with a barrier, never by waiting for a quiet period: the client
makes the broker push a QueueReleased event to the group's channels (acquire and release a
queue); events of one channel arrive in order, so when the next event read is that barrier, no
notification was pushed before it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import wait_until
from tests.integration.protocol_client import ProtocolClient, heartbeat_request, mq, response_code

TOPIC = "GroupTopic"
G = "g"
# A queue used only for barriers (acquired and released at once).
BARRIER_QUEUE = mq(TOPIC, 3)


@asynccontextmanager
async def one_broker(tmp_path: Path, **overrides: Any) -> AsyncIterator[LocalCluster]:
    # RocketMQ's behaviour, checked here: one notification per change (our default holds the
    # changes of a burst for 100 ms; tests/unit/test_rebalance_members.py checks that).
    overrides = {
        "notify_consumer_ids_changed_min_interval_ms": 0,
        "notify_consumer_ids_changed_ms_per_channel": 0,
        **overrides,
    }
    async with LocalCluster(tmp_path, brokers=1, broker_overrides=overrides) as cluster:
        await cluster.create_topic(TOPIC, 4)
        yield cluster


class Clients:
    """Opens clients on one broker and closes every one of them at the end."""

    def __init__(self, cluster: LocalCluster, stack: AsyncExitStack) -> None:
        self.addr = cluster.broker("broker-a").address
        self.stack = stack

    async def new(self, name: str) -> ProtocolClient:
        """A client with its connection, channel not opened yet."""
        return await self.stack.enter_async_context(ProtocolClient(self.addr, f"127.0.0.1@{name}"))

    async def join(self, name: str, group: str = G) -> ProtocolClient:
        """A client that opened its channel and heartbeated into ``group``."""
        client = await self.new(name)
        await client.open()
        await client.heartbeat(group, [TOPIC])
        return client


@asynccontextmanager
async def clients(cluster: LocalCluster) -> AsyncIterator[Clients]:
    async with AsyncExitStack() as stack:
        yield Clients(cluster, stack)


@asynccontextmanager
async def heartbeating(
    client: ProtocolClient, group: str, interval: float = 0.1
) -> AsyncIterator[None]:
    """Keep ``client`` alive in ``group`` with periodic heartbeats (a client's timer)."""

    async def loop() -> None:
        while True:
            await client.heartbeat(group, [TOPIC])
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop(), name=f"heartbeat-{client.client_id}")
    try:
        yield
        if task.done():
            task.result()  # a failed heartbeat fails the test
    finally:
        task.cancel()
        await asyncio.wait([task])


async def ids_are(client: ProtocolClient, group: str, expected: list[str]) -> bool:
    return await client.consumer_ids(group) == sorted(expected)


# ---- join -------------------------------------------------------------------------------------
async def test_second_client_joining_notifies_both_and_is_listed(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        await c1.expect_notify(G)  # its own join is a change of the group too
        assert await c1.consumer_ids(G) == [c1.client_id]

        c2 = await cs.join("c2")
        await c1.expect_notify(G)
        await c2.expect_notify(G)
        assert await c1.consumer_ids(G) == sorted([c1.client_id, c2.client_id])

        # A heartbeat that changes nothing (a refresh) notifies nobody.
        await c1.heartbeat(G, [TOPIC])
        await c2.heartbeat(G, [TOPIC])
        await c1.push_queue_released(G, BARRIER_QUEUE, to=[c1, c2])
        await c1.expect_queue_released(G)
        await c2.expect_queue_released(G)


async def test_a_member_asking_with_the_version_it_holds_is_told_unchanged(tmp_path: Path) -> None:
    """Ours: the list's version is the latest notification's; asked with it, the broker says
    the members are unchanged instead of sending them; asked with another, it sends them."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        await c1.expect_notify(G)
        c2 = await cs.join("c2")
        await c2.expect_notify(G)
        notified = await c1.expect_notify(G)
        assert notified.version
        both = sorted([c1.client_id, c2.client_id])
        answer = await c1.consumer_list(G, notified.version)
        assert answer.unchanged and answer.version == notified.version
        assert list(answer.consumer_id_list) == []
        for known in (0, notified.version - 1, notified.version + 1000):
            answer = await c1.consumer_list(G, known)
            assert not answer.unchanged and answer.version == notified.version
            assert sorted(answer.consumer_id_list) == both
        c3 = await cs.join("c3")
        newer = await c1.expect_notify(G)
        await c2.expect_notify(G)
        await c3.expect_notify(G)
        answer = await c2.consumer_list(G, notified.version)  # held before the join
        assert not answer.unchanged and answer.version == newer.version > notified.version
        assert sorted(answer.consumer_id_list) == sorted([*both, c3.client_id])
        assert (await c3.consumer_list(G, newer.version)).unchanged


async def test_a_member_notified_elsewhere_is_listed_but_not_told(tmp_path: Path) -> None:
    """``notified_elsewhere``: the channel is a member (in the list, in the others'
    notifications) and is sent no notification; a heartbeat that clears it is answered with
    the group's members at once, and the changes after it are told again."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        await c1.expect_notify(G)
        quiet = await cs.new("quiet")
        await quiet.open()
        await quiet.heartbeat(G, [TOPIC], notified_elsewhere=True)
        await c1.expect_notify(G)  # the quiet member's join is told to the others
        assert await c1.consumer_ids(G) == sorted([c1.client_id, quiet.client_id])

        c2 = await cs.join("c2")
        await c1.expect_notify(G)
        await c2.expect_notify(G)
        await c1.push_queue_released(G, BARRIER_QUEUE, to=[quiet])
        await quiet.expect_queue_released(G)  # its first event: no notification before it

        await quiet.heartbeat(G, [TOPIC])  # this broker is to notify it again
        event = await quiet.next_event()
        notify = event.notify_consumer_ids_changed
        assert notify.consumer_group == G
        assert sorted(notify.consumer_id_list) == sorted(
            [c1.client_id, c2.client_id, quiet.client_id]
        )
        await c1.push_queue_released(G, BARRIER_QUEUE, to=[c1, c2])  # not a change: not told
        await c1.expect_queue_released(G)
        await c2.expect_queue_released(G)

        await c2.unregister(G)
        await c1.expect_notify(G)
        await quiet.expect_notify(G)


async def test_subscribing_another_topic_notifies_the_group(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        await cluster.create_topic("OtherTopic", 2)
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        await c1.expect_notify(G)
        await c1.expect_notify(G)
        await c2.expect_notify(G)

        await c2.heartbeat(G, [TOPIC, "OtherTopic"])  # a topic added to the group
        await c1.expect_notify(G)
        await c2.expect_notify(G)


# ---- leave: stream cut, lost connection, unregister -------------------------------------------
async def test_cut_stream_notifies_the_rest_at_once_and_leaves_the_list(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        c3 = await cs.join("c3")
        for c in (c1, c1, c1, c2, c2, c3):
            await c.expect_notify(G)

        started = time.monotonic()
        c3.cut()
        await c1.expect_notify(G, timeout=2.0)
        await c2.expect_notify(G, timeout=2.0)
        elapsed = time.monotonic() - started
        # The notification and the removal are one step on the broker.
        assert await c1.consumer_ids(G) == sorted([c1.client_id, c2.client_id])
        assert elapsed < 2.0
        await asyncio.wait_for(c3.ended.wait(), 2.0)
        assert await c3.stream_code() == grpc.StatusCode.CANCELLED

        await c1.push_queue_released(G, BARRIER_QUEUE, to=[c1, c2])
        await c1.expect_queue_released(G)
        await c2.expect_queue_released(G)


async def test_lost_connection_notifies_the_rest(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        for c in (c1, c1, c2):
            await c.expect_notify(G)

        await c2.grpc_channel.close()  # the whole connection goes, not just the stream
        await c1.expect_notify(G, timeout=3.0)
        assert await c1.consumer_ids(G) == [c1.client_id]


async def test_unregister_notifies_the_remaining_members(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        c3 = await cs.join("c3")
        for c in (c1, c1, c1, c2, c2, c3):
            await c.expect_notify(G)

        await c3.unregister(G)
        await c1.expect_notify(G)
        await c2.expect_notify(G)
        assert await c1.consumer_ids(G) == sorted([c1.client_id, c2.client_id])

        # Its channel is still open but in no group: closing it changes nothing for the group.
        c3.cut()
        await asyncio.wait_for(c3.ended.wait(), 2.0)
        await c1.push_queue_released(G, BARRIER_QUEUE, to=[c1, c2])
        await c1.expect_queue_released(G)
        await c2.expect_queue_released(G)

        # RocketMQ notifies on every UNREGISTER_CLIENT naming the group, even from a client
        # that is not in it.
        stranger = await cs.new("stranger")
        await stranger.open()
        await stranger.unregister(G)
        await c1.expect_notify(G)
        await c2.expect_notify(G)
        assert await c1.consumer_ids(G) == sorted([c1.client_id, c2.client_id])

        # The last member unregistering removes the group.
        await c2.unregister(G)
        await c1.unregister(G)
        assert await c1.consumer_ids(G) == []


async def test_broker_restart_ends_every_channel_and_forgets_the_groups(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        await c1.expect_notify(G)
        old_channel_id = c1.channel_id

        await cluster.restart_broker("broker-a")  # same port, same store
        await asyncio.wait_for(c1.ended.wait(), 5.0)
        assert await c1.stream_code() == grpc.StatusCode.OK
        assert await c1.consumer_ids(G) == []  # groups live in memory, as in RocketMQ
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await c1.heartbeat(G, [TOPIC])
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert old_channel_id in (e.value.details() or "")

        # A new channel and a heartbeat bring the member back.
        again = await cs.join("c1")
        assert again.channel_id != old_channel_id
        await again.expect_notify(G)
        assert await again.consumer_ids(G) == [again.client_id]


async def test_broadcasting_groups_are_never_notified(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        members = []
        for name in ("b1", "b2", "b3"):
            member = await cs.new(name)
            await member.open()
            await member.heartbeat("bc", [TOPIC], message_model=common_pb2.BROADCASTING)
            members.append(member)
        b1, b2, b3 = members
        assert await b1.consumer_ids("bc") == sorted(m.client_id for m in members)
        await b2.unregister("bc")
        b3.cut()
        await wait_until(
            lambda: ids_are(b1, "bc", [b1.client_id]), timeout=3, message="b3 left the group"
        )
        await b1.push_queue_released("bc", BARRIER_QUEUE)
        await b1.expect_queue_released("bc")


# ---- expiry -----------------------------------------------------------------------------------
@pytest.mark.parametrize("notify_on_expiry", [False, True], ids=["rocketmq", "notify-on-expiry"])
async def test_silent_client_expires_from_the_group(tmp_path: Path, notify_on_expiry: bool) -> None:
    overrides = {
        "channel_expired_timeout_ms": 600,
        "client_channel_scan_interval_ms": 100,
        "notify_consumer_ids_changed_on_channel_expiry": notify_on_expiry,
    }
    async with one_broker(tmp_path, **overrides) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        async with heartbeating(c1, G):
            silent_since = time.monotonic()  # before its one heartbeat: the bound below is exact
            c2 = await cs.join("c2")  # heartbeats once, then stays silent with its stream open
            for c in (c1, c1, c2):
                await c.expect_notify(G)

            # The broker closes the expired channel: the silent client's stream ends.
            await asyncio.wait_for(c2.ended.wait(), 5.0)
            assert time.monotonic() - silent_since >= 0.6
            assert await c2.stream_code() == grpc.StatusCode.OK
            assert await c1.consumer_ids(G) == [c1.client_id]
            if notify_on_expiry:
                await c1.expect_notify(G)
            # RocketMQ: survivors are not told; they notice at their next periodic rebalance.
            await c1.push_queue_released(G, BARRIER_QUEUE)
            await c1.expect_queue_released(G)

            # The expired channel is gone: a heartbeat on it must open a new channel first.
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await c2.heartbeat(G, [TOPIC])
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


# ---- the switches -----------------------------------------------------------------------------
async def test_broker_level_switch_off_silences_every_change(tmp_path: Path) -> None:
    async with (
        one_broker(tmp_path, notify_consumer_ids_changed_enable=False) as cluster,
        clients(cluster) as cs,
    ):
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        c3 = await cs.join("c3")
        assert await c1.consumer_ids(G) == sorted([c1.client_id, c2.client_id, c3.client_id])
        await c2.unregister(G)
        c3.cut()
        await wait_until(
            lambda: ids_are(c1, G, [c1.client_id]), timeout=3, message="c3 left the group"
        )
        # Join, unregister and channel close: none was pushed.
        await c1.push_queue_released(G, BARRIER_QUEUE)
        await c1.expect_queue_released(G)


async def test_group_level_switch_off_silences_join_and_unregister_not_close(
    tmp_path: Path,
) -> None:
    async with (
        one_broker(tmp_path, groups_with_notify_disabled=["quiet"]) as cluster,
        clients(cluster) as cs,
    ):
        loud = await cs.join("loud", group="loud")
        await loud.expect_notify("loud")  # other groups keep their notifications

        c1 = await cs.join("c1", group="quiet")
        c2 = await cs.join("c2", group="quiet")
        c3 = await cs.join("c3", group="quiet")
        await c1.push_queue_released("quiet", BARRIER_QUEUE, to=[c1, c2, c3])
        for c in (c1, c2, c3):
            await c.expect_queue_released("quiet")  # no notification on join

        await c3.unregister("quiet")
        await c1.push_queue_released("quiet", BARRIER_QUEUE, to=[c1, c2])
        for c in (c1, c2):
            await c.expect_queue_released("quiet")  # none on unregister either
        assert await c1.consumer_ids("quiet") == sorted([c1.client_id, c2.client_id])

        # RocketMQ does not consult the group-level flag on the channel-close path.
        c2.cut()
        await c1.expect_notify("quiet", timeout=2.0)
        assert await c1.consumer_ids("quiet") == [c1.client_id]


async def test_the_heartbeat_names_the_groups_this_broker_does_not_notify(
    tmp_path: Path,
) -> None:
    """``HeartbeatResponse.silent_groups``: a client notified by one broker picks one that
    notifies. Broadcasting groups are never notified by any broker: not named."""
    async with (
        one_broker(tmp_path / "group", groups_with_notify_disabled=["quiet"]) as cluster,
        clients(cluster) as cs,
    ):
        c = await cs.join("c", group="loud")
        answer = await c.heartbeat_groups({"loud": [TOPIC], "quiet": [TOPIC]})
        assert list(answer.silent_groups) == ["quiet"]
        answer = await c.heartbeat("quiet", [TOPIC], message_model=common_pb2.BROADCASTING)
        assert list(answer.silent_groups) == []
    async with (
        one_broker(tmp_path / "broker", notify_consumer_ids_changed_enable=False) as cluster,
        clients(cluster) as cs,
    ):
        c = await cs.join("c", group="loud")
        answer = await c.heartbeat_groups({"loud": [TOPIC], "other": [TOPIC]})
        assert sorted(answer.silent_groups) == ["loud", "other"]


async def test_groups_never_hear_about_each_other(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        a1 = await cs.join("a1", group="A")
        await a1.expect_notify("A")

        b1 = await cs.join("b1", group="B")
        b2 = await cs.join("b2", group="B")
        b2.cut()
        for _ in range(3):  # b1's join, b2's join, b2's leave
            await b1.expect_notify("B")
        await a1.push_queue_released("A", BARRIER_QUEUE)
        await a1.expect_queue_released("A")

        # A client in both groups: each group hears its own change, once, about itself.
        both = await cs.new("both")
        await both.open()
        await both.heartbeat_groups({"A": [TOPIC], "B": [TOPIC]})
        await a1.expect_notify("A")
        await b1.expect_notify("B")
        events = [await both.next_event(), await both.next_event()]
        assert sorted(e.notify_consumer_ids_changed.consumer_group for e in events) == ["A", "B"]
        both.cut()
        await a1.expect_notify("A", timeout=2.0)
        await b1.expect_notify("B", timeout=2.0)
        await a1.push_queue_released("A", BARRIER_QUEUE)
        await a1.expect_queue_released("A")
        await b1.push_queue_released("B", BARRIER_QUEUE)
        await b1.expect_queue_released("B")
        assert await a1.consumer_ids("A") == [a1.client_id]
        assert await b1.consumer_ids("B") == [b1.client_id]


# ---- locks ------------------------------------------------------------------------------------
async def test_lock_batch_mq_owner_expiry_and_unlock(tmp_path: Path) -> None:
    max_live_ms = 500
    async with (
        one_broker(tmp_path, rebalance_lock_max_live_time_ms=max_live_ms) as cluster,
        clients(cluster) as cs,
    ):
        c1 = await cs.new("c1")
        c2 = await cs.new("c2")
        q01 = [mq(TOPIC, 0), mq(TOPIC, 1)]
        both = [(TOPIC, 0), (TOPIC, 1)]

        assert await c1.lock(G, q01) == both
        assert await c2.lock(G, q01) == []
        assert await c2.lock(G, [mq(TOPIC, 1), mq(TOPIC, 2)]) == [(TOPIC, 2)]  # only the free
        assert await c2.lock("other-group", q01) == both  # locks are per group

        relocked_at = time.monotonic()
        assert await c1.lock(G, q01) == both  # the owner re-locks (and refreshes)
        await c1.unlock(G, [mq(TOPIC, 2)])  # not the owner of queue 2: nothing happens
        assert await c1.lock(G, [mq(TOPIC, 2)]) == []

        async def c2_took_them() -> bool:
            return await c2.lock(G, q01) == both

        await wait_until(c2_took_them, timeout=5, interval=0.05, message="c1's locks expired")
        assert time.monotonic() - relocked_at >= max_live_ms / 1000
        assert await c1.lock(G, q01) == []

        await c2.unlock(G, q01)  # the owner unlocks: free at once
        assert await c1.lock(G, q01) == both
        assert await c2.lock(G, q01) == []


async def test_lock_of_a_topic_that_does_not_exist_is_not_found(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.new("c1")
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await c1.lock(G, [mq("NoSuchTopic", 0)])
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        assert "NoSuchTopic" in (e.value.details() or "")
        assert response_code(e.value) == common_pb2.TOPIC_NOT_EXIST
        assert await c1.lock(G, [mq(TOPIC, 0)]) == [(TOPIC, 0)]  # still serving


# ---- bad input --------------------------------------------------------------------------------
async def test_bad_heartbeats_are_refused_by_name_and_the_broker_keeps_serving(
    tmp_path: Path,
) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.new("c1")
        await c1.open()

        async def refused(request: broker_pb2.HeartbeatRequest) -> grpc.aio.AioRpcError:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await c1.stub.Heartbeat(request, timeout=3)
            return e.value

        e = await refused(heartbeat_request(c1.channel_id, c1.client_id, {"bad group!": [TOPIC]}))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "bad group!" in (e.details() or "")
        assert response_code(e) == common_pb2.INVALID_PARAMETER

        e = await refused(heartbeat_request(c1.channel_id, c1.client_id, {G: ["bad/topic"]}))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "bad/topic" in (e.details() or "")
        assert "subscription_data_set" in (e.details() or "")
        assert await c1.consumer_ids(G) == []  # a refused heartbeat registers nothing

        e = await refused(heartbeat_request("no-such-channel", c1.client_id, {G: [TOPIC]}))
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "no-such-channel" in (e.details() or "")
        assert response_code(e) == common_pb2.CHANNEL_NOT_FOUND

        with pytest.raises(grpc.aio.AioRpcError) as u:
            await c1.stub.UnregisterClient(
                broker_pb2.UnregisterClientRequest(
                    channel_id="no-such-channel", client_id=c1.client_id, consumer_group=G
                ),
                timeout=3,
            )
        assert u.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        # Still serving: a valid heartbeat registers and notifies.
        await c1.heartbeat(G, [TOPIC])
        await c1.expect_notify(G)
        assert await c1.consumer_ids(G) == [c1.client_id]


async def test_a_client_cannot_act_on_another_clients_channel(tmp_path: Path) -> None:
    """A channel id is not a password: requests must come from the channel's own client id."""
    from aiorocketmq.protocol.broker_connections import BrokerConnections

    async with LocalCluster(tmp_path, brokers=1) as cluster:
        conns = BrokerConnections()
        stub = conns.stub(cluster.broker_list[0].address)
        call = stub.OpenChannel(broker_pb2.OpenChannelRequest(client_id="c1"))
        try:
            opened = await asyncio.wait_for(call.read(), 5)
            channel_id = opened.opened.channel_id
            hb = broker_pb2.HeartbeatRequest(
                channel_id=channel_id, heartbeat=common_pb2.HeartbeatData(client_id="c2")
            )
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await stub.Heartbeat(hb, timeout=3)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "belongs to client" in (
                e.value.details() or ""
            )
            unregister = broker_pb2.UnregisterClientRequest(
                channel_id=channel_id, client_id="c2", consumer_group="g"
            )
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await stub.UnregisterClient(unregister, timeout=3)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            call.cancel()
            await conns.close()


async def test_a_released_queue_is_told_only_to_the_channels_denied_it(tmp_path: Path) -> None:
    """QueueReleased goes to the consumers that asked for the queue and were denied, not to the
    whole group (at 1,000 members a push to all made every release a thousand writes)."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c1 = await cs.join("c1")
        c2 = await cs.join("c2")
        for c in (c1, c1, c2):
            await c.expect_notify(G)
        other = mq(TOPIC, 2)
        await c1.push_queue_released(G, other, to=[c2])
        event = await c2.next_event()
        assert event.queue_released.message_queue == other
        await c1.push_queue_released(G, BARRIER_QUEUE)  # to c1 alone
        event = await c1.next_event()  # c1 was denied nothing before: not told of ``other``
        assert event.queue_released.message_queue == BARRIER_QUEUE


async def test_an_acquire_that_waits_is_granted_the_queue_its_holder_lets_go(
    tmp_path: Path,
) -> None:
    """A waiting acquire is answered with the grant the moment the holder releases (with the
    final offset committed), not denied; the channels denied it earlier now wait for the new
    holder, untold (told, they would ask again and be denied again)."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        holder = await cs.join("holder")
        waiter = await cs.join("waiter")
        denied = await cs.join("denied")
        queue = mq(TOPIC, 1)
        held = await holder.acquire(G, [queue])
        (grant,) = held.granted
        assert [d.message_queue for d in (await denied.acquire(G, [queue])).denied] == [queue]
        asked = time.monotonic()
        waiting = asyncio.ensure_future(waiter.acquire(G, [queue], wait_ms=1_500))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        released = await holder.release(G, queue, grant.epoch, final_offset=7)
        assert list(released.released) == [queue]
        answer = await waiting
        assert time.monotonic() - asked < 1.5
        assert [g.message_queue for g in answer.granted] == [queue] and not answer.denied
        assert answer.granted[0].epoch == grant.epoch + 1
        assert answer.granted[0].committed_offset == 7
        await asyncio.sleep(0.1)
        assert not [e for e in denied.pending() if e.WhichOneof("event") == "queue_released"]
        assert (await denied.acquire(G, [queue])).denied[0].holder_client_id == waiter.client_id


async def test_a_release_riding_with_an_acquire_is_done_first_and_hands_its_queue_on(
    tmp_path: Path,
) -> None:
    """A pass's release and acquire on one broker, one request: the release is done at once
    (its final offset committed, its queue handed to the acquire waiting for it) while the
    acquire itself waits; the answer names both. A riding release naming a bad queue fails the
    whole request, before anything is done."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        mover, other, waiter = await cs.join("mover"), await cs.join("other"), await cs.join("w")
        q1, q2 = mq(TOPIC, 1), mq(TOPIC, 2)
        (given,) = (await mover.acquire(G, [q1])).granted
        (held,) = (await other.acquire(G, [q2])).granted
        waiting = asyncio.ensure_future(waiter.acquire(G, [q1], wait_ms=1_500))
        await asyncio.sleep(0.2)
        release = broker_pb2.QueueRelease(message_queue=q1, epoch=given.epoch, final_offset=5)
        bad = broker_pb2.QueueRelease(message_queue=mq(TOPIC, 9_999), epoch=1)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await mover.acquire(G, [q2], releases=[release, bad])
        assert "queue_id 9999" in (failed.value.details() or "")
        assert not waiting.done()  # the good release was not done either
        moving = asyncio.ensure_future(mover.acquire(G, [q2], wait_ms=1_500, releases=[release]))
        answer = await asyncio.wait_for(waiting, 1.0)  # handed on while the mover still waits
        assert [(g.message_queue, g.committed_offset) for g in answer.granted] == [(q1, 5)]
        assert not moving.done()
        await other.release(G, q2, held.epoch)
        moved = await asyncio.wait_for(moving, 1.0)
        assert list(moved.released) == [q1] and [g.message_queue for g in moved.granted] == [q2]


async def test_a_batch_of_acquires_is_done_in_order_and_each_answered_when_done(
    tmp_path: Path,
) -> None:
    """AcquireQueuesBatch: the acquires of several clients, done in order (a release riding
    in a later one hands its queue to an earlier one waiting for it, within the batch), each
    answered in the stream once done; one that fails gets its own response code and message
    and the others go on. Past 1,024 acquires the call is refused."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        mover, other, waiter = await cs.join("mover"), await cs.join("other"), await cs.join("w")
        q1, q2 = mq(TOPIC, 1), mq(TOPIC, 2)
        (given,) = (await mover.acquire(G, [q1])).granted
        (held,) = (await other.acquire(G, [q2])).granted

        def asking(client: ProtocolClient, queue: common_pb2.MessageQueue, **more: Any) -> Any:
            return broker_pb2.AcquireQueuesRequest(
                consumer_group=G,
                client_id=client.client_id,
                channel_id=client.channel_id,
                mq_set=[queue],
                wait_millis=1_500,
                **more,
            )

        release = broker_pb2.QueueRelease(message_queue=q1, epoch=given.epoch, final_offset=5)
        stranger = asking(waiter, q2)
        stranger.channel_id = other.channel_id  # not the waiter's channel
        batch = broker_pb2.AcquireQueuesBatchRequest(
            acquires=[asking(waiter, q1), asking(mover, q2, releases=[release]), stranger]
        )
        call = waiter.stub.AcquireQueuesBatch(batch, timeout=5)
        answers: dict[int, broker_pb2.AcquireAnswer] = {}
        while len(answers) < 2:  # not after the mover's 1.5 s wait
            answers.update((a.index, a) for a in (await asyncio.wait_for(call.read(), 1.0)).answers)
        assert set(answers) == {0, 2}
        assert answers[0].response_code == 0
        assert [(g.message_queue, g.committed_offset) for g in answers[0].response.granted] == [
            (q1, 5)
        ]
        assert answers[2].response_code != 0 and not answers[2].HasField("response")
        assert other.channel_id in answers[2].error
        await other.release(G, q2, held.epoch)
        second = await asyncio.wait_for(call.read(), 1.0)
        (moved,) = second.answers
        assert moved.index == 1
        assert list(moved.response.released) == [q1]
        assert [g.message_queue for g in moved.response.granted] == [q2]
        assert await call.read() is grpc.aio.EOF

        too_many = broker_pb2.AcquireQueuesBatchRequest(acquires=[asking(waiter, q1)] * 1_025)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in waiter.stub.AcquireQueuesBatch(too_many, timeout=5):
                pass
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "1025" in (refused.value.details() or "")


async def test_releases_riding_with_the_unregister_commit_their_final_offsets_first(
    tmp_path: Path,
) -> None:
    """A fenced consumer's leave: its grants released with their final offsets in the
    UNREGISTER_CLIENT itself, done before it leaves the group (the next owner starts at the
    final offset); a release with a stale epoch is not done (the answer leaves it out), and the
    unregister still lets that grant go, as without releases. Releases without a consumer
    group are refused."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        leaving, waiter = await cs.join("leaving"), await cs.join("w")
        q1, q2 = mq(TOPIC, 1), mq(TOPIC, 2)
        g1, g2 = (await leaving.acquire(G, [q1, q2])).granted
        releases = [
            broker_pb2.QueueRelease(message_queue=q1, epoch=g1.epoch, final_offset=11),
            broker_pb2.QueueRelease(message_queue=q2, epoch=g2.epoch + 5, final_offset=22),
        ]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await leaving.stub.UnregisterClient(
                broker_pb2.UnregisterClientRequest(
                    channel_id=leaving.channel_id, client_id=leaving.client_id, releases=releases
                ),
                timeout=3,
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "consumer_group" in (refused.value.details() or "")
        waiting = asyncio.ensure_future(waiter.acquire(G, [q1, q2], wait_ms=1_500))
        await asyncio.sleep(0.2)
        answer = await leaving.stub.UnregisterClient(
            broker_pb2.UnregisterClientRequest(
                channel_id=leaving.channel_id,
                client_id=leaving.client_id,
                consumer_group=G,
                releases=releases,
            ),
            timeout=3,
        )
        assert list(answer.released) == [q1]
        granted = (await asyncio.wait_for(waiting, 1.2)).granted
        assert sorted((g.message_queue.queue_id, g.committed_offset) for g in granted) == [
            (1, 11),
            (2, -1),  # let go by the unregister, with no final offset committed
        ]
        assert await waiter.consumer_ids(G) == [waiter.client_id]


async def test_a_holder_that_goes_away_hands_its_queue_to_the_waiting_acquire(
    tmp_path: Path,
) -> None:
    """Its stream cut, or its consumer unregistered from the group (a graceful leave): either
    way its grants are let go at once, to the acquire waiting for them."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        cut, leaving, waiter = await cs.join("cut"), await cs.join("leaving"), await cs.join("w")
        q1, q2 = mq(TOPIC, 1), mq(TOPIC, 2)
        assert (await cut.acquire(G, [q1])).granted and (await leaving.acquire(G, [q2])).granted
        waiting = asyncio.ensure_future(waiter.acquire(G, [q1], wait_ms=1_500))
        await asyncio.sleep(0.2)
        cut.cut()
        answer = await asyncio.wait_for(waiting, 1.2)
        assert [g.message_queue for g in answer.granted] == [q1]
        waiting = asyncio.ensure_future(waiter.acquire(G, [q2], wait_ms=1_500))
        await asyncio.sleep(0.2)
        await leaving.stub.UnregisterClient(
            broker_pb2.UnregisterClientRequest(
                channel_id=leaving.channel_id, client_id=leaving.client_id, consumer_group=G
            ),
            timeout=3,
        )
        answer = await asyncio.wait_for(waiting, 1.2)
        assert [g.message_queue for g in answer.granted] == [q2]


async def test_an_acquire_waiting_on_a_replaced_channel_is_granted_to_the_new_one(
    tmp_path: Path,
) -> None:
    """A client reopens its channel while an acquire of its old one waits (the broker has not
    seen the old one end): the queue let go is granted to the new channel, so the client
    asking again there holds it with the same epoch, and the old channel's late close takes
    nothing away."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        holder, old = await cs.join("holder"), await cs.join("w")
        queue = mq(TOPIC, 1)
        (given,) = (await holder.acquire(G, [queue])).granted
        waiting = asyncio.ensure_future(old.acquire(G, [queue], wait_ms=1_500))
        await asyncio.sleep(0.2)
        new = await cs.new("w")  # the same client id, its own connection
        await new.open(previous_channel_id=old.channel_id)
        await holder.release(G, queue, given.epoch)
        (granted,) = (await asyncio.wait_for(waiting, 1.2)).granted
        assert granted.epoch == given.epoch + 1
        (again,) = (await new.acquire(G, [queue])).granted  # not denied: it is the new channel's
        assert again.epoch == granted.epoch
        old.cut()
        await old.ended.wait()
        await asyncio.sleep(0.2)  # the broker runs the old channel's close
        (denied,) = (await holder.acquire(G, [queue])).denied
        assert denied.holder_client_id == new.client_id and denied.epoch == granted.epoch


async def test_an_acquire_whose_wait_runs_out_is_denied(tmp_path: Path) -> None:
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        holder = await cs.join("holder")
        waiter = await cs.join("waiter")
        queue, free = mq(TOPIC, 1), mq(TOPIC, 2)
        await holder.acquire(G, [queue])
        asked = time.monotonic()
        answer = await waiter.acquire(G, [queue, free], wait_ms=300)
        assert time.monotonic() - asked >= 0.29
        assert [g.message_queue for g in answer.granted] == [free]
        assert [d.message_queue for d in answer.denied] == [queue]
        assert answer.denied[0].holder_client_id == holder.client_id


async def test_a_watched_grant_wakes_once_and_ends_with_its_release_or_its_consumer(
    tmp_path: Path,
) -> None:
    """An idle queue granted with ``watch`` is watched only at its end: MessagesArrived names
    the new max offset once; a release, or the consumer's unregistration, ends the watch."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c = await cs.join("c")
        watches = cluster.broker("broker-a").client.watches
        queue, beyond = mq(TOPIC, 1), mq(TOPIC, 2)
        for q, final in ((queue, 0), (beyond, 5)):  # commit 0 (the end) and 5 (past the end)
            (g,) = (await c.acquire(G, [q])).granted
            assert list((await c.release(G, q, g.epoch, final_offset=final)).released) == [q]
        answer = await c.acquire(G, [queue, beyond], watch=True)
        watching = {g.message_queue.queue_id: g.watching for g in answer.granted}
        assert watching == {1: True, 2: False} and len(watches) == 1
        async with Producer("watch-producer", cluster.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"x"), MessageQueue(TOPIC, "broker-a", 1))
        event = await c.next_event()
        while event.WhichOneof("event") != "messages_arrived":
            event = await c.next_event()
        assert event.messages_arrived.message_queue == queue
        assert event.messages_arrived.max_offset == 1 and len(watches) == 0
        # At its end again (committed 1): watched again, then released: the watch ends.
        (g,) = (await c.acquire(G, [queue])).granted
        await c.release(G, queue, g.epoch, final_offset=1)
        (g,) = (await c.acquire(G, [queue], watch=True)).granted
        assert g.watching and len(watches) == 1
        await c.release(G, queue, g.epoch, final_offset=1)
        assert len(watches) == 0
        # Watched again, then the consumer leaves its group on an open channel: it ends too.
        (g,) = (await c.acquire(G, [queue], watch=True)).granted
        assert g.watching and len(watches) == 1
        await c.stub.UnregisterClient(
            broker_pb2.UnregisterClientRequest(
                channel_id=c.channel_id, client_id=c.client_id, consumer_group=G
            ),
            timeout=3,
        )
        assert len(watches) == 0


async def test_a_consumer_leaving_while_its_acquire_waits_is_answered_with_nothing(
    tmp_path: Path,
) -> None:
    """UNREGISTER_CLIENT ends the consumer's waiting acquires in the group at once, with no
    grant (what it held, or was granted at once, was let go with the rest), and leaves no
    waiting acquire or watch behind."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        holder, leaving = await cs.join("holder"), await cs.join("leaving")
        free, held = mq(TOPIC, 1), mq(TOPIC, 2)
        assert (await holder.acquire(G, [held])).granted
        (g,) = (await leaving.acquire(G, [free])).granted
        await leaving.release(G, free, g.epoch, final_offset=0)  # committed at its end
        waiting = asyncio.ensure_future(leaving.acquire(G, [free, held], wait_ms=1_500, watch=True))
        await asyncio.sleep(0.2)
        processor = cluster.broker("broker-a").client
        assert len(processor.watches) == 1  # the free queue, granted at once and watched
        await leaving.stub.UnregisterClient(
            broker_pb2.UnregisterClientRequest(
                channel_id=leaving.channel_id, client_id=leaving.client_id, consumer_group=G
            ),
            timeout=3,
        )
        answer = await asyncio.wait_for(waiting, 1.0)
        assert not answer.granted and not answer.denied
        assert len(processor.watches) == 0 and not processor._held_acquires
        assert (await holder.acquire(G, [free])).granted  # let go: free for anyone


async def test_a_start_offset_query_with_a_channel_watches_the_queues_at_their_end(
    tmp_path: Path,
) -> None:
    """Classic: QueryConsumerOffsets with ``watch_channel_id`` watches each queue whose answer
    is its end (a young empty queue answers 0, its end), and says which; a queue with
    something after its offset, or a channel the broker does not know, is not watched."""
    async with one_broker(tmp_path) as cluster, clients(cluster) as cs:
        c = await cs.join("c")
        watches = cluster.broker("broker-a").client.watches
        async with Producer("watch-producer", cluster.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"x"), MessageQueue(TOPIC, "broker-a", 2))

        async def query(channel_id: str) -> broker_pb2.QueryConsumerOffsetsResponse:
            response: broker_pb2.QueryConsumerOffsetsResponse = await c.stub.QueryConsumerOffsets(
                broker_pb2.QueryConsumerOffsetsRequest(
                    consumer_group=G,
                    set_zero_if_not_found=True,
                    queues=[broker_pb2.QueueRef(topic=TOPIC, queue_id=q) for q in (1, 2)],
                    watch_channel_id=channel_id,
                ),
                timeout=3,
            )
            return response

        unknown = await query("no-such-channel")
        assert list(unknown.offsets) == [0, 0] and list(unknown.watching) == [False, False]
        assert len(watches) == 0
        answer = await query(c.channel_id)
        assert list(answer.offsets) == [0, 0] and list(answer.watching) == [True, False]
        assert len(watches) == 1
        async with Producer("watch-producer", cluster.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"y"), MessageQueue(TOPIC, "broker-a", 1))
        event = await c.next_event()
        while event.WhichOneof("event") != "messages_arrived":
            event = await c.next_event()
        assert event.messages_arrived.message_queue == mq(TOPIC, 1)
        assert event.messages_arrived.max_offset == 1 and len(watches) == 0
        # Watched again (its end is 1 now); an offset reset fires it with -1, "pull now",
        # whatever offset the client holds: the reset's new offset may be at or below it.
        committed = broker_pb2.UpdateConsumerOffsetRequest(
            consumer_group=G, offsets=[broker_pb2.OffsetCommit(topic=TOPIC, queue_id=1, offset=1)]
        )
        await c.stub.UpdateConsumerOffset(committed, timeout=3)
        assert list((await query(c.channel_id)).watching) == [True, False]
        await c.stub.ResetOffset(
            broker_pb2.ResetOffsetRequest(topic=TOPIC, consumer_group=G, timestamp=0, force=True),
            timeout=3,
        )
        event = await c.next_event()
        while event.WhichOneof("event") != "messages_arrived":
            event = await c.next_event()
        assert event.messages_arrived.max_offset == -1 and len(watches) == 0
