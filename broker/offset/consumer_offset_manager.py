"""``ConsumerOffsetManager``: the committed offsets of every (group, topic, queue) on a broker.

Rules (RocketMQ's ``ConsumerOffsetManager``):

- ``offset_table``: ``"topic@group"`` -> (queue id -> offset). An offset is the next one the
  group will consume (one past the last consumed message).
- ``commit_offset`` is a plain put, **not** monotonic: the last writer wins, and a lower value
  than the stored one only logs a ``[NOTIFYME]`` warning. (Rewinding is legitimate: a reset,
  a new owner that re-read from an older offset.)
- ``query_offset`` answers -1 when the group has no offset for the queue; what the broker
  replies then is the rule of ``aiorocketmq.broker.offset.consume_from_where``.
- ``pull_offset_table`` keeps the offsets of broker-side pulls (``commit_pull_offset``); it is
  not persisted.
- Persistence: ``<store>/config/consumerOffset.json``, a JSON object with ``offsetTable`` and
  ``dataVersion``. ``persist()`` writes a temporary file, fsyncs it, copies the current file to
  ``.bak`` and renames the temporary file over the current one (``os.replace``), so a crash
  leaves either the old or the new file, never half of one. ``load()`` falls back to ``.bak``
  when the file is missing, empty or unreadable. The broker service calls ``persist()`` every
  5 s (``flushConsumerOffsetInterval``) and at shutdown; nothing here starts a timer.

Where we differ from RocketMQ, and why:

- RocketMQ's fastjson writes the integer queue-id keys unquoted (``{0:12}``), which is not
  JSON. We write standard JSON (``{"0": 12}``) and still read RocketMQ's form, so a RocketMQ
  store's file can be loaded.
- ``dataVersion`` (``stateVersion``, ``timestamp``, ``counter``) advances on every change,
  stamped with the injected ``now_ms`` clock.
- Not here: ``resetOffsetTable`` (server-side offset resets) and broadcast offsets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.logs import get_logger

__all__ = [
    "CONSUMER_OFFSET_FILE",
    "TOPIC_GROUP_SEPARATOR",
    "ConsumerOffsetManager",
    "DataVersion",
    "fsync_dir",
    "write_atomically",
]

log = get_logger("aiorocketmq.broker.offset.consumer_offset_manager")

TOPIC_GROUP_SEPARATOR = "@"
CONSUMER_OFFSET_FILE = "consumerOffset.json"

# A fastjson integer map key, e.g. the 0 in {0:12,1:7}.
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class DataVersion:
    """RocketMQ's ``DataVersion``: tells two snapshots of a table apart."""

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def next_version(self, now: int) -> None:
        self.timestamp = now
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
            "counter": self.counter,
        }

    @classmethod
    def from_json(cls, data: Any) -> DataVersion:
        if not isinstance(data, dict):
            return cls()
        return cls(
            state_version=int(data.get("stateVersion", 0)),
            timestamp=int(data.get("timestamp", 0)),
            counter=int(data.get("counter", 0)),
        )


