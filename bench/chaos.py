"""Randomized fault schedules over a real cluster: is any acknowledged message ever lost?

A *schedule* is a seeded list of steps (``make_schedule``, pure: the same seed gives the same
schedule on every machine). It runs against a name server and three brokers as processes
(SYNC_FLUSH: an acknowledged message is on disk) and consumers as processes
(``aiorocketmq consume``), while this process keeps sending throughout: sync sends, concurrent
("async") sends, batches and one-way sends. The steps:

- ``join``: one more consumer process; ``leave``: SIGTERM to one (a graceful leave);
- ``kill_consumer``: SIGKILL to one (its channels close; the brokers notice);
- ``kill_broker``: SIGKILL to one broker, then start it again on its port and store;
- ``restart_namesrv``: stop the name server and start it again (brokers re-register);
- ``notify_off``: NOTIFY_CONSUMER_IDS_CHANGED switched off on every broker for a while
  (``mqadmin updateBrokerConfig``), so a join or leave meanwhile reaches the group only
  through the periodic rebalance;
- ``join_racing_send``: a consumer starts while a message is sent at the same moment;
- ``pause_broker``: SIGSTOP to one broker for 16-20 s, then SIGCONT (its clients' keepalive
  ends their channels; it hears of those ends only when it runs again);
- ``pause_consumer``: SIGSTOP to one consumer for 16-20 s, then SIGCONT (the brokers'
  keepalive ends its channels and gives its queues to the others; it learns when it runs).

After the last step the run waits for the group to converge (every queue held by exactly
one live consumer) and for every acknowledged message to be consumed, then the trace checker
(``aiorocketmq.trace_check``) decides: **0 acknowledged messages never consumed**; in fenced
mode no double ownership; duplicates are counted by cause. One-way sends are excluded from the
loss count (nothing acknowledged them to the application). A failing seed prints itself and
``python -m bench.chaos --replay SEED`` runs the same schedule again.

``python -m bench.chaos --seeds N [--first S] [--handoff classic|fenced|both] [--parallel K]
[--consume-ms MS] [--data-transport auto|grpc|remoting]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.cli.common import non_negative_type
from aiorocketmq.logs import configure_logging
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.data_path import DATA_TRANSPORTS
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.runtime import run
from aiorocketmq.trace import tracer
from aiorocketmq.trace_check import TraceReport, check, client_id_of, read_traces
from bench.procs import ConsumerProcess, ProcessCluster
from bench.stats import percentile

__all__ = ["STEP_KINDS", "Schedule", "Step", "StepFailed", "main", "make_schedule", "run_schedule"]

STEP_KINDS = (
    "join",
    "leave",
    "kill_consumer",
    "kill_broker",
    "restart_namesrv",
    "notify_off",
    "join_racing_send",
    "pause_broker",
    "pause_consumer",
)
# How often each kind is drawn; the constraints in make_schedule come first.
# A broker paused (SIGSTOP) longer than the keepalive's detection (10 s + 5 s: protocol.rpc):
# its clients end their channels and reopen them when it is back, and it hears of the old ones'
# ends only then, before or after the new ones open.
PAUSE_BROKER_MS = (16_000, 20_000)
# A consumer paused as long: the brokers' keepalive ends its channels while it is stopped.
PAUSE_CONSUMER_MS = PAUSE_BROKER_MS
_WEIGHTS = {
    "join": 4,
    "leave": 3,
    "kill_consumer": 2,
    "kill_broker": 1,
    "restart_namesrv": 1,
    "notify_off": 1,
    "join_racing_send": 2,
    "pause_broker": 1,
    "pause_consumer": 1,
}
BROKERS = ("broker-a", "broker-b", "broker-c")
QUEUES = 4  # per broker
MAX_CONSUMERS = 4
REBALANCE_INTERVAL_MS = 2_000  # the periodic rebalance, shrunk as a user would
SETTLE_TIMEOUT_S = 90.0  # generous: schedules side by side share two cores


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a schedule: wait ``pause_ms``, then do ``kind`` (to ``target``)."""

    index: int
    kind: str
    pause_ms: int
    # A broker name (kill_broker, pause_broker); which consumer, by rank (leave, kill, pause).
    target: str = ""
    duration_ms: int = 0  # notify_off: how long notifications stay off; a pause: how long


