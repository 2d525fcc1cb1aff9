"""The trace checker over hand-made traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiorocketmq.trace_check import check, format_report, read_traces

Q0 = "MessageQueue [topic=T, brokerName=b, queueId=0]"
Q1 = "MessageQueue [topic=T, brokerName=b, queueId=1]"


def rec(ts: int, event: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, "group": "g", **fields}


def test_holdings_double_ownership_and_handoffs() -> None:
    report = check(
        [
            rec(0, "sent", mq=Q0, offset=0, count=3),
            rec(0, "queue_added", client_id="A", mq=Q0),
            rec(10, "consumed", client_id="A", mq=Q0, offset=0),
            rec(20, "queue_added", client_id="B", mq=Q0),  # B starts before A stops: 5 ms double
            rec(25, "queue_dropped", client_id="A", mq=Q0),
            rec(26, "consumed", client_id="B", mq=Q0, offset=0),  # a duplicate (graceful)
            rec(27, "consumed", client_id="B", mq=Q0, offset=1),
            rec(30, "queue_added", client_id="A", mq=Q1),
            rec(40, "queue_dropped", client_id="A", mq=Q1),
            rec(50, "queue_added", client_id="B", mq=Q1),  # 10 ms unowned
            rec(60, "queue_dropped", client_id="B", mq=Q1),
        ]
    )
    assert report.double_ownership_ms == {Q0: 5}
    assert {(h.mq, h.unowned_ms, h.overlap_ms) for h in report.handoffs} == {
        (Q0, 0, 5),
        (Q1, 10, 0),
    }
    assert report.unowned_at_end == [Q1]
    assert report.duplicates == {f"{Q0}@0": ["A", "B"]}
    assert report.duplicate_causes == {"graceful": 1}
    assert report.never_consumed == [f"{Q0}@2"]
    assert report.holders_now() == {Q0: ["B"]}
    text = format_report(report)
    assert "double ownership: 5 ms" in text and "never consumed: 1" in text


def test_a_crash_ends_holdings_at_the_channel_close_and_is_the_duplicates_cause() -> None:
    report = check(
        [
            rec(0, "queue_added", client_id="A", mq=Q0),
            rec(5, "consumed", client_id="A", mq=Q0, offset=0),
            {"ts": 10, "event": "channel_closed", "client_id": "A", "groups": ["g"]},
            rec(12, "queue_added", client_id="B", mq=Q0),
            rec(13, "consumed", client_id="B", mq=Q0, offset=0),
        ]
    )
    assert report.crashed_clients == {"A"}
    assert report.double_ownership_ms == {}
    assert report.handoffs[0].unowned_ms == 2
    assert report.duplicate_causes == {"crash": 1}


def test_the_close_of_a_channel_its_client_replaced_is_not_a_crash() -> None:
    """The broker saw a silent connection end after its client had opened a new channel that
    took its grants over (``replaced_by``): the client lives on, holding its queues, and a
    second holder is double ownership."""
    report = check(
        [
            rec(0, "queue_added", client_id="A", mq=Q0),
            {
                "ts": 10,
                "event": "channel_closed",
                "client_id": "A",
                "groups": ["g"],
                "replaced_by": "b-2",
            },
            rec(12, "queue_added", client_id="B", mq=Q0),
            rec(20, "queue_dropped", client_id="A", mq=Q0),
        ]
    )
    assert report.crashed_clients == set()
    assert report.double_ownership_ms == {Q0: 8}


def test_a_live_clients_channel_closed_by_its_broker_ends_only_that_brokers_holdings() -> None:
    """The broker closed the channel of a client that lived on (its keepalive found the
    connection silent; the client opened a new channel after): not a crash. The broker let go
    of that channel's grants, so the client's fenced holdings of its queues end at the close (a
    queue granted to another meanwhile is no double ownership, though the client drops it only
    at its reopen), and its holdings elsewhere go on, as do a classic client's (no grant)."""
    other = "MessageQueue [topic=T, brokerName=c, queueId=0]"
    report = check(
        [
            rec(0, "queue_acquired", client_id="A", mq=Q0),
            rec(0, "queue_acquired", client_id="A", mq=other),
            rec(1, "queue_added", client_id="C", mq=Q1),  # classic: no grant, goes on
            rec(10, "channel_closed", client_id="A", broker="b", groups=["g"], replaced_by=""),
            rec(10, "channel_closed", client_id="C", broker="b", groups=["g"], replaced_by=""),
            rec(12, "queue_acquired", client_id="B", mq=Q0),
            rec(15, "channel_opened", client_id="A", broker="b"),
            rec(15, "channel_opened", client_id="C", broker="b"),
            rec(16, "queue_dropped", client_id="A", mq=Q0),
        ]
    )
    assert report.crashed_clients == set()
    assert report.double_ownership_ms == {}
    assert report.holders_now() == {Q0: ["B"], Q1: ["C"], other: ["A"]}


