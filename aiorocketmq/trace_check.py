"""The invariant checker: who held each queue when, and what was consumed twice or never.

Rules: pure functions over trace records (``aiorocketmq.trace``); records from several
processes are merged by timestamp. A consumer *holds* a queue from its ``queue_added`` (or
``queue_acquired``) to its ``queue_dropped`` (or ``queue_releasing``: a fenced consumer stops
using a queue when it asks to release it, before the broker answers), or to the end of the trace
if it never let go; a client whose channel closed without a graceful leave (no
``consumer_shutdown`` / ``client_unregistered``) crashed, and its holdings end at that close
(or at an earlier close of its channel at the queue's broker, which gave its grants away, or
where a restarted broker let the grants it restored for the client expire: ``grants_expired``).

The report answers, per queue: the holders in order; windows with two holders (double
ownership); gaps between one holder and the next (unowned time per handoff) and queues unowned
at the end; messages consumed more than once (by whom, and whether a crash or a graceful change
caused it); messages sent but never consumed.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = [
    "Handoff",
    "Holding",
    "TraceReport",
    "check",
    "client_id_of",
    "format_report",
    "holder_of",
    "read_traces",
]


@dataclass(slots=True)
class Holding:
    """One client holding one queue from ``start`` to ``end`` (ms; None = still holding)."""

    client_id: str
    start: int
    end: int | None = None
    granted: bool = False  # a fenced grant (queue_acquired): the broker's to end
    epoch: int = 0  # the grant's epoch (fenced; 0: none): a release of another leaves it on


@dataclass(slots=True)
class Handoff:
    """A queue passing from one holder to the next: overlap > 0 is double ownership."""

    mq: str
    from_client: str
    to_client: str
    unowned_ms: int
    overlap_ms: int


@dataclass
class TraceReport:
    """What ``check`` found."""

    start: int
    end: int
    holdings: dict[str, list[Holding]] = field(default_factory=dict)
    double_ownership_ms: dict[str, int] = field(default_factory=dict)
    handoffs: list[Handoff] = field(default_factory=list)
    unowned_at_end: list[str] = field(default_factory=list)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    duplicate_causes: dict[str, int] = field(default_factory=dict)
    never_consumed: list[str] = field(default_factory=list)
    crashed_clients: set[str] = field(default_factory=set)
    consumed: int = 0
    sent: int = 0

    @property
    def total_double_ownership_ms(self) -> int:
        return sum(self.double_ownership_ms.values())

    @property
    def duplicate_count(self) -> int:
        """Deliveries beyond the first, over all messages."""
        return sum(len(v) - 1 for v in self.duplicates.values())

    def holders_now(self) -> dict[str, list[str]]:
        """Per queue, the clients still holding it at the end of the trace (by client id)."""
        return {
            mq: [client_id_of(h.client_id) for h in hs if h.end is None]
            for mq, hs in self.holdings.items()
            if any(h.end is None for h in hs)
        }


def holder_of(record: dict[str, Any]) -> str:
    """Who a record speaks for: the client id, and the process when the trace says so.

    Two processes with the same client id (a misconfiguration the suite provokes) are still two
    holders; ``client_id_of`` gives the client id back.
    """
    pid = record.get("pid")
    return (
        f"{record.get('client_id', '')}|{pid}" if pid is not None else record.get("client_id", "")
    )


def client_id_of(holder: str) -> str:
    return holder.split("|", 1)[0]


def read_traces(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of the JSONL files, merged in timestamp order (a torn last line is skipped)."""
    records: list[dict[str, Any]] = []
    for path in paths:
        with path.open() as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a process killed mid-write leaves a partial last line
    records.sort(key=lambda r: r.get("ts", 0))
    return records


_GAINS = {"queue_added", "queue_acquired"}
_LOSSES = {"queue_dropped", "queue_releasing", "queue_released"}


def _gave_grants_away(r: dict[str, Any]) -> bool:
    """Whether ``r`` is a channel's close that gave its grants away: not the close of one its
    client had replaced with a new channel (the grants went there; the client lives on)."""
    return bool(r["event"] == "channel_closed" and not r.get("replaced_by"))


def _crashed(records: list[dict[str, Any]]) -> tuple[set[str], dict[str, int]]:
    """Clients whose channel closed with no graceful leave before it, and when.

    A graceful leave is recorded by the consumer (``consumer_shutdown``) or by the broker
    (``client_unregistered``); a channel that closes while still in groups without either is a
    crash, unless the client opened a channel after it: then it lived on, and the broker had
    closed a live client's channel (its keepalive found the connection silent). The crash is
    the first such close after the client's last open.
    """
    graceful: set[str] = set()
    closes: dict[str, list[int]] = defaultdict(list)
    last_open: dict[str, int] = {}
    for r in records:
        event, cid = r["event"], r.get("client_id", "")
        if event in ("consumer_shutdown", "client_unregistered"):
            graceful.add(cid)
        elif event == "channel_opened":
            last_open[cid] = r["ts"]
        elif _gave_grants_away(r) and cid not in graceful and r.get("groups"):
            closes[cid].append(r["ts"])
    crashed_at = {}
    for cid, times in closes.items():
        final = [t for t in times if t >= last_open.get(cid, 0)]
        if final:
            crashed_at[cid] = min(final)
    return set(crashed_at), crashed_at