class ConsumerOffsetManager:
    """Committed offsets per ``topic@group`` and queue, persisted as JSON."""

    def __init__(self, store_path: Path, *, now_ms: Callable[[], int] = _wall_clock_ms) -> None:
        self.store_path = Path(store_path)
        self.now_ms = now_ms
        self.offset_table: dict[str, dict[int, int]] = {}
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        # Offsets an administrator reset while the group was online, until the queue's next
        # pull starts there: commits of any other offset are ignored meanwhile (RocketMQ's
        # resetOffsetTable), and a pull from elsewhere is told to move (PULL_OFFSET_MOVED).
        self.reset_table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion()

    # ---- keys ------------------------------------------------------------------------------

    @staticmethod
    def key(group: str, topic: str) -> str:
        """``topic@group``."""
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    @staticmethod
    def split_key(key: str) -> tuple[str, str] | None:
        """``(topic, group)`` of a ``topic@group`` key, or None when malformed."""
        topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
        if not sep or not topic or not group or TOPIC_GROUP_SEPARATOR in group:
            return None
        return topic, group

    # ---- offsets ---------------------------------------------------------------------------

    def commit_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        """Store ``offset`` (a plain put); warn with [NOTIFYME] when it goes backwards.
        Ignored while a reset of the queue to another offset is pending."""
        key = self.key(group, topic)
        pending = self.reset_table.get(key, {}).get(queue_id)
        if pending is not None and pending != offset:
            log.info(
                "offset has been previously reset; commit ignored",
                key=key,
                queue_id=queue_id,
                request_offset=offset,
                reset_offset=pending,
            )
            return
        queues = self.offset_table.setdefault(key, {})
        stored = queues.get(queue_id)
        queues[queue_id] = offset
        self.data_version.next_version(self.now_ms())
        if stored is not None and offset < stored:
            log.warning(
                "[NOTIFYME]update consumer offset less than store",
                client_host=client_host,
                key=key,
                queue_id=queue_id,
                request_offset=offset,
                store_offset=stored,
            )

    def reset_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, pending: bool
    ) -> None:
        """Set the committed offset as an administrator asked; ``pending`` (the group is
        online) keeps it until the queue's next pull starts there."""
        key = self.key(group, topic)
        self.offset_table.setdefault(key, {})[queue_id] = offset
        self.pull_offset_table.get(key, {}).pop(queue_id, None)
        if pending:
            self.reset_table.setdefault(key, {})[queue_id] = offset
        else:
            self.reset_table.get(key, {}).pop(queue_id, None)
        self.data_version.next_version(self.now_ms())

    def pending_reset(self, group: str, topic: str, queue_id: int, pull_offset: int) -> int | None:
        """For a pull from ``pull_offset``: the offset it must move to while a reset is
        pending, else None (a pull from the reset offset ends the pending state)."""
        key = self.key(group, topic)
        queues = self.reset_table.get(key)
        if not queues or queue_id not in queues:
            return None
        if queues[queue_id] == pull_offset:
            del queues[queue_id]
            if not queues:
                del self.reset_table[key]
            return None
        return queues[queue_id]

    def reset_waiting(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Whether a reset of the queue to another offset than ``offset`` waits for its next
        pull (``pending_reset`` without ending it): a watch from ``offset`` would hide it."""
        target = self.reset_table.get(self.key(group, topic), {}).get(queue_id)
        return target is not None and target != offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when there is none."""
        return self.offset_table.get(self.key(group, topic), {}).get(queue_id, -1)

    def query_offset_table(self, group: str, topic: str) -> dict[int, int]:
        """Queue id -> committed offset of one (group, topic); a copy."""
        return dict(self.offset_table.get(self.key(group, topic), {}))

    def commit_pull_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        """Record where a broker-side pull got to (in memory only)."""
        self.pull_offset_table.setdefault(self.key(group, topic), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The pull offset if one was recorded, else the committed offset (else -1)."""
        pulled = self.pull_offset_table.get(self.key(group, topic), {}).get(queue_id)
        return pulled if pulled is not None else self.query_offset(group, topic, queue_id)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """The topics ``group`` has offsets for."""
        topics: set[str] = set()
        for key in self.offset_table:
            parts = self.split_key(key)
            if parts is not None and parts[1] == group:
                topics.add(parts[0])
        return topics

    def which_group_by_topic(self, topic: str) -> set[str]:
        """The groups with offsets for ``topic``."""
        groups: set[str] = set()
        for key in self.offset_table:
            parts = self.split_key(key)
            if parts is not None and parts[0] == topic:
                groups.add(parts[1])
        return groups

    def remove_offset(self, group: str) -> list[str]:
        """Forget every offset of ``group`` (the group was deleted); the keys removed."""
        removed: list[str] = []
        for table in (self.offset_table, self.pull_offset_table):
            for key in [k for k in table if (p := self.split_key(k)) is not None and p[1] == group]:
                del table[key]
                if table is self.offset_table:
                    removed.append(key)
                    log.warning("Clean group's offset", group=group, key=key)
        if removed:
            self.data_version.next_version(self.now_ms())
        return removed

    # ---- persistence -----------------------------------------------------------------------

    @property
    def config_file_path(self) -> Path:
        """``<store>/config/consumerOffset.json``."""
        return self.store_path / "config" / CONSUMER_OFFSET_FILE

    def encode(self, *, pretty: bool = False) -> str:
        """The file's content: standard JSON, queue ids as string keys."""
        body = {
            "offsetTable": {
                key: {str(qid): off for qid, off in sorted(queues.items())}
                for key, queues in sorted(self.offset_table.items())
            },
            "dataVersion": self.data_version.to_json(),
        }
        return json.dumps(body, indent=2 if pretty else None, sort_keys=False)

    def decode(self, text: str) -> None:
        """Replace the tables with a file's content; ``ValueError`` when it is not one."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            # RocketMQ's own file: integer keys unquoted.
            data = json.loads(_BARE_INT_KEY.sub(r'\1"\2"\3', text))
        if not isinstance(data, dict):
            raise ValueError("consumer offset file is not a JSON object")
        raw_table = data.get("offsetTable", {})
        if not isinstance(raw_table, dict):
            raise ValueError("offsetTable is not an object")
        table: dict[str, dict[int, int]] = {}
        for key, queues in raw_table.items():
            if not isinstance(queues, dict):
                raise ValueError(f"offsetTable[{key!r}] is not an object")
            try:
                table[str(key)] = {int(qid): int(off) for qid, off in queues.items()}
            except (TypeError, ValueError) as exc:
                raise ValueError(f"offsetTable[{key!r}] has a bad queue id or offset") from exc
        self.offset_table = table
        self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def load(self) -> bool:
        """Read the file (or its ``.bak``); False only when neither could be read."""
        path = self.config_file_path
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            if not text.strip():
                return self._load_bak()
            self.decode(text)
        except (OSError, ValueError) as exc:
            log.error(
                "load consumer offsets failed, and try to load backup file",
                path=str(path),
                error=str(exc),
            )
            return self._load_bak()
        log.info("load consumer offsets OK", path=str(path), keys=len(self.offset_table))
        return True

    def _load_bak(self) -> bool:
        bak = _bak_path(self.config_file_path)
        try:
            text = bak.read_text(encoding="utf-8") if bak.exists() else ""
            if text.strip():
                self.decode(text)
                log.info("load consumer offsets from backup OK", path=str(bak))
        except (OSError, ValueError) as exc:
            log.error("load consumer offsets backup failed", path=str(bak), error=str(exc))
            return False
        return True

    def persist(self) -> None:
        """Write the file atomically (temporary file + ``os.replace``), keeping a ``.bak``."""
        write_atomically(self.config_file_path, self.encode(pretty=True))


def _bak_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` durably: a fsynced temporary file replaces it, the old one
    kept as ``.bak``; a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        # The previous content becomes the backup; copied, so the file itself never vanishes.
        bak = _bak_path(path)
        bak_tmp = bak.with_name(bak.name + ".tmp")
        shutil.copyfile(path, bak_tmp)
        os.replace(bak_tmp, bak)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make the renames durable where the platform allows it (not on Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
