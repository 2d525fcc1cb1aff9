"""The tracer's sinks: callbacks that take only some events, and a file that takes all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.trace import Tracer


def test_a_callback_gets_only_the_events_it_asked_for() -> None:
    t = Tracer()
    some: list[dict[str, Any]] = []
    every: list[dict[str, Any]] = []
    t.subscribe(some.append, {"queue_added"})
    t.record("queue_added", mq="a")
    t.record("queue_released", mq="a")
    assert [r["event"] for r in some] == ["queue_added"]
    assert t.wants("queue_added") and not t.wants("queue_released")
    t.subscribe(every.append)  # one sink that takes all: every event is built again
    t.record("queue_released", mq="b")
    assert [r["event"] for r in every] == ["queue_released"]
    assert [r["event"] for r in some] == ["queue_added"]
    assert t.wants("queue_released")
    t.unsubscribe(every.append)
    t.unsubscribe(some.append)
    assert not t.enabled and not t.wants("queue_added")
    t.record("queue_added", mq="c")  # nobody listens: nothing recorded
    assert len(some) == 1


def test_a_file_takes_every_event_beside_a_filtered_callback(tmp_path: Path) -> None:
    t = Tracer()
    some: list[dict[str, Any]] = []
    t.subscribe(some.append, ["notify_received"])
    t.to_file(tmp_path / "trace.jsonl")
    t.record("notify_received", client_id="x")
    t.record("heartbeat", client_id="x")
    t.close_file()
    t.record("heartbeat", client_id="y")  # the file is gone: filtered again
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [r["event"] for r in lines] == ["notify_received", "heartbeat"]
    assert [r["event"] for r in some] == ["notify_received"]
    assert t.enabled


def test_an_unknown_event_name_is_refused() -> None:
    t = Tracer()
    with pytest.raises(ValueError, match="unknown trace events"):
        t.subscribe(print, {"queue_addded"})
    assert not t.enabled
    with pytest.raises(ValueError, match="unknown trace event"):
        t.subscribe(print)
        t.record("nonsense")
