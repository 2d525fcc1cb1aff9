"""The rebalance timeline: who held which queue when, and the events behind each change.

Pure (no I/O): it is fed observations, live ones (``observe``: the holders of each queue and the
group's members, as the cluster reports them at one instant) or a recorded trace
(``Timeline.from_trace``), and answers rows of bars, one row per queue and one bar per holding,
with the places where two clients held a queue at once (double ownership) and where nobody held
it between two holders (a handoff gap). Each bar carries the events that preceded it: a member
joining (its HEART_BEAT), leaving, the brokers' NOTIFY_CONSUMER_IDS_CHANGED, the allocation result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.validators import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic
from aiorocketmq.trace_check import check, client_id_of

__all__ = ["Bar", "Mark", "Timeline", "TimelineEvent", "TraceError", "parse_trace"]

# Events this long before a bar opens are shown as its causes.
CAUSE_WINDOW_MS = 5_000
# Trace events worth showing on the timeline, and how to say them.
_TRACE_EVENTS = {
    "heartbeat": "HEART_BEAT from {client_id} to {broker}",
    "notify_sent": "NOTIFY_CONSUMER_IDS_CHANGED sent by {broker} to {client_id}",
    "notify_received": "NOTIFY_CONSUMER_IDS_CHANGED received by {client_id}",
    "rebalance_result": "allocation result of {client_id}: {result}",
    "client_unregistered": "UNREGISTER_CLIENT of {client_id} at {broker}",
    "channel_closed": "channel of {client_id} closed at {broker}",
    "consumer_started": "{client_id} started",
    "consumer_shutdown": "{client_id} shut down",
}


class TraceError(ValueError):
    """A trace file that is not one; the message names the line."""


@dataclass(slots=True)
class Bar:
    """``holder`` held the queue from ``start`` to ``end`` (ms; None: still holds it)."""

    holder: str
    start: int
    end: int | None = None
    causes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Mark:
    """``double``: two holders at once; ``gap``: nobody between two holders."""

    kind: str
    queue: str
    start: int
    end: int


@dataclass(slots=True)
class TimelineEvent:
    ts: int
    kind: str
    text: str


@dataclass
class Timeline:
    """One consumer group's queues over time."""

    group: str
    rows: dict[str, list[Bar]] = field(default_factory=dict)
    events: list[TimelineEvent] = field(default_factory=list)
    members: dict[str, str] = field(default_factory=dict)
    start: int = 0
    last: int = 0

    # ---- live ------------------------------------------------------------------------------
    def observe(
        self,
        ts: int,
        holders: Mapping[str, Iterable[str]],
        members: Mapping[str, str],
        notes: Iterable[str] = (),
    ) -> list[TimelineEvent]:
        """One look at the group at ``ts``: each queue's holders (client ids; a queue missing
        from ``holders`` is not part of the group's topics any more) and the members (client
        id -> description). What changed, as events (also kept in ``events``)."""
        if not self.start:
            self.start = ts
        self.last = max(self.last, ts)
        new: list[TimelineEvent] = []
        for client in sorted(set(members) - set(self.members)):
            new.append(
                TimelineEvent(ts, "joined", f"{client} joined ({members[client]}): HEART_BEAT")
            )
        for client in sorted(set(self.members) - set(members)):
            new.append(
                TimelineEvent(ts, "left", f"{client} left: UNREGISTER_CLIENT or channel closed")
            )
        new.extend(TimelineEvent(ts, "note", n) for n in notes)
        self.members = dict(members)
        gained: dict[str, list[str]] = {}
        lost: dict[str, list[str]] = {}
        for queue in sorted(set(self.rows) | set(holders)):
            now = set(holders.get(queue, ()))
            bars = self.rows.setdefault(queue, [])
            for bar in bars:
                if bar.end is None and bar.holder not in now:
                    bar.end = ts
                    lost.setdefault(bar.holder, []).append(queue)
            open_holders = {b.holder for b in bars if b.end is None}
            for holder in sorted(now - open_holders):
                bars.append(Bar(holder, ts))
                gained.setdefault(holder, []).append(queue)
        for holder in sorted(set(gained) | set(lost)):
            parts = []
            if gained.get(holder):
                parts.append("took " + ", ".join(_short(q) for q in gained[holder]))
            if lost.get(holder):
                parts.append("gave up " + ", ".join(_short(q) for q in lost[holder]))
            new.append(
                TimelineEvent(
                    ts, "allocation", f"allocation result of {holder}: {'; '.join(parts)}"
                )
            )
        self.events.extend(new)
        self._attach_causes(ts)
        return new

    def _attach_causes(self, ts: int) -> None:
        for bars in self.rows.values():
            for bar in bars:
                if bar.start == ts and not bar.causes:
                    bar.causes = [
                        e.text for e in self.events if ts - CAUSE_WINDOW_MS <= e.ts <= ts
                    ][-8:]

    # ---- a recorded trace ------------------------------------------------------------------
    @classmethod
    def from_trace(cls, records: list[dict[str, Any]], group: str | None = None) -> Timeline:
        """The timeline a trace recorded (``aiorocketmq trace`` files, any group if None)."""
        report = check(records, group=group)
        groups = sorted({str(r["group"]) for r in records if r.get("group")})
        timeline = cls(group or ", ".join(groups) or "-", start=report.start, last=report.end)
        for queue, holdings in sorted(report.holdings.items()):
            timeline.rows[queue] = [
                Bar(client_id_of(h.client_id), h.start, h.end)
                for h in sorted(holdings, key=lambda h: h.start)
            ]
        for r in records:
            template = _TRACE_EVENTS.get(str(r.get("event")))
            if template is None or (group is not None and r.get("group") not in (None, group)):
                continue
            values = {k: r.get(k, "?") for k in ("client_id", "broker", "result")}
            if isinstance(values["result"], list):
                values["result"] = ", ".join(_short(str(q)) for q in values["result"]) or "nothing"
            timeline.events.append(
                TimelineEvent(int(r["ts"]), str(r["event"]), template.format(**values))
            )
        for bars in timeline.rows.values():
            for bar in bars:
                bar.causes = [
                    e.text
                    for e in timeline.events
                    if bar.start - CAUSE_WINDOW_MS <= e.ts <= bar.start
                ][-8:]
        return timeline

    # ---- what the page shows ---------------------------------------------------------------
    def marks(self, now: int | None = None) -> list[Mark]:
        """Double ownership and handoff gaps, row by row."""
        end_now = self.last if now is None else now
        found: list[Mark] = []
        for queue, bars in sorted(self.rows.items()):
            ordered = sorted(bars, key=lambda b: b.start)
            for i, a in enumerate(ordered):
                a_end = end_now if a.end is None else a.end
                for b in ordered[i + 1 :]:
                    if b.holder == a.holder:
                        continue
                    b_end = end_now if b.end is None else b.end
                    lo, hi = max(a.start, b.start), min(a_end, b_end)
                    if hi > lo:
                        found.append(Mark("double", queue, lo, hi))
            covered_until = None
            for bar in ordered:
                if covered_until is not None and bar.start > covered_until:
                    found.append(Mark("gap", queue, covered_until, bar.start))
                bar_end = end_now if bar.end is None else bar.end
                covered_until = bar_end if covered_until is None else max(covered_until, bar_end)
        return found

    def holders_now(self) -> dict[str, list[str]]:
        return {
            q: sorted(b.holder for b in bars if b.end is None)
            for q, bars in sorted(self.rows.items())
        }

    def to_json(self, now: int | None = None) -> dict[str, Any]:
        end = max(self.last, now or 0)
        return {
            "group": self.group,
            "start": self.start,
            "now": end,
            "rows": [
                {"queue": q, "label": _short(q), "bars": [asdict(b) for b in bars]}
                for q, bars in sorted(self.rows.items())
            ],
            "marks": [asdict(m) for m in self.marks(end)],
            "events": [asdict(e) for e in self.events[-200:]],
            "members": self.members,
        }


