"""Failures on a client's connection to a broker, injected over real gRPC on loopback.

One failed call never cancels another; ``start()`` returns or raises a typed error, never
``CancelledError``; whatever ends a consumer's channel stream (the broker aborted it, closed it,
restarted), the stream reopens and the consumer is a member of its group again, holding its
share of the queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from aiorocketmq.broker.client_processor import ClientManageProcessor
from aiorocketmq.broker.service import BrokerService
from aiorocketmq.consumer import AllocateMessageQueueAveragely, MessageQueue, PushConsumer
from aiorocketmq.consumer.broker_channel import BrokerChannel
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.client_instance import MQClientInstance
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.nameserver.service import NameServerService
from aiorocketmq.producer import Message, Producer, SendStatus
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.channels import shared_channels
from aiorocketmq.protocol.errors import MQError, ServiceNotAvailable
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.trace import tracer
from tests.helpers import wait_until
from tests.integration.support import Received, owners

TOPIC = "ConnTopic"
PROBE = "ConnProbe"  # a topic nobody consumes: a long-poll pull on it stays in flight
BROKERS = ("broker-a", "broker-b")
QUEUES = 4
GROUP = "conn-group"
FAST = {"register_name_server_period_ms": 500, "flush_consumer_offset_interval_ms": 200}


def client_config(**kw: Any) -> ClientConfig:
    """Fast timers, and a reconnect backoff of 50 ms doubling up to 400 ms. The route poll is
    fast too: a consumer that fetched its routes while a broker was restarting (unregistered)
    learns of it again at the next poll."""
    settings: dict[str, Any] = {
        "poll_name_server_interval_ms": 500,
        "persist_consumer_offset_interval_ms": 200,
        "rebalance_wait_interval_ms": 2_000,
        "channel_reconnect_delay_ms": 50,
        "channel_reconnect_max_delay_ms": 400,
    }
    settings.update(kw)
    return ClientConfig(**settings)


class StreamFaults:
    """Installed on ``BrokerService`` before the brokers start: aborts the next OpenChannel
    streams of one client (by instance name) before they open, one per status in ``plan``."""

    def __init__(self, instance_name: str) -> None:
        self.suffix = "@" + instance_name
        self.plan: list[grpc.StatusCode] = []
        self.aborted: list[grpc.StatusCode] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = BrokerService.OpenChannel
        faults = self

        async def open_channel(
            service: BrokerService, request: broker_pb2.OpenChannelRequest, context: Any
        ) -> AsyncIterator[broker_pb2.ChannelEvent]:
            if request.client_id.endswith(faults.suffix) and faults.plan:
                code = faults.plan.pop(0)
                faults.aborted.append(code)
                await context.abort(code, "injected: channel stream aborted")
            async for event in original(service, request, context):
                yield event

        monkeypatch.setattr(BrokerService, "OpenChannel", open_channel)


class Gate:
    """Installed before the servers start: while closed, holds the broker's SendMessage calls
    to PROBE and the name server's route queries of TOPIC (calls that stay in flight)."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.opened.set()
        self.waiting = 0

    async def _hold(self) -> None:
        self.waiting += 1
        try:
            await self.opened.wait()
        finally:
            self.waiting -= 1

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        send_message = BrokerService.SendMessage
        get_route = NameServerService.GetRouteInfoByTopic
        gate = self

        async def held_send(
            service: BrokerService, request: broker_pb2.SendMessageRequest, context: Any
        ) -> broker_pb2.SendMessageResponse:
            if request.topic == PROBE:
                await gate._hold()
            return await send_message(service, request, context)

        async def held_route(service: NameServerService, request: Any, context: Any) -> Any:
            if request.topic == TOPIC:
                await gate._hold()
            return await get_route(service, request, context)

        monkeypatch.setattr(BrokerService, "SendMessage", held_send)
        monkeypatch.setattr(NameServerService, "GetRouteInfoByTopic", held_route)


