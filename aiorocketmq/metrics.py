"""Prometheus metrics of a server: one registry per server, served over HTTP at ``/metrics``.

Names follow RocketMQ 5's broker metrics where one exists (``rocketmq_messages_in_total``,
``rocketmq_rpc_latency`` in milliseconds, labels ``cluster``, ``node_type``, ``node_id``, ...);
ours (the rebalance, the channels, the fenced handoff) start with ``aiorocketmq_``.

The hot path only adds to plain integers kept by the processors; a ``collect`` callback turns
them (and gauges read from the server's tables) into metric families at scrape time. Only the
RPC latency histogram is observed per call. Each server has its own registry, so several
servers in one process (``LocalCluster``) do not mix their series.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "LATENCY_BUCKETS_MS",
    "MetricFamilies",
    "ServerMetrics",
]

# RocketMQ 5's rpc latency buckets, in milliseconds.
LATENCY_BUCKETS_MS = (1, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 3000, 10000, 20000)


class MetricFamilies:
    """Builds counter and gauge families that all carry the server's own labels."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.families: list[Metric] = []

    def counter(
        self, name: str, documentation: str, rows: Iterable[tuple[dict[str, str], float]]
    ) -> None:
        """``name`` without ``_total`` (added by the exposition)."""
        self._add(CounterMetricFamily, name, documentation, rows)

    def gauge(
        self, name: str, documentation: str, rows: Iterable[tuple[dict[str, str], float]]
    ) -> None:
        self._add(GaugeMetricFamily, name, documentation, rows)

    def _add(
        self,
        kind: Any,
        name: str,
        documentation: str,
        rows: Iterable[tuple[dict[str, str], float]],
    ) -> None:
        rows = list(rows)
        keys = list(self.labels) + (sorted(rows[0][0]) if rows else [])
        family = kind(name, documentation, labels=keys)
        for extra, value in rows:
            family.add_metric([*self.labels.values(), *(extra[k] for k in keys[len(self.labels):])],
                              value)
        self.families.append(family)


class _Callback(Collector):
    def __init__(self, collect: Callable[[MetricFamilies], None], labels: dict[str, str]) -> None:
        self._collect = collect
        self._labels = labels

    def collect(self) -> Iterable[Metric]:
        families = MetricFamilies(self._labels)
        self._collect(families)
        return families.families


class ServerMetrics:
    """A server's registry: the RPC latency histogram, its ``collect`` callback, the HTTP port."""

    def __init__(
        self,
        *,
        node_type: str,
        cluster: str,
        node_id: str,
        collect: Callable[[MetricFamilies], None],
    ) -> None:
        self.labels = {"cluster": cluster, "node_type": node_type, "node_id": node_id}
        self.registry = CollectorRegistry(auto_describe=False)
        self.rpc_latency = Histogram(
            "rocketmq_rpc_latency",
            "Time to serve a request, in milliseconds (RocketMQ 5's metric)",
            [*self.labels, "protocol_type", "request_code", "response_code"],
            buckets=LATENCY_BUCKETS_MS,
            registry=self.registry,
        )
        self.registry.register(_Callback(collect, self.labels))
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.address = ""

    def observe_rpc(
        self, protocol: str, request_code: int | str, response_code: int, seconds: float
    ) -> None:
        self.rpc_latency.labels(
            *self.labels.values(), protocol, str(request_code), str(response_code)
        ).observe(seconds * 1000)

    def start(self, listen: str) -> str:
        """Serve ``/metrics`` on ``host:port`` (port 0: any); the address bound."""
        host, _, port = listen.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        try:
            self._server, self._thread = start_http_server(
                int(port), addr=host, registry=self.registry
            )
        except (OSError, ValueError) as e:
            raise OSError(f"cannot listen on {listen} (metrics): {e}") from e
        self.address = f"{host}:{self._server.server_port}"
        return self.address

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
