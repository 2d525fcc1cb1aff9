"""Protocol trace: components record what happens; a JSONL file or a callback receives it.

The event names are a table (``EVENTS``) so tests, the trace checker and the demo's narration
read the same words. Recording is off unless a sink is installed, and costs one attribute test
then (a call site whose fields cost more to build, a sort or a string per queue, asks
``tracer.wants(event)`` first). Every record carries ``ts`` (ms, wall clock), ``event`` and
the ids as fields.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["EVENTS", "Tracer", "tracer"]

# event -> what it means (and who records it).
EVENTS: dict[str, str] = {
    "channel_opened": "broker: a client opened its channel stream",
    "channel_closed": "broker: a channel ended; the client left its groups",
    "heartbeat": "broker: a client's heartbeat registered or refreshed its groups",
    "consumer_table_changed": "broker: a group's channels or topics changed (CHANGE)",
    "notify_sent": "broker: NOTIFY_CONSUMER_IDS_CHANGED pushed to a channel",
    "notify_received": "consumer: NOTIFY_CONSUMER_IDS_CHANGED arrived",
    "rebalance_result": "consumer: the strategy's allocation for a topic",
    "queue_added": "consumer: a queue became ours (new process queue and pull request)",
    "queue_dropped": "consumer: a queue is no longer ours (offset persisted, queue removed)",
    "queue_acquired": "consumer (fenced): the broker granted a queue with an epoch",
    "queue_releasing": "consumer (fenced): done with a queue (no pull, nothing in flight), "
    "asking the broker to release it",
    "queue_released": "consumer (fenced): the broker released a queue with its final offset",
    "pull": "consumer: a pull returned messages",
    "offset_commit": "consumer: offsets committed to a broker",
    "consumed": "consumer: the listener consumed a message",
    "sent": "producer: the broker stored a batch (queue, first offset, count)",
    "consumer_started": "consumer: start() finished (the client joined its group)",
    "consumer_shutdown": "consumer: shutdown() began (a graceful leave)",
    "client_unregistered": "broker: UNREGISTER_CLIENT, a graceful leave",
    "acquire_answered": "broker (fenced): an AcquireQueues answered, with how long it waited "
    "for releases and for the grant table's durable write",
    "grants_expired": "broker (fenced): grants restored after a restart expired, their client "
    "not back in time (no channel's close says so)",
}


class Tracer:
    """Where trace records go: nowhere (default), a JSONL file, and/or callbacks."""

    def __init__(self) -> None:
        self.enabled = False
        self.pid = os.getpid()
        self._file: TextIO | None = None
        # (callback, the events it takes; None: all).
        self._callbacks: list[tuple[Callable[[dict[str, Any]], None], frozenset[str] | None]] = []
        # The events some sink takes (None: all): a record nobody takes is not built.
        self._wanted: frozenset[str] | None = None

    def wants(self, event: str) -> bool:
        """Whether a record of ``event`` would reach a sink: a call site whose fields cost
        something to build asks this first."""
        return self.enabled and (self._wanted is None or event in self._wanted)

    def record(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        if event not in EVENTS:
            raise ValueError(f"unknown trace event {event!r}")
        if not self.wants(event):
            return
        rec = {"ts": int(time.time() * 1000), "event": event, "pid": self.pid, **fields}
        if self._file is not None:
            self._file.write(json.dumps(rec, default=str) + "\n")
        for cb, events in list(self._callbacks):
            if events is None or event in events:
                cb(rec)

    def to_file(self, path: Path) -> None:
        self.close_file()
        self._file = path.open("a", buffering=1)
        self._refresh()

    def close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._refresh()

    def subscribe(
        self, callback: Callable[[dict[str, Any]], None], events: Iterable[str] | None = None
    ) -> None:
        """``callback`` gets every record, or only those of ``events`` (a harness that reads a
        few events spares the processes it measures the building of the others)."""
        wanted = None if events is None else frozenset(events)
        unknown = sorted(wanted - EVENTS.keys()) if wanted is not None else []
        if unknown:
            raise ValueError(f"unknown trace events {unknown}")
        self._callbacks.append((callback, wanted))
        self._refresh()

    def unsubscribe(self, callback: Callable[[dict[str, Any]], None]) -> None:
        for i, (cb, _) in enumerate(self._callbacks):
            if cb == callback:
                del self._callbacks[i]
                break
        self._refresh()

    def _refresh(self) -> None:
        self.enabled = bool(self._callbacks) or self._file is not None
        wanted: frozenset[str] | None = frozenset()
        for _, events in self._callbacks:
            wanted = None if wanted is None or events is None else wanted | events
        self._wanted = None if self._file is not None else wanted


tracer = Tracer()
