"""The broker's consumer groups: ConsumerManager's event rules, the notification listener,
channels, duplicate client ids, and the producer table. Pure: a fake clock, no network."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.broker.client import (
    Channel,
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerManager,
    DefaultConsumerIdsChangeListener,
    ProducerManager,
    SubscriptionData,
)
from aiorocketmq.protocol.tags import java_string_hash
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import capture_logs

CLUSTERING = common_pb2.CLUSTERING
BROADCASTING = common_pb2.BROADCASTING
PUSH = common_pb2.CONSUME_PASSIVELY
LAST = common_pb2.CONSUME_FROM_LAST_OFFSET
CHANGE = ConsumerGroupEvent.CHANGE


class Recorder:
    """A listener that remembers every event."""

    def __init__(self) -> None:
        self.events: list[tuple[ConsumerGroupEvent, str, tuple[object, ...]]] = []

    def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
        self.events.append((event, group, args))

    def names(self, group: str | None = None) -> list[str]:
        return [e.name for e, g, _ in self.events if group is None or g == group]

    def clear(self) -> None:
        self.events.clear()


class Broker:
    """A ConsumerManager wired like the broker does it, plus a recorder."""

    def __init__(self, *, broker_notify: bool = True, expiry_ms: int = 120_000) -> None:
        self.recorder = Recorder()
        self.notifier = DefaultConsumerIdsChangeListener(broker_notify)
        self.manager = ConsumerManager(
            [self.notifier, self.recorder], channel_expired_timeout_ms=expiry_ms
        )
        self._n = 0

    def channel(self, client_id: str, addr: str | None = None) -> Channel:
        self._n += 1
        return Channel(f"ch-{self._n}", client_id, addr or f"10.0.0.{self._n}:5000{self._n}")

    def heartbeat(
        self,
        group: str,
        channel: Channel,
        topics: dict[str, int] | list[str],
        *,
        now: int = 0,
        model: common_pb2.MessageModel = CLUSTERING,
        notify: bool = True,
        client_id: str | None = None,
    ) -> bool:
        versions = topics if isinstance(topics, dict) else dict.fromkeys(topics, 1)
        subs = [SubscriptionData.build(t, "*", v) for t, v in versions.items()]
        info = ClientChannelInfo.for_channel(channel, client_id, now=now)
        return self.manager.register_consumer(group, info, PUSH, model, LAST, subs, notify, now)


def notified(channel: Channel) -> list[str]:
    """Drain the channel's outbox; the groups it was told about."""
    groups: list[str] = []
    while not channel.outbox.empty():
        event = channel.outbox.get_nowait()
        assert event.WhichOneof("event") == "notify_consumer_ids_changed"
        groups.append(event.notify_consumer_ids_changed.consumer_group)
    return groups


# ---- joining -------------------------------------------------------------------------------


def test_first_client_registers_group_and_fires_client_register_change_register() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    assert b.heartbeat("G", c1, ["T"]) is True
    assert b.recorder.names() == ["CLIENT_REGISTER", "CHANGE", "REGISTER"]
    info = b.manager.get_consumer_group_info("G")
    assert info is not None
    assert info.get_all_client_id() == ["cid-1"]
    assert notified(c1) == ["G"]


def test_second_client_joining_notifies_the_first() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"])
    notified(c1)
    assert b.heartbeat("G", c2, ["T"], now=1_000) is True
    assert notified(c1) == ["G"]
    assert notified(c2) == ["G"]
    change = [args for e, _, args in b.recorder.events if e is CHANGE][-1]
    assert change == ([c1, c2],)
    assert b.notifier.notifications_sent == 3


def test_refresh_heartbeat_changes_nothing_but_still_fires_register() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    b.recorder.clear()
    notified(c1)
    assert b.heartbeat("G", c1, ["T"], now=30_000) is False
    assert b.recorder.names() == ["REGISTER"]
    assert notified(c1) == []
    info = b.manager.get_consumer_group_info("G")
    assert info is not None
    assert info.channel_info_table[c1].last_update_timestamp == 30_000
    assert info.last_update_timestamp == 30_000


