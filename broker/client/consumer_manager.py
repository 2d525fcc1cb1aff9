"""``ConsumerManager``: the broker's consumer groups (consumer_table, channel_info_table).

Everything the broker knows about who consumes lives here; nothing here does I/O or reads a
clock (``now`` is an argument in ms). The gRPC service calls in from its handlers:

================================  ============================================================
RocketMQ trigger                  call
================================  ============================================================
HEART_BEAT (34)                   ``register_consumer`` for each group of the heartbeat
UNREGISTER_CLIENT (35)            ``unregister_consumer``
channel close / error / idle      ``do_channel_close_event`` (here: the OpenChannel stream ends)
housekeeping every 10 s           ``scan_not_active_channel`` (120 s expiry)
GET_CONSUMER_LIST_BY_GROUP (38)   ``get_consumer_group_info(group).get_all_client_id()``
================================  ============================================================

Theory of operation. ``consumer_table`` maps a group to its ``ConsumerGroupInfo``: the group's
subscriptions (``subscription_table``, topic -> ``SubscriptionData``, group-wide, last writer
wins) and its live connections (``channel_info_table``, keyed by the ``Channel`` object exactly
as RocketMQ keys it by the Netty channel; requests name a channel by id and the service maps the
id to the object). When the set of channels or the set of topics changes, the manager fires
``CHANGE`` to its listeners; ``DefaultConsumerIdsChangeListener`` turns that into a
``NOTIFY_CONSUMER_IDS_CHANGED`` pushed to every channel of the group, and each consumer
rebalances at once. Groups never hear about each other.

The event rules (RocketMQ's ``ConsumerManager``), as a table:

=======================  ================================================================
path                     events fired
=======================  ================================================================
register_consumer        CLIENT_REGISTER if the channel is new; CHANGE if (new channel, or
                         a topic added or removed) and the group-level notify flag is on
                         and the group is not BROADCASTING; REGISTER always. A
                         subVersion-only change replaces the subscription, no CHANGE.
unregister_consumer      CLIENT_UNREGISTER if the channel was there; UNREGISTER if the
                         group is now empty (and removed); CHANGE if the group-level flag
                         is on and not BROADCASTING, even when nothing was removed.
do_channel_close_event   per group holding the channel: CLIENT_UNREGISTER; UNREGISTER if
                         the group is now empty; CHANGE unless BROADCASTING. The
                         group-level notify flag is not consulted on this path.
scan_not_active_channel  CLIENT_UNREGISTER per expired channel, which is closed and
                         removed; an emptied group is removed. No CHANGE, no UNREGISTER
                         (RocketMQ): survivors notice at their next periodic rebalance.
                         ``notify=True`` (ours) also fires CHANGE to each affected
                         non-BROADCASTING group.
=======================  ================================================================

The broker-level switch (``notifyConsumerIdsChangedEnable`` in broker.conf) belongs to the
listener (``DefaultConsumerIdsChangeListener``), which drops CHANGE when it is off; the
group-level switch (the subscription group config) is the ``is_notify_consumer_ids_changed_enable``
argument. Either one off silences the group.

Listener arguments per event: CHANGE ``(channels: list[Channel])``; UNREGISTER ``()``;
REGISTER ``(sub_list: list[SubscriptionData], info: ClientChannelInfo)``; CLIENT_REGISTER and
CLIENT_UNREGISTER ``(info: ClientChannelInfo, topics: set[str])``.

Where we differ from RocketMQ, and why:

- Duplicate client ids: two live channels of one group with the same client id (two processes
  whose ``ip@instanceName`` collide, common in containers) make every member compute the same
  allocation twice, so one share of the queues is consumed twice and another by nobody.
  RocketMQ says nothing; ``register_consumer`` logs a loud warning naming both addresses and
  ``duplicate_client_ids`` reports it. The id list itself is unchanged (it still shows the
  duplicate, as RocketMQ's does) so clients behave as they would against RocketMQ.
- ``topic_group_table`` is kept exact: a group leaves a topic's set when a heartbeat drops the
  topic or the group goes away. RocketMQ prunes it only when the group is removed.
- Not here: the compensation table (clients that pull without heartbeats), the V2 light
  heartbeat (``registerConsumerWithoutSub``) and the fast channel-event path; our clients
  always heartbeat with their subscriptions.
"""

