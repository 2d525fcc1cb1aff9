"""``ConsumerStatsManager``: a consumer's pull and consume rates over the last minute.

RocketMQ's client keeps per-topic ``StatsItem`` minute averages (pull TPS, consume OK and failed
TPS, consume RT) and reports them in its running info (GET_CONSUMER_RUNNING_INFO), which is
where ``mqadmin consumerProgress`` gets its "Consume TPS". Here a ``RateWindow`` keeps one
bucket per second for the last ``window_s`` seconds; a rate is the window's sum over the time
it covers (less than the window right after start). Pure: callers pass the time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["CONVERGENCE_BUCKETS_S", "ConsumerStatsManager", "ConvergenceClock", "RateWindow"]


class RateWindow:
    """Events per second over the last ``window_s`` seconds (one bucket per second)."""

    __slots__ = ("_buckets", "started", "window_s")

    def __init__(self, started: float, window_s: int = 60) -> None:
        self.window_s = window_s
        self.started = started
        self._buckets: deque[list[float]] = deque()  # [second, count]

    def add(self, n: float, now: float) -> None:
        second = float(int(now))
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += n
        else:
            self._buckets.append([second, n])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._buckets and self._buckets[0][0] <= now - self.window_s:
            self._buckets.popleft()

    def total(self, now: float) -> float:
        self._trim(now)
        return sum(count for _, count in self._buckets)

    def per_second(self, now: float) -> float:
        covered = min(float(self.window_s), max(now - self.started, 1.0))
        return self.total(now) / covered


@dataclass
class _TopicStats:
    pull: RateWindow
    ok: RateWindow
    failed: RateWindow
    rt_ms: RateWindow
    batches: RateWindow
    failed_total: int = 0


@dataclass
class ConsumerStatsManager:
    """Per topic: pulled, consumed OK and failed messages, and the time per consumed batch."""

    started: float
    topics: dict[str, _TopicStats] = field(default_factory=dict)

    def _of(self, topic: str) -> _TopicStats:
        stats = self.topics.get(topic)
        if stats is None:
            w = self.started
            stats = self.topics[topic] = _TopicStats(
                pull=RateWindow(w),
                ok=RateWindow(w),
                failed=RateWindow(w),
                rt_ms=RateWindow(w),
                batches=RateWindow(w),
            )
        return stats

    def pulled(self, topic: str, n: int, now: float) -> None:
        self._of(topic).pull.add(n, now)

    def consumed(self, topic: str, ok: int, failed: int, rt_ms: float, now: float) -> None:
        stats = self._of(topic)
        stats.ok.add(ok, now)
        if failed:
            stats.failed.add(failed, now)
            stats.failed_total += failed
        stats.rt_ms.add(rt_ms, now)
        stats.batches.add(1, now)

    def status(self, topic: str, now: float) -> broker_pb2.ConsumeStatus:
        stats = self._of(topic)
        batches = stats.batches.total(now)
        return broker_pb2.ConsumeStatus(
            topic=topic,
            pull_tps=stats.pull.per_second(now),
            consume_ok_tps=stats.ok.per_second(now),
            consume_failed_tps=stats.failed.per_second(now),
            consume_failed_msgs=stats.failed_total,
            consume_rt_ms=stats.rt_ms.total(now) / batches if batches else 0.0,
        )


# Convergence buckets, in seconds.
CONVERGENCE_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ConvergenceClock:
    """How long a client takes to settle after its group changed: from the first
    NOTIFY_CONSUMER_IDS_CHANGED (or start) not yet settled to the end of the first rebalance
    pass after it that leaves every consumer balanced. Plain counts, for a histogram."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.counts = [0] * (len(CONVERGENCE_BUCKETS_S) + 1)  # the last: above every bucket
        self.total_s = 0.0
        self.observed = 0

    def changed(self, now: float) -> None:
        if self.since is None:
            self.since = now

    def settled(self, now: float) -> float | None:
        """The time it took, if a change was waiting to settle."""
        if self.since is None:
            return None
        took = max(0.0, now - self.since)
        self.since = None
        self.total_s += took
        self.observed += 1
        index = next(
            (i for i, le in enumerate(CONVERGENCE_BUCKETS_S) if took <= le),
            len(CONVERGENCE_BUCKETS_S),
        )
        self.counts[index] += 1
        return took

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs, ``+Inf`` last (Prometheus' histogram form)."""
        out, running = [], 0
        for le, count in zip((*map(str, CONVERGENCE_BUCKETS_S), "+Inf"), self.counts, strict=True):
            running += count
            out.append((le, float(running)))
        return out