def test_changed_topic_set_fires_change() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T1"])
    b.heartbeat("G", c2, ["T1"])
    notified(c1), notified(c2)

    assert b.heartbeat("G", c2, ["T1", "T2"], now=1) is True  # a topic added
    assert notified(c1) == ["G"]
    assert notified(c2) == ["G"]
    assert b.heartbeat("G", c1, ["T1"], now=2) is True  # T2 removed: group-wide, last writer
    assert notified(c1) == ["G"]
    assert notified(c2) == ["G"]
    assert b.manager.find_subscription_data("G", "T2") is None
    assert b.manager.query_topic_consume_by_who("T2") == set()
    assert b.manager.query_topic_consume_by_who("T1") == {"G"}


def test_sub_version_only_change_replaces_without_change() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, {"T": 100})
    b.recorder.clear()
    notified(c1)

    assert b.heartbeat("G", c1, {"T": 200}, now=1) is False
    sub = b.manager.find_subscription_data("G", "T")
    assert sub is not None and sub.sub_version == 200
    assert "CHANGE" not in b.recorder.names()
    assert notified(c1) == []

    # An older version does not replace the stored one.
    b.heartbeat("G", c1, {"T": 150}, now=2)
    sub = b.manager.find_subscription_data("G", "T")
    assert sub is not None and sub.sub_version == 200


def test_tag_change_with_newer_version_is_stored_without_change() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    info = ClientChannelInfo.for_channel(c1)
    first = [SubscriptionData.build("T", "A", 1)]
    b.manager.register_consumer("G", info, PUSH, CLUSTERING, LAST, first, True, 0)
    notified(c1)
    second = [SubscriptionData.build("T", "A || B", 2)]
    assert b.manager.register_consumer("G", info, PUSH, CLUSTERING, LAST, second, True, 1) is False
    sub = b.manager.find_subscription_data("G", "T")
    assert sub is not None
    assert sub.tags_set == {"A", "B"}
    assert sub.code_set == {java_string_hash("A"), java_string_hash("B")}
    assert notified(c1) == []


def test_heartbeat_overwrites_group_settings_last_writer_wins() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"])
    info = ClientChannelInfo.for_channel(c2)
    subs = [SubscriptionData.build("T", "*", 1)]
    b.manager.register_consumer(
        "G",
        info,
        common_pb2.CONSUME_ACTIVELY,
        CLUSTERING,
        common_pb2.CONSUME_FROM_FIRST_OFFSET,
        subs,
        True,
        5,
    )
    group = b.manager.get_consumer_group_info("G")
    assert group is not None
    assert group.consume_type == common_pb2.CONSUME_ACTIVELY
    assert group.consume_from_where == common_pb2.CONSUME_FROM_FIRST_OFFSET


def test_known_channel_with_other_client_id_is_replaced_but_not_a_change() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    notified(c1)
    assert b.heartbeat("G", c1, ["T"], now=1, client_id="cid-renamed") is False
    group = b.manager.get_consumer_group_info("G")
    assert group is not None and group.get_all_client_id() == ["cid-renamed"]
    assert notified(c1) == []


# ---- switches ------------------------------------------------------------------------------


def test_broker_level_switch_suppresses_notifications() -> None:
    b = Broker(broker_notify=False)
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"])
    b.heartbeat("G", c2, ["T"])
    b.manager.do_channel_close_event(c2.remote_addr, c2)
    assert "CHANGE" in b.recorder.names()  # the manager fires; the listener drops it
    assert notified(c1) == []
    assert b.notifier.notifications_sent == 0


def test_group_level_switch_suppresses_change_on_register_and_unregister() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"], notify=False)
    b.heartbeat("G", c2, ["T"], notify=False)
    b.manager.unregister_consumer("G", ClientChannelInfo.for_channel(c2), False)
    assert "CHANGE" not in b.recorder.names()
    assert notified(c1) == []