from __future__ import annotations

import asyncio
import enum
import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.broker.client.subscription_data import SubscriptionData
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.membership import MembershipHistory
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.trace import tracer

__all__ = [
    "CHANNEL_EXPIRED_TIMEOUT_MS",
    "ClientChannelInfo",
    "ConsumerGroupEvent",
    "ConsumerGroupInfo",
    "ConsumerIdsChangeListener",
    "ConsumerManager",
    "DefaultConsumerIdsChangeListener",
]

log = get_logger("aiorocketmq.broker.client.consumer_manager")

# BrokerConfig.channelExpiredTimeout: a channel not refreshed by a heartbeat for this long is
# dropped by the housekeeping scan.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection as a group sees it (RocketMQ's ``ClientChannelInfo``)."""

    channel: Channel
    client_id: str
    language: str = "PYTHON"
    version: int = 0
    # ms; refreshed by every heartbeat, read by the expiry scan.
    last_update_timestamp: int = 0

    @classmethod
    def for_channel(
        cls, channel: Channel, client_id: str | None = None, *, now: int = 0
    ) -> ClientChannelInfo:
        """The info of ``channel`` (client id from the heartbeat, else from the channel)."""
        return cls(
            channel=channel,
            client_id=client_id if client_id is not None else channel.client_id,
            language=channel.language,
            version=channel.version,
            last_update_timestamp=now,
        )


class ConsumerGroupEvent(enum.Enum):
    """What a ``ConsumerIdsChangeListener`` is told (RocketMQ's ``ConsumerGroupEvent``)."""

    # The group's channels or topics changed: its members should rebalance.
    CHANGE = "CHANGE"
    # The group lost its last channel and was removed.
    UNREGISTER = "UNREGISTER"
    # A heartbeat registered the group's subscriptions (fired on every heartbeat).
    REGISTER = "REGISTER"
    # A new channel joined the group.
    CLIENT_REGISTER = "CLIENT_REGISTER"
    # A channel left the group.
    CLIENT_UNREGISTER = "CLIENT_UNREGISTER"


class ConsumerIdsChangeListener(Protocol):
    """Told about group events; arguments per event are in the module docstring."""

    def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None: ...


