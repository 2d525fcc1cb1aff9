"""What every console tool does alike: the name-server flag, one-line errors, quiet pipes,
progress on a terminal.

- ``-n``: ``host:port`` items separated by ``;`` (RocketMQ's) or ``,``; a bare host gets the
  name server's port 9876; the default is ``$NAMESRV_ADDR``, else ``127.0.0.1:9876``, as
  RocketMQ's tools read it.
- An expected failure ends the tool with one line on stderr naming the problem and what to do,
  and a non-zero exit code; never a traceback (``ToolError``, ``explain``).
- A closed pipe (``mqadmin consumeMessage | head -1``) ends the tool quietly, as Unix tools end.
- ``Progress`` prints a rate and totals line on stderr when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from datetime import datetime
from typing import NoReturn, TextIO

from aiorocketmq.nameserver.client import DEFAULT_NAMESRV_PORT, NameServerClient, parse_namesrv_addr
from aiorocketmq.protocol.errors import MQError, ServiceNotAvailable

__all__ = [
    "Progress",
    "ToolArgumentParser",
    "ToolError",
    "check_namesrv",
    "default_namesrv_addr",
    "explain",
    "namesrv_addr_type",
    "non_negative_type",
    "quiet_broken_pipe",
    "timestamp_ms_type",
]

DEFAULT_NAMESRV_ADDR = f"127.0.0.1:{DEFAULT_NAMESRV_PORT}"


class ToolError(Exception):
    """An expected failure of a tool: its message is the one line the user sees."""


class ToolArgumentParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line: ``prog: error: what``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def default_namesrv_addr() -> str:
    return os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR


def namesrv_addr_type(value: str) -> str:
    """argparse ``type`` for ``-n``: the normalized ``a:1;b:2``, or a one-line error."""
    try:
        return ";".join(parse_namesrv_addr(value))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def explain(error: BaseException, namesrv_addr: str = "") -> str:
    """One line for an error: a server given as -n that is no name server said plainly."""
    message = error.message if isinstance(error, MQError) else str(error)
    if "Method not found" in message or "UNIMPLEMENTED" in message:
        where = f" at {namesrv_addr}" if namesrv_addr else ""
        return (
            f"the server{where} answered but is not a name server (a broker?); "
            "give -n the name server's address"
        )
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


async def check_namesrv(addr: str, timeout: float = 3.0, *, wait: float = 0.0) -> None:
    """``ToolError`` unless some name server of ``addr`` answers (and is one), trying again
    for up to ``wait`` seconds while none is reachable (a name server restarting).

    The client's own warning about each unreachable address is held back: the tool says it
    once, in its one line.
    """
    client_log = logging.getLogger("aiorocketmq.nameserver.client")
    level = client_log.level
    client_log.setLevel(logging.ERROR)
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                await _probe_namesrv(addr, timeout)
                return
            except _Unreachable as e:
                if time.monotonic() >= deadline:
                    raise ToolError(str(e)) from None
                await asyncio.sleep(0.2)
    finally:
        client_log.setLevel(level)


class _Unreachable(Exception):
    """No name server of the address answered (may change if one is restarting)."""


async def _probe_namesrv(addr: str, timeout: float) -> None:
    async with NameServerClient(addr, timeout=timeout) as ns:
        try:
            await ns.get_broker_cluster_info()
        except ServiceNotAvailable:
            raise _Unreachable(
                f"cannot reach a name server at {addr}; start one (mqnamesrv, or "
                "aiorocketmq cluster up) or give its address with -n or NAMESRV_ADDR"
            ) from None
        except MQError as e:
            raise ToolError(explain(e, addr)) from None


def non_negative_type(text: str) -> float:
    """An argparse type: a number of 0 or more (a duration, a rate), else a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def timestamp_ms_type(text: str) -> int:
    """An argparse type for a point in time, as RocketMQ's tools take it: milliseconds since
    the epoch, ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time), or ``now``."""
    text = text.strip()
    if text == "now":
        return time.time_ns() // 1_000_000
    if text.isdigit():
        return int(text)
    try:
        when = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"time {text!r} is not milliseconds since the epoch, yyyy-MM-dd#HH:mm:ss:SSS or now"
        ) from None
    return int(when.timestamp() * 1000)


def quiet_broken_pipe() -> int:
    """After a ``BrokenPipeError`` on stdout (``mqadmin ... | head -1``): end quietly, as Unix
    tools do, with SIGPIPE's status. Stdout is pointed at /dev/null so the interpreter's last
    flush does not fail again. (SIGPIPE itself stays ignored, as Python sets it: a tool that
    talks to brokers must not die when a socket's peer goes away.)"""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return 128 + 13


class Progress:
    """A ``verb N (R/s)`` line on stderr every ``interval`` s, only when stderr is a terminal."""

    def __init__(self, verb: str, *, stream: TextIO | None = None, interval: float = 1.0) -> None:
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.enabled = self.stream.isatty()
        self.count = 0
        self.started = time.monotonic()
        self._last = self.started
        self._last_count = 0

    def add(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            rate = (self.count - self._last_count) / (now - self._last)
            self.stream.write(f"\r{self.verb} {self.count:,} ({rate:,.0f}/s)   ")
            self.stream.flush()
            self._last, self._last_count = now, self.count

    def done(self, what: str) -> None:
        """The final line (always printed): totals and the mean rate."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        if self.enabled:
            self.stream.write("\r")
        self.stream.write(
            f"{self.verb} {self.count:,} {what} in {elapsed:.1f}s ({self.count / elapsed:,.0f}/s)\n"
        )
        self.stream.flush()
