"""``NamesrvConfig``: the name server's settings, with RocketMQ's defaults (tests shrink them)."""

from __future__ import annotations

from dataclasses import dataclass

from aiorocketmq.nameserver.route_info_manager import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS

__all__ = ["NamesrvConfig"]


@dataclass(slots=True)
class NamesrvConfig:
    """Where the name server listens and how it keeps its soft state.

    ``scan_not_active_broker_interval_ms`` is RocketMQ's ``scanNotActiveBrokerInterval`` (5 s);
    ``broker_channel_expired_time_ms`` is ``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`` (120 s), used
    for brokers that do not send their own heartbeat timeout. ``shutdown_grace_ms`` is how long
    in-flight RPCs may finish when the server stops. ``remoting_listen`` (``host:port``, empty
    for none) also serves RocketMQ's remoting protocol, for Apache's own clients.
    """

    listen: str = "127.0.0.1:9876"
    scan_not_active_broker_interval_ms: int = 5_000
    broker_channel_expired_time_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
    shutdown_grace_ms: int = 1_000
    remoting_listen: str = ""
    # host:port serving Prometheus metrics at /metrics; empty = none.
    metrics_listen: str = ""
