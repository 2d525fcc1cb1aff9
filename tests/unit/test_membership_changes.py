"""A group's membership sent as changes (``protocol.membership``): the broker's versions, the
notifications its listener offers each channel, and the client's copy rebuilt from them.

Pure: the listener's channels are read without a network, and the client side is
``NotifiedMembers`` as a ``BrokerChannel`` holds it.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.broker.client import Channel, ConsumerGroupEvent, DefaultConsumerIdsChangeListener
from aiorocketmq.protocol.membership import MembershipChange, MembershipHistory, NotifiedMembers
from aiorocketmq.protocol.v1 import broker_pb2


def test_a_change_from_a_kept_version_names_only_what_changed() -> None:
    history = MembershipHistory(keep=2)
    v1 = history.record("G", ["a", "b", "c"])
    v2 = history.record("G", ["a", "c", "d"])
    change = history.changes_since("G", v1, v2)
    assert change == MembershipChange(v2, v1, added=("d",), removed=("b",))
    v3 = history.record("G", ["a"])
    assert history.changes_since("G", v1, v3) is None  # forgotten: keep=2
    assert history.changes_since("G", 0, v3) is None  # a channel sent nothing yet
    assert history.changes_since("OTHER", v2, v3) is None


def test_versions_are_never_reused_across_groups_or_after_a_group_is_forgotten() -> None:
    history = MembershipHistory()
    a = history.record("A", ["x"])
    history.forget("A")
    b = history.record("A", ["x"])
    c = history.record("B", ["x"])
    assert len({a, b, c}) == 3
    assert history.changes_since("A", a, b) is None  # from before the group was forgotten


def test_members_that_repeat_an_id_are_never_a_base_for_changes() -> None:
    history = MembershipHistory()
    v1 = history.record("G", ["a", "a", "b"])
    v2 = history.record("G", ["a", "b"])
    assert history.changes_since("G", v1, v2) is None
    v3 = history.record("G", ["a", "b", "c"])
    assert history.changes_since("G", v2, v3) == MembershipChange(v3, v2, ("c",), ())


def test_the_client_applies_a_change_only_to_the_version_it_holds() -> None:
    held = NotifiedMembers()
    assert held.whole("G", 4, ["c", "a", "b"]) == ["a", "b", "c"]
    assert held.apply(MembershipChange(6, 5, ("d",), ()), "G") is None  # missed version 5
    assert held.version("G") == 0  # and it forgot its copy: the next whole list starts again
    held.whole("G", 6, ["a", "b"])
    assert held.apply(MembershipChange(7, 6, ("0", "c"), ("a",)), "G") == ["0", "b", "c"]
    assert held.version("G") == 7
    held.clear()
    assert held.apply(MembershipChange(8, 7, (), ()), "G") is None


def test_the_latest_round_names_its_members_and_a_query_records_none() -> None:
    history = MembershipHistory(keep=2)
    assert history.latest("G", ["a"]) == 0  # no round yet
    v1 = history.record("G", ["a", "b"])
    assert history.latest("G", ["b", "a"]) == v1
    assert history.latest("G", ["a"]) == 0  # changed since the round: no version, none made
    assert history.latest("G", ["a", "a"]) == 0
    assert history.changes_since("G", v1, history.record("G", ["a"])) is not None  # v1 kept
    history.record("G", ["a", "a"])
    assert history.latest("G", ["a", "a"]) == 0  # a repeated id is never a version


def test_a_broker_restarted_numbers_its_rounds_after_every_version_of_its_last_run() -> None:
    before = MembershipHistory(start=1_000)
    versions = [before.record("G", ["a"]) for _ in range(3)]
    assert versions == [1_001, 1_002, 1_003]
    after = MembershipHistory(start=2_000)  # its start time later: a newer base
    assert after.record("G", ["a"]) > max(versions)


def test_the_client_finds_its_members_by_version_and_takes_a_change_it_already_holds() -> None:
    held = NotifiedMembers()
    held.whole("G", 4, ["b", "a"])
    assert held.members("G", 4) == ["a", "b"]
    assert held.members("G", 3) is None
    assert held.members("OTHER", 4) is None
    # An answer brought version 4 before the notification of it (base 3) was read: that
    # notification is the members held, not a change refused.
    assert held.apply(MembershipChange(4, 3, ("b",), ()), "G") == ["a", "b"]
    assert held.version("G") == 4


def test_an_unversioned_whole_list_is_used_but_not_held() -> None:
    held = NotifiedMembers()
    held.whole("G", 3, ["a"])
    assert held.whole("G", 0, ["b", "a"]) == ["a", "b"]
    assert held.version("G") == 0


# ---- through the broker's listener and its channels -------------------------------------


def _drain(channel: Channel) -> list[broker_pb2.NotifyConsumerIdsChanged]:
    """What the stream handler would send: ``events()`` read until the outbox is empty."""

    async def read() -> list[broker_pb2.NotifyConsumerIdsChanged]:
        out: list[broker_pb2.NotifyConsumerIdsChanged] = []
        events = channel.events()
        while not channel.outbox.empty():
            try:
                event = await asyncio.wait_for(anext(events), 0.01)
            except TimeoutError:  # only superseded ones were left
                break
            out.append(event.notify_consumer_ids_changed)
        await events.aclose()
        return out

    return asyncio.run(read())


def _client_view(held: NotifiedMembers, notify: broker_pb2.NotifyConsumerIdsChanged) -> list[str]:
    """The client's rule: a whole list, or a change from the version held."""
    if notify.base_version:
        change = MembershipChange(
            notify.version,
            notify.base_version,
            tuple(notify.added_ids),
            tuple(notify.removed_ids),
        )
        members = held.apply(change, notify.consumer_group)
        assert members is not None, "a change from a version the channel was never sent"
        return members
    return held.whole(notify.consumer_group, notify.version, notify.consumer_id_list)