def check(
    records: list[dict[str, Any]],
    *,
    group: str | None = None,
    topic: str | None = None,
    expected: Iterable[str] | None = None,
) -> TraceReport:
    """Analyse ``records`` for ``group`` (all groups if None) and ``topic`` (all if None).

    ``expected``: message keys ``"<mq>@<offset>"`` that must have been consumed; by default
    every message of a ``sent`` record (of ``topic``).
    """
    if not records:
        return TraceReport(0, 0)
    start, end = records[0]["ts"], records[-1]["ts"]
    report = TraceReport(start, end)
    crashed, crashed_at = _crashed(records)
    report.crashed_clients = crashed

    def wanted(r: dict[str, Any]) -> bool:
        if group is not None and r.get("group") not in (None, group):
            return False
        return topic is None or f"topic={topic}," in str(r.get("mq", f"topic={topic},"))

    holdings: dict[str, list[Holding]] = defaultdict(list)
    # The processes of each client id (two with one id: a misconfiguration the suite provokes).
    processes: dict[str, set[Any]] = defaultdict(set)
    for r in records:
        if "broker" not in r and "pid" in r and r.get("client_id"):
            processes[r["client_id"]].add(r["pid"])
    consumed_by: dict[str, list[str]] = defaultdict(list)
    sent: set[str] = set()
    queues_of: dict[str, list[str]] = defaultdict(list)  # broker -> its queues held so far
    # (holder, queue, epoch) of the grants a broker took back (a close, an expiry): a queue
    # added under one of them afterwards (a pass that got the grant just before its process
    # stopped, say) is not held: each of its pulls is refused.
    revoked: set[tuple[str, str, int]] = set()

    def take_back(client_id: str, mqs: Iterable[str], ts: int) -> None:
        """A broker let go of ``client_id``'s grants of ``mqs``: its fenced holdings end."""
        for mq in mqs:
            for h in holdings.get(mq, ()):
                if h.end is None and h.granted and client_id_of(h.client_id) == client_id:
                    h.end = ts
                    revoked.add((h.client_id, mq, h.epoch))

    for r in records:
        if not wanted(r):
            continue
        event = r["event"]
        if event in _GAINS:
            hs = holdings[r["mq"]]
            if not hs:  # its first holding (a list never shrinks)
                queues_of[_broker_of(r["mq"])].append(r["mq"])
            who, epoch = holder_of(r), r.get("epoch") or 0
            if event == "queue_added" and (who, r["mq"], epoch) in revoked:
                continue
            mine = [h for h in hs if h.client_id == who and h.end is None]
            if not mine:
                hs.append(Holding(who, r["ts"], granted=event == "queue_acquired"))
                mine = hs[-1:]
            elif event == "queue_acquired":
                mine[0].granted = True
            mine[0].epoch = epoch or mine[0].epoch
        elif event in _LOSSES:
            # A release names its grant's epoch: one of an earlier grant, sent after the queue
            # was granted to us again (its drop drained a batch meanwhile), ends nothing.
            who, epoch = holder_of(r), r.get("epoch") or 0
            for h in reversed(holdings[r["mq"]]):
                if h.client_id == who and h.end is None and epoch in (0, h.epoch or epoch):
                    h.end = r["ts"]
                    break
        elif _gave_grants_away(r) or event == "grants_expired":
            # The broker let go of grants: every grant of a closed channel (its client's fenced
            # holdings of the broker's queues end here, whatever the client learns later: a
            # fenced consumer holds them back from the moment its stream ended, and drops them
            # at the reopen), or those a restarted broker restored for a client that did not
            # come back in time (stopped, say). A classic holding has no grant and goes on;
            # nor can either be told apart between two processes with one client id (the older
            # rules below see to those).
            cid = r.get("client_id", "")
            if len(processes.get(cid, ())) <= 1:
                gone = r["queues"] if event == "grants_expired" else queues_of[r.get("broker", "")]
                take_back(cid, gone, r["ts"])
        elif event == "consumed":
            consumed_by[f"{r['mq']}@{r['offset']}"].append(holder_of(r))
        elif event == "sent":
            sent.update(f"{r['mq']}@{r['offset'] + i}" for i in range(r.get("count", 1)))
    # A holding a client never recorded giving up (it shut down between acquiring a queue and
    # adding it, say) ends where its broker forgot it: at that client's UNREGISTER_CLIENT (or
    # its channel's close) at the queue's broker, after the holding began and after the
    # holder's own shutdown (another process with the same client id leaving ends nothing of
    # this one's).
    shut_down: dict[str, int] = {}
    unregistered: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in records:
        if r["event"] == "consumer_shutdown":
            shut_down.setdefault(holder_of(r), r["ts"])
        elif r["event"] == "client_unregistered" or _gave_grants_away(r):
            unregistered[(str(r.get("client_id", "")), str(r.get("broker", "")))].append(r["ts"])

    def forgotten(cid: str, mq: str, since: int) -> list[int]:
        """When ``mq``'s broker forgot ``cid``'s grants (its unregister or a channel close)."""
        return [t for t in unregistered.get((cid, _broker_of(mq)), ()) if t >= since]

    for mq, hs in holdings.items():
        for h in hs:
            if h.end is None and h.client_id in shut_down:
                since = max(h.start, shut_down[h.client_id])
                after = forgotten(client_id_of(h.client_id), mq, since)
                if after:
                    h.end = min(after)
    # A crashed client's holdings end when it crashed (its first channel close with groups),
    # or earlier at the queue's broker: a close there, even of a channel not in a group yet
    # (one just reopened to a restarted broker, whose restored grants it carried), gives the
    # broker's grants away.
    for mq, hs in holdings.items():
        for h in hs:
            cid = client_id_of(h.client_id)
            if h.end is None and cid in crashed_at:
                h.end = max(h.start, min([crashed_at[cid], *forgotten(cid, mq, h.start)]))
    report.holdings = dict(holdings)
    for mq, hs in holdings.items():
        ordered = sorted(hs, key=lambda h: h.start)
        double = 0
        for i, a in enumerate(ordered):
            a_end = end if a.end is None else a.end
            for b in ordered[i + 1 :]:
                if b.client_id == a.client_id:
                    continue
                b_end = end if b.end is None else b.end
                double += max(0, min(a_end, b_end) - max(a.start, b.start))
        if double:
            report.double_ownership_ms[mq] = double
        for a, b in pairwise(ordered):
            if a.client_id == b.client_id:
                continue
            a_end = end if a.end is None else a.end
            report.handoffs.append(
                Handoff(
                    mq, a.client_id, b.client_id, max(0, b.start - a_end), max(0, a_end - b.start)
                )
            )
        if ordered and all(h.end is not None for h in ordered):
            report.unowned_at_end.append(mq)
    report.unowned_at_end.sort()
    report.consumed = len(consumed_by)
    report.sent = len(sent)
    report.duplicates = {k: v for k, v in consumed_by.items() if len(v) > 1}
    causes: dict[str, int] = defaultdict(int)
    for clients in report.duplicates.values():
        cause = "crash" if any(client_id_of(c) in crashed for c in clients) else "graceful"
        causes[cause] += len(clients) - 1
    report.duplicate_causes = dict(causes)
    must = set(expected) if expected is not None else sent
    report.never_consumed = sorted(must - set(consumed_by))
    return report


