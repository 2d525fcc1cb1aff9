"""Randomized fault schedules (``bench.chaos``) over a real cluster: nothing acknowledged is lost.

A fixed set of seeds runs in CI in both handoff modes; ``python -m bench.chaos --seeds N`` runs
many. The schedules themselves are pure, so their rules are checked without a cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.trace_check import check
from bench.chaos import (
    BROKERS,
    MAX_CONSUMERS,
    PAUSE_BROKER_MS,
    PAUSE_CONSUMER_MS,
    STEP_KINDS,
    Schedule,
    Step,
    StepFailed,
    duplicate_causes,
    duplicate_timeline,
    graceful_duplicates,
    make_schedule,
    run_schedule,
    run_seeds,
)
from bench.procs import ProcessCluster

# Seeds whose schedules together draw every kind of step (checked below).
CI_SEEDS = [0, 4]
REMOTING_SEED = 6


def test_a_seed_always_gives_the_same_schedule() -> None:
    assert make_schedule(7) == make_schedule(7)
    assert make_schedule(7) != make_schedule(8)
    assert make_schedule(7, "fenced").steps == make_schedule(7, "classic").steps


@pytest.mark.parametrize("seed", range(200))
def test_schedules_keep_a_consumer_and_fault_each_thing_once(seed: int) -> None:
    schedule = make_schedule(seed)
    live = 1
    for step in schedule.steps:
        if step.kind in ("leave", "kill_consumer"):
            live -= 1
        elif step.kind in ("join", "join_racing_send"):
            live += 1
        assert 1 <= live <= MAX_CONSUMERS, schedule.describe()
        assert 300 <= step.pause_ms <= 1500
        if step.kind == "pause_consumer":
            assert live >= 2 and 0 <= int(step.target) < live  # another takes its queues
    once = ("kill_broker", "restart_namesrv", "notify_off", "pause_broker", "pause_consumer")
    for kind in once:
        assert sum(s.kind == kind for s in schedule.steps) <= 1
    faults = [s for s in schedule.steps if s.kind in ("kill_broker", "pause_broker")]
    assert all(s.target in BROKERS for s in faults)
    pauses = [s for s in schedule.steps if s.kind == "pause_broker"]
    assert all(PAUSE_BROKER_MS[0] <= s.duration_ms <= PAUSE_BROKER_MS[1] for s in pauses)
    stops = [s for s in schedule.steps if s.kind == "pause_consumer"]
    assert all(PAUSE_CONSUMER_MS[0] <= s.duration_ms <= PAUSE_CONSUMER_MS[1] for s in stops)


def test_the_ci_seeds_draw_every_kind_of_step() -> None:
    kinds = {s.kind for seed in CI_SEEDS for s in make_schedule(seed).steps}
    assert kinds == set(STEP_KINDS)


def test_a_duplicate_counted_to_no_crash_is_shown_with_its_queues_timeline() -> None:
    """A failing fenced schedule prints, for each duplicate not caused by a crash, what its
    queue went through: holdings, commits, the pulls that carried it, its consumptions."""
    q = "MessageQueue [topic=T, brokerName=broker-a, queueId=0]"
    records = [
        {"ts": 100, "event": "queue_acquired", "client_id": "A", "mq": q, "epoch": 1, "offset": 0},
        {"ts": 110, "event": "pull", "client_id": "A", "mq": q, "first": 0, "next": 3},
        {"ts": 111, "event": "pull", "client_id": "A", "mq": q, "first": 3, "next": 5},
        {"ts": 120, "event": "consumed", "client_id": "A", "mq": q, "offset": 1},
        {"ts": 130, "event": "offset_commit", "client_id": "A", "offsets": {q: 3}},
        {"ts": 140, "event": "queue_releasing", "client_id": "A", "mq": q, "epoch": 1, "offset": 0},
        {"ts": 150, "event": "queue_acquired", "client_id": "B", "mq": q, "epoch": 2, "offset": 0},
        {"ts": 160, "event": "consumed", "client_id": "B", "mq": q, "offset": 1},
        {"ts": 170, "event": "consumed", "client_id": "B", "mq": q, "offset": 2},
    ]
    report = check(records)
    assert graceful_duplicates(report, records, []) == [f"{q}@1"]
    # A kill -9 of the queue's broker between the first pull and the second consumption is a
    # broker crash's duplicate, not one of a graceful step.
    assert graceful_duplicates(report, records, [("broker-a", 145)]) == []
    lines = duplicate_timeline(f"{q}@1", records, [("broker-b", 115)], [(135, "leave")])
    assert lines[0] == f"{q}@1:"
    assert [line.split("ms  ", 1)[1] for line in lines[1:]] == [
        "queue_acquired A epoch 1 at 0",
        "pull A [0, 3)",
        "kill -9 broker-b",
        "consumed A",
        "offset_commit A offset 3",
        "step leave",
        "queue_releasing A epoch 1 at 0",
        "queue_acquired B epoch 2 at 0",
        "consumed B",
    ]
    assert lines[2].startswith("         +0 ms")
    # A pause of the queue's broker across the first pull and the second consumption is a
    # broker fault's duplicate too, and the timeline shows it.
    assert graceful_duplicates(report, records, [], [("broker-a", 115, 155)]) == []
    assert graceful_duplicates(report, records, [], [("broker-b", 115, 155)]) == [f"{q}@1"]
    paused = duplicate_timeline(f"{q}@1", records, [], [], broker_pauses=[("broker-a", 115, 155)])
    texts = [line.split("ms  ", 1)[1] for line in paused[1:]]
    assert texts.index("SIGSTOP broker-a") == 2 and texts.index("SIGCONT broker-a") == 7
    # So is a pause of a consumer that consumed it (A, its batch in the listener as it
    # stopped), not of one that did not.
    assert graceful_duplicates(report, records, [], [], [("A", 115, 155)]) == []
    assert graceful_duplicates(report, records, [], [], [("C", 115, 155)]) == [f"{q}@1"]
    causes = duplicate_causes(report, records, [], [], [("A", 115, 155)])
    assert causes == {"consumer_pause": 1}
    stopped = duplicate_timeline(f"{q}@1", records, [], [], consumer_pauses=[("A", 115, 155)])
    assert "SIGSTOP A" in [line.split("ms  ", 1)[1] for line in stopped[1:]]


@pytest.mark.process
@pytest.mark.timeout(900)
async def test_fault_schedules_lose_no_acknowledged_message(tmp_path: Path) -> None:
    # Both modes of a seed side by side (one cluster): a consumer's and a broker's pause each
    # stop a schedule 16-20 s.
    results = await run_seeds(CI_SEEDS, ["classic", "fenced"], tmp_path, parallel=2)
    failures = [
        f"{r.schedule.describe()}: {'; '.join(r.failures())}" for r in results if r.failures()
    ]
    assert not failures, "\n".join(failures)
    assert all(r.sent > 100 for r in results)


@pytest.mark.process
@pytest.mark.timeout(600)
async def test_fault_schedules_over_remoting_lose_no_acknowledged_message(tmp_path: Path) -> None:
    # The producer sends and the consumers pull over remoting (data_transport): seed 6 pauses
    # a broker, kills another, restarts the name server, and consumers join, leave and die.
    results = await run_seeds(
        [REMOTING_SEED], ["classic", "fenced"], tmp_path, parallel=2, data_transport="remoting"
    )
    failures = [
        f"{r.schedule.describe()}: {'; '.join(r.failures())}" for r in results if r.failures()
    ]
    assert not failures, "\n".join(failures)
    assert all(r.sent > 100 for r in results)


@pytest.mark.process
@pytest.mark.timeout(300)
async def test_a_step_that_cannot_run_fails_with_its_seed_and_step(tmp_path: Path) -> None:
    bad = Schedule(99, "classic", (Step(0, "join", 300), Step(1, "kill_broker", 300, "broker-z")))
    async with ProcessCluster(
        tmp_path / "cluster", broker_names=list(BROKERS), trace=True
    ) as cluster:
        with pytest.raises(StepFailed) as failed:
            await run_schedule(cluster, bad, tmp_path)
    text = str(failed.value)
    assert "seed 99" in text and "step 1 (kill_broker)" in text
    assert "--replay 99" in text