def test_group_level_switch_is_not_consulted_on_channel_close() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"], notify=False)
    b.heartbeat("G", c2, ["T"], notify=False)
    assert b.manager.do_channel_close_event(c2.remote_addr, c2) == ["G"]
    assert notified(c1) == ["G"]


# ---- leaving -------------------------------------------------------------------------------


def test_channel_close_notifies_the_rest_of_the_group_and_no_other_group() -> None:
    b = Broker()
    a1, a2 = b.channel("a-1"), b.channel("a-2")
    o1 = b.channel("o-1")
    b.heartbeat("A", a1, ["T"])
    b.heartbeat("A", a2, ["T"])
    b.heartbeat("OTHER", o1, ["T"])
    notified(a1), notified(a2), notified(o1)
    b.recorder.clear()

    assert b.manager.do_channel_close_event(a2.remote_addr, a2) == ["A"]
    assert notified(a1) == ["A"]
    assert notified(o1) == []
    assert b.recorder.names() == ["CLIENT_UNREGISTER", "CHANGE"]
    group = b.manager.get_consumer_group_info("A")
    assert group is not None and group.get_all_client_id() == ["a-1"]


def test_channel_close_of_last_member_removes_group_with_unregister() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    b.recorder.clear()
    assert b.manager.do_channel_close_event(c1.remote_addr, c1) == ["G"]
    assert b.recorder.names() == ["CLIENT_UNREGISTER", "UNREGISTER", "CHANGE"]
    assert b.manager.get_consumer_group_info("G") is None
    assert b.manager.query_topic_consume_by_who("T") == set()


def test_channel_close_leaves_every_group_of_the_client() -> None:
    b = Broker()
    c1, x, y = b.channel("cid-1"), b.channel("x"), b.channel("y")
    b.heartbeat("G1", c1, ["T"])
    b.heartbeat("G2", c1, ["T"])
    b.heartbeat("G1", x, ["T"])
    b.heartbeat("G2", y, ["T"])
    notified(x), notified(y)
    assert sorted(b.manager.do_channel_close_event(c1.remote_addr, c1)) == ["G1", "G2"]
    assert notified(x) == ["G1"]
    assert notified(y) == ["G2"]


def test_channel_close_of_unknown_channel_does_nothing() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    b.recorder.clear()
    stranger = b.channel("stranger")
    assert b.manager.do_channel_close_event(stranger.remote_addr, stranger) == []
    assert b.recorder.events == []


def test_unregister_notifies_the_rest_of_the_group() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"])
    b.heartbeat("G", c2, ["T"])
    notified(c1), notified(c2)
    b.recorder.clear()
    b.manager.unregister_consumer("G", ClientChannelInfo.for_channel(c2), True)
    assert b.recorder.names() == ["CLIENT_UNREGISTER", "CHANGE"]
    assert notified(c1) == ["G"]
    assert notified(c2) == []


def test_unregister_fires_change_even_when_nothing_was_removed() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    notified(c1)
    b.recorder.clear()
    stranger = b.channel("stranger")
    b.manager.unregister_consumer("G", ClientChannelInfo.for_channel(stranger), True)
    assert b.recorder.names() == ["CHANGE"]
    assert notified(c1) == ["G"]
    # An unknown group: nothing at all.
    b.recorder.clear()
    b.manager.unregister_consumer("NOPE", ClientChannelInfo.for_channel(stranger), True)
    assert b.recorder.events == []


def test_unregister_of_last_member_removes_group() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"])
    b.recorder.clear()
    b.manager.unregister_consumer("G", ClientChannelInfo.for_channel(c1), True)
    assert b.recorder.names() == ["CLIENT_UNREGISTER", "UNREGISTER", "CHANGE"]
    assert b.manager.consumer_table == {}
    assert b.manager.topic_group_table == {}


# ---- expiry --------------------------------------------------------------------------------


