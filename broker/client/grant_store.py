"""The fenced grant table on disk: a snapshot, and a journal of the changes made since.

An acquire or a release is answered only once its change is on disk (a grant survives a
crash once given). Written whole at every group commit, the table cost the brokers a quarter
of their CPU in a rebalance at 1,000 consumers: a JSON dump of about 2,000 grants and epochs
per write, many writes a second, for a few changes each. So a write appends just the changes
since the last one to the journal (a JSON line each, fsynced), and the table is written whole
(atomically, then the journal emptied) only once the journal has grown past a few times the
table's size: the checkpoint of a write-ahead log.

Each change carries the table's version after it (``seq``), and the snapshot the version it
holds; at start the snapshot is read, then the journal's changes above its version replayed.
So a crash between a snapshot and the journal's truncation replays nothing twice. A torn last
line (a crash inside an append) is left out; the whole lines of that append are replayed,
though no answer was sent for them: the client took the missing answer as a lost one (the
queues unsure, asked again), as it does for any write a crash cut short.

After a failed write the journal may lack changes, so nothing is appended until a snapshot
(which holds them all) has been written. A table that cannot be read at start is left aside
(the broker starts without it, as before the journal) and so is its journal, renamed
``.unreadable``: its lines must not be replayed over the next run's table.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from aiorocketmq.broker.client.queue_grants import QueueGrantManager
from aiorocketmq.broker.offset.consumer_offset_manager import fsync_dir, write_atomically
from aiorocketmq.logs import get_logger

__all__ = ["GrantStore", "append_durably"]

log = get_logger("aiorocketmq.broker.client.grant_store")

# The journal is folded into a snapshot past this many lines, or past COMPACT_FACTOR times the
# table's size, whichever is larger: a snapshot costs the table's size, a line costs one change.
MIN_COMPACT_LINES = 4096
COMPACT_FACTOR = 4


def append_durably(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` and fsync it (the file, and its folder, created when
    missing; the folder fsynced then, so that the new file itself survives a crash)."""
    created = not path.exists()
    if created:
        path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if created:
        fsync_dir(path.parent)


def _truncate_durably(path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.flush()
        os.fsync(f.fileno())


class GrantStore:
    """Where one broker's grant table lives: ``<snapshot>`` and ``<snapshot>.journal``.

    One ``write`` at a time (the broker's group commit runs them one after the other).
    """

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = snapshot
        self.journal = snapshot.with_name(snapshot.name + ".journal")
        self.journal_lines = 0
        # A write failed: the journal may miss changes; the next write is a snapshot.
        self.snapshot_due = False

    def load(self, grants: QueueGrantManager, now: int) -> int | None:
        """Restore ``grants`` from disk: how many grants came back, None when none was kept.

        An unreadable snapshot starts the broker without the table (logged); a journal line
        that cannot be read ends the replay there (a torn last append).
        """
        data: dict[str, Any] = {}
        try:
            data = json.loads(self.snapshot.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except FileNotFoundError:
            pass
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            self._start_without(grants, e)
            return None
        changes = self._read_journal()
        if not data and not changes:
            return None
        try:
            restored = grants.restore(data, now, changes)
        except ValueError as e:
            self._start_without(grants, e)
            return None
        self.journal_lines = len(changes)  # appends go on after them
        return restored

    def _start_without(self, grants: QueueGrantManager, error: ValueError) -> None:
        """The table cannot be read: start without it, its journal set aside (renamed), the
        next write a snapshot."""
        log.error("queue grant table unreadable, starting without it", error=str(error))
        grants.reset()
        self.snapshot_due = True
        try:
            self.journal.replace(self.journal.with_name(self.journal.name + ".unreadable"))
        except FileNotFoundError:
            pass

    def _read_journal(self) -> list[dict[str, Any]]:
        try:
            lines = self.journal.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return []
        changes: list[dict[str, Any]] = []
        for number, line in enumerate(lines, 1):
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no end of line")
                change = json.loads(line.decode("utf-8"))  # not UTF-8: a bad line too
                if not isinstance(change, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                log.warning(
                    "queue grant journal ends in a line it cannot read; replayed up to it",
                    file=str(self.journal),
                    line=number,
                    of=len(lines),
                    error=str(e),
                )
                self.snapshot_due = True  # the bad tail goes with the next snapshot
                break
            changes.append(change)
        return changes

    async def write(self, grants: QueueGrantManager) -> int:
        """Put on disk every change made to ``grants`` so far; the version now durable.

        The changes are taken on the event loop (the table as it is now); the file work runs
        in a thread. On an ``OSError`` the next write is a snapshot.
        """
        version, changes = grants.version, grants.take_changes()
        try:
            if self.snapshot_due or self.journal_lines + len(changes) > max(
                MIN_COMPACT_LINES, COMPACT_FACTOR * grants.size()
            ):
                table = grants.to_json()
                self.snapshot_due = True  # until both steps are done
                await asyncio.to_thread(self._write_snapshot, table)
                self.journal_lines, self.snapshot_due = 0, False
            elif changes:
                text = "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in changes)
                await asyncio.to_thread(append_durably, self.journal, text)
                self.journal_lines += len(changes)
        except BaseException:
            self.snapshot_due = True  # these changes may not be in the journal
            raise
        return version

    def _write_snapshot(self, table: dict[str, Any]) -> None:
        write_atomically(self.snapshot, json.dumps(table, indent=1))
        if self.journal.exists():
            _truncate_durably(self.journal)
