"""``ClientConfig``: a client instance's timings, with RocketMQ's defaults (spec 1.1, 11).

Tests and users shrink them through these same fields (e.g. ``heartbeat_broker_interval_ms``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiorocketmq.protocol.validators import check_group

__all__ = ["HANDOFF_MODES", "ClientConfig", "check_consumer_settings"]

HANDOFF_MODES = ("classic", "fenced")


@dataclass(slots=True)
class ClientConfig:
    """Timings of one ``MQClientInstance`` (shared by its consumers and producers)."""

    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    mq_client_api_timeout_ms: int = 3_000
    rebalance_wait_interval_ms: int = 20_000
    rebalance_min_interval_ms: int = 1_000
    # Ours (RocketMQ's remoting reconnects on demand, at the next request): a broker's channel
    # stream that ended or failed to open is reopened after a delay that starts here and doubles
    # with each failure in a row, up to the max, each drawn at random from its upper half
    # (jitter, so the clients of a restarted broker do not all come back at once). Reopening
    # never gives up; only the client's shutdown ends it.
    channel_reconnect_delay_ms: int = 200
    channel_reconnect_max_delay_ms: int = 5_000

    def __post_init__(self) -> None:
        if self.channel_reconnect_delay_ms < 1:
            raise ValueError(
                f"channel_reconnect_delay_ms must be >= 1, got {self.channel_reconnect_delay_ms}"
            )
        if self.channel_reconnect_max_delay_ms < self.channel_reconnect_delay_ms:
            raise ValueError(
                "channel_reconnect_max_delay_ms must be >= channel_reconnect_delay_ms, got "
                f"{self.channel_reconnect_max_delay_ms} < {self.channel_reconnect_delay_ms}"
            )


def check_consumer_settings(
    group: str, handoff: str, ranges: Iterable[tuple[str, int, int, int]]
) -> None:
    """A consumer's ``checkConfig``: a legal group that is not DEFAULT_CONSUMER, a known
    handoff, and each ``(name, value, low, high)`` setting within its range (ValueError)."""
    check_group(group)
    if group == "DEFAULT_CONSUMER":
        raise ValueError(
            "consumerGroup can not equal DEFAULT_CONSUMER, please specify another one."
        )
    for name, value, lo, hi in ranges:
        if not lo <= value <= hi:
            raise ValueError(f"{name} out of range [{lo}, {hi}]: {value}")
    if handoff not in HANDOFF_MODES:
        raise ValueError(f"handoff must be 'classic' or 'fenced', got {handoff!r}")