@functools.lru_cache(maxsize=65_536)
def _broker_of(mq: str) -> str:
    """``broker-a`` of ``MessageQueue [topic=T, brokerName=broker-a, queueId=0]``."""
    queue = MessageQueue.parse(mq)
    return "" if queue is None else queue.broker_name


def _short(mq: str) -> str:
    queue = MessageQueue.parse(mq)
    return mq if queue is None else f"{queue.broker_name}:{queue.queue_id}"


def format_report(report: TraceReport) -> str:
    """The report for people."""
    t0 = report.start
    lines = [
        f"trace: {(report.end - report.start) / 1000:.2f}s, {report.sent} messages sent, "
        f"{report.consumed} consumed"
    ]
    lines.append("\nwho held each queue (seconds from the start of the trace):")
    for mq in sorted(report.holdings):
        spans = "  ".join(
            f"{client_id_of(h.client_id).rpartition('@')[2]} {(h.start - t0) / 1000:.2f}-"
            + ("end" if h.end is None else f"{(h.end - t0) / 1000:.2f}")
            for h in sorted(report.holdings[mq], key=lambda h: h.start)
        )
        lines.append(f"  {_short(mq):24} {spans}")
    lines.append(f"\ndouble ownership: {report.total_double_ownership_ms} ms in total")
    for mq, ms in sorted(report.double_ownership_ms.items()):
        lines.append(f"  {_short(mq):24} {ms} ms")
    if report.handoffs:
        unowned = sorted(h.unowned_ms for h in report.handoffs)
        lines.append(
            f"handoffs: {len(report.handoffs)}, unowned time p50 {unowned[len(unowned) // 2]} ms, "
            f"max {unowned[-1]} ms"
        )
    if report.unowned_at_end:
        lines.append("unowned at the end: " + ", ".join(_short(m) for m in report.unowned_at_end))
    if report.crashed_clients:
        lines.append("crashed clients: " + ", ".join(sorted(report.crashed_clients)))
    lines.append(
        f"duplicates: {report.duplicate_count} deliveries beyond the first on {len(report.duplicates)} "
        f"messages {dict(sorted(report.duplicate_causes.items()))}"
    )
    for key, clients in sorted(report.duplicates.items())[:20]:
        mq, _, offset = key.rpartition("@")
        lines.append(
            f"  {_short(mq)}@{offset}: " + ", ".join(c.rpartition("@")[2] for c in clients)
        )
    lines.append(f"never consumed: {len(report.never_consumed)}")
    for key in report.never_consumed[:20]:
        mq, _, offset = key.rpartition("@")
        lines.append(f"  {_short(mq)}@{offset}")
    return "\n".join(lines)