def test_scan_removes_after_expiry_without_notifying_by_default() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"], now=0)
    b.heartbeat("G", c2, ["T"], now=0)
    b.heartbeat("G", c1, ["T"], now=100_000)  # c1 keeps heartbeating, c2 went silent
    notified(c1), notified(c2)
    b.recorder.clear()

    assert b.manager.scan_not_active_channel(120_000) == []  # exactly 120 s: still alive
    expired = b.manager.scan_not_active_channel(120_001)
    assert [(g, i.client_id) for g, i in expired] == [("G", "cid-2")]
    assert c2.closed
    assert not c1.closed
    assert b.recorder.names() == ["CLIENT_UNREGISTER"]
    assert notified(c1) == []
    group = b.manager.get_consumer_group_info("G")
    assert group is not None and group.get_all_client_id() == ["cid-1"]

    # The close event that follows finds the channel already gone: still nobody notified.
    assert b.manager.do_channel_close_event(c2.remote_addr, c2) == []
    assert notified(c1) == []


def test_scan_with_notify_fires_change_to_survivors() -> None:
    b = Broker(expiry_ms=5_000)  # the setting, shrunk the way a test or a user would
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"], now=0)
    b.heartbeat("G", c2, ["T"], now=0)
    b.heartbeat("G", c1, ["T"], now=4_000)
    notified(c1), notified(c2)
    b.recorder.clear()
    expired = b.manager.scan_not_active_channel(5_001, notify=True)
    assert [i.client_id for _, i in expired] == ["cid-2"]
    assert b.recorder.names() == ["CLIENT_UNREGISTER", "CHANGE"]
    assert notified(c1) == ["G"]


def test_scan_removes_emptied_group_without_unregister_event() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T"], now=0)
    b.recorder.clear()
    b.manager.scan_not_active_channel(200_000)
    assert b.manager.get_consumer_group_info("G") is None
    assert b.manager.query_topic_consume_by_who("T") == set()
    assert b.recorder.names() == ["CLIENT_UNREGISTER"]


def test_scan_with_notify_does_not_notify_broadcasting_groups() -> None:
    b = Broker(expiry_ms=1_000)
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("B", c1, ["T"], now=0, model=BROADCASTING)
    b.heartbeat("B", c2, ["T"], now=0, model=BROADCASTING)
    b.heartbeat("B", c1, ["T"], now=900, model=BROADCASTING)
    b.manager.scan_not_active_channel(1_001, notify=True)
    assert notified(c1) == []


# ---- isolation and broadcasting ------------------------------------------------------------


def test_groups_never_hear_about_each_other() -> None:
    b = Broker()
    a1, b1 = b.channel("a-1"), b.channel("b-1")
    b.heartbeat("A", a1, ["T"])
    b.heartbeat("B", b1, ["T"])
    notified(a1), notified(b1)
    b2 = b.channel("b-2")
    b.heartbeat("B", b2, ["T"])
    b.manager.unregister_consumer("B", ClientChannelInfo.for_channel(b2), True)
    b.manager.do_channel_close_event(b1.remote_addr, b1)
    assert notified(a1) == []


def test_broadcasting_group_is_never_notified() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    assert b.heartbeat("B", c1, ["T"], model=BROADCASTING) is True
    assert b.heartbeat("B", c2, ["T", "U"], model=BROADCASTING) is True
    b.manager.unregister_consumer("B", ClientChannelInfo.for_channel(c2), True)
    c3 = b.channel("cid-3")
    b.heartbeat("B", c3, ["T"], model=BROADCASTING)
    b.manager.do_channel_close_event(c3.remote_addr, c3)
    assert "CHANGE" not in b.recorder.names()
    assert notified(c1) == []


# ---- duplicate client ids ------------------------------------------------------------------