class ConsumerGroupInfo:
    """One consumer group: its subscriptions and its live channels."""

    def __init__(
        self,
        group_name: str,
        consume_type: common_pb2.ConsumeType = common_pb2.CONSUME_PASSIVELY,
        message_model: common_pb2.MessageModel = common_pb2.CLUSTERING,
        consume_from_where: common_pb2.ConsumeFromWhere = common_pb2.CONSUME_FROM_LAST_OFFSET,
        *,
        last_update_timestamp: int = 0,
    ) -> None:
        self.group_name = group_name
        self.subscription_table: dict[str, SubscriptionData] = {}
        # Keyed by the Channel object (identity), as RocketMQ keys it by the Netty channel.
        self.channel_info_table: dict[Channel, ClientChannelInfo] = {}
        # Overwritten by every heartbeat: last writer wins.
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update_timestamp = last_update_timestamp

    @property
    def is_broadcasting(self) -> bool:
        return self.message_model == common_pb2.BROADCASTING

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        """The first channel whose client id is ``client_id``."""
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def get_all_channels(self) -> list[Channel]:
        return list(self.channel_info_table)

    def get_all_client_id(self) -> list[str]:
        """The client ids of the live channels, in table order (duplicates kept, unsorted)."""
        return [info.client_id for info in self.channel_info_table.values()]

    def get_subscribe_topics(self) -> set[str]:
        return set(self.subscription_table)

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)

    def duplicate_client_ids(self) -> dict[str, list[str]]:
        """Client ids held by more than one channel, with the remote address of each."""
        addrs: dict[str, list[str]] = {}
        for channel, info in self.channel_info_table.items():
            addrs.setdefault(info.client_id, []).append(channel.remote_addr)
        return {cid: a for cid, a in addrs.items() if len(a) > 1}

    def update_channel(
        self,
        info: ClientChannelInfo,
        consume_type: common_pb2.ConsumeType,
        message_model: common_pb2.MessageModel,
        consume_from_where: common_pb2.ConsumeFromWhere,
        now: int,
    ) -> bool:
        """Record a heartbeat's channel; True only when the channel is new to the group.

        A known channel that now reports another client id is replaced (and logged) but
        answers False, like RocketMQ. The group's consume type, model and where-from are
        overwritten either way (last writer wins).
        """
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        updated = False
        old = self.channel_info_table.get(info.channel)
        if old is None:
            self.channel_info_table[info.channel] = info
            stored = info
            updated = True
            log.info(
                "new consumer connected",
                group=self.group_name,
                client_id=info.client_id,
                remote_addr=info.channel.remote_addr,
                channel_id=info.channel.channel_id,
            )
        elif old.client_id != info.client_id:
            log.error(
                "consumer channel exists in broker, but clientId is not equal",
                group=self.group_name,
                old_client_id=old.client_id,
                new_client_id=info.client_id,
                channel_id=info.channel.channel_id,
            )
            self.channel_info_table[info.channel] = info
            stored = info
        else:
            stored = old
        self.last_update_timestamp = now
        stored.last_update_timestamp = now
        return updated

    def update_subscription(self, sub_list: Iterable[SubscriptionData], now: int) -> bool:
        """Apply a heartbeat's subscriptions; True only when a topic was added or removed.

        An existing topic is replaced only by a larger ``sub_version``, and that replacement
        alone answers False: a tag change is picked up without a rebalance.
        """
        updated = False
        topics: set[str] = set()
        for sub in sub_list:
            topics.add(sub.topic)
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
                log.info(
                    "subscription changed, add new topic",
                    group=self.group_name,
                    topic=sub.topic,
                    sub_string=sub.sub_string,
                )
            elif sub.sub_version > old.sub_version:
                if self.consume_type == common_pb2.CONSUME_PASSIVELY:
                    log.info(
                        "subscription changed",
                        group=self.group_name,
                        topic=sub.topic,
                        old_sub_string=old.sub_string,
                        new_sub_string=sub.sub_string,
                        old_sub_version=old.sub_version,
                        new_sub_version=sub.sub_version,
                    )
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in topics]:
            del self.subscription_table[topic]
            updated = True
            log.warning("subscription changed, remove topic", group=self.group_name, topic=topic)
        self.last_update_timestamp = now
        return updated

    def unregister_channel(self, info: ClientChannelInfo) -> bool:
        """Remove ``info.channel``; True when it was there."""
        removed = self.channel_info_table.pop(info.channel, None)
        if removed is not None:
            log.info(
                "unregister a consumer from consumerGroupInfo",
                group=self.group_name,
                client_id=removed.client_id,
                remote_addr=info.channel.remote_addr,
            )
        return removed is not None

    def do_channel_close_event(
        self, remote_addr: str, channel: Channel
    ) -> ClientChannelInfo | None:
        """Remove a closed channel; the removed info, or None when the group did not have it."""
        removed = self.channel_info_table.pop(channel, None)
        if removed is not None:
            log.warning(
                "NETTY EVENT: remove not active channel from ConsumerGroupInfo",
                group=self.group_name,
                client_id=removed.client_id,
                remote_addr=remote_addr,
                channel_id=channel.channel_id,
            )
        return removed