@dataclass(frozen=True, slots=True)
class Schedule:
    seed: int
    handoff: str
    steps: tuple[Step, ...]

    def describe(self) -> str:
        parts = [
            f"{s.index}:{s.kind}{'(' + s.target + ')' if s.target else ''}+{s.pause_ms}ms"
            for s in self.steps
        ]
        return f"seed {self.seed} ({self.handoff}): " + ", ".join(parts)


def make_schedule(seed: int, handoff: str = "classic", steps: int = 8) -> Schedule:
    """The schedule of ``seed``: a pure function (``random.Random(seed)``, nothing else).

    Constraints: at least one consumer is always left running (a leave or kill needs two, and
    so does a consumer's pause: another takes its queues), at most ``MAX_CONSUMERS`` run at
    once, one broker kill, one pause of each kind, one name-server restart and one notify-off
    per schedule, and every fault kind drawn at least once across a few seeds.
    """
    rng = random.Random(seed)
    live = 1  # the first consumer is started before the schedule
    once = {"kill_broker", "restart_namesrv", "notify_off", "pause_broker", "pause_consumer"}
    used: set[str] = set()
    out: list[Step] = []
    for index in range(steps):
        allowed = []
        for kind, weight in _WEIGHTS.items():
            if kind in once and kind in used:
                continue
            if kind in ("leave", "kill_consumer", "pause_consumer") and live < 2:
                continue
            if kind in ("join", "join_racing_send") and live >= MAX_CONSUMERS:
                continue
            allowed += [kind] * weight
        kind = rng.choice(allowed)
        used.add(kind)
        pause = rng.randint(300, 1500)
        target = ""
        duration = 0
        if kind == "kill_broker":
            target = rng.choice(BROKERS)
        elif kind == "pause_broker":
            target = rng.choice(BROKERS)
            duration = rng.randint(*PAUSE_BROKER_MS)
        elif kind in ("leave", "kill_consumer"):
            target = str(rng.randrange(live))
            live -= 1
        elif kind == "pause_consumer":
            target = str(rng.randrange(live))
            duration = rng.randint(*PAUSE_CONSUMER_MS)
        elif kind in ("join", "join_racing_send"):
            live += 1
        elif kind == "notify_off":
            duration = rng.randint(1000, 3000)
        out.append(Step(index, kind, pause, target, duration))
    return Schedule(seed, handoff, tuple(out))


class StepFailed(AssertionError):
    """A step could not run: the seed and the step say which, so it can be replayed."""

    def __init__(self, schedule: Schedule, step: Step | None, reason: str) -> None:
        where = f"step {step.index} ({step.kind})" if step is not None else "setup"
        super().__init__(
            f"chaos seed {schedule.seed} ({schedule.handoff}) failed at {where}: {reason}\n"
            f"  {schedule.describe()}\n"
            f"  replay: python -m bench.chaos --replay {schedule.seed} --handoff {schedule.handoff}"
        )


@dataclass
class RunResult:
    """What one schedule showed."""

    schedule: Schedule
    sent: int = 0
    oneway: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)
    double_ownership_ms: int = 0
    converge_ms: float = 0.0
    converged: bool = False
    error: str = ""  # a step that could not run (StepFailed), with the seed and the step
    report: TraceReport | None = None
    unsettled: dict[str, list[str]] = field(default_factory=dict)  # queue -> holders, at the end
    steps_at: list[tuple[int, str]] = field(default_factory=list)  # (ms, step kind) as run
    explained: list[str] = field(default_factory=list)  # timelines of graceful duplicates

    def failures(self) -> list[str]:
        """Why this schedule fails the no-loss rules (empty when it passes)."""
        out = []
        if self.error:
            return [self.error]
        if self.lost:
            out.append(f"{len(self.lost)} acknowledged messages never consumed: {self.lost[:5]}")
        if not self.converged:
            shown = {
                mq.split("brokerName=")[-1].rstrip("]"): ids
                for mq, ids in list(self.unsettled.items())[:6]
            }
            out.append(
                f"the group did not converge within {SETTLE_TIMEOUT_S:.0f}s "
                f"({len(self.unsettled)} queues not held by exactly one live member: {shown})"
            )
        if self.schedule.handoff == "fenced" and self.double_ownership_ms:
            out.append(f"double ownership in fenced mode: {self.double_ownership_ms} ms")
        if self.schedule.handoff == "fenced" and self.duplicates.get("graceful"):
            out.append(f"duplicates across graceful steps: {self.duplicates['graceful']}")
        return out