def test_duplicate_client_id_in_a_group_is_detected_and_logged() -> None:
    b = Broker()
    p1 = b.channel("172.17.0.2@1", "172.17.0.2:40001")
    p2 = b.channel("172.17.0.2@1", "172.17.0.3:40002")
    b.heartbeat("G", p1, ["T"])
    with capture_logs() as logs:
        b.heartbeat("G", p2, ["T"])
    warnings = [e for e in logs if e["event"] == "duplicate client id in consumer group"]
    assert len(warnings) == 1
    w = warnings[0]
    assert w["log_level"] == "warning"
    assert w["group"] == "G"
    assert w["client_id"] == "172.17.0.2@1"
    assert {w["remote_addr"], w["other_remote_addr"]} == {"172.17.0.2:40001", "172.17.0.3:40002"}
    assert b.manager.duplicate_client_ids("G") == {
        "172.17.0.2@1": ["172.17.0.2:40001", "172.17.0.3:40002"]
    }
    # The id list still shows both, as RocketMQ's does.
    group = b.manager.get_consumer_group_info("G")
    assert group is not None and group.get_all_client_id() == ["172.17.0.2@1"] * 2

    # Refresh heartbeats do not repeat the warning; a leave clears the report.
    with capture_logs() as logs:
        b.heartbeat("G", p2, ["T"], now=30_000)
    assert not [e for e in logs if e["event"] == "duplicate client id in consumer group"]
    b.manager.do_channel_close_event(p2.remote_addr, p2)
    assert b.manager.duplicate_client_ids("G") == {}


def test_same_client_id_in_different_groups_is_not_a_duplicate() -> None:
    b = Broker()
    c1 = b.channel("cid")
    c2 = b.channel("cid")
    b.heartbeat("G1", c1, ["T"])
    b.heartbeat("G2", c2, ["T"])
    assert b.manager.duplicate_client_ids("G1") == {}
    assert b.manager.duplicate_client_ids("G2") == {}
    assert b.manager.duplicate_client_ids("missing") == {}


# ---- queries -------------------------------------------------------------------------------


def test_find_channel_and_subscription_and_topic_consumers() -> None:
    b = Broker()
    c1 = b.channel("cid-1")
    b.heartbeat("G", c1, ["T", "%RETRY%G"])
    b.heartbeat("H", b.channel("cid-2"), ["T"])
    found = b.manager.find_channel("G", "cid-1")
    assert found is not None and found.channel is c1
    assert b.manager.find_channel("G", "nobody") is None
    assert b.manager.find_channel("nogroup", "cid-1") is None
    assert b.manager.find_subscription_data("G", "%RETRY%G") is not None
    assert b.manager.find_subscription_data("nogroup", "T") is None
    assert b.manager.query_topic_consume_by_who("T") == {"G", "H"}
    assert b.manager.query_topic_consume_by_who("unknown") == set()


def test_listener_failure_does_not_stop_other_listeners() -> None:
    class Broken:
        def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
            raise RuntimeError("boom")

    recorder = Recorder()
    manager = ConsumerManager([Broken(), recorder])
    channel = Channel("ch", "cid", "1.2.3.4:5")
    with capture_logs() as logs:
        manager.register_consumer(
            "G",
            ClientChannelInfo.for_channel(channel),
            PUSH,
            CLUSTERING,
            LAST,
            [SubscriptionData("T")],
            True,
            0,
        )
    assert recorder.names() == ["CLIENT_REGISTER", "CHANGE", "REGISTER"]
    assert any(e["event"] == "consumer ids change listener failed" for e in logs)


# ---- the notification listener -------------------------------------------------------------


def test_notify_logs_group_and_channel_count() -> None:
    b = Broker()
    c1, c2 = b.channel("cid-1"), b.channel("cid-2")
    b.heartbeat("G", c1, ["T"])
    with capture_logs() as logs:
        b.heartbeat("G", c2, ["T"])
    notes = [e for e in logs if e["event"] == "NOTIFY_CONSUMER_IDS_CHANGED"]
    assert notes == [
        {
            "event": "NOTIFY_CONSUMER_IDS_CHANGED",
            "log_level": "info",
            "group": "G",
            "channels": 2,
            "sent": 2,
            "notified_elsewhere": 0,
        }
    ]
    c2.notified_elsewhere = True  # its client takes another broker's notifications
    with capture_logs() as logs:
        b.heartbeat("G", b.channel("cid-3"), ["T"])
    [note] = [e for e in logs if e["event"] == "NOTIFY_CONSUMER_IDS_CHANGED"]
    assert (note["channels"], note["sent"], note["notified_elsewhere"]) == (2, 2, 1)


