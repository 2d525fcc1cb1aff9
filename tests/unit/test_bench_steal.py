"""bench.procs.StealWatch: the host's steal time over a span, from the samples around it."""

from __future__ import annotations

import asyncio
import time

from bench.procs import StealWatch, host_steal_seconds


def test_a_span_reads_the_samples_that_bracket_it() -> None:
    watch = StealWatch()
    watch.samples = [(10.0, 1.00), (10.02, 1.00), (10.04, 1.03), (10.06, 1.05), (10.08, 1.05)]
    assert watch.between(10.01, 10.05) == 1.05 - 1.00  # from the sample before to the one after
    assert watch.between(10.02, 10.02) == 0.0
    assert watch.between(9.0, 10.05) is None  # began before the first sample
    assert watch.between(10.01, 11.0) is None  # ends after the last
    assert watch.share(10.0) is not None  # from 10.0 to the last sample, 10.08


async def test_it_samples_this_machine_while_it_runs() -> None:
    if host_steal_seconds() is None:  # not Linux: nothing to read
        return
    watch = StealWatch(interval=0.01)
    task = watch.start()
    start = time.time()
    assert len(watch.samples) == 1  # the first sample at once: a span from now is covered
    await asyncio.sleep(0.1)
    task.cancel()
    assert len(watch.samples) >= 3
    share = watch.share(start)
    assert share is not None and 0.0 <= share <= 1.0
    assert all(b[1] >= a[1] for a, b in zip(watch.samples, watch.samples[1:], strict=False))