class _Sender:
    """Sends throughout the schedule: sync, concurrent, batch and one-way, unique bodies."""

    def __init__(self, producer: Producer, topic: str, rng: random.Random) -> None:
        self.producer = producer
        self.topic = topic
        self.rng = rng
        self.seq = 0
        self.acked = 0
        self.oneway = 0
        self.errors = 0
        self._inflight: set[asyncio.Task[None]] = set()

    def _msg(self) -> Message:
        self.seq += 1
        return Message(self.topic, f"m{self.seq}".encode())

    async def send_one(self) -> None:
        """A sync send (the acknowledged kind the start race loses)."""
        try:
            await self.producer.send(self._msg())
            self.acked += 1
        except MQError:
            self.errors += 1  # not acknowledged: the application knows it failed

    async def _async_send(self) -> None:
        try:
            await self.producer.send(self._msg())
            self.acked += 1
        except MQError:
            self.errors += 1

    async def loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            kind = self.rng.choice(("sync", "sync", "async", "batch", "oneway"))
            if kind == "sync":
                await self.send_one()
            elif kind == "async":
                task = asyncio.create_task(self._async_send())
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
            elif kind == "batch":
                try:
                    result = await self.producer.send_batch([self._msg() for _ in range(5)])
                    self.acked += len(result.msg_ids)
                except MQError:
                    self.errors += 1
            else:
                await self.producer.send_oneway(self._msg())
                self.oneway += 1
            await asyncio.sleep(0.02)
        await asyncio.gather(*self._inflight, return_exceptions=True)


def duplicate_causes(
    report: TraceReport,
    records: list[dict[str, Any]],
    broker_kills: list[tuple[str, int]],
    broker_pauses: Sequence[tuple[str, int, int]] = (),
    consumer_pauses: Sequence[tuple[str, int, int]] = (),
) -> dict[str, int]:
    """Deliveries beyond the first, by cause: ``crash`` (a consumer killed, as the checker
    says), ``broker_crash`` (pulled before its broker's kill -9 and consumed again after it:
    the offsets committed since the broker's last flush were lost with it; the first pull
    counts, since a message pulled before the kill may be consumed from the client's buffer
    after it), ``broker_pause`` (pulled before its broker's pause ended and consumed again
    after it began: a batch in a listener when its channel ended, whose queue the broker gave
    away when it heard of that end), ``consumer_pause`` (the same across the pause of a
    consumer that consumed it, given by client id: a batch in its listener when it stopped,
    whose queue the broker gave away while it was stopped) and ``graceful`` (the rest)."""
    times: dict[str, list[int]] = {}
    pulls: dict[str, list[tuple[int, int, int]]] = {}
    for r in records:
        if r["event"] == "consumed":
            times.setdefault(f"{r['mq']}@{r['offset']}", []).append(r["ts"])
        elif r["event"] == "pull" and "first" in r:
            pulls.setdefault(str(r["mq"]), []).append((r["ts"], r["first"], r["next"]))

    def first_seen(key: str, consumed: list[int]) -> int:
        mq, _, offset = key.rpartition("@")
        fetched = [t for t, lo, hi in pulls.get(mq, ()) if lo <= int(offset) < hi]
        return min([*fetched, *consumed[:1]])

    causes: Counter[str] = Counter()
    crashed = report.crashed_clients
    for key, clients in report.duplicates.items():
        extra = len(clients) - 1
        ts = sorted(times.get(key, []))
        queue = MessageQueue.parse(key.rpartition("@")[0])
        broker = "" if queue is None else queue.broker_name
        seen = (first_seen(key, ts), ts[-1]) if ts else None
        if any(client_id_of(c) in crashed for c in clients):
            causes["crash"] += extra
        elif _across(broker, seen, ((b, t, t) for b, t in broker_kills)):
            causes["broker_crash"] += extra
        elif _across(broker, seen, broker_pauses):
            causes["broker_pause"] += extra
        elif any(_across(client_id_of(c), seen, consumer_pauses) for c in clients):
            causes["consumer_pause"] += extra
        else:
            causes["graceful"] += extra
    return dict(causes)