class HeldHeartbeats:
    """Installed before the servers start: once armed, holds the next heartbeat of one client
    (by instance name) at the broker's door until released; the broker then handles it."""

    def __init__(self, instance_name: str) -> None:
        self.suffix = "@" + instance_name
        self.armed = False
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = BrokerService.Heartbeat
        holds = self

        async def heartbeat(
            service: BrokerService, request: broker_pb2.HeartbeatRequest, context: Any
        ) -> broker_pb2.HeartbeatResponse:
            if holds.armed and request.heartbeat.client_id.endswith(holds.suffix):
                holds.armed = False
                holds.held.set()
                await holds.release.wait()
            return await original(service, request, context)

        monkeypatch.setattr(BrokerService, "Heartbeat", heartbeat)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldHeartbeats]:
    h = HeldHeartbeats("flaky")
    h.install(monkeypatch)
    yield h
    h.release.set()


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[StreamFaults]:
    f = StreamFaults("flaky")
    f.install(monkeypatch)
    yield f


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    g = Gate()
    g.install(monkeypatch)
    yield g
    g.opened.set()


@pytest.fixture
async def cluster(
    tmp_path: Path, faults: StreamFaults, gate: Gate, held: HeldHeartbeats
) -> AsyncIterator[LocalCluster]:
    """Not the shared fixture: the fault, gate and hold wrappers go on the service before it
    starts."""
    async with LocalCluster(tmp_path, brokers=len(BROKERS), broker_overrides=FAST) as c:
        await c.create_topic(TOPIC, QUEUES)
        await c.create_topic(PROBE, 1)
        yield c


@pytest.fixture
async def conns() -> AsyncIterator[BrokerConnections]:
    c = BrokerConnections()
    yield c
    await c.close()


def new_consumer(cluster: LocalCluster, name: str, received: Received, **kw: Any) -> PushConsumer:
    c = PushConsumer(
        GROUP, cluster.namesrv_addr, instance_name=name, client_config=client_config(**kw)
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(received.listener(name))
    return c


def client_of(consumer: PushConsumer) -> MQClientInstance:
    assert consumer._impl.client is not None
    return consumer._impl.client


def channel_to(cluster: LocalCluster, consumer: PushConsumer, broker: str) -> BrokerChannel:
    return client_of(consumer).channels[cluster.broker(broker).address]


async def members(conns: BrokerConnections, cluster: LocalCluster, broker: str) -> list[str]:
    """The group's client ids as the broker's GetConsumerListByGroup lists them."""
    request = broker_pb2.GetConsumerListByGroupRequest(consumer_group=GROUP)
    try:
        response = await call(
            conns.stub(cluster.broker(broker).address).GetConsumerListByGroup, request
        )
    except MQError:
        return []  # no consumer in the group on that broker
    return sorted(response.consumer_id_list)


async def members_everywhere(
    conns: BrokerConnections, cluster: LocalCluster, consumers: list[PushConsumer]
) -> bool:
    expected = sorted(c.client_id for c in consumers)
    return all([await members(conns, cluster, b) == expected for b in BROKERS])


def settled(consumers: list[PushConsumer]) -> bool:
    """Each queue held by exactly one consumer, as AVG computes it."""
    every = sorted(MessageQueue(TOPIC, b, q) for b in BROKERS for q in range(QUEUES))
    held = owners(consumers)
    if sorted(held) != every or any(len(v) != 1 for v in held.values()):
        return False
    cids = sorted(c.client_id for c in consumers)
    avg = AllocateMessageQueueAveragely()
    return all(
        c.assigned_queues == set(avg.allocate(GROUP, c.client_id, every, cids)) for c in consumers
    )


async def rejoined(
    conns: BrokerConnections, cluster: LocalCluster, consumers: list[PushConsumer], what: str
) -> None:
    """Every consumer is a member on every broker and the queues are split as AVG says."""
    await wait_until(
        lambda: members_everywhere(conns, cluster, consumers),
        timeout=15,
        message=f"{what}: members",
    )
    await wait_until(lambda: settled(consumers), timeout=15, message=f"{what}: settled")


async def consumed_everything(
    cluster: LocalCluster, received: Received, tag: str, count: int = 40
) -> None:
    """Send ``count`` messages over every queue; each is consumed."""
    bodies = [f"{tag}-{i}".encode() for i in range(count)]
    producer = Producer("conn-producer", cluster.namesrv_addr)
    await producer.start()
    try:
        for body in bodies:
            await producer.send(Message(TOPIC, body))
    finally:
        await producer.shutdown()
    await wait_until(lambda: not received.missing(bodies), timeout=15, message=f"{tag} consumed")


def probe_pull(group: str, timeout_ms: int) -> broker_pb2.PullMessageRequest:
    """A long-poll pull of the idle probe queue, held by the broker up to ``timeout_ms``."""
    return broker_pb2.PullMessageRequest(
        consumer_group=group,
        topic=PROBE,
        queue_id=0,
        queue_offset=0,
        max_msg_nums=32,
        has_subscription=True,
        sub_expression="*",
        suspend=True,
        suspend_timeout_millis=timeout_ms,
    )


async def test_aborted_channel_streams_reopen_until_the_consumer_is_a_member(
    cluster: LocalCluster, faults: StreamFaults, conns: BrokerConnections
) -> None:
    received = Received()
    steady = new_consumer(cluster, "steady", received)
    # The heartbeat of start() gives up waiting for a channel after 500 ms; the aborts below
    # take longer, so the consumer joins through its channel's first open, not start().
    flaky = new_consumer(cluster, "flaky", received, mq_client_api_timeout_ms=500)
    codes = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED]
    faults.plan = codes * 4
    try:
        await steady.start()
        await flaky.start()  # returns although no channel opened yet
        await rejoined(conns, cluster, [steady, flaky], "after 12 aborted streams")
        assert faults.aborted == codes * 4
        assert all(channel_to(cluster, flaky, b).opened_count == 1 for b in BROKERS)
        await consumed_everything(cluster, received, "aborted")

        # The broker's own channel-close path ends an open stream (as its expiry scan or an
        # UNREGISTER of the channel would): the consumer leaves the group, and comes back.
        broker = cluster.broker("broker-a")
        channel = channel_to(cluster, flaky, "broker-a")
        old_id = channel.channel_id
        [closed] = [c for c in broker.client.channels.values() if c.client_id == flaky.client_id]
        broker.client.close_channel(closed)
        assert broker.client.consumer_manager.find_channel(GROUP, flaky.client_id) is None
        await wait_until(
            lambda: channel.opened_count == 2 and channel.channel_id not in (None, old_id),
            timeout=10,
            message="the closed channel reopened",
        )
        await rejoined(conns, cluster, [steady, flaky], "after the broker closed the channel")
        await consumed_everything(cluster, received, "closed")
        assert flaky.running
    finally:
        await flaky.shutdown()
        await steady.shutdown()