def test_batched_mode_keeps_latest_channel_list_until_flush() -> None:
    notifier = DefaultConsumerIdsChangeListener(real_time_notify_consumer_change=False)
    manager = ConsumerManager([notifier])
    c1, c2 = Channel("1", "cid-1", "a:1"), Channel("2", "cid-2", "a:2")
    for i, ch in enumerate((c1, c2)):
        manager.register_consumer(
            "G",
            ClientChannelInfo.for_channel(ch),
            PUSH,
            CLUSTERING,
            LAST,
            [SubscriptionData("T")],
            True,
            i,
        )
    assert notified(c1) == [] and notified(c2) == []
    assert notifier.consumer_channel_map == {"G": [c1, c2]}
    assert notifier.flush_pending() == 2
    assert notified(c1) == ["G"] and notified(c2) == ["G"]
    assert notifier.consumer_channel_map == {}


def test_full_or_closed_outbox_drops_notification_without_blocking() -> None:
    notifier = DefaultConsumerIdsChangeListener()
    full = Channel("f", "cid-f", "a:1", outbox_size=1)
    assert full.offer(broker_pb2.ChannelEvent()) is True
    closed = Channel("c", "cid-c", "a:2")
    closed.close()
    ok = Channel("o", "cid-o", "a:3")
    assert notifier.notify_consumer_change("G", [full, closed, ok]) == 1
    assert notifier.notifications_sent == 1
    assert notifier.notifications_dropped == 2
    assert full.dropped == 1 and closed.dropped == 1
    assert notified(ok) == ["G"]


# ---- the channel ---------------------------------------------------------------------------


async def test_channel_events_yield_in_order_and_stop_on_close() -> None:
    channel = Channel("ch", "cid", "1.2.3.4:5")
    received: list[str] = []

    async def read() -> None:
        async for event in channel.events():
            received.append(event.notify_consumer_ids_changed.consumer_group)

    reader = asyncio.create_task(read())
    for group in ("A", "B"):
        channel.offer(
            broker_pb2.ChannelEvent(
                notify_consumer_ids_changed=broker_pb2.NotifyConsumerIdsChanged(
                    consumer_group=group
                )
            )
        )
    await asyncio.sleep(0)
    channel.close()  # wakes the reader, blocked on an empty outbox by now
    await asyncio.wait_for(reader, timeout=2)
    assert received == ["A", "B"]
    assert channel.offer(broker_pb2.ChannelEvent()) is False


async def test_channel_close_with_full_outbox_still_ends_the_reader() -> None:
    channel = Channel("ch", "cid", "1.2.3.4:5", outbox_size=2)
    channel.offer(broker_pb2.ChannelEvent())
    channel.offer(broker_pb2.ChannelEvent())
    channel.close()
    channel.close()  # idempotent
    events = [e async for e in channel.events()]
    assert events == []


async def test_a_notification_supersedes_its_groups_notifications_still_queued() -> None:
    """A reader that fell behind reads each group's latest membership once, and every other
    event in order."""

    def notify(group: str, *ids: str) -> broker_pb2.ChannelEvent:
        return broker_pb2.ChannelEvent(
            notify_consumer_ids_changed=broker_pb2.NotifyConsumerIdsChanged(
                consumer_group=group, consumer_id_list=list(ids)
            )
        )

    released = broker_pb2.ChannelEvent(queue_released=broker_pb2.QueueReleased(consumer_group="A"))
    channel = Channel("ch", "cid", "1.2.3.4:5")
    channel.offer(notify("A", "c1"), group="A")
    channel.offer(notify("B", "c1"), group="B")
    channel.offer(released)
    channel.offer(notify("A", "c1", "c2"), group="A")
    channel.offer(notify("A", "c1", "c2", "c3"), group="A")
    seen: list[tuple[str, list[str]]] = []

    async def read() -> None:
        async for event in channel.events():
            if event.HasField("queue_released"):
                seen.append(("released", []))
            else:
                n = event.notify_consumer_ids_changed
                seen.append((n.consumer_group, list(n.consumer_id_list)))

    reader = asyncio.ensure_future(read())
    await asyncio.sleep(0)
    assert seen == [("B", ["c1"]), ("released", []), ("A", ["c1", "c2", "c3"])]
    assert channel.superseded == 2
    channel.offer(notify("A", "c1"), group="A")  # read at once: nothing to supersede
    await asyncio.sleep(0)
    assert seen[-1] == ("A", ["c1"])
    channel.close()
    await asyncio.wait_for(reader, timeout=2)


