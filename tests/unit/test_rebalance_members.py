"""Where a rebalance pass gets the group's members, and what it does with a bad list.

Our brokers send the members with NOTIFY_CONSUMER_IDS_CHANGED; the pass that follows uses them
instead of asking (GET_CONSUMER_LIST_BY_GROUP), so a change among 1,000 consumers is not
followed by 1,000 requests. A list without this client (empty, or from a broker that has not
seen its heartbeat) makes no allocation: RocketMQ's rule, and nothing held is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.broker.client.consumer_manager import DefaultConsumerIdsChangeListener
from aiorocketmq.consumer import AllocateMessageQueueAveragely, MessageModel
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.rebalance_impl import RebalanceImpl
from aiorocketmq.protocol.message_queue import MessageQueue
from tests.helpers import capture_logs

T = "T"
QUEUES = {MessageQueue(T, "b", i) for i in range(4)}


class Members:
    """A consumer-id source: what the last notification carried, and what a broker answers."""

    def __init__(self, client_id: str, answer: list[str] | None) -> None:
        self.client_id = client_id
        self.answer = answer
        self.notified: dict[str, list[str]] = {}
        self.asked = 0

    def take_notified_consumer_ids(self, group: str) -> list[str] | None:
        return self.notified.pop(group, None)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        self.asked += 1
        return self.answer


class Mode:
    is_push = True

    def __init__(self) -> None:
        self.removed: list[MessageQueue] = []
        self.paired: list[set[str]] = []  # each pair_releases; unpair_releases appends set()

    async def before_rebalance(self) -> None:
        pass

    def pair_releases(self, brokers: Iterable[str]) -> None:
        self.paired.append(set(brokers))

    def unpair_releases(self) -> None:
        if self.paired and self.paired[-1]:
            self.paired.append(set())

    def handoff_owed(self) -> bool:
        return False

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        self.removed.extend(mq for mq, _ in items)
        return [True for _ in items]

    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        return [0 for _ in mqs]

    def dispatch_pull_requests(self, requests: list[object]) -> None:
        pass

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        pass


def rebalance(members: Members, mode: Mode | None = None) -> RebalanceImpl:
    impl = RebalanceImpl(
        "g",
        MessageModel.CLUSTERING,
        AllocateMessageQueueAveragely(),
        members,
        mode or Mode(),  # type: ignore[arg-type]
    )
    impl.subscription_inner[T] = ("*", 1)
    impl.topic_subscribe_info_table[T] = QUEUES
    return impl


async def test_a_pass_after_a_notification_uses_its_members_without_asking() -> None:
    members = Members("a", answer=["a"])
    impl = rebalance(members)
    members.notified["g"] = ["b", "a"]
    assert await impl.do_rebalance(False)
    assert members.asked == 0
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}  # a of [a, b]
    # The members are used once: the next pass (the 20 s one) asks a broker again.
    assert await impl.do_rebalance(False)
    assert members.asked == 1
    assert impl.assigned_queues() == QUEUES


async def test_members_without_this_client_make_no_allocation_and_drop_nothing() -> None:
    members = Members("a", answer=["a"])
    mode = Mode()
    impl = rebalance(members, mode)
    assert await impl.do_rebalance(False)
    assert impl.assigned_queues() == QUEUES
    with capture_logs() as logs:
        for bad in (["b", "c"], [], ["b"]):  # stale, empty, stale again
            members.answer = bad
            assert not await impl.do_rebalance(False)  # unbalanced: the service retries in 1 s
    assert impl.assigned_queues() == QUEUES and mode.removed == []
    warned = [e for e in logs if "do not include this client" in str(e.get("event"))]
    assert len(warned) == 1  # logged once, not on every retry
    # A good list again: allocation resumes (and a later bad one is logged again).
    members.answer = ["a", "b"]
    assert await impl.do_rebalance(False)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}
    assert sorted(mq.queue_id for mq in mode.removed) == [2, 3]


def test_the_broker_sends_the_members_with_the_notification() -> None:
    notifier = DefaultConsumerIdsChangeListener()
    c1, c2 = Channel("1", "cid-1", "a:1"), Channel("2", "cid-2", "a:2")
    assert notifier.notify_consumer_change("G", [c1, c2]) == 2
    for channel in (c1, c2):
        notify = channel.outbox.get_nowait().notify_consumer_ids_changed
        assert notify.consumer_group == "G"
        assert list(notify.consumer_id_list) == ["cid-1", "cid-2"]
        assert abs(notify.sent_at_ms - time.time() * 1000) < 60_000  # stamped when sent


async def test_the_client_keeps_the_members_of_the_latest_notification_until_taken() -> None:
    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")
    try:

        def notify(*ids: str) -> broker_pb2.ChannelEvent:
            return broker_pb2.ChannelEvent(
                notify_consumer_ids_changed=broker_pb2.NotifyConsumerIdsChanged(
                    consumer_group="g", consumer_id_list=ids
                )
            )

        client._on_channel_event("b1:1", notify("x", "a"))
        client._on_channel_event("b2:1", notify("y", "a"))  # the latest wins
        client._on_channel_event("b3:1", notify())  # a broker that sends none changes nothing
        assert client.take_notified_consumer_ids("g") == ["y", "a"]
        assert client.take_notified_consumer_ids("g") is None
        assert client.notifications_received == 3

        # Read long after it was sent: its list is not used (a newer one may be on its way),
        # and it voids the list of an earlier one; the pass asks a broker.
        now_ms = int(time.time() * 1000)
        client._on_channel_event("b1:1", notify("x", "a"))
        late = notify("y", "a")
        late.notify_consumer_ids_changed.sent_at_ms = now_ms - 60_000
        client._on_channel_event("b2:1", late)
        assert client.take_notified_consumer_ids("g") is None
        assert client.stale_notifications == 1
        assert client.notifying_broker == {"g": "b2:1"}  # the pass asks the broker that sent it
        fresh = notify("z", "a")
        fresh.notify_consumer_ids_changed.sent_at_ms = now_ms
        client._on_channel_event("b3:1", fresh)
        assert client.take_notified_consumer_ids("g") == ["z", "a"]
    finally:
        await client.namesrv.close()


async def test_a_burst_of_changes_is_notified_once_more_with_the_latest_members() -> None:
    import asyncio

    notifier = DefaultConsumerIdsChangeListener(min_interval_ms=50)
    a, b, c = (Channel(x, f"cid-{x}", f"h:{i}") for i, x in enumerate("abc"))

    def drained(channel: Channel) -> list[list[str]]:
        told = []
        while not channel.outbox.empty():
            told.append(
                list(channel.outbox.get_nowait().notify_consumer_ids_changed.consumer_id_list)
            )
        return told

    from aiorocketmq.broker.client.consumer_manager import ConsumerGroupEvent

    notifier.handle(ConsumerGroupEvent.CHANGE, "G", [a])  # quiet group: at once
    assert drained(a) == [["cid-a"]]
    notifier.handle(ConsumerGroupEvent.CHANGE, "G", [a, b])  # within the window: held
    notifier.handle(ConsumerGroupEvent.CHANGE, "G", [a, b, c])  # replaces the held one
    assert drained(a) == [] and drained(c) == []
    await asyncio.sleep(0.08)
    assert drained(a) == drained(b) == drained(c) == [["cid-a", "cid-b", "cid-c"]]
    notifier.handle(ConsumerGroupEvent.CHANGE, "H", [a])  # another group has its own window
    assert drained(a) == [["cid-a"]]
    # Without a window every change goes out, as RocketMQ does.
    every = DefaultConsumerIdsChangeListener()
    for _ in range(3):
        every.handle(ConsumerGroupEvent.CHANGE, "G", [a])
    assert len(drained(a)) == 3


async def test_the_window_grows_with_the_group_and_a_lone_change_still_goes_at_once() -> None:
    import asyncio

    from aiorocketmq.broker.client.consumer_manager import ConsumerGroupEvent

    notifier = DefaultConsumerIdsChangeListener(min_interval_ms=10, ms_per_channel=2)
    assert notifier.window_s(1) == 0.010  # the floor
    assert notifier.window_s(1_000) == 2.0  # 2 ms per channel
    group = [Channel(str(i), f"cid-{i}", f"h:{i}") for i in range(40)]  # an 80 ms window

    def told(channel: Channel) -> int:
        n = 0
        while not channel.outbox.empty():
            channel.outbox.get_nowait()
            n += 1
        return n

    loop = asyncio.get_running_loop()
    first = loop.time()  # before the notifier reads its clock, so the bound below is exact
    notifier.handle(ConsumerGroupEvent.CHANGE, "G", group)  # quiet: at once
    assert told(group[0]) == 1
    notifier.handle(ConsumerGroupEvent.CHANGE, "G", group)  # held for 80 ms, not 10
    assert told(group[0]) == 0
    async with asyncio.timeout(5):  # a lower bound only: a loaded machine is late, never early
        await group[0].outbox.get()
    assert loop.time() - first >= 0.08
    assert told(group[0]) == 0  # one notification for the held change


async def test_after_a_late_notification_the_pass_asks_the_broker_that_sent_it() -> None:
    """That broker has seen the change; one picked at random may not have yet."""
    from types import SimpleNamespace
    from typing import Any

    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")
    asked: list[str] = []

    async def invoke_broker(name: str, method: str, request: Any, timeout: Any = None) -> Any:
        asked.append(name)
        return broker_pb2.GetConsumerListByGroupResponse(consumer_id_list=["127.0.0.1@a"])

    try:
        client.topic_route_table["T"] = common_pb2.TopicRouteData(
            broker_datas=[common_pb2.BrokerData(broker_name=f"broker-{x}") for x in "abcd"]
        )
        client.channels["b:1"] = SimpleNamespace(broker_name="broker-c")  # type: ignore[assignment]
        client.invoke_broker = invoke_broker  # type: ignore[method-assign]
        for _ in range(5):
            client.notifying_broker["g"] = "b:1"
            assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a"]
        assert asked == ["broker-c"] * 5
        assert client.notifying_broker == {}
    finally:
        await client.namesrv.close()


async def test_the_pass_asks_with_the_version_it_holds_and_an_unchanged_answer_is_that_list() -> (
    None
):
    """A periodic pass among 1,000 consumers then reads a few bytes, not 25 KB of ids."""
    from typing import Any

    from aiorocketmq.consumer.broker_channel import BrokerChannel
    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")
    asked: list[tuple[str, int]] = []
    answers: list[broker_pb2.GetConsumerListByGroupResponse] = []

    async def invoke_broker(name: str, method: str, request: Any, timeout: Any = None) -> Any:
        asked.append((name, request.known_version))
        return answers.pop(0)

    async def reopened(channel: BrokerChannel) -> None:
        pass

    try:
        client.topic_route_table["T"] = common_pb2.TopicRouteData(
            broker_datas=[common_pb2.BrokerData(broker_name=f"broker-{x}") for x in "ab"]
        )
        client.broker_addr_table = {"broker-a": {0: "a:1"}, "broker-b": {0: "b:1"}}
        client.invoke_broker = invoke_broker  # type: ignore[method-assign]
        for addr in ("a:1", "b:1"):
            client.channels[addr] = BrokerChannel(
                addr, client.client_id, lambda: None, client._on_channel_event, reopened
            )
            client.channels[addr]._opened(broker_pb2.ChannelOpened(channel_id=f"ch-{addr}"))
        client.channels["b:1"].members.whole("g", 7, ["127.0.0.1@z", "127.0.0.1@a"])
        # The broker whose version is held is asked, with it; "unchanged" is the list held.
        answers.append(broker_pb2.GetConsumerListByGroupResponse(version=7, unchanged=True))
        assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a", "127.0.0.1@z"]
        assert asked == [("broker-b", 7)]
        # Changed: the new list and its version are held, and asked with the next time.
        answers.append(
            broker_pb2.GetConsumerListByGroupResponse(
                consumer_id_list=["127.0.0.1@a", "127.0.0.1@c"], version=9
            )
        )
        assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a", "127.0.0.1@c"]
        assert client.channels["b:1"].members.version("g") == 9
        # "Unchanged" for a version no longer held (a refused notification dropped it
        # meanwhile): asked again without one, for the list.
        answers.append(broker_pb2.GetConsumerListByGroupResponse(version=8, unchanged=True))
        answers.append(
            broker_pb2.GetConsumerListByGroupResponse(consumer_id_list=["127.0.0.1@a"], version=8)
        )
        assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a"]
        assert asked[2:] == [("broker-b", 9), ("broker-b", 0)]
        # An unversioned answer (a change not yet notified) is used and not held.
        client.channels["b:1"].members.clear()
        answers.append(broker_pb2.GetConsumerListByGroupResponse(consumer_id_list=["127.0.0.1@a"]))
        assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a"]
        assert asked[-1][1] == 0
        assert all(c.members.version("g") == 0 for c in client.channels.values())
        # A channel not open holds nothing: asked without a version, the answer not held (its
        # broker may have restarted; the channel's reopening starts again from its lists).
        client.channels["a:1"].members.whole("g", 3, ["127.0.0.1@a"])
        client.channels["a:1"].channel_id = None
        client.topic_route_table["T"] = common_pb2.TopicRouteData(
            broker_datas=[common_pb2.BrokerData(broker_name="broker-a")]
        )
        answers.append(
            broker_pb2.GetConsumerListByGroupResponse(consumer_id_list=["127.0.0.1@a"], version=4)
        )
        assert await client.find_consumer_id_list("T", "g") == ["127.0.0.1@a"]
        assert asked[-1] == ("broker-a", 0)
        assert client.channels["a:1"].members.version("g") == 3
    finally:
        await client.namesrv.close()


async def test_an_answer_is_not_held_over_a_newer_notification_or_a_reopened_channel() -> None:
    from typing import Any

    from aiorocketmq.consumer.broker_channel import BrokerChannel
    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")
    during: list[Any] = []

    async def invoke_broker(name: str, method: str, request: Any, timeout: Any = None) -> Any:
        during.pop(0)()  # what happens while the answer is on its way
        return broker_pb2.GetConsumerListByGroupResponse(
            consumer_id_list=["127.0.0.1@a", "127.0.0.1@b"], version=8
        )

    async def reopened(channel: BrokerChannel) -> None:
        pass

    try:
        client.topic_route_table["T"] = common_pb2.TopicRouteData(
            broker_datas=[common_pb2.BrokerData(broker_name="broker-a")]
        )
        client.broker_addr_table = {"broker-a": {0: "a:1"}}
        client.invoke_broker = invoke_broker  # type: ignore[method-assign]
        channel = client.channels["a:1"] = BrokerChannel(
            "a:1", client.client_id, lambda: None, client._on_channel_event, reopened
        )
        channel._opened(broker_pb2.ChannelOpened(channel_id="c1"))
        during.append(lambda: channel.members.whole("g", 9, ["127.0.0.1@a"]))
        await client.find_consumer_id_list("T", "g")
        assert channel.members.members("g", 9) == ["127.0.0.1@a"]  # the notification's
        during.append(lambda: channel._opened(broker_pb2.ChannelOpened(channel_id="c2")))
        await client.find_consumer_id_list("T", "g")
        assert channel.members.version("g") == 0  # from the channel before: not held
    finally:
        await client.namesrv.close()


async def test_the_client_rebuilds_the_members_from_a_change_to_the_version_its_channel_holds() -> (
    None
):
    from aiorocketmq.consumer.broker_channel import BrokerChannel
    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")

    async def reopened(channel: BrokerChannel) -> None:
        pass

    client.channels["b1:1"] = BrokerChannel(
        "b1:1", client.client_id, lambda: None, client._on_channel_event, reopened
    )

    def notify(**fields: object) -> broker_pb2.ChannelEvent:
        return broker_pb2.ChannelEvent(
            notify_consumer_ids_changed=broker_pb2.NotifyConsumerIdsChanged(
                consumer_group="g", sent_at_ms=int(time.time() * 1000), **fields
            )
        )

    try:
        client._on_channel_event("b1:1", notify(version=3, consumer_id_list=["x", "a"]))
        assert client.take_notified_consumer_ids("g") == ["a", "x"]
        client._on_channel_event(
            "b1:1", notify(version=5, base_version=3, added_ids=["b"], removed_ids=["x"])
        )
        assert client.take_notified_consumer_ids("g") == ["a", "b"]
        # A change from a version this channel does not hold (not sent on this stream): no
        # list; the pass asks the broker that sent it.
        client._on_channel_event("b1:1", notify(version=9, base_version=7, added_ids=["c"]))
        assert client.take_notified_consumer_ids("g") is None
        assert client.notifying_broker == {"g": "b1:1"}
        # A reopened stream starts again from a whole list.
        client._on_channel_event("b1:1", notify(version=10, consumer_id_list=["a"]))
        client.channels["b1:1"]._opened(broker_pb2.ChannelOpened(channel_id="c2"))
        client._on_channel_event("b1:1", notify(version=11, base_version=10, added_ids=["d"]))
        assert client.take_notified_consumer_ids("g") is None
    finally:
        await client.namesrv.close()


async def test_a_pass_records_the_members_it_allocated_by_while_it_holds_its_share() -> None:
    members = Members("a", answer=["a", "b"])
    impl = rebalance(members)
    assert impl.allocated_by(["a", "b"]) is False  # no pass yet
    assert await impl.do_rebalance(False)
    assert impl.allocated_by(["a", "b"])
    assert not impl.allocated_by(["a", "b", "c"])
    next(iter(impl.process_queue_table.values())).dropped = True  # a queue lost since
    assert not impl.allocated_by(["a", "b"])
    members.answer = ["b", "c"]  # a stale list: no allocation, unbalanced
    assert not await impl.do_rebalance(False)
    assert impl.last_members is None


async def test_members_are_not_taken_as_allocated_by_while_a_pass_runs_or_after_a_route_change() -> (
    None
):
    import asyncio

    class SlowMode(Mode):
        def __init__(self) -> None:
            super().__init__()
            self.go = asyncio.Event()

        async def message_queue_changed(
            self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
        ) -> None:
            await self.go.wait()  # a push consumer heartbeats here: the network

    members = Members("a", answer=["a", "b"])
    mode = SlowMode()
    impl = rebalance(members, mode)
    mode.go.set()
    assert await impl.do_rebalance(False)
    assert impl.allocated_by(["a", "b"])
    # b leaves: a pass by [a] runs; [a, b] again arrives meanwhile (b back, same client id).
    mode.go.clear()
    members.answer = ["a"]
    running = asyncio.create_task(impl.do_rebalance(False))
    await asyncio.sleep(0.01)
    assert impl.assigned_queues() == QUEUES  # the pass holds its new allocation already
    assert not impl.allocated_by(["a", "b"])  # but its members are not known to be applied
    mode.go.set()
    assert await running
    assert impl.allocated_by(["a"])
    impl.topic_subscribe_info_table[T] = set(QUEUES)  # the route was fetched again
    assert not impl.allocated_by(["a"])


async def test_the_members_of_the_pass_running_now_need_no_other_pass() -> None:
    """The other brokers' notifications of one change, read while the first one's pass awaits
    its brokers: that pass allocates by their members, so none of them wakes another."""
    import asyncio

    class SlowMode(Mode):
        def __init__(self) -> None:
            super().__init__()
            self.go = asyncio.Event()

        async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
            await self.go.wait()  # the offset queries: the network
            return [0 for _ in mqs]

    members = Members("a", answer=["a"])
    mode = SlowMode()
    impl = rebalance(members, mode)
    running = asyncio.create_task(impl.do_rebalance(False))
    await asyncio.sleep(0.01)
    assert impl.assigned_queues() == set()  # the pass awaits its queries
    assert impl.allocated_by(["a"])  # it allocates by these: no other pass needed
    assert not impl.allocated_by(["a", "b"])  # other members: a pass is needed
    impl.topic_subscribe_info_table[T] = set(QUEUES)  # the route was fetched again
    assert not impl.allocated_by(["a"])  # the running pass used the old one
    mode.go.set()
    assert await running
    assert impl.allocated_by(["a"]) is False  # a route newer than the pass's
    assert await impl.do_rebalance(False)
    assert impl.allocated_by(["a"])
    # A topic subscribed since (the running pass, or the last, did not allocate it).
    impl.subscription_inner["U"] = ("*", 1)
    assert not impl.allocated_by(["a"])


async def test_a_notification_of_the_members_the_last_pass_used_wakes_no_pass() -> None:
    """Each broker notifies the same change: the second to fourth notifications carry the
    members the first one's pass already allocated by."""
    from aiorocketmq.consumer.client_instance import MQClientInstance
    from aiorocketmq.protocol.v1 import broker_pb2

    class Consumer:
        def __init__(self) -> None:
            self.done: list[str] = ["a", "b"]

        def allocated_by(self, members: list[str]) -> bool:
            return members == self.done

    client = MQClientInstance("127.0.0.1@a", "127.0.0.1:1")
    client.consumer_table["g"] = Consumer()  # type: ignore[assignment]
    wakeups: list[None] = []
    client.rebalance_service.wakeup = lambda: wakeups.append(None)  # type: ignore[method-assign]

    def notify(*ids: str) -> broker_pb2.ChannelEvent:
        return broker_pb2.ChannelEvent(
            notify_consumer_ids_changed=broker_pb2.NotifyConsumerIdsChanged(
                consumer_group="g", consumer_id_list=ids
            )
        )

    try:
        client._on_channel_event("b1:1", notify("a", "b"))
        assert wakeups == [] and client.take_notified_consumer_ids("g") is None
        assert client.notifications_already_applied == 1
        assert client.convergence.since is None  # no change to settle: its clock not started
        client._on_channel_event("b1:1", notify("a", "b", "c"))  # a change: a pass
        assert len(wakeups) == 1
        # A list still waits for its pass: a later one replaces it, whatever it says.
        client._on_channel_event("b2:1", notify("a", "b"))
        assert len(wakeups) == 2 and client.take_notified_consumer_ids("g") == ["a", "b"]
    finally:
        await client.namesrv.close()


async def test_a_pass_is_not_balanced_while_the_handoff_owes_a_release() -> None:
    """While a release is owed the pass does not count as balanced: the group is not reported
    settled, and a notification of the same members still wakes a pass (the retry itself is
    woken by the handoff)."""

    class Owing(Mode):
        owed = True

        def handoff_owed(self) -> bool:
            return self.owed

    members = Members("a", answer=["a"])
    mode = Owing()
    impl = rebalance(members, mode)
    assert not await impl.do_rebalance(False)  # its queues all held, but a release owed
    assert impl.last_members is None  # a notification of the same members still wakes a pass
    mode.owed = False
    assert await impl.do_rebalance(False)