async def test_a_stale_channel_not_found_does_not_forget_the_reopened_channel(
    cluster: LocalCluster, held: HeldHeartbeats, conns: BrokerConnections
) -> None:
    """A heartbeat sent on a channel the broker then closes is answered CHANNEL_NOT_FOUND after
    the stream has reopened: the new channel is kept, and the consumer is a member again. (It
    used to forget the new channel and wait for an open that never came: the consumer never
    heartbeated that broker again, and the group's brokers disagreed on its members.)"""
    received = Received()
    flaky = new_consumer(cluster, "flaky", received)
    try:
        await flaky.start()
        await rejoined(conns, cluster, [flaky], "started")
        broker = cluster.broker("broker-a")
        channel = channel_to(cluster, flaky, "broker-a")
        old_id = channel.channel_id
        held.armed = True
        in_flight = asyncio.ensure_future(client_of(flaky).send_heartbeat_to_all_broker())
        await asyncio.wait_for(held.held.wait(), 10)  # sent with old_id, held at broker-a
        [closed] = [c for c in broker.client.channels.values() if c.channel_id == old_id]
        broker.client.close_channel(closed)  # as the expiry scan does
        await wait_until(
            lambda: channel.channel_id not in (None, old_id), message="the stream reopened"
        )
        new_id = channel.channel_id
        held.release.set()  # the held heartbeat reaches the broker: channel not found
        await asyncio.wait_for(in_flight, 10)
        assert channel.channel_id == new_id
        await rejoined(conns, cluster, [flaky], "after a stale CHANNEL_NOT_FOUND")
        # A broker that forgets the channel we hold now: the stream is ended and reopens.
        channel.mark_broken(new_id)
        await wait_until(
            lambda: channel.channel_id not in (None, new_id), message="reopened on request"
        )
        assert channel.opened_count == 3
        await rejoined(conns, cluster, [flaky], "after mark_broken")
    finally:
        await flaky.shutdown()


