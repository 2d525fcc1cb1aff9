"""aiorocketmq.runtime: the entry points' event loop and allocator tuning."""

from __future__ import annotations

import platform

import pytest

from aiorocketmq.runtime import run, tune_allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_allocator_is_tuned_on_glibc() -> None:
    assert tune_allocator() is True
    assert tune_allocator() is True  # again: the same settings


def test_run_answers_the_coroutine_result() -> None:
    async def main() -> int:
        return 42

    assert run(main()) == 42
