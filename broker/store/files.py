"""Small blocking file helpers the store's modules share: whole writes and fsyncs.

Rules: ``pwrite_all`` loops until every byte is written (``pwrite`` may write less); the fsync
helpers are what the store runs in a thread, never on the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["fsync_all", "fsync_dirs", "pwrite_all"]


def pwrite_all(fd: int, data: bytes, position: int) -> None:
    """Write all of ``data`` at ``position`` of ``fd``."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def fsync_all(fds: Iterable[int]) -> None:
    for fd in fds:
        os.fsync(fd)


def fsync_dirs(dirs: Iterable[str]) -> None:
    """fsync directories (so created and deleted files are durable); gone ones are skipped."""
    for path in dirs:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