async def test_a_broker_restart_under_running_consumers(
    cluster: LocalCluster, conns: BrokerConnections
) -> None:
    received = Received()
    c1 = new_consumer(cluster, "c1", received)
    c2 = new_consumer(cluster, "c2", received)
    try:
        await c1.start()
        await rejoined(conns, cluster, [c1], "c1 alone")
        channel = channel_to(cluster, c1, "broker-a")
        # A restarted broker may have lost its last offsets: c1 is told to send them all again.
        impl = client_of(c1).consumer_table[c1.consumer_group]
        told: list[str] = []
        tell = impl.broker_reconnected
        impl.broker_reconnected = lambda name, held: (told.append(name), tell(name, held))[1]  # type: ignore[method-assign]
        # c2 starts while broker-a restarts: its start() returns or says why, typed.
        results = await asyncio.gather(
            c2.start(), cluster.restart_broker("broker-a"), return_exceptions=True
        )
        assert not isinstance(results[1], BaseException), results[1]
        if isinstance(results[0], BaseException):
            assert isinstance(results[0], MQError), repr(results[0])
            await c2.start()
        await wait_until(
            lambda: channel.opened_count == 2, timeout=10, message="c1's channel reopened"
        )
        await rejoined(conns, cluster, [c1, c2], "after the restart")
        assert told == ["broker-a"]
        await consumed_everything(cluster, received, "restart")
        assert c1.running and c2.running
    finally:
        await c2.shutdown()
        await c1.shutdown()


async def test_instances_sharing_connections_survive_a_restart_and_each_other_leaving(
    cluster: LocalCluster, conns: BrokerConnections
) -> None:
    """``share_connections``: one gRPC channel per broker for the process's instances, each
    with its own channel stream; a broker restart reopens every stream over it, one instance
    leaving closes nothing of the others', and the last one closes the channels."""
    received = Received()
    consumers = [new_consumer(cluster, f"s{i}", received, share_connections=True) for i in range(3)]
    addrs = [cluster.broker(b).address for b in BROKERS]
    try:
        for c in consumers:
            await c.start()
        await rejoined(conns, cluster, consumers, "three sharing")
        for addr in addrs:
            assert len({id(client_of(c).brokers.channel(addr)) for c in consumers}) == 1
        streams = {channel_to(cluster, c, "broker-a").channel_id for c in consumers}
        assert len(streams) == 3  # one channel of channel_info_table each
        await cluster.restart_broker("broker-a")
        await wait_until(
            lambda: all(channel_to(cluster, c, "broker-a").opened_count == 2 for c in consumers),
            timeout=10,
            message="every stream over the shared channel reopened",
        )
        await rejoined(conns, cluster, consumers, "after the restart")
        await consumers.pop(0).shutdown()  # its share of the channels is let go, not closed
        await rejoined(conns, cluster, consumers, "after one left")
        await consumed_everything(cluster, received, "shared")
    finally:
        for c in consumers:
            await c.shutdown()
    assert len(shared_channels()) == 0  # the last user of each closed it


async def test_a_deadline_cancels_no_other_call_on_the_connection(
    cluster: LocalCluster, conns: BrokerConnections
) -> None:
    received = Received()
    c = new_consumer(cluster, "c", received)
    try:
        await c.start()
        await rejoined(conns, cluster, [c], "started")
        client = client_of(c)
        channel = channel_to(cluster, c, "broker-a")
        channel_id = channel.channel_id
        broker = cluster.broker("broker-a")
        held = broker.hold.held_count()  # the consumer's own long polls, one per queue

        # Two more long polls in flight on the consumer's connection to broker-a.
        kept = asyncio.create_task(
            client.invoke_broker("broker-a", "PullMessage", probe_pull("probe", 10_000), 15)
        )
        cancelled = asyncio.create_task(
            client.invoke_broker("broker-a", "PullMessage", probe_pull("probe", 10_000), 15)
        )
        await wait_until(
            lambda: broker.hold.held_count() == held + 2, message="probe pulls held by the broker"
        )

        # A call on the same connection runs past its deadline: a typed error, nothing else.
        with pytest.raises(ServiceNotAvailable) as e:
            await client.invoke_broker("broker-a", "PullMessage", probe_pull("probe", 10_000), 0.05)
        assert e.value.grpc_status is grpc.StatusCode.DEADLINE_EXCEEDED

        # A call its caller cancels ends in CancelledError, and only that call.
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled

        producer = Producer("probe-producer", cluster.namesrv_addr)
        await producer.start()
        try:
            await producer.send(Message(PROBE, b"wake"), MessageQueue(PROBE, "broker-a", 0))
        finally:
            await producer.shutdown()
        response = await kept
        assert [m.body for m in response.messages] == [b"wake"]

        assert channel.channel_id == channel_id and channel.opened_count == 1
        assert await members_everywhere(conns, cluster, [c])
        assert settled([c])
        await consumed_everything(cluster, received, "deadline")
    finally:
        await c.shutdown()


