"""When ``RebalanceService`` runs a pass: woken, retrying an unbalanced group, and the minimum
interval between them (a fake clock and a recorded sleep, so no assertion depends on timing)."""

from __future__ import annotations

import asyncio

from aiorocketmq.consumer.rebalance_service import RebalanceService


class Schedule:
    """A fake clock the test moves, the sleeps the service asked for, and the passes it ran."""

    def __init__(self, results: list[bool]) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.passes: list[float] = []
        self.results = results
        self.ran = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds

    async def do_rebalance(self) -> bool:
        self.passes.append(self.now)
        self.ran.set()
        return self.results.pop(0) if self.results else True

    async def next_pass(self) -> None:
        self.ran.clear()
        await asyncio.wait_for(self.ran.wait(), 5)


async def test_a_wake_up_after_a_retry_pass_is_not_deferred() -> None:
    """A group kept unbalanced retries every min interval; a notification between two retries
    runs its pass at once, as it would with nothing unbalanced (RocketMQ defers it)."""
    s = Schedule([False, False, True])
    service = RebalanceService(
        s.do_rebalance, min_interval_ms=20, clock=s.clock, sleep=s.sleep, wait_interval_ms=60_000
    )
    service.start()
    try:
        service.wakeup()
        await s.next_pass()  # woken: unbalanced
        s.now += 0.02
        await s.next_pass()  # its retry (the wait's 20 ms timeout): unbalanced again
        s.now += 0.005  # 5 ms after the retry, 25 ms after the woken pass
        service.wakeup()
        await s.next_pass()
        assert s.slept == []  # no pass waited on the minimum interval
        assert len(s.passes) == 3
    finally:
        await service.shutdown()


async def test_wake_ups_stay_at_most_one_per_min_interval() -> None:
    """Two notifications 5 ms apart: the second pass waits out the interval since the first."""
    s = Schedule([True, True])
    service = RebalanceService(
        s.do_rebalance, min_interval_ms=1_000, clock=s.clock, sleep=s.sleep, wait_interval_ms=60_000
    )
    service.start()
    try:
        service.wakeup()
        await s.next_pass()
        s.now += 0.005
        service.wakeup()
        await s.next_pass()
        assert s.slept == [0.995]
        assert s.passes[1] - s.passes[0] >= 1.0
    finally:
        await service.shutdown()