def _short(queue: str) -> str:
    """``T broker-a:3`` for RocketMQ's ``MessageQueue [topic=T, brokerName=broker-a, queueId=3]``
    (a retry topic is ``%RETRY%``)."""
    mq = MessageQueue.parse(queue)
    if mq is None:
        return queue
    topic = RETRY_GROUP_TOPIC_PREFIX if is_retry_topic(mq.topic) else mq.topic
    return f"{topic} {mq.broker_name}:{mq.queue_id}"


def parse_trace(text: str) -> list[dict[str, Any]]:
    """The records of a trace file (JSON lines with ``ts`` and ``event``), in time order.

    A bad line is refused with its number; only a last line without its newline (a process
    killed mid-write) is forgiven and dropped.
    """
    records: list[dict[str, Any]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        torn_tail = number == len(lines) and not text.endswith("\n")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if torn_tail:
                break
            raise TraceError(f"line {number}: not JSON ({e.msg}): {line[:80]!r}") from None
        if not isinstance(record, dict):
            raise TraceError(f"line {number}: a trace record is a JSON object, got {line[:80]!r}")
        if not isinstance(record.get("ts"), int) or not isinstance(record.get("event"), str):
            raise TraceError(f"line {number}: a trace record has an integer ts and an event name")
        records.append(record)
    if not records:
        raise TraceError("no trace records (an empty file?)")
    records.sort(key=lambda r: r["ts"])
    return records