async def test_a_call_cancelled_by_grpc_raises_a_typed_error(cluster: LocalCluster) -> None:
    """A call whose channel is closed under it (not by its caller) gets ServiceNotAvailable."""
    conns = BrokerConnections()
    stub = conns.stub(cluster.broker("broker-a").address)
    pull = asyncio.create_task(call(stub.PullMessage, probe_pull("probe", 10_000), 15))
    broker = cluster.broker("broker-a")
    await wait_until(lambda: broker.hold.held_count() == 1, message="the pull is held")
    await conns.close()
    with pytest.raises(ServiceNotAvailable) as e:
        await pull
    assert e.value.grpc_status is grpc.StatusCode.CANCELLED


async def test_a_channel_stream_cancelled_by_grpc_reopens_and_only_close_ends_it(
    cluster: LocalCluster,
) -> None:
    broker = cluster.broker("broker-a")
    conns = BrokerConnections()
    reopened: list[str | None] = []

    async def on_reopen(channel: BrokerChannel) -> None:
        reopened.append(channel.channel_id)

    channel = BrokerChannel(
        broker.address,
        "127.0.0.1@probe",
        lambda: conns.stub(broker.address),
        lambda addr, event: None,
        on_reopen,
        reconnect_delay_ms=50,
        reconnect_max_delay_ms=400,
    )
    channel.start()
    try:
        first = await channel.wait_ready(5)
        assert first is not None and first in broker.client.channels
        # Closing the gRPC channel cancels the stream under the task (not the task itself).
        await conns.close()
        await wait_until(lambda: len(reopened) == 1, message="the stream reopened")
        assert channel.opened_count == 2 and reopened == [channel.channel_id]
        assert first not in broker.client.channels
        assert channel.channel_id in broker.client.channels
    finally:
        await channel.close()
        await conns.close()
    await wait_until(lambda: not broker.client.channels, message="close() ended the stream")


async def test_producer_and_name_server_failures_cancel_no_other_call(
    cluster: LocalCluster, gate: Gate
) -> None:
    # Every send its own call, all out at once on the shared channel (by default the sends
    # made while one is out would wait and share the next request).
    producer = Producer("conn-producer", cluster.namesrv_addr, max_in_flight_sends=32)
    await producer.start()
    try:
        mq = MessageQueue(PROBE, "broker-a", 0)
        await producer.send(Message(PROBE, b"route"), mq)  # the route is known from here on
        gate.opened.clear()
        sends = [
            asyncio.create_task(producer.send(Message(PROBE, f"m{i}".encode()), mq, timeout=15))
            for i in range(20)
        ]
        await wait_until(lambda: gate.waiting == 20, message="sends held by the broker")
        with pytest.raises(ServiceNotAvailable) as e:
            await producer.send(Message(PROBE, b"late"), mq, timeout=0.2)
        assert e.value.grpc_status is grpc.StatusCode.DEADLINE_EXCEEDED
        gate.opened.set()
        results = await asyncio.gather(*sends)
        assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    finally:
        gate.opened.set()
        await producer.shutdown()

    async with NameServerClient(cluster.namesrv_addr) as ns:
        gate.opened.clear()
        queries = [
            asyncio.create_task(ns.get_route_info_by_topic(TOPIC, timeout=15)) for _ in range(20)
        ]
        await wait_until(lambda: gate.waiting == 20, message="queries held by the name server")
        with pytest.raises(ServiceNotAvailable):
            await ns.get_route_info_by_topic(TOPIC, timeout=0.2)
        gate.opened.set()
        routes = await asyncio.gather(*queries)
        assert all(len(r.queue_datas) == len(BROKERS) for r in routes)


def notifiers(cluster: LocalCluster, consumer: PushConsumer) -> list[str]:
    """The brokers that send ``consumer`` its group's notifications (their channel of it is
    not ``notified_elsewhere``)."""
    return [
        b
        for b in BROKERS
        if any(
            c.client_id == consumer.client_id and not c.notified_elsewhere
            for c in cluster.broker(b).client.channels.values()
        )
    ]