class ConsumerManager:
    """``consumer_table`` (group -> ConsumerGroupInfo) and the event rules above."""

    def __init__(
        self,
        listeners: Iterable[ConsumerIdsChangeListener] = (),
        *,
        channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
    ) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        # topic -> groups subscribing to it.
        self.topic_group_table: dict[str, set[str]] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self.listeners: list[ConsumerIdsChangeListener] = list(listeners)

    def append_consumer_ids_change_listener(self, listener: ConsumerIdsChangeListener) -> None:
        self.listeners.append(listener)

    # ---- queries ---------------------------------------------------------------------------

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return info.find_channel(client_id) if info is not None else None

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        return info.find_subscription_data(topic) if info is not None else None

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """The groups subscribing to ``topic``."""
        return set(self.topic_group_table.get(topic, ()))

    def duplicate_client_ids(self, group: str) -> dict[str, list[str]]:
        """Client ids held by several channels of ``group`` -> the remote address of each."""
        info = self.consumer_table.get(group)
        return info.duplicate_client_ids() if info is not None else {}

    # ---- the paths that change the tables --------------------------------------------------

    def register_consumer(
        self,
        group: str,
        client_channel_info: ClientChannelInfo,
        consume_type: common_pb2.ConsumeType,
        message_model: common_pb2.MessageModel,
        consume_from_where: common_pb2.ConsumeFromWhere,
        sub_list: Iterable[SubscriptionData],
        is_notify_consumer_ids_changed_enable: bool,
        now: int,
        *,
        update_subscription: bool = True,
    ) -> bool:
        """A heartbeat's consumer group: True when the channel or the topic set changed."""
        subs = list(sub_list)
        group_info = self.consumer_table.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where, last_update_timestamp=now
            )
            self.consumer_table[group] = group_info
        for sub in subs:
            self.topic_group_table.setdefault(sub.topic, set()).add(group)

        previous = group_info.channel_info_table.get(client_channel_info.channel)
        channel_changed = group_info.update_channel(
            client_channel_info, consume_type, message_model, consume_from_where, now
        )
        if channel_changed:
            self._fire(
                ConsumerGroupEvent.CLIENT_REGISTER,
                group,
                client_channel_info,
                {sub.topic for sub in subs},
            )
        if previous is None or previous.client_id != client_channel_info.client_id:
            self._warn_duplicate_client_id(group_info, client_channel_info)

        topics_changed = False
        if update_subscription:
            before = group_info.get_subscribe_topics()
            topics_changed = group_info.update_subscription(subs, now)
            self._prune_topic_group_table(group, before - group_info.get_subscribe_topics())

        if (
            (channel_changed or topics_changed)
            and is_notify_consumer_ids_changed_enable
            and message_model != common_pb2.BROADCASTING
        ):
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.get_all_channels())
        self._fire(ConsumerGroupEvent.REGISTER, group, subs, client_channel_info)
        return channel_changed or topics_changed

    def unregister_consumer(
        self,
        group: str,
        client_channel_info: ClientChannelInfo,
        is_notify_consumer_ids_changed_enable: bool,
    ) -> None:
        """UNREGISTER_CLIENT: a graceful leave; the group hears CHANGE even if nothing moved."""
        group_info = self.consumer_table.get(group)
        if group_info is None:
            return
        if group_info.unregister_channel(client_channel_info):
            self._fire(
                ConsumerGroupEvent.CLIENT_UNREGISTER,
                group,
                client_channel_info,
                group_info.get_subscribe_topics(),
            )
        if not group_info.channel_info_table:
            self._remove_group(
                group, "unregister consumer ok, no any connection, and remove consumer group"
            )
        if is_notify_consumer_ids_changed_enable and not group_info.is_broadcasting:
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.get_all_channels())

    def do_channel_close_event(self, remote_addr: str, channel: Channel) -> list[str]:
        """The channel closed (stream ended, error, idle): drop it from every group.

        Returns the groups it left. Each non-BROADCASTING group hears CHANGE, whatever its
        group-level notify flag says (RocketMQ does not consult it on this path).
        """
        left: list[str] = []
        for group, group_info in list(self.consumer_table.items()):
            removed = group_info.do_channel_close_event(remote_addr, channel)
            if removed is None:
                continue
            left.append(group)
            self._fire(
                ConsumerGroupEvent.CLIENT_UNREGISTER,
                group,
                removed,
                group_info.get_subscribe_topics(),
            )
            if not group_info.channel_info_table:
                self._remove_group(
                    group, "unregister consumer ok, no any connection, and remove consumer group"
                )
            if not group_info.is_broadcasting:
                self._fire(ConsumerGroupEvent.CHANGE, group, group_info.get_all_channels())
        return left

    def scan_not_active_channel(
        self, now: int, *, notify: bool = False
    ) -> list[tuple[str, ClientChannelInfo]]:
        """Drop channels not refreshed for ``channel_expired_timeout_ms``; close each one.

        RocketMQ fires only CLIENT_UNREGISTER here, neither CHANGE nor UNREGISTER, so the rest
        of the group learns at its next periodic rebalance (and the close event that follows
        finds the channel already gone). That is the default. ``notify=True`` is ours: it also
        fires CHANGE once to each affected non-BROADCASTING group, so survivors rebalance at
        once (the broker-level switch in the listener still applies).

        Returns ``(group, info)`` for every channel removed.
        """
        expired: list[tuple[str, ClientChannelInfo]] = []
        for group, group_info in list(self.consumer_table.items()):
            lost = False
            for channel, info in list(group_info.channel_info_table.items()):
                if now - info.last_update_timestamp <= self.channel_expired_timeout_ms:
                    continue
                log.warning(
                    "SCAN: remove expired channel from ConsumerManager consumerTable",
                    group=group,
                    client_id=info.client_id,
                    remote_addr=channel.remote_addr,
                    channel_id=channel.channel_id,
                    idle_ms=now - info.last_update_timestamp,
                )
                self._fire(
                    ConsumerGroupEvent.CLIENT_UNREGISTER,
                    group,
                    info,
                    group_info.get_subscribe_topics(),
                )
                channel.close()
                del group_info.channel_info_table[channel]
                expired.append((group, info))
                lost = True
            if not group_info.channel_info_table:
                log.warning(
                    "SCAN: remove expired channel from ConsumerManager consumerTable, all clear",
                    group=group,
                )
                del self.consumer_table[group]
                self._prune_topic_group_table(group, group_info.get_subscribe_topics())
            if lost and notify and not group_info.is_broadcasting:
                self._fire(ConsumerGroupEvent.CHANGE, group, group_info.get_all_channels())
        return expired

    # ---- helpers ---------------------------------------------------------------------------

    def _remove_group(self, group: str, reason: str) -> None:
        group_info = self.consumer_table.pop(group, None)
        if group_info is None:
            return
        log.info(reason, group=group)
        self._fire(ConsumerGroupEvent.UNREGISTER, group)
        self._prune_topic_group_table(group, group_info.get_subscribe_topics())

    def _prune_topic_group_table(self, group: str, topics: Iterable[str]) -> None:
        for topic in topics:
            groups = self.topic_group_table.get(topic)
            if groups is None:
                continue
            groups.discard(group)
            if not groups:
                del self.topic_group_table[topic]

    def _warn_duplicate_client_id(
        self, group_info: ConsumerGroupInfo, info: ClientChannelInfo
    ) -> None:
        for channel, other in group_info.channel_info_table.items():
            if channel is info.channel or other.client_id != info.client_id:
                continue
            log.warning(
                "duplicate client id in consumer group",
                group=group_info.group_name,
                client_id=info.client_id,
                remote_addr=info.channel.remote_addr,
                other_remote_addr=channel.remote_addr,
                channel_id=info.channel.channel_id,
                other_channel_id=channel.channel_id,
                hint=(
                    "two processes share one client id: both get the same queues and some "
                    "queues get no consumer; give each process its own instanceName"
                ),
            )

    def _fire(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
        for listener in self.listeners:
            try:
                listener.handle(event, group, *args)
            except Exception:
                # One broken listener must not stop the others or the caller's request.
                log.exception(
                    "consumer ids change listener failed",
                    listener=repr(listener),
                    group_event=event.name,
                    group=group,
                )


class DefaultConsumerIdsChangeListener:
    """Pushes ``NOTIFY_CONSUMER_IDS_CHANGED`` to every channel of a group on CHANGE (ours: but
    those whose client is notified by another broker, ``Channel.notified_elsewhere``).

    ``notify_consumer_ids_changed_enable`` is the broker-level switch (broker.conf,
    default true): off, CHANGE is dropped. ``real_time_notify_consumer_change`` (default true)
    offers the notification to every channel at once; off, the latest channel list per group is
    kept in ``consumer_channel_map`` and the service calls ``flush_pending`` on its own timer
    (RocketMQ: every 15 s). REGISTER and UNREGISTER feed RocketMQ's ConsumerFilterManager (SQL92
    filters); we filter by tag only, so they are no-ops here, as are the CLIENT_* events.

    ``notifications_sent`` and ``notifications_dropped`` count channel offers (oneway: a full or
    closed outbox drops the event).

    Ours, ``min_interval_ms`` (default 0 here, 100 from the broker's config): a group is
    notified at most once in that time. The first change of a quiet group goes out at once;
    the changes that follow within the window are held and sent as one at its end, with the
    group's channels as they are then. A thousand consumers starting together cost the broker
    a few rounds of a thousand notifications, not a thousand rounds.

    Ours too, ``ms_per_channel`` (default 0 here, 1 from the broker's config): the window is at
    least that much per channel of the group, so it grows with the group. A round costs the
    broker one event per channel and each member a rebalance, which a client runs at most once
    per ``rebalance_min_interval_ms`` (1 s) anyway: at 1,000 members a round a second is all
    they can use, and ten (the 100 ms floor) kept a starting group re-dealing its queues ten
    times a second. A lone change still goes out at once.

    Ours, versions (``protocol.membership``): each round has a version, and a channel that was
    sent the group's previous version gets only the ids added and removed since then (the
    channels of one round share one event per base version); a new channel, one that missed
    more than ``MembershipHistory.keep`` rounds, or members that repeat an id get the whole
    list. At 1,000 members a join is then 1,000 events of under 100 bytes per broker, not 1,000
    of 17 to 33 KB (the ids' length).
    """

    def __init__(
        self,
        notify_consumer_ids_changed_enable: bool = True,
        *,
        real_time_notify_consumer_change: bool = True,
        min_interval_ms: int = 0,
        ms_per_channel: float = 0.0,
        broker_name: str = "",
    ) -> None:
        self.notify_consumer_ids_changed_enable = notify_consumer_ids_changed_enable
        self.broker_name = broker_name  # for the protocol trace's notify_sent
        self.real_time_notify_consumer_change = real_time_notify_consumer_change
        self.min_interval_ms = min_interval_ms
        self.ms_per_channel = ms_per_channel
        self.consumer_channel_map: dict[str, list[Channel]] = {}
        self.notifications_sent = 0
        self.notifications_dropped = 0
        # Rate limit: when each group was last notified, and the held change of each group.
        self._last_notified: dict[str, float] = {}
        self._held: dict[str, list[Channel]] = {}
        # versions from the start time (ms): never one of a run before a restart
        self.history = MembershipHistory(start=int(time.time() * 1000))

    def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
        if event is ConsumerGroupEvent.UNREGISTER:
            self.history.forget(group)
            return
        if event is not ConsumerGroupEvent.CHANGE or not self.notify_consumer_ids_changed_enable:
            return
        raw = args[0] if args else ()
        channels = (
            [c for c in raw if isinstance(c, Channel)] if isinstance(raw, list | tuple) else []
        )
        if not self.real_time_notify_consumer_change:
            self.consumer_channel_map[group] = channels
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): nothing to hold changes with
            self.notify_consumer_change(group, channels)
            return
        if group in self._held:  # a window is open: this change replaces the held one
            self._held[group] = channels
            return
        now = loop.time()
        wait = self._last_notified.get(group, -math.inf) + self.window_s(len(channels)) - now
        if wait <= 0:
            self._last_notified[group] = now
            self.notify_consumer_change(group, channels)
            return
        self._held[group] = channels
        loop.call_later(wait, self._release, group)

    def notify_again(self, group: str, channels: Iterable[Channel], channel: Channel) -> int:
        """The group's members, now, to ``channel`` alone (its client asks this broker for its
        notifications again), under the switches ``handle`` obeys; how many accepted it."""
        if not self.notify_consumer_ids_changed_enable or not self.real_time_notify_consumer_change:
            return 0
        return self.notify_consumer_change(group, channels, only=channel)

    def window_s(self, channels: int) -> float:
        """The least time between two notifications of a group with this many channels."""
        return max(self.min_interval_ms, self.ms_per_channel * channels) / 1000

    def _release(self, group: str) -> None:
        """The window of ``group`` ended: send its held change (the latest channels)."""
        channels = self._held.pop(group, None)
        if channels is not None:
            self._last_notified[group] = asyncio.get_running_loop().time()
            self.notify_consumer_change(group, [c for c in channels if not c.closed])

    def notify_consumer_change(
        self, group: str, channels: Iterable[Channel], *, only: Channel | None = None
    ) -> int:
        """Offer the notification to each channel now, but those notified by another broker
        (or to ``only``, one of them); how many accepted it."""
        every = list(channels)
        sent = 0
        # The members (the channels' client ids, GET_CONSUMER_LIST_BY_GROUP's answer) go along,
        # so the thousand rebalances it triggers need not each ask for them: whole to a channel
        # that holds no earlier version, as a change to one that does. One message per base
        # version, shared by its channels: never mutated after this point.
        members = [c.client_id for c in every]
        if only is not None:  # the same members again, to one channel: no new version
            targets = [only]
            version = self.history.current(group, members)
        else:
            targets = [c for c in every if not c.notified_elsewhere]
            version = self.history.record(group, members)
        sent_at_ms = int(time.time() * 1000)
        events: dict[int, broker_pb2.ChannelEvent] = {}
        # In a random order, as RocketMQ's hash-ordered channel table gives each broker its own:
        # in the one order of joining on every broker, the same consumers came last from all of
        # them, and under AVG the last to join are the ones a join moves (a join at 1,000
        # waited for them: p50 1.35 s, the leaves, which move the first ones, 0.70 s).
        random.shuffle(targets)
        for channel in targets:
            base = channel.notified_versions.get(group, 0)
            event = events.get(base)
            if event is None:
                event = events[base] = self._event(group, members, version, base, sent_at_ms)
            if channel.offer(event, group=group):
                sent += 1
                if tracer.enabled:
                    tracer.record(
                        "notify_sent",
                        broker=self.broker_name,
                        group=group,
                        client_id=channel.client_id,
                        version=version,
                    )
        self.notifications_sent += sent
        self.notifications_dropped += len(targets) - sent
        log.info(
            "NOTIFY_CONSUMER_IDS_CHANGED",
            group=group,
            channels=len(targets),
            sent=sent,
            notified_elsewhere=len(every) - len(targets) if only is None else 0,
        )
        return sent

    def _event(
        self, group: str, members: list[str], version: int, base: int, sent_at_ms: int
    ) -> broker_pb2.ChannelEvent:
        notify = broker_pb2.NotifyConsumerIdsChanged(
            consumer_group=group, sent_at_ms=sent_at_ms, version=version
        )
        change = self.history.changes_since(group, base, version)
        if change is None:
            notify.consumer_id_list.extend(members)
        else:
            notify.base_version = base
            notify.added_ids.extend(change.added)
            notify.removed_ids.extend(change.removed)
        return broker_pb2.ChannelEvent(notify_consumer_ids_changed=notify)

    def flush_pending(self) -> int:
        """Batched mode: notify every group with a pending CHANGE; how many offers succeeded."""
        pending, self.consumer_channel_map = self.consumer_channel_map, {}
        return sum(self.notify_consumer_change(g, chs) for g, chs in pending.items())