def _across(
    where: str, seen: tuple[int, int] | None, faults: Iterable[tuple[str, int, int]]
) -> bool:
    """Whether a fault of ``where`` (a broker, a consumer's client id), from its start to its
    end (a kill: one instant), lies between a message's first pull and its last consumption
    (``seen``)."""
    return seen is not None and any(
        w == where and seen[0] < end and start <= seen[1] for w, start, end in faults
    )


def graceful_duplicates(
    report: TraceReport,
    records: list[dict[str, Any]],
    broker_kills: list[tuple[str, int]],
    broker_pauses: Sequence[tuple[str, int, int]] = (),
    consumer_pauses: Sequence[tuple[str, int, int]] = (),
) -> list[str]:
    """The message keys ``duplicate_causes`` counts to no fault (``graceful``)."""
    return [
        key
        for key, clients in report.duplicates.items()
        if len(clients) > 1
        and duplicate_causes(
            _only(report, key), records, broker_kills, broker_pauses, consumer_pauses
        ).get("graceful")
    ]


def _only(report: TraceReport, key: str) -> TraceReport:
    """``report`` narrowed to one duplicated message (to classify it alone)."""
    narrowed = TraceReport(report.start, report.end, crashed_clients=report.crashed_clients)
    narrowed.duplicates = {key: report.duplicates[key]}
    return narrowed


# The queue's events a duplicate's timeline shows (pulls only when they carried the message).
_TIMELINE_EVENTS = {
    "queue_added",
    "queue_acquired",
    "queue_releasing",
    "queue_released",
    "queue_dropped",
    "offset_commit",
}


def duplicate_timeline(
    key: str,
    records: list[dict[str, Any]],
    broker_kills: list[tuple[str, int]],
    steps_at: list[tuple[int, str]],
    *,
    broker_pauses: Sequence[tuple[str, int, int]] = (),
    consumer_pauses: Sequence[tuple[str, int, int]] = (),
    before_ms: int = 3000,
    after_ms: int = 1000,
) -> list[str]:
    """What happened around one duplicated message, for a failure's report: the steps,
    broker kills and pauses, its queue's holdings and commits, the pulls that carried it and its
    consumptions, from ``before_ms`` before its first pull to ``after_ms`` after its last
    consumption (times relative to the first pull)."""
    mq, _, off = key.rpartition("@")
    offset = int(off)
    mine = [r for r in records if r.get("mq") == mq or mq in r.get("offsets", {})]
    carried = [
        r
        for r in mine
        if r["event"] == "pull" and "first" in r and r["first"] <= offset < r["next"]
    ]
    consumed = [r for r in mine if r["event"] == "consumed" and r["offset"] == offset]
    if not consumed:
        return [f"{key}: no consumption traced"]
    t0 = min(r["ts"] for r in carried + consumed)
    lo, hi = t0 - before_ms, max(r["ts"] for r in consumed) + after_ms
    lines: list[tuple[int, str]] = [(t, f"step {kind}") for t, kind in steps_at if lo <= t <= hi]
    lines += [(t, f"kill -9 {b}") for b, t in broker_kills if lo <= t <= hi]
    lines += [
        (t, f"{what} {b}")
        for b, start, end in [*broker_pauses, *consumer_pauses]
        for t, what in ((start, "SIGSTOP"), (end, "SIGCONT"))
        if lo <= t <= hi
    ]
    for r in mine:
        if not lo <= r["ts"] <= hi:
            continue
        who = r.get("client_id", "")
        if r["event"] in _TIMELINE_EVENTS:
            extra = f" offset {r['offsets'][mq]}" if r["event"] == "offset_commit" else ""
            extra += f" epoch {r['epoch']}" if "epoch" in r else ""
            extra += f" at {r['offset']}" if "offset" in r and r["event"] != "consumed" else ""
            lines.append((r["ts"], f"{r['event']} {who}{extra}"))
        elif r in carried:
            lines.append((r["ts"], f"pull {who} [{r['first']}, {r['next']})"))
        elif r in consumed:
            lines.append((r["ts"], f"consumed {who}"))
    lines.sort(key=lambda x: x[0])
    return [f"{key}:"] + [f"    {t - t0:+7d} ms  {text}" for t, text in lines]


def _oneway_keys(records: list[dict[str, Any]]) -> set[str]:
    return {
        f"{r['mq']}@{r['offset'] + i}"
        for r in records
        if r["event"] == "sent" and r.get("oneway")
        for i in range(r.get("count", 1))
    }