def test_a_join_is_sent_as_a_change_to_the_channels_that_hold_the_last_version() -> None:
    listener = DefaultConsumerIdsChangeListener()
    channels = [Channel(f"ch-{i}", f"cid-{i}", f"10.0.0.{i}:1") for i in range(3)]
    listener.notify_consumer_change("G", channels[:2])
    first = [_drain(c) for c in channels[:2]]
    assert all(list(n[0].consumer_id_list) == ["cid-0", "cid-1"] for n in first)
    listener.notify_consumer_change("G", channels)
    old, new = _drain(channels[0])[0], _drain(channels[2])[0]
    assert (old.base_version, list(old.added_ids), list(old.consumer_id_list)) == (
        first[0][0].version,
        ["cid-2"],
        [],
    )
    assert old.version == new.version
    assert list(new.consumer_id_list) == ["cid-0", "cid-1", "cid-2"]  # a new channel: whole


def test_the_trace_names_only_the_channels_a_notification_was_offered_to() -> None:
    """A channel whose client is notified by another broker gets nothing here, and the
    protocol trace (``notify_sent``, what the dashboard and the demo show) says so."""
    from typing import Any

    from aiorocketmq.trace import tracer

    listener = DefaultConsumerIdsChangeListener(broker_name="broker-a")
    here, elsewhere = Channel("ch-0", "cid-0", "10.0.0.1:1"), Channel("ch-1", "cid-1", "10.0.0.2:1")
    elsewhere.notified_elsewhere = True
    seen: list[dict[str, Any]] = []
    tracer.subscribe(seen.append)
    try:
        assert listener.notify_consumer_change("G", [here, elsewhere]) == 1
    finally:
        tracer.unsubscribe(seen.append)
    assert [(r["event"], r["broker"], r["client_id"]) for r in seen] == [
        ("notify_sent", "broker-a", "cid-0")
    ]
    assert _drain(elsewhere) == []


def test_a_group_unregistered_sends_whole_lists_again() -> None:
    listener = DefaultConsumerIdsChangeListener()
    channel = Channel("ch", "cid", "10.0.0.1:1")
    listener.notify_consumer_change("G", [channel])
    _drain(channel)
    listener.handle(ConsumerGroupEvent.UNREGISTER, "G")
    listener.notify_consumer_change("G", [channel])
    assert list(_drain(channel)[0].consumer_id_list) == ["cid"]


class LossyChannel(Channel):
    """A channel whose outbox is full while ``losing``: its offers are dropped."""

    __slots__ = ("losing",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.losing = False

    def offer(self, event: broker_pb2.ChannelEvent, *, group: str | None = None) -> bool:
        if self.losing:
            self.dropped += 1
            return False
        return super().offer(event, group=group)


@settings(max_examples=150, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            st.sets(st.integers(0, 9)),  # the other members of the round
            st.lists(st.sampled_from(["read", "hold", "drop"]), min_size=3, max_size=3),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_channel_rebuilds_every_membership_it_reads(
    rounds: list[tuple[set[int], list[str]]],
) -> None:
    """Whatever the rounds, and whether each channel reads its notifications at once, late
    (superseded by the next round's) or never (a full outbox): the members a client rebuilds
    are exactly those of the round it reads."""
    listener = DefaultConsumerIdsChangeListener()
    listener.history.keep = 3  # small, so that falling behind it is exercised too
    readers = [LossyChannel(f"ch-{i}", f"r-{i}", f"10.0.0.{i}:1") for i in range(3)]
    held = [NotifiedMembers() for _ in readers]
    for others, fates in rounds:
        members = readers + [Channel(f"o-{o}", f"o-{o}", "10.0.1.1:1") for o in sorted(others)]
        expected = sorted(c.client_id for c in members)
        for channel, fate in zip(readers, fates, strict=True):
            channel.losing = fate == "drop"
        listener.notify_consumer_change("G", members)
        for i, (channel, fate) in enumerate(zip(readers, fates, strict=True)):
            if fate == "read":
                seen = _drain(channel)
                assert len(seen) == 1  # the round's; any held before it was superseded
                assert _client_view(held[i], seen[0]) == expected


def test_the_same_members_again_to_one_channel_cost_no_version() -> None:
    """``current``: a repeat of the latest membership (a client asking one broker for its
    notifications again) reuses its version, so it pushes no base the others hold out."""
    history = MembershipHistory(keep=2)
    v1 = history.record("g", ["a", "b"])
    v2 = history.record("g", ["a", "b", "c"])
    assert history.current("g", ["c", "a", "b"]) == v2
    assert history.changes_since("g", v1, v2) is not None  # v1 is still kept
    v3 = history.current("g", ["a"])  # not the latest members: a new round
    assert v3 > v2
    assert history.current("h", ["x"]) > v3  # a group never recorded
