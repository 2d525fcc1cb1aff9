"""The dashboard's pages as HTML strings (server-rendered; the timeline is drawn by
``static/dashboard.js`` from JSON). Pure functions of what ``ClusterSource`` read; every value
is escaped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

__all__ = ["cluster_page", "group_page", "groups_page", "replay_page", "topics_page"]

_NAV = (
    ("/", "Cluster"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/replay", "Replay a trace"),
)


def _layout(title: str, body: str, *, active: str, scripts: str = "") -> str:
    nav = " ".join(
        f'<a href="{href}"{" class=active" if href == active else ""}>{escape(label)}</a>'
        for href, label in _NAV
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · aiorocketmq</title>"
        '<link rel=stylesheet href="/static/dashboard.css"></head><body>'
        f"<header><b>aiorocketmq</b> {nav}</header><main><h1>{escape(title)}</h1>{body}</main>"
        f'<script src="/static/dashboard.js"></script>{scripts}</body></html>'
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], *, table_id: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    ident = f' id="{escape(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _state(up: bool) -> str:
    return "up" if up else "DOWN"


def _uptime(status: dict[str, str]) -> str:
    boot = int(status.get("bootTimestamp", "0") or 0)
    if not boot:
        return "-"
    seconds = max(0, int(time.time()) - boot // 1000)
    return f"{seconds // 3600}h {seconds // 60 % 60}m {seconds % 60}s"


def cluster_page(data: dict[str, Any]) -> str:
    """Name servers and brokers: address, state, version, uptime, disk, messages in and out."""
    namesrvs = _table(
        ["Name server", "State", "Error"],
        [(n["address"], _state(n["up"]), n["error"]) for n in data["namesrvs"]],
        table_id="namesrvs",
    )
    rows = []
    for b in data["brokers"]:
        s = b["status"]
        disk = s.get("commitLogDiskRatio")
        rows.append(
            (
                b["cluster"], b["name"], b["id"], b["address"], _state(b["up"]),
                s.get("brokerVersionDesc", "-"), _uptime(s),
                f"{float(disk) * 100:.1f} %" if disk else "-",
                s.get("msgPutTotalTodayNow", "-"), s.get("msgGetTotalTodayNow", "-"),
                s.get("topicNumber", "-"), s.get("consumerGroupNumber", "-"), b["error"],
            )
        )  # fmt: skip
    brokers = _table(
        ["Cluster", "Broker", "Id", "Address", "State", "Version", "Uptime", "Disk used",
         "Messages in", "Messages out", "Topics", "Groups", "Error"],
        rows,
        table_id="brokers",
    )  # fmt: skip
    error = f'<p class="error">{escape(data["error"])}</p>' if data.get("error") else ""
    return _layout("Cluster", error + namesrvs + brokers, active="/")


def topics_page(topics: list[dict[str, Any]]) -> str:
    """Each topic's queues per broker with min/max offsets; the rate since the last look."""
    parts = []
    for t in topics:
        rate = "-" if t.get("rate") is None else f"{t['rate']} msg/s"
        parts.append(
            f"<h2>{escape(t['topic'])}</h2><p>{t.get('messages', 0)} messages stored; "
            f"produce rate {escape(rate)} (since the last look)</p>"
        )
        if t["error"]:
            parts.append(f'<p class="error">{escape(t["error"])}</p>')
            continue
        parts.append(
            _table(
                ["Broker", "Queue", "Min offset", "Max offset", "Last update"],
                [
                    (q["broker"], q["queueId"], q["min"], q["max"], _when(q["lastUpdate"]))
                    for q in t["queues"]
                ],
            )
        )
    body = "".join(parts) or "<p>No topics yet.</p>"
    return _layout("Topics", body, active="/topics")


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def groups_page(groups: list[str]) -> str:
    items = "".join(
        f'<li><a href="/groups/{quote(g, safe="")}">{escape(g)}</a></li>' for g in groups
    )
    body = f"<ul class=groups>{items}</ul>" if items else "<p>No consumer groups yet.</p>"
    return _layout("Consumer groups", body, active="/groups")


def group_page(group: str) -> str:
    """Members, the progress view and the live timeline; filled and kept fresh by the page's
    script from the group's event stream."""
    body = (
        '<p id="status" class="muted">connecting…</p>'
        "<h2>Members</h2>"
        + _table(["Client", "Address", "Language", "Protocol", "Version"], [], table_id="members")
        + '<h2>Progress <span id="tps" class="muted"></span></h2>'
        + _table(
            ["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Holder"],
            [],
            table_id="progress",
        )
        + "<h2>Rebalance timeline</h2>"
        '<p class="muted">One row per queue, one bar per holding (hover for the events behind '
        'it). <span class="key double"></span> two holders at once '
        '<span class="key gap"></span> nobody between two holders</p>'
        '<div id="timeline" class="timeline"></div><h2>Events</h2><ol id="events"></ol>'
    )
    stream = json.dumps(f"/groups/{quote(group, safe='')}/events")
    script = f"<script>aiorocketmq.live({stream});</script>"
    return _layout(f"Consumer group {group}", body, active="/groups", scripts=script)


def replay_page(timeline: dict[str, Any] | None, *, error: str = "", name: str = "") -> str:
    """A recorded trace, replayed: the timeline with a time slider and a play button."""
    form = (
        '<form method=post action="/replay" enctype="multipart/form-data">'
        '<input type=file name=trace accept=".jsonl,.json,.txt"> '
        "<button type=submit>Open trace</button></form>"
        '<p class="muted">A trace is what <code>aiorocketmq consume --trace FILE</code> or '
        "<code>aiorocketmq demo</code> records (JSON lines).</p>"
    )
    if error:
        form += f'<p class="error" id="trace-error">{escape(error)}</p>'
    if timeline is None:
        return _layout("Replay a trace", form, active="/replay")
    data = json.dumps(timeline).replace("</", "<\\/")
    body = (
        form + f"<h2>{escape(name or timeline['group'])}</h2>"
        '<p><button id="play" type=button>Play</button> '
        '<input id="clock" type=range min=0 max=1000 value=1000> <span id="at"></span></p>'
        '<div id="timeline" class="timeline"></div><h2>Events</h2><ol id="events"></ol>'
        f'<script type="application/json" id="trace-data">{data}</script>'
    )
    return _layout(
        "Replay a trace", body, active="/replay", scripts="<script>aiorocketmq.replay();</script>"
    )
