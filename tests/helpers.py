"""Test utilities: wait for a condition with a deadline (never a bare sleep), free ports."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

__all__ = ["BIN", "free_port", "mqadmin", "wait_until", "wait_until_sync"]

# The venv's console scripts (mqnamesrv, mqbroker, mqadmin, aiorocketmq).
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> None:
    """Poll ``condition`` (sync or async) until true; fail with ``message`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], bool],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> None:
    """Blocking variant for process tests."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


async def mqadmin(*argv: str) -> tuple[int, str, str]:
    """Run the ``mqadmin`` console script with ``argv``; its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "mqadmin"), *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
