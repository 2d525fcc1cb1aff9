"""Latency fault tolerance (``MQFaultStrategy``): avoid brokers that were slow or failed.

Rules (RocketMQ 5.1.4+): a send's latency maps to a period during which its broker is avoided:
the largest i with ``latency >= LATENCY_MAX[i]`` gives ``NOT_AVAILABLE_DURATION[i]``; a failure
(isolation) counts as latency 10 000 ms, i.e. 10 s. Pure: the clock is passed in.
"""

from __future__ import annotations

__all__ = ["LATENCY_MAX", "NOT_AVAILABLE_DURATION", "LatencyFaultTolerance"]

LATENCY_MAX = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS = 10_000


def _duration(latency_ms: float) -> int:
    for i in range(len(LATENCY_MAX) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX[i]:
            return NOT_AVAILABLE_DURATION[i]
    return 0


class LatencyFaultTolerance:
    """Per broker name: until when it is avoided."""

    def __init__(self) -> None:
        self.fault_items: dict[str, int] = {}

    def update_fault_item(
        self, broker_name: str, latency_ms: float, now_ms: int, *, isolation: bool
    ) -> None:
        """Record one send's outcome."""
        duration = _duration(ISOLATION_LATENCY_MS if isolation else latency_ms)
        if duration > 0:
            self.fault_items[broker_name] = now_ms + duration
        else:
            self.fault_items.pop(broker_name, None)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        until = self.fault_items.get(broker_name)
        return until is None or now_ms >= until
