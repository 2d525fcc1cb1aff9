"""The broker's Prometheus metrics: what its processors counted and what its tables hold.

``collect_broker`` runs at each scrape (``aiorocketmq.metrics``); nothing here is on the data
path. RocketMQ 5's names where it has one:

- ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` (bytes of the send bodies
  received: a batch body's items, properties included), per topic;
- ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total``, per topic and group;
- ``rocketmq_consumer_lag_messages``: per topic and group, the broker's max offsets less the
  group's committed offsets, over the queues the group has committed on;
- ``rocketmq_consumer_connections``: per group, its live channels;
- ``rocketmq_topic_number``, ``rocketmq_consumer_group_number``;
- ``rocketmq_rpc_latency`` (a histogram observed per request, both protocols).

Ours: ``aiorocketmq_channels_open`` (per client language), ``aiorocketmq_group_changes_total``
(CHANGE events of a group's membership: each is a rebalance of that group),
``aiorocketmq_notifications_sent_total`` and ``..._dropped_total``,
``aiorocketmq_fenced_grants_held`` (now), ``aiorocketmq_fenced_grants_given_total`` and
``aiorocketmq_fenced_denials_total``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from aiorocketmq.broker.client.consumer_manager import ConsumerGroupEvent
from aiorocketmq.metrics import MetricFamilies

if TYPE_CHECKING:
    from aiorocketmq.broker.broker_controller import BrokerController

__all__ = ["GroupChangeCounter", "collect_broker"]


class GroupChangeCounter:
    """A consumer-ids-change listener counting each group's CHANGE events."""

    def __init__(self) -> None:
        self.changes: Counter[str] = Counter()

    def handle(self, event: ConsumerGroupEvent, group: str, *args: object) -> None:
        if event is ConsumerGroupEvent.CHANGE:
            self.changes[group] += 1


def collect_broker(broker: BrokerController, out: MetricFamilies) -> None:
    """Every metric family of ``broker`` as it stands now."""
    send, pull, client = broker.send, broker.pull, broker.client
    out.counter(
        "rocketmq_messages_in",
        "Messages stored, per topic",
        (({"topic": t}, c[0]) for t, c in sorted(send.stats.items())),
    )
    out.counter(
        "rocketmq_throughput_in",
        "Bytes of the send bodies stored, per topic",
        (({"topic": t}, c[1]) for t, c in sorted(send.stats.items())),
    )
    out.counter(
        "rocketmq_messages_out",
        "Messages answered to pulls, per topic and consumer group",
        (({"consumer_group": g, "topic": t}, c[0]) for (t, g), c in sorted(pull.stats.items())),
    )
    out.counter(
        "rocketmq_throughput_out",
        "Record bytes answered to pulls, per topic and consumer group",
        (({"consumer_group": g, "topic": t}, c[1]) for (t, g), c in sorted(pull.stats.items())),
    )
    groups = client.consumer_manager.consumer_table
    out.gauge(
        "rocketmq_consumer_connections",
        "Live channels of a consumer group",
        (
            ({"consumer_group": g}, len(info.channel_info_table))
            for g, info in sorted(groups.items())
        ),
    )
    lag = []
    for key, queues in sorted(client.offsets.offset_table.items()):
        topic, _, group = key.partition("@")
        behind = sum(
            max(0, broker.store.get_max_offset(topic, q) - offset) for q, offset in queues.items()
        )
        lag.append(({"consumer_group": group, "topic": topic}, behind))
    out.gauge("rocketmq_consumer_lag_messages", "Messages not yet committed by a group", lag)
    out.gauge(
        "rocketmq_topic_number",
        "Topics on this broker",
        [({}, len(broker.topics.topic_config_table))],
    )
    out.gauge(
        "rocketmq_consumer_group_number", "Consumer groups with a live member", [({}, len(groups))]
    )
    languages = Counter(c.language for c in client.channels.values())
    out.gauge(
        "aiorocketmq_channels_open",
        "Open client channels (gRPC streams and TCP connections)",
        (({"language": lang}, n) for lang, n in sorted(languages.items())),
    )
    out.counter(
        "aiorocketmq_group_changes",
        "Membership changes of a consumer group (each a rebalance)",
        (({"consumer_group": g}, n) for g, n in sorted(broker.group_changes.changes.items())),
    )
    out.counter(
        "aiorocketmq_notifications_sent",
        "NOTIFY_CONSUMER_IDS_CHANGED offered to channels",
        [({}, client.listener.notifications_sent)],
    )
    out.counter(
        "aiorocketmq_notifications_dropped",
        "Notifications dropped (outbox full or channel closed)",
        [({}, client.listener.notifications_dropped)],
    )
    held = sum(len(queues) for queues in client.grants.grant_table.values())
    out.gauge("aiorocketmq_fenced_grants_held", "Queues granted now (fenced handoff)", [({}, held)])
    out.counter(
        "aiorocketmq_fenced_grants_given",
        "Queues granted (fenced handoff)",
        [({}, client.grants_given)],
    )
    out.counter(
        "aiorocketmq_fenced_denials",
        "Acquisitions denied: the queue had a holder",
        [({}, client.grants_denied)],
    )
