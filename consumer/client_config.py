"""``ClientConfig``: a client instance's timings, with RocketMQ's defaults (spec 1.1, 11).

Tests and users shrink them through these same fields (e.g. ``heartbeat_broker_interval_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClientConfig"]


@dataclass(slots=True)
class ClientConfig:
    """Timings of one ``MQClientInstance`` (shared by its consumers and producers)."""

    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    mq_client_api_timeout_ms: int = 3_000
    rebalance_wait_interval_ms: int = 20_000
    rebalance_min_interval_ms: int = 1_000
    # Reconnect delay of a channel stream after it ends (ours: RocketMQ reconnects on demand).
    channel_reconnect_delay_ms: int = 200