async def _set_notify(cluster: ProcessCluster, enabled: bool) -> None:
    """UPDATE_BROKER_CONFIG (``mqadmin updateBrokerConfig``'s RPC) on every broker:
    notifyConsumerIdsChangedEnable on or off."""
    request = broker_pb2.UpdateBrokerConfigRequest(
        properties={"notifyConsumerIdsChangedEnable": "true" if enabled else "false"}
    )
    for addr in cluster.broker_addrs.values():
        deadline = time.monotonic() + 15
        while True:  # a broker just restarted: our channel to it may still be backing off
            try:
                await call(cluster.conns.stub(addr).UpdateBrokerConfig, request, 5.0)
                break
            except MQError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def run_schedule(
    cluster: ProcessCluster,
    schedule: Schedule,
    root: Path,
    lock: asyncio.Lock | None = None,
    producer_trace: Path | None = None,
    consume_ms: float = 0.0,
    data_transport: str = "grpc",
) -> RunResult:
    """Run ``schedule`` on ``cluster`` (a fresh topic and group) and check the trace.

    ``lock`` serializes cluster-wide faults between schedules running side by side, which
    then share one ``producer_trace`` (this process's trace file, already open).
    ``consume_ms``: the work each message takes in the consumers' listeners.
    ``data_transport``: how the producer sends and the consumers pull.
    """
    cluster_faults = lock or asyncio.Lock()
    tag = f"s{schedule.seed}{schedule.handoff[0]}"
    topic, group = f"Chaos{tag}", f"chaos_{tag}"
    work = root / tag
    work.mkdir(parents=True, exist_ok=True)
    result = RunResult(schedule)
    try:
        async with cluster_faults:
            await cluster.create_topic(topic, QUEUES)
    except Exception as e:
        raise StepFailed(schedule, None, f"create topic: {e}") from e
    own_trace = producer_trace is None
    if producer_trace is None:
        producer_trace = work / "trace-producer.jsonl"
        tracer.to_file(producer_trace)
    consumers: list[ConsumerProcess] = []
    gone: list[ConsumerProcess] = []
    rng = random.Random(schedule.seed)
    stop = asyncio.Event()
    counter = 0
    consumer_pauses: list[tuple[str, int, int]] = []  # (client id, SIGSTOP, SIGCONT), ms

    def consumer_process(name: str) -> ConsumerProcess:
        return ConsumerProcess(
            cluster.namesrv_addr,
            group,
            topic,
            name,
            work / f"trace-{name}.jsonl",
            schedule.handoff,
            extra=(
                "--rebalance-interval-ms",
                str(REBALANCE_INTERVAL_MS),
                "--consume-ms",
                str(consume_ms),
                "--data-transport",
                data_transport,
            ),
        )

    async def new_consumer() -> ConsumerProcess:
        nonlocal counter
        counter += 1
        c = consumer_process(f"{tag}c{counter}")
        consumers.append(c)
        await c.started()
        return c

    producer = Producer(
        f"chaos_producer_{tag}",
        cluster.namesrv_addr,
        retry_times_when_send_failed=4,
        data_transport=data_transport,
    )
    step: Step | None = None
    try:
        await producer.start()
        await new_consumer()
        sender = _Sender(producer, topic, rng)
        await sender.send_one()  # the first message right after the first start() returned
        send_task = asyncio.create_task(sender.loop(stop))
        for step in schedule.steps:
            await asyncio.sleep(step.pause_ms / 1000)
            result.steps_at.append((int(time.time() * 1000), step.kind))
            try:
                if step.kind == "join":
                    await new_consumer()
                elif step.kind == "join_racing_send":
                    counter += 1
                    c = consumer_process(f"{tag}c{counter}")
                    consumers.append(c)
                    await sender.send_one()
                    await c.started()
                elif step.kind in ("leave", "kill_consumer"):
                    victim = consumers.pop(int(step.target) % len(consumers))
                    await (victim.stop() if step.kind == "leave" else victim.kill())
                    gone.append(victim)
                elif step.kind == "kill_broker":
                    async with cluster_faults:
                        await cluster.kill_broker(step.target)
                        await asyncio.sleep(0.3)
                        await cluster.restart_broker(step.target)
                elif step.kind == "pause_broker":
                    async with cluster_faults:
                        await cluster.pause_broker(step.target, step.duration_ms / 1000)
                elif step.kind == "pause_consumer":
                    paused = consumers[int(step.target) % len(consumers)]
                    start, end = await paused.pause(step.duration_ms / 1000)
                    consumer_pauses.append((paused.client_id, start, end))
                elif step.kind == "restart_namesrv":
                    async with cluster_faults:
                        await cluster.restart_namesrv()
                elif step.kind == "notify_off":
                    async with cluster_faults:
                        await _set_notify(cluster, False)
                        await asyncio.sleep(step.duration_ms / 1000)
                        await _set_notify(cluster, True)
            except Exception as e:
                raise StepFailed(schedule, step, f"{type(e).__name__}: {e}") from e
        step = None
        last_step_ms = int(time.time() * 1000)
        await asyncio.sleep(1.0)
        stop.set()
        await send_task
        last_step_at = time.monotonic()
        result.sent, result.oneway = sender.acked, sender.oneway
        paths = [producer_trace, *(c.trace for c in consumers + gone)]
        paths += [cluster.trace_file(b) for b in BROKERS]
        live = {c.client_id for c in consumers}
        deadline = last_step_at + SETTLE_TIMEOUT_S
        report: TraceReport | None = None
        records: list[dict[str, Any]] = []
        oneway: set[str] = set()
        while time.monotonic() < deadline:
            records = read_traces(p for p in paths if p.exists())
            report = check(records, group=group, topic=topic)
            oneway = _oneway_keys(records)
            holders = report.holders_now()
            settled = len(holders) == len(BROKERS) * QUEUES and all(
                len(ids) == 1 and ids[0] in live for ids in holders.values()
            )
            lost = [k for k in report.never_consumed if k not in oneway]
            if settled and not lost:
                result.converged = True
                break
            await asyncio.sleep(0.25)
        assert report is not None
        # Converged at the last change of who holds what (from the trace), after the last step.
        changes = [
            t
            for hs in report.holdings.values()
            for h in hs
            for t in (h.start, h.end)
            if t is not None
        ]
        result.converge_ms = max(0, max(changes, default=last_step_ms) - last_step_ms)
        result.report = report
        if not result.converged:
            holders = report.holders_now()
            every = [str(MessageQueue(topic, b, q)) for b in BROKERS for q in range(QUEUES)]
            result.unsettled = {
                mq: holders.get(mq, [])
                for mq in every
                if len(holders.get(mq, [])) != 1 or holders[mq][0] not in live
            }
        result.lost = [k for k in report.never_consumed if k not in oneway]
        # Every kill counts, this schedule's or another's running beside it on the cluster.
        faults = (cluster.kills, cluster.pauses, consumer_pauses)
        result.duplicates = duplicate_causes(report, records, *faults)
        if schedule.handoff == "fenced" and result.duplicates.get("graceful"):
            for key in graceful_duplicates(report, records, *faults)[:3]:
                result.explained += duplicate_timeline(
                    key,
                    records,
                    cluster.kills,
                    result.steps_at,
                    broker_pauses=cluster.pauses,
                    consumer_pauses=consumer_pauses,
                )
        result.double_ownership_ms = report.total_double_ownership_ms
    finally:
        stop.set()
        for c in consumers:
            await c.stop()
        await producer.shutdown()
        if own_trace:
            tracer.close_file()
    return result