def test_channel_identity_is_the_object() -> None:
    a = Channel("same", "cid", "h:1")
    b = Channel("same", "cid", "h:1")
    assert a != b
    assert len({a, b}) == 2
    assert "same" in repr(a)


# ---- subscription data ---------------------------------------------------------------------


def test_subscription_data_proto_round_trip() -> None:
    sub = SubscriptionData.build("T", "TagA || TagB", 42)
    assert SubscriptionData.from_proto(sub.to_proto()) == sub
    blank = SubscriptionData.from_proto(common_pb2.SubscriptionData(topic="T"))
    assert blank.sub_string == "*" and blank.expression_type == "TAG"


# ---- producers -----------------------------------------------------------------------------


def test_producer_manager_register_refresh_unregister() -> None:
    pm = ProducerManager()
    ch = Channel("p1", "pid-1", "h:1")
    info = ClientChannelInfo.for_channel(ch)
    assert pm.register_producer("PG", info, 0) is True
    assert pm.register_producer("PG", ClientChannelInfo.for_channel(ch), 10) is False
    assert pm.group_channel_table["PG"][ch].last_update_timestamp == 10
    assert pm.find_channel("pid-1") is ch
    assert pm.unregister_producer("PG", info) is True
    assert pm.group_channel_table == {}
    assert pm.find_channel("pid-1") is None
    assert pm.unregister_producer("PG", info) is False


def test_producer_manager_channel_close_and_scan() -> None:
    pm = ProducerManager(channel_expired_timeout_ms=1_000)
    a, b = Channel("a", "pid-a", "h:1"), Channel("b", "pid-b", "h:2")
    pm.register_producer("PG1", ClientChannelInfo.for_channel(a), 0)
    pm.register_producer("PG2", ClientChannelInfo.for_channel(a), 0)
    pm.register_producer("PG1", ClientChannelInfo.for_channel(b), 0)
    assert sorted(pm.do_channel_close_event(a.remote_addr, a)) == ["PG1", "PG2"]
    assert list(pm.group_channel_table) == ["PG1"]
    assert pm.find_channel("pid-a") is None

    assert pm.scan_not_active_channel(1_000) == []
    expired = pm.scan_not_active_channel(1_001)
    assert [(g, i.client_id) for g, i in expired] == [("PG1", "pid-b")]
    assert b.closed
    assert pm.group_channel_table == {}


def test_producer_client_lookup_survives_leaving_one_of_two_groups() -> None:
    pm = ProducerManager()
    ch = Channel("a", "pid", "h:1")
    info = ClientChannelInfo.for_channel(ch)
    pm.register_producer("PG1", info, 0)
    pm.register_producer("PG2", ClientChannelInfo.for_channel(ch), 0)
    pm.unregister_producer("PG1", info)
    assert pm.find_channel("pid") is ch
    assert [i.client_id for i in pm.get_group_channels("PG2")] == ["pid"]


@pytest.mark.parametrize("model", [CLUSTERING, BROADCASTING])
def test_register_returns_true_for_new_channel_whatever_the_model(
    model: common_pb2.MessageModel,
) -> None:
    b = Broker()
    assert b.heartbeat("G", b.channel("cid"), ["T"], model=model) is True
