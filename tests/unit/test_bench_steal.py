"""bench.procs.StealWatch: the host's steal time over a span, from the samples around it."""

from __future__ import annotations

import asyncio
import time

from bench.procs import StealWatch, host_steal_seconds


def test_a_span_reads_the_samples_that_bracket_it() -> None:
    watch = StealWatch()
    for when, steal in [(10.0, 1.00), (10.02, 1.00), (10.04, 1.03), (10.06, 1.05), (10.08, 1.05)]:
        watch.add(when, steal)
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


def test_a_long_watch_reads_a_span_from_its_two_brackets() -> None:
    """A run of a thousand changes asks once per change of a watch that keeps every sample:
    a span reads only the two samples around it (times and steal in binary fractions, exact)."""
    watch = StealWatch()
    for k in range(100_000):  # 26 minutes of samples every 1/64 s
        watch.add(k / 64, k / 1024)
    assert watch.between(1000.0, 1000.0625) == 4 / 1024  # samples 64,000 to 64,004
    assert watch.between(1000.01, 1000.05) == 4 / 1024  # the brackets: 64,000 and 64,004
    assert watch.samples[-1] == (99_999 / 64, 99_999 / 1024)
