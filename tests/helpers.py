"""Test utilities: wait for a condition with a deadline (never a bare sleep), free ports, logs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from aiorocketmq.consumer.client_config import ClientConfig

__all__ = [
    "BIN",
    "capture_logs",
    "fast_client_config",
    "free_port",
    "mqadmin",
    "wait_until",
    "wait_until_sync",
]

# The venv's console scripts (mqnamesrv, mqbroker, mqadmin, aiorocketmq).
BIN = Path(sys.executable).parent


_RECORD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


@contextlib.contextmanager
def capture_logs(logger: str = "aiorocketmq") -> Iterator[list[dict[str, object]]]:
    """The library's log records under ``logger`` as dicts: ``event``, ``log_level``, fields."""
    entries: list[dict[str, object]] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            fields = {k: v for k, v in record.__dict__.items() if k not in _RECORD_ATTRS}
            entries.append(
                {"event": record.getMessage(), "log_level": record.levelname.lower(), **fields}
            )

    target = logging.getLogger(logger)
    handler = _Collect(logging.DEBUG)
    saved = target.level
    target.addHandler(handler)
    target.setLevel(logging.DEBUG)
    try:
        yield entries
    finally:
        target.removeHandler(handler)
        target.setLevel(saved)


def fast_client_config() -> ClientConfig:
    """RocketMQ's client timings, shrunk where a test would otherwise wait on a timer."""
    return ClientConfig(persist_consumer_offset_interval_ms=200, rebalance_wait_interval_ms=2_000)


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
