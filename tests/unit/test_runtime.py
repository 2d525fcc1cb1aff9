"""aiorocketmq.runtime: the entry points' event loop, allocator and garbage-collector tuning."""

from __future__ import annotations

import gc
import platform

import pytest

from aiorocketmq.runtime import GC_THRESHOLDS, run, tune_allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_allocator_is_tuned_on_glibc() -> None:
    assert tune_allocator() is True
    assert tune_allocator() is True  # again: the same settings


def test_run_answers_the_coroutine_result_with_the_collector_tuned() -> None:
    before = gc.get_threshold()

    async def main() -> tuple[tuple[int, int, int], int]:
        return gc.get_threshold(), gc.get_freeze_count()

    try:
        thresholds, frozen = run(main())
        assert thresholds == GC_THRESHOLDS
        assert frozen > 0  # the imports: out of the collector's sight
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # cycles made after it are still collected
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
