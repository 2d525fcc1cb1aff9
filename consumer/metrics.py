"""A consumer's Prometheus metrics (opt-in): what it holds, moved and consumed.

The library opens no port: ``ConsumerCollector(consumer)`` is a collector an application
registers in its own registry (``prometheus_client.REGISTRY.register(...)``); ``aiorocketmq
consume --metrics-listen HOST:PORT`` serves the same at ``/metrics``.

- ``aiorocketmq_consumer_queues_held``: the queues it holds now (retry topics left out);
- ``aiorocketmq_consumer_queue_moves_total{direction="added"|"dropped"}``: rebalance results;
- ``aiorocketmq_consumer_rebalances_total``: rebalance passes of its client instance;
- ``aiorocketmq_consumer_messages_consumed_total``: messages its listener acknowledged (push);
- ``aiorocketmq_consumer_rebalance_convergence_seconds``: a histogram of the time from a change
  of its group (a NOTIFY_CONSUMER_IDS_CHANGED received, or its own start) to the rebalance pass
  that settled it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from aiorocketmq.metrics import MetricFamilies

__all__ = ["ConsumerCollector", "collect_consumer"]


def collect_consumer(consumer: Any, out: MetricFamilies) -> None:
    """The families of a ``PushConsumer`` or ``LitePullConsumer`` as it stands now."""
    rebalance = consumer.rebalance_impl
    held = len(consumer.assigned_queues) if rebalance is not None else 0
    out.gauge("aiorocketmq_consumer_queues_held", "Queues this consumer holds now", [({}, held)])
    moves = (
        []
        if rebalance is None
        else [
            ({"direction": "added"}, rebalance.queues_added),
            ({"direction": "dropped"}, rebalance.queues_dropped),
        ]
    )
    out.counter("aiorocketmq_consumer_queue_moves", "Queues taken or given up by rebalances", moves)
    client = getattr(consumer._impl, "client", None)
    passes = client.rebalance_service.rebalance_count if client is not None else 0
    out.counter(
        "aiorocketmq_consumer_rebalances", "Rebalance passes of the client instance", [({}, passes)]
    )
    if client is not None:
        clock = client.convergence
        family = HistogramMetricFamily(
            "aiorocketmq_consumer_rebalance_convergence_seconds",
            "From a change of the group (a notification, the start) to a settled rebalance",
            labels=list(out.labels),
        )
        family.add_metric(list(out.labels.values()), clock.buckets(), clock.total_s)
        out.families.append(family)
    service = getattr(consumer._impl, "consume_service", None)
    consumed = service.consumed_ok if service is not None else 0
    out.counter(
        "aiorocketmq_consumer_messages_consumed",
        "Messages the listener acknowledged",
        [({}, consumed)],
    )


class ConsumerCollector(Collector):
    """``collect_consumer`` as a collector, labelled by group and client id."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def collect(self) -> Iterable[Metric]:
        out = MetricFamilies(
            {"consumer_group": self.consumer.consumer_group, "client_id": self.consumer.client_id}
        )
        collect_consumer(self.consumer, out)
        return out.families