async def test_one_broker_notifies_a_consumer_and_another_once_its_channel_is_lost(
    cluster: LocalCluster, conns: BrokerConnections
) -> None:
    """Heartbeats ask one broker for notifications and tell the others not to send them; when
    that broker's channel ends, the next round (at once) asks another one, and a change is told
    again. With ``notified_by_one_broker`` off, every broker notifies (RocketMQ)."""
    received = Received()
    one = new_consumer(cluster, "one", received)
    every = new_consumer(cluster, "every", received, notified_by_one_broker=False)
    try:
        await one.start()
        await rejoined(conns, cluster, [one], "started")
        [first] = notifiers(cluster, one)
        broker = cluster.broker(first)
        [closed] = [c for c in broker.client.channels.values() if c.client_id == one.client_id]
        broker.client.close_channel(closed)  # as the expiry scan does

        def moved() -> bool:
            return len(now := notifiers(cluster, one)) == 1 and now != [first]

        await wait_until(moved, timeout=10, message="another broker notifies the consumer")
        [second] = notifiers(cluster, one)
        await wait_until(
            lambda: channel_to(cluster, one, first).channel_id is not None,
            message="the lost channel reopened",
        )
        await rejoined(conns, cluster, [one], "after the channel was lost")
        assert notifiers(cluster, one) == [second]  # the reopened one stays quiet

        told = client_of(one).notifications_received
        await every.start()  # a change of the group: told to the old member by `second`
        await rejoined(conns, cluster, [one, every], "the second one joined")
        assert client_of(one).notifications_received > told
        assert notifiers(cluster, every) == list(BROKERS)
    finally:
        await every.shutdown()
        await one.shutdown()


async def test_a_broker_that_does_not_notify_the_group_is_not_asked_to(
    cluster: LocalCluster, conns: BrokerConnections
) -> None:
    """A group notified by some brokers only (its switch off on one): the heartbeat's answer
    names it (``silent_groups``), and the client takes its notifications from a broker that
    sends them, so a change still reaches it at once (else it waited for the 20 s rebalance)."""
    received = Received()
    one = new_consumer(cluster, "one", received)
    other = new_consumer(cluster, "other", received)
    try:
        await one.start()
        await rejoined(conns, cluster, [one], "started")
        [first] = notifiers(cluster, one)
        cluster.broker(first).client.config.groups_with_notify_disabled.append(GROUP)
        await client_of(one).send_heartbeat_to_all_broker()
        [second] = [b for b in BROKERS if b != first]
        await wait_until(
            lambda: notifiers(cluster, one) == [second], message="the other broker notifies it"
        )
        told = client_of(one).notifications_received
        quiet = cluster.broker(first).client.listener.notifications_sent
        await other.start()  # notified to `one` by `second` only: `first` does not notify
        await wait_until(
            lambda: client_of(one).notifications_received > told, message="told of the join"
        )
        await rejoined(conns, cluster, [one, other], "the second one joined")
        assert cluster.broker(first).client.listener.notifications_sent == quiet

        # Off on every broker: none is picked, and none notifies (RocketMQ's switch).
        cluster.broker(second).client.config.groups_with_notify_disabled.append(GROUP)
        await client_of(one).send_heartbeat_to_all_broker()
        assert client_of(one)._notifier is None
    finally:
        await other.shutdown()
        await one.shutdown()