def format_table(results: list[RunResult]) -> str:
    """The summary: schedules, steps, messages, lost, duplicates by cause, convergence."""
    lines = [
        f"{'handoff':8} {'schedules':>9} {'steps':>6} {'messages':>9} {'lost':>5} "
        f"{'dup crash':>9} {'dup broker':>10} {'dup paused':>10} {'dup other':>9} "
        f"{'double ms':>9} "
        f"{'conv p50':>9} {'conv p99':>9}"
    ]
    for handoff in ("classic", "fenced"):
        rs = [r for r in results if r.schedule.handoff == handoff]
        if not rs:
            continue
        conv = [r.converge_ms for r in rs]
        lines.append(
            f"{handoff:8} {len(rs):9d} {sum(len(r.schedule.steps) for r in rs):6d} "
            f"{sum(r.sent for r in rs):9d} {sum(len(r.lost) for r in rs):5d} "
            f"{sum(r.duplicates.get('crash', 0) for r in rs):9d} "
            f"{sum(r.duplicates.get('broker_crash', 0) + r.duplicates.get('broker_pause', 0) for r in rs):10d} "
            f"{sum(r.duplicates.get('consumer_pause', 0) for r in rs):10d} "
            f"{sum(r.duplicates.get('graceful', 0) for r in rs):9d} "
            f"{sum(r.double_ownership_ms for r in rs):9d} "
            f"{percentile(conv, 50) / 1000:8.1f}s {percentile(conv, 99) / 1000:8.1f}s"
        )
    kinds = Counter(s.kind for r in results for s in r.schedule.steps)
    lines.append("steps by kind: " + json.dumps(dict(sorted(kinds.items()))))
    return "\n".join(lines)