def test_a_client_that_lived_through_one_close_and_was_then_killed_crashed() -> None:
    """A close the client lived through (it opened a channel after) is no crash, but its kill
    later is: its holdings at a broker that never recorded a close for it (down then, its
    grants restored as orphans and expired) end at the kill's first close."""
    other = "MessageQueue [topic=T, brokerName=c, queueId=0]"
    report = check(
        [
            rec(0, "queue_added", client_id="A", mq=Q0),
            rec(0, "queue_added", client_id="A", mq=other),
            rec(10, "channel_closed", client_id="A", broker="b", groups=["g"], replaced_by=""),
            rec(15, "channel_opened", client_id="A", broker="b"),
            rec(16, "queue_dropped", client_id="A", mq=Q0),
            rec(40, "channel_closed", client_id="A", broker="b", groups=["g"], replaced_by=""),
            rec(50, "queue_added", client_id="B", mq=other),
        ]
    )
    assert report.crashed_clients == {"A"}
    assert report.holders_now() == {other: ["B"]}
    assert report.double_ownership_ms == {}


def test_a_graceful_leave_is_not_a_crash() -> None:
    report = check(
        [
            rec(0, "queue_added", client_id="A", mq=Q0),
            rec(5, "consumer_shutdown", client_id="A"),
            {"ts": 10, "event": "channel_closed", "client_id": "A", "groups": []},
        ]
    )
    assert report.crashed_clients == set()


def test_a_grant_taken_by_a_client_that_then_left_ends_at_its_unregister() -> None:
    """A consumer that shuts down between acquiring a queue and adding it records no release:
    its broker forgets the grant at UNREGISTER_CLIENT, and so does the checker (it once counted
    such a holding as held for ever, double ownership in fenced mode included)."""
    report = check(
        [
            rec(0, "queue_acquired", client_id="A", mq=Q0, epoch=1),
            rec(5, "consumer_shutdown", client_id="A"),
            {"ts": 7, "event": "client_unregistered", "client_id": "A", "broker": "other"},
            {"ts": 8, "event": "client_unregistered", "client_id": "A", "broker": "b"},
            rec(20, "queue_acquired", client_id="B", mq=Q0, epoch=2),
        ]
    )
    assert [(h.client_id, h.start, h.end) for h in report.holdings[Q0]] == [
        ("A", 0, 8),
        ("B", 20, None),
    ]
    assert report.double_ownership_ms == {} and report.holders_now() == {Q0: ["B"]}


def test_read_traces_merges_files_and_skips_a_torn_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rec(2, "consumed", client_id="A", mq=Q0, offset=0)) + '\n{"ts": 3, "ev')
    b.write_text(json.dumps(rec(1, "sent", mq=Q0, offset=0, count=1)) + "\n")
    records = read_traces([a, b])
    assert [r["ts"] for r in records] == [1, 2]
    assert check(records).never_consumed == []


