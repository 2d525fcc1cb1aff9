"""Running an asyncio entry point: uvloop where installed, plain asyncio otherwise.

Every process of the project (name server, broker, clients' command lines, the benchmarks'
servers) starts through ``run``, which first tunes the C allocator (``tune_allocator``) and the
cyclic garbage collector (``tune_gc``).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import platform
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = [
    "GC_THRESHOLDS",
    "KEEP_FREED_BELOW",
    "run",
    "stop_on_signals",
    "tune_allocator",
    "tune_gc",
]

T = TypeVar("T")

KEEP_FREED_BELOW = 32 * 1024 * 1024
"""Blocks below this size are served from (and freed back to) the heap, and up to four times
this much freed memory is kept at its top: glibc's largest ``M_MMAP_THRESHOLD``."""

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3


def tune_allocator() -> bool:
    """On glibc, keep freed memory for reuse rather than unmapping it; whether it was set.

    A pull's answer of 1024 messages is a few hundred KiB, and passes through several such
    buffers on each side (records, protobuf, gRPC). By default glibc maps each one fresh and
    unmaps it when freed, so every pull faults its pages in again: measured, a 360 KiB pull
    answer took 258 µs to build and serialize that way and 32 µs with this, in the
    ``bench.throughput`` pull phase 7 % more messages per second. The cost is a process that
    holds on to memory it has freed, as a JVM holds its heap. Like RocketMQ's JVM options,
    this is for the process's owner: ``run`` calls it; an application that embeds the
    clients in its own event loop may call it at start.
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, KEEP_FREED_BELOW)
        and mallopt(_M_TRIM_THRESHOLD, 4 * KEEP_FREED_BELOW)
    )


GC_THRESHOLDS = (50_000, 20, 10)
"""The cyclic collector's thresholds ``run`` sets: a young collection every 50,000 net container
allocations (Python's default is 700), an older one every 20 of those, a full one every 10 of
those (and, as always, only when a quarter of the heap is new since the last)."""


def tune_gc() -> None:
    """Collect cycles less often, and never scan what was built before the loop started.

    Almost everything this code allocates is freed by reference counting (messages, requests,
    futures); the cyclic collector still walks the young objects every 700 allocations and the
    whole heap every 70,000, which in a process holding a big state is long pauses of no use:
    at 1,000 x 4,096 a worker of 125 consumers spent 0.5-1.1 s of every 10 s collecting, with
    pauses up to 0.6 s (``bench.rebalance --worker-stats``), and py-spy put 8 % of a broker's
    samples in the collector. ``gc.freeze`` moves what exists now (modules, classes, functions:
    the imports) out of the collector's sight for good. Cyclic garbage still goes, later. For
    the process's owner, like ``tune_allocator``: ``run`` calls it; an application that embeds
    the clients in its own event loop may call it once its imports are done.
    """
    if gc.get_threshold() == GC_THRESHOLDS:
        return  # done already: this process's imports were frozen then
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on uvloop if it is importable, the allocator and the garbage
    collector tuned."""
    tune_allocator()
    tune_gc()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM, handled on the running loop: a command that runs
    until Ctrl-C stops with it even when started with SIGINT ignored (a shell starts its
    background jobs so, and Python then raises no KeyboardInterrupt)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
