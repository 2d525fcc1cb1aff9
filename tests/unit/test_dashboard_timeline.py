"""The dashboard's timeline model: bars from observations and from traces, the marks, and
the strict reading of trace files."""

from __future__ import annotations

import json

import pytest

from aiorocketmq.dashboard.timeline import Timeline, TraceError, parse_trace

Q0 = "MessageQueue [topic=T, brokerName=broker-a, queueId=0]"
Q1 = "MessageQueue [topic=T, brokerName=broker-a, queueId=1]"


def test_observations_open_and_close_bars_and_say_why() -> None:
    t = Timeline("g")
    t.observe(1_000, {Q0: ["A"], Q1: ["A"]}, {"A": "PYTHON over grpc"})
    events = t.observe(2_000, {Q0: ["A"], Q1: ["B"]}, {"A": "x", "B": "CPP over remoting"})
    assert [e.kind for e in events] == ["joined", "allocation", "allocation"]
    assert "B joined (CPP over remoting): HEART_BEAT" in events[0].text
    assert t.rows[Q1][0].end == 2_000 and t.rows[Q1][1].holder == "B"
    assert any("B joined" in c for c in t.rows[Q1][1].causes)
    assert t.holders_now() == {Q0: ["A"], Q1: ["B"]}
    left = t.observe(3_000, {Q0: ["B"], Q1: ["B"]}, {"B": "x"})
    assert left[0].kind == "left" and "A left" in left[0].text


def test_double_ownership_and_gaps_are_marked() -> None:
    t = Timeline("g")
    t.observe(1_000, {Q0: ["A"]}, {"A": ""})
    t.observe(2_000, {Q0: ["A", "B"]}, {"A": "", "B": ""})  # both at once
    t.observe(3_000, {Q0: []}, {"A": "", "B": ""})  # nobody
    t.observe(4_000, {Q0: ["B"]}, {"B": ""})
    marks = [(m.kind, m.start, m.end) for m in t.marks()]
    assert ("double", 2_000, 3_000) in marks and ("gap", 3_000, 4_000) in marks
    doc = t.to_json(now=5_000)
    assert doc["now"] == 5_000 and doc["rows"][0]["label"] == "T broker-a:0"
    assert json.loads(json.dumps(doc)) == doc


def test_a_trace_becomes_a_timeline_with_its_events() -> None:
    records = [
        {"ts": 100, "event": "heartbeat", "group": "g", "client_id": "A", "broker": "broker-a"},
        {"ts": 110, "event": "notify_sent", "group": "g", "client_id": "A", "broker": "broker-a"},
        {"ts": 120, "event": "rebalance_result", "group": "g", "client_id": "A", "result": [Q0]},
        {"ts": 130, "event": "queue_added", "group": "g", "client_id": "A", "mq": Q0},
        {"ts": 900, "event": "queue_dropped", "group": "g", "client_id": "A", "mq": Q0},
        {"ts": 950, "event": "queue_added", "group": "g", "client_id": "B", "mq": Q0},
    ]
    t = Timeline.from_trace(records, group="g")
    bars = t.rows[Q0]
    assert [(b.holder, b.start, b.end) for b in bars] == [("A", 130, 900), ("B", 950, None)]
    assert "allocation result of A: T broker-a:0" in bars[0].causes
    assert "HEART_BEAT from A to broker-a" in bars[0].causes
    assert [(m.kind, m.start, m.end) for m in t.marks()] == [("gap", 900, 950)]


def test_a_bad_trace_is_refused_with_its_line() -> None:
    good = '{"ts": 1, "event": "heartbeat"}\n'
    assert parse_trace(good + '{"ts": 2, "ev')[0]["ts"] == 1  # a torn last line is forgiven
    with pytest.raises(TraceError, match="line 2: not JSON"):
        parse_trace(good + "not json\n" + good)
    with pytest.raises(TraceError, match="line 1: a trace record has an integer ts"):
        parse_trace('{"ts": "soon", "event": "x"}\n')
    with pytest.raises(TraceError, match="line 1: a trace record is a JSON object"):
        parse_trace("[1, 2]\n")
    with pytest.raises(TraceError, match="no trace records"):
        parse_trace("\n\n")