async def run_seeds(
    seeds: list[int],
    handoffs: list[str],
    root: Path,
    parallel: int = 1,
    consume_ms: float = 0.0,
    data_transport: str = "grpc",
) -> list[RunResult]:
    """Every seed in every handoff mode on one cluster (each schedule on its own topic and
    group), ``parallel`` schedules at a time. Parallel schedules share the brokers and the
    name server, so one's broker kill or name-server restart is a fault for the others too.
    With ``data_transport`` other than "grpc" the servers serve remoting too, and the clients
    send and pull over it."""
    results: list[RunResult] = []
    todo = [make_schedule(seed, handoff) for seed in seeds for handoff in handoffs]
    async with ProcessCluster(
        root / "cluster",
        brokers=len(BROKERS),
        settings='flush_disk_type = "SYNC_FLUSH"\n',
        broker_names=list(BROKERS),
        trace=True,
        remoting=data_transport != "grpc",
    ) as cluster:
        lock = asyncio.Lock()  # one broker kill or name-server restart at a time
        producer_trace = root / "trace-producers.jsonl"
        tracer.to_file(producer_trace)

        async def one(schedule: Schedule) -> None:
            try:
                result = await run_schedule(
                    cluster, schedule, root, lock, producer_trace, consume_ms, data_transport
                )
            except StepFailed as e:
                result = RunResult(schedule, error=str(e))
            results.append(result)
            status = "ok" if not result.failures() else "FAIL: " + "; ".join(result.failures())
            status += "".join(f"\n  {line}" for line in result.explained)
            print(
                f"{schedule.describe()}\n  sent {result.sent}, converged in "
                f"{result.converge_ms / 1000:.1f}s, duplicates {result.duplicates}: {status}",
                flush=True,
            )

        try:
            for first in range(0, len(todo), parallel):
                await asyncio.gather(*(one(s) for s in todo[first : first + parallel]))
        finally:
            tracer.close_file()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="how many seeds")
    p.add_argument("--first", type=int, default=0, help="the first seed")
    p.add_argument("--replay", type=int, help="run this one seed (as a failure printed it)")
    p.add_argument("--handoff", choices=("classic", "fenced", "both"), default="both")
    p.add_argument("--parallel", type=int, default=1, help="schedules at a time (one cluster)")
    p.add_argument(
        "--consume-ms",
        type=non_negative_type,
        default=0.0,
        help="work each message takes in the consumers' listeners (default 0: quick), so that "
        "faults land with consumption in flight",
    )
    p.add_argument(
        "--data-transport",
        choices=DATA_TRANSPORTS,
        default="grpc",
        help="how the producer sends and the consumers pull (auto, remoting: the servers serve "
        "remoting too)",
    )
    p.add_argument(
        "--keep",
        type=Path,
        help="write the cluster's files and every process's trace here and keep them "
        "(by default a temporary folder, removed at the end)",
    )
    args = p.parse_args(argv)
    configure_logging("ERROR")
    seeds = (
        [args.replay]
        if args.replay is not None
        else list(range(args.first, args.first + args.seeds))
    )
    handoffs = ["classic", "fenced"] if args.handoff == "both" else [args.handoff]
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        root = args.keep if args.keep is not None else Path(tmp)
        results = run(
            run_seeds(seeds, handoffs, root, args.parallel, args.consume_ms, args.data_transport)
        )
    print()
    print(format_table(results))
    failed = [r for r in results if r.failures()]
    for r in failed:
        print(f"FAILED seed {r.schedule.seed} ({r.schedule.handoff}): {'; '.join(r.failures())}")
    conv = [r.converge_ms for r in results]
    if conv:
        print(f"convergence mean {statistics.mean(conv) / 1000:.1f}s over {len(conv)} schedules")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