def test_a_consumer_leaving_mid_acquisition_traces_the_end_of_its_grants() -> None:
    """``RebalanceImpl.destroy`` records the grants it holds but had not added yet."""
    from types import SimpleNamespace

    from aiorocketmq.consumer import AllocateMessageQueueAveragely, MessageModel
    from aiorocketmq.consumer.rebalance_impl import RebalanceImpl
    from aiorocketmq.protocol.message_queue import MessageQueue
    from aiorocketmq.trace import tracer

    mq = MessageQueue("T", "b", 0)
    impl = RebalanceImpl(
        "g",
        MessageModel.CLUSTERING,
        AllocateMessageQueueAveragely(),
        SimpleNamespace(client_id="A"),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        fenced=True,
        epochs={mq: 7},
    )
    seen: list[dict[str, Any]] = []
    tracer.subscribe(seen.append)
    try:
        impl.destroy()
    finally:
        tracer.unsubscribe(seen.append)
    assert [(r["event"], r["mq"], r.get("granted_only")) for r in seen] == [
        ("queue_dropped", str(mq), True)
    ]
    assert impl.epochs == {}


async def test_a_rebalance_pass_that_outlives_its_consumer_adds_nothing() -> None:
    """The consumer left (``destroy``) while a pass awaited its start offsets: no queue is
    added after it, so nothing is pulled, and nothing in the trace looks held."""
    import asyncio
    from types import SimpleNamespace

    from aiorocketmq.consumer import AllocateMessageQueueAveragely, MessageModel
    from aiorocketmq.consumer.rebalance_impl import RebalanceImpl
    from aiorocketmq.protocol.message_queue import MessageQueue

    gate = asyncio.Event()
    dispatched: list[object] = []

    class Mode:
        is_push = True

        async def remove_unnecessary_message_queues(self, items: list[object]) -> list[bool]:
            return [True for _ in items]

        async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
            await gate.wait()
            return [0 for _ in mqs]

        def dispatch_pull_requests(self, requests: list[object]) -> None:
            dispatched.extend(requests)

    impl = RebalanceImpl(
        "g",
        MessageModel.CLUSTERING,
        AllocateMessageQueueAveragely(),
        SimpleNamespace(client_id="A"),  # type: ignore[arg-type]
        Mode(),  # type: ignore[arg-type]
    )
    mq = MessageQueue("T", "b", 0)
    running = asyncio.ensure_future(impl._update_process_queue_table("T", {mq}, need_lock=False))
    await asyncio.sleep(0)
    impl.destroy()
    gate.set()
    await running
    assert impl.process_queue_table == {} and dispatched == []


def test_a_queue_reads_back_from_its_string() -> None:
    from aiorocketmq.protocol.message_queue import MessageQueue

    mq = MessageQueue("%RETRY%g", "broker-a", 12)
    assert MessageQueue.parse(str(mq)) == mq
    assert MessageQueue.parse("broker-a:12") is None


def test_a_crash_ends_a_holding_at_its_brokers_close_of_a_channel_in_no_group_yet() -> None:
    """A consumer killed just after reopening its channel to a restarted broker (its restored
    grants on that channel, no heartbeat yet): that broker gives the grants away at the close,
    before the other brokers' closes (in a group) say when it crashed."""
    report = check(
        [
            rec(0, "queue_added", client_id="A", mq=Q0),
            {"ts": 10, "event": "channel_closed", "client_id": "A", "broker": "b", "groups": []},
            rec(12, "queue_acquired", client_id="B", mq=Q0, epoch=2),
            {"ts": 20, "event": "channel_closed", "client_id": "A", "broker": "c", "groups": ["g"]},
        ]
    )
    assert report.crashed_clients == {"A"}
    assert [(h.client_id, h.end) for h in report.holdings[Q0]] == [("A", 10), ("B", None)]
    assert report.double_ownership_ms == {}