def fenced_consumer(
    cluster: LocalCluster, name: str, listener: Any, config: dict[str, Any] | None = None, **kw: Any
) -> PushConsumer:
    """A fenced consumer of the group whose offsets are committed only every minute: what it
    learns of its grants, it learns from its channel or its pulls, not from a refused commit.
    ``config``: more client settings."""
    c = PushConsumer(
        GROUP,
        cluster.namesrv_addr,
        instance_name=name,
        client_config=client_config(persist_consumer_offset_interval_ms=60_000, **(config or {})),
        handoff="fenced",
        **kw,
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    return c


async def backed_up(
    cluster: LocalCluster, consumer: PushConsumer, tag: str
) -> tuple[list[bytes], dict[MessageQueue, ProcessQueue]]:
    """Start ``consumer`` (made with a blocked listener, one call at a time, a pull threshold of one
    message), let it take every queue, and send 40 messages: each queue's process queue then
    holds messages the listener has not been handed. The bodies, and TOPIC's process queues."""
    await consumer.start()
    await wait_until(lambda: settled([consumer]), timeout=15, message="it holds every queue")
    bodies = [f"{tag}-{i}".encode() for i in range(40)]
    async with Producer("conn-producer", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(TOPIC, body))
    impl = consumer._impl.rebalance_impl
    assert impl is not None
    table = {mq: pq for mq, pq in impl.process_queue_table.items() if mq.topic == TOPIC}
    await wait_until(
        lambda: all(pq.msg_count > 0 for pq in table.values()),
        timeout=10,
        message="every queue has messages waiting for the listener",
    )
    return bodies, table


def grants_at(cluster: LocalCluster, broker: str) -> dict[MessageQueue, tuple[str, int]]:
    """The broker's grants of the group: each queue's holding channel and epoch."""
    grants = cluster.broker(broker).client.grants.grant_table.get(GROUP, {})
    return {mq: (g.channel_id, g.epoch) for mq, g in grants.items()}


async def test_a_fenced_consumer_drops_at_once_the_queues_its_reopened_channel_does_not_hold(
    cluster: LocalCluster,
) -> None:
    """The broker closes a live consumer's channel (as its expiry scan would): its grants there
    are given up. The new channel's ChannelOpened lists none, and the consumer drops those
    queues at once, their pulled messages not handed to its listener, although no pull or
    commit of theirs was refused (the listener is busy, the queues under flow control, the
    commits a minute apart). It then takes them again under new grants and consumes all."""
    received = Received()
    gate = asyncio.Event()
    consume = received.listener("solo")

    async def busy(msgs: list[Any], ctx: Any) -> Any:
        await gate.wait()
        return await consume(msgs, ctx)

    # A listener call at a time, one message per queue in the process queue before pulls stop.
    solo = fenced_consumer(cluster, "solo", busy, consume_thread_max=1, pull_threshold_for_queue=1)
    try:
        bodies, table = await backed_up(cluster, solo, "lost")
        before = grants_at(cluster, "broker-a")
        on_a = {mq: pq for mq, pq in table.items() if mq.broker_name == "broker-a"}
        on_b = {mq: pq for mq, pq in table.items() if mq.broker_name == "broker-b"}
        broker = cluster.broker("broker-a")
        channel = channel_to(cluster, solo, "broker-a")
        [closed] = [c for c in broker.client.channels.values() if c.client_id == solo.client_id]
        broker.client.close_channel(closed)
        await wait_until(
            lambda: channel.opened_count == 2, timeout=10, message="the closed channel reopened"
        )
        await wait_until(
            lambda: all(pq.dropped for pq in on_a.values()),
            timeout=5,
            message="broker-a's queues dropped on the reopen",
        )
        assert not any(pq.dropped for pq in on_b.values())
        assert not gate.is_set() and not received.by_body  # no pull or commit told it
        gate.set()
        await wait_until(lambda: settled([solo]), timeout=15, message="solo holds them again")
        after = grants_at(cluster, "broker-a")
        assert all(after[mq][1] > before[mq][1] for mq in on_a)  # new grants
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="all consumed")
    finally:
        gate.set()
        await solo.shutdown()


async def test_a_fenced_consumer_hands_no_message_of_a_broker_to_its_listener_while_its_channel_there_is_down(
    cluster: LocalCluster,
) -> None:
    """Between the end of its channel to broker-a and the next open (which says which grants
    are still its own), the consumer's listener is handed batches of broker-b's queues only:
    broker-a may have given its queues to others meanwhile. Broker-a's grants were released
    here (the broker closed the channel), so the reopen drops them, and they are taken again."""
    calls: list[MessageQueue] = []
    received = Received()
    gate = asyncio.Event()
    consume = received.listener("solo")

    async def busy(msgs: list[Any], ctx: Any) -> Any:
        calls.append(ctx.message_queue)
        await gate.wait()
        return await consume(msgs, ctx)

    # The reopen comes 1 to 2 s after the stream's end.
    delay = {"channel_reconnect_delay_ms": 2_000, "channel_reconnect_max_delay_ms": 2_000}
    solo = fenced_consumer(
        cluster, "solo", busy, delay, consume_thread_max=1, pull_threshold_for_queue=1
    )
    try:
        bodies, table = await backed_up(cluster, solo, "held")
        await wait_until(lambda: len(calls) == 1, message="one batch in the listener")
        broker = cluster.broker("broker-a")
        channel = channel_to(cluster, solo, "broker-a")
        [closed] = [c for c in broker.client.channels.values() if c.client_id == solo.client_id]
        broker.client.close_channel(closed)
        await wait_until(lambda: channel.channel_id is None, message="the client saw it end")
        gate.set()  # the batch in the listener goes on (beyond reach); broker-b's follow
        on_b = [pq for mq, pq in table.items() if mq.broker_name == "broker-b"]
        await wait_until(
            lambda: all(pq.msg_count == 0 for pq in on_b),
            timeout=5,
            message="broker-b's messages consumed",
        )
        assert channel.opened_count == 1, "the channel reopened too soon for this test"
        assert all(mq.broker_name == "broker-b" for mq in calls[1:]), calls
        await wait_until(lambda: channel.opened_count == 2, timeout=10, message="reopened")
        await wait_until(lambda: settled([solo]), timeout=15, message="solo holds them again")
        await wait_until(lambda: not received.missing(bodies), timeout=15, message="all consumed")
    finally:
        gate.set()
        await solo.shutdown()


