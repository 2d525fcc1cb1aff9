"""bench.endtoend's rows in processes of their own: a row's figures come back, its failure too."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bench.endtoend import Run, fresh
from tests.helpers import wait_until


async def _row_of_this_process(name: str) -> Run:
    return Run(name, saturated=float(os.getpid()))


async def _failing_row(reason: str) -> Run:
    raise ValueError(reason)


async def test_a_row_runs_in_a_process_started_for_it_and_its_run_comes_back() -> None:
    first = await fresh(_row_of_this_process, "one")
    second = await fresh(_row_of_this_process, "two")
    assert first.name == "one" and second.name == "two"
    pids = {int(first.saturated), int(second.saturated)}
    assert len(pids) == 2 and os.getpid() not in pids  # a new process each, not this one


async def test_a_failing_row_raises_here_naming_the_row_and_its_error() -> None:
    with pytest.raises(RuntimeError, match="_failing_row: ValueError: no broker"):
        await fresh(_failing_row, "no broker")


async def _endless_row(pid_file: str) -> Run:
    await asyncio.to_thread(Path(pid_file).write_text, str(os.getpid()))
    await asyncio.sleep(3600)
    return Run("never")


async def test_a_cancelled_row_stops_its_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    task = asyncio.create_task(fresh(_endless_row, str(pid_file)))
    await wait_until(
        lambda: pid_file.exists() and bool(pid_file.read_text()),
        timeout=60,
        message="the row's process to start",
    )
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):  # ended and reaped, not left running
        os.kill(pid, 0)


def test_the_page_cache_fill_is_a_file_kept_while_open(tmp_path: Path) -> None:
    """The free memory less the headroom, in whole chunks, as a file removed at the end."""
    from bench.procs import _meminfo_bytes, filled_page_cache

    chunk = 64 * 1024 * 1024
    headroom = _meminfo_bytes("MemFree") - 4 * chunk  # leaves about four chunks to fill
    fill = tmp_path / "page-cache-fill"
    with filled_page_cache(tmp_path, headroom=headroom) as size:
        assert size % chunk == 0 and size <= 6 * chunk  # free memory moves a little meanwhile
        assert fill.stat().st_size == size
    assert not fill.exists()
    with filled_page_cache(tmp_path, headroom=1 << 62) as size:  # nothing free beyond it
        assert size == 0 and not (tmp_path / "page-cache-fill").exists()