async def test_a_reopened_channel_takes_over_the_grants_of_one_the_broker_has_not_seen_end(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's stream ends while the broker has not seen it end yet (a connection gone
    silent: the broker learns at its keepalive, here a second late). The new stream names the
    old one: its grants move there with their epochs, and the old one's close gives none away.
    The consumer keeps every queue under the same grant, and is never refused a pull."""
    late: set[str] = set()
    close_channel = ClientManageProcessor.close_channel

    def close_late(processor: ClientManageProcessor, channel: Any) -> None:
        if channel.channel_id in late:
            asyncio.get_running_loop().call_later(1.0, close_channel, processor, channel)
        else:
            close_channel(processor, channel)

    monkeypatch.setattr(ClientManageProcessor, "close_channel", close_late)
    records: list[dict[str, Any]] = []
    tracer.subscribe(records.append)
    received = Received()
    solo = fenced_consumer(cluster, "solo", received.listener("solo"))
    try:
        await solo.start()
        await wait_until(lambda: settled([solo]), timeout=15, message="solo holds every queue")
        before = grants_at(cluster, "broker-a")
        broker = cluster.broker("broker-a")
        channel = channel_to(cluster, solo, "broker-a")
        old_id = channel.channel_id
        assert old_id is not None and {ch for ch, _ in before.values()} == {old_id}
        late.add(old_id)
        channel._call.cancel()  # the client gives up on the stream; the broker hears late
        await wait_until(
            lambda: channel.opened_count == 2, timeout=10, message="the stream reopened"
        )
        await wait_until(
            lambda: old_id not in broker.client.channels, timeout=5, message="the late close"
        )
        new_id = channel.channel_id
        assert grants_at(cluster, "broker-a") == {mq: (new_id, e) for mq, (_, e) in before.items()}
        await wait_until(lambda: settled([solo]), timeout=15, message="settled")
        await consumed_everything(cluster, received, "taken-over")
        assert grants_at(cluster, "broker-a") == {mq: (new_id, e) for mq, (_, e) in before.items()}
    finally:
        await solo.shutdown()
        tracer.unsubscribe(records.append)
    mine = [r for r in records if r.get("client_id") == solo.client_id]
    shut = next(i for i, r in enumerate(mine) if r["event"] == "consumer_shutdown")
    assert [r for r in mine[:shut] if r["event"] == "queue_dropped"] == []
    [closed] = [r for r in mine if r["event"] == "channel_closed" and r["channel_id"] == old_id]
    assert closed["replaced_by"] == new_id


@pytest.mark.process
@pytest.mark.timeout(120)
async def test_a_broker_that_stalls_is_left_and_its_channel_reopened_when_it_answers(
    tmp_path: Path,
) -> None:
    """A broker process stopped (SIGSTOP: its connections stay open, nothing answers) is
    found dead by the keepalive within its time and timeout (10 s + 5 s): the consumer's
    channel ends, and reopens once the broker runs again. gRPC waits a minute for a ping's
    answer unless told otherwise (``grpc.http2.ping_timeout_ms``): the keepalive's own timeout
    alone did not end a channel to a broker stopped for 45 s."""
    from bench.procs import ProcessCluster

    async with ProcessCluster(tmp_path / "cluster", brokers=1) as cluster:
        await cluster.create_topic(TOPIC, 2)
        consumer = PushConsumer(GROUP, cluster.namesrv_addr, handoff="fenced")
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(Received().listener("c"))
        await consumer.start()
        try:
            (channel,) = client_of(consumer).channels.values()
            await wait_until(lambda: channel.channel_id is not None, timeout=10)
            first = channel.channel_id
            stall = asyncio.ensure_future(cluster.pause_broker(cluster.broker_names[0], 20))
            await wait_until(lambda: channel.channel_id is None, timeout=19)
            assert not stall.done()  # found while the broker was still stopped
            await stall
            await wait_until(lambda: channel.channel_id not in (None, first), timeout=15)
            assert channel.opened_count == 2
        finally:
            await consumer.shutdown()
