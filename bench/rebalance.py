"""Rebalance convergence at scale: how long from a membership change to a settled group.

Brokers run as processes (``--brokers``, the topic's queues split evenly over them); the
consumers run in several worker processes (``bench.rebalance_worker``), each consumer with its
own client instance and connections, as separate RocketMQ clients would. RocketMQ's default
timings (20 s periodic rebalance, 30 s heartbeat) leave the notification as the only fast path:
heartbeat -> CHANGE -> NOTIFY_CONSUMER_IDS_CHANGED -> each consumer rebalances.

One consumer joins, then one leaves (the oldest), repeated ``--changes`` times; each change is
timed from the command (``start()`` / ``shutdown()``) to the protocol-trace event after which
every queue is held by exactly its final owner (the strategy's answer for the new membership)
and by nobody else. The workers stream their queue_added/queue_dropped events to this process,
which tracks holdings in O(1) per event. A settled group is watched for ``SPACING_S`` more; if
it comes apart, the change is timed to its final settling.

Changes are ``SPACING_S`` apart: a joining consumer rebalances twice (its own start, then the
broker's notification of its own arrival, deferred by RocketMQ's 1 s minimum interval between
rebalances), so a change within that window waits for it; that is RocketMQ's behaviour, not
measured here.

``python -m bench.rebalance [--size 1000x4096] [--strategy AVG] [--handoff classic]``;
``--sweep`` runs 8 x 32 to 1,000 x 4,096 for AVG and the bounded consistent hash, classic and
fenced, into a CSV and a plot. The in-process helpers (``new_consumer``, ``converge``) serve
``bench.handoff``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.consumer.allocate import strategy_by_name
from aiorocketmq.trace import tracer
from bench.procs import ProcessCluster, StealWatch, cpu_seconds
from bench.rebalance_worker import queue_key
from bench.stats import percentile

TOPIC = "BenchRebalance"
# The consumer processes run at this nice level: the brokers get the CPU they need first, as
# they would on machines of their own (on two shared cores, a thousand consumers' work otherwise
# starves them until heartbeats miss their 3 s deadline and the brokers expire live channels).
WORKER_NICE = 10
SPACING_S = 2.2
# From a settled start to the first change: the start's own tail (its last notification rounds,
# the periodic passes and heartbeats of a thousand consumers started within a minute) is not
# a change among settled consumers. Half the periodic rebalance interval: at 20 s, a small
# group's first change landed on the periodic pass its consumers all ran 20 s after their start,
# and waited out RocketMQ's 1 s minimum interval between passes (a 1 s join, every run).
WARMUP_S = 10.0
# After the warm-up, the first change waits until the group has been quiet this long: no
# queue moved and no notification read (a large start's tail: notifications still queued on
# the brokers, passes still running); at most QUIET_MAX_S.
QUIET_S = 3.0
QUIET_MAX_S = 300.0
IDLE_S = 10.0  # the settled group's CPU is read over this long after the changes
GROUP = "bench_rebalance"
SWEEP_SIZES = [(8, 32), (32, 128), (128, 512), (1000, 4096)]
SWEEP_MODES = [
    ("AVG", "classic"),
    ("AVG", "fenced"),
    ("CONSISTENT_HASH_BOUNDED", "classic"),
    ("CONSISTENT_HASH_BOUNDED", "fenced"),
]


async def _listener(
    msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def new_consumer(
    namesrv: str,
    name: str,
    *,
    group: str = GROUP,
    topic: str = TOPIC,
    listener: Any = None,
    **kwargs: Any,
) -> PushConsumer:
    """A push consumer of ``topic`` whose listener (by default) accepts everything."""
    c = PushConsumer(group, namesrv, instance_name=name, **kwargs)
    c.subscribe(topic, "*")
    c.register_message_listener(listener or _listener)
    return c


def settled(
    consumers: list[PushConsumer], mq_all: list[MessageQueue], leaving: PushConsumer | None = None
) -> bool:
    """Every consumer holds exactly its AVG share, no queue twice (the leaver holds nothing)."""
    cids = sorted(c.client_id for c in consumers)
    if len(set(cids)) != len(cids):
        return False
    avg = AllocateMessageQueueAveragely()
    seen: set[MessageQueue] = set(leaving.assigned_queues) if leaving is not None else set()
    for c in consumers:
        held = c.assigned_queues
        if held & seen or held != set(avg.allocate(c.consumer_group, c.client_id, mq_all, cids)):
            return False
        seen |= held
    return seen == set(mq_all) and (leaving is None or not leaving.assigned_queues)


async def converge(
    consumers: list[PushConsumer],
    mq_all: list[MessageQueue],
    timeout: float = 30.0,
    leaving: PushConsumer | None = None,
) -> float:
    """Seconds until ``settled``, tracked incrementally from the trace's queue events.

    The expected owner of each queue is computed once; each queue_added/queue_dropped updates
    one queue's holders, so watching costs O(1) per event and does not slow the group it
    measures (a full check per event would, with 33 consumers in one process).
    """
    cids = sorted(c.client_id for c in consumers)
    avg = AllocateMessageQueueAveragely()
    expected = {
        str(mq): c.client_id
        for c in consumers
        for mq in avg.allocate(c.consumer_group, c.client_id, mq_all, cids)
    }
    done = asyncio.Event()
    holders: dict[str, set[str]] = {key: set() for key in expected}
    wrong: set[str] = set()

    def update(key: str) -> None:
        if holders[key] == {expected[key]}:
            wrong.discard(key)
        else:
            wrong.add(key)
        if not wrong:
            done.set()

    def on_event(rec: dict[str, object]) -> None:
        key = str(rec.get("mq"))
        if key not in holders:
            return
        if rec["event"] == "queue_added":
            holders[key].add(str(rec["client_id"]))
        elif rec["event"] == "queue_dropped":
            holders[key].discard(str(rec["client_id"]))
        else:
            return
        update(key)

    tracer.subscribe(on_event)
    start = time.perf_counter()
    try:
        for c in [*consumers, *([leaving] if leaving is not None else [])]:
            for mq in c.assigned_queues:
                if str(mq) in holders:
                    holders[str(mq)].add(c.client_id)
        for key in holders:
            update(key)
        async with asyncio.timeout(timeout):
            while True:
                await done.wait()
                # The trace says settled; the consumers' own state must agree (a queue is marked
                # dropped a moment before its queue_dropped is recorded).
                if settled(consumers, mq_all, leaving):
                    return time.perf_counter() - start
                done.clear()
                try:
                    async with asyncio.timeout(0.005):
                        await done.wait()
                except TimeoutError:
                    pass
                if not wrong:
                    done.set()
    except TimeoutError:
        raise TimeoutError(
            f"the group did not settle: {len(wrong)} queues not as expected"
        ) from None
    finally:
        tracer.unsubscribe(on_event)


def _cpu(pids: list[int]) -> float:
    """CPU seconds used so far by these processes (0 where /proc cannot say)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Holdings:
    """Who holds which queue, from the workers' trace lines, against who should."""

    holders: dict[str, set[str]]
    expected: dict[str, str] = field(default_factory=dict)
    wrong: set[str] = field(default_factory=set)
    settled_at: float | None = None
    # The event that settled the group last, and the last event: (client id, "+" or "-", key).
    settled_by: tuple[str, str, str] | None = None
    last_event: tuple[str, str, str] | None = None
    last_event_at: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # With --times: when each consumer first read a notification since the change's command
    # (cleared then: a join's expect() comes after its start() returned, later than the
    # notifications its heartbeats caused).
    notified: dict[str, float] = field(default_factory=dict)
    notified_by: dict[str, str] = field(default_factory=dict)  # the broker that told each
    notified_since: float = 0.0
    heard_at: float = 0.0  # time.monotonic() of the last queue or notification line read

    async def quiet(self, quiet_s: float, max_s: float) -> float:
        """Wait until no queue moved and no notification was read for ``quiet_s`` (at most
        ``max_s``); how long it waited."""
        t0 = time.monotonic()
        # A deadline pushed back by each line read: nothing to await but time.
        while (now := time.monotonic()) - t0 < max_s and now - self.heard_at < quiet_s:  # noqa: ASYNC110
            await asyncio.sleep(min(self.heard_at + quiet_s, t0 + max_s) - now)
        return time.monotonic() - t0

    def _check(self, key: str) -> None:
        if self.holders[key] == {self.expected.get(key)}:
            self.wrong.discard(key)
        else:
            self.wrong.add(key)

    def expect(self, expected: dict[str, str], now: float) -> None:
        self.expected = expected
        self.wrong = set()
        for key in self.holders:
            self._check(key)
        # Already settled: by the last event (the change's events can beat its command's reply).
        self.settled_at = None if self.wrong else max(self.last_event_at, now)
        self.settled_by = None if self.wrong else self.last_event
        self.changed.set()

    def issued(self, t0: float) -> None:
        """A change's command goes out at ``t0``: its notification reads are counted from now."""
        self.notified, self.notified_by, self.notified_since = {}, {}, t0

    def notified_at(self, t: float, client_id: str, broker: str = "") -> None:
        """A consumer read a notification (a worker's ``N`` line), from ``broker``: its first
        since the change's command (a line of the change before, read late, is not counted)."""
        if t >= self.notified_since and client_id not in self.notified:
            self.notified[client_id] = t
            self.notified_by[client_id] = broker

    def fan_out(self, members: list[str], t0: float) -> tuple[str, str, str]:
        """(ms from ``t0`` to the first notification read, ms until every member had read
        one, and the last member to read one with the broker that told it); empty where no
        member, or not every one, read one. The last names where to look when a change's
        fan-out is late."""
        read = [(self.notified[c], c) for c in members if c in self.notified]
        if not read:
            return "", "", ""
        first = f"{(min(read)[0] - t0) * 1000:.1f}"
        if len(read) != len(members):
            return first, "", ""
        t, last = max(read)
        return first, f"{(t - t0) * 1000:.1f}", f"{last} from {self.notified_by[last] or '?'}"

    def forget(self, client_id: str) -> None:
        """A killed consumer holds nothing any more (it records no queue_dropped)."""
        for held in self.holders.values():
            held.discard(client_id)

    def event(self, t: float, client_id: str, mark: str, key: str) -> None:
        held = self.holders.get(key)
        if held is None:
            return
        # The latest time seen: the workers' lines reach us in batches, one pipe each, so an
        # event may be read after a later one of another worker; the group is settled only
        # when the last of the events that settled it has happened.
        if t >= self.last_event_at:
            self.last_event_at, self.last_event = t, (client_id, mark, key)
        if mark == "+":
            held.add(client_id)
        else:
            held.discard(client_id)
        if self.expected:
            was_settled = not self.wrong
            self._check(key)
            if not self.wrong and not was_settled:
                self.settled_at, self.settled_by = self.last_event_at, self.last_event
            elif self.wrong:
                self.settled_at = None
        self.changed.set()

    async def settle(self, timeout: float) -> float:
        """The time of the event that settled the group (TimeoutError naming what is not)."""
        try:
            async with asyncio.timeout(timeout):
                while self.settled_at is None:
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            sample = sorted(self.wrong)[:5]
            detail = ", ".join(
                f"{k}: held by {sorted(self.holders[k])}, expected {self.expected.get(k)}"
                for k in sample
            )
            raise TimeoutError(
                f"the group did not settle in {timeout:.0f}s: {len(self.wrong)} queues "
                f"not as expected ({detail})"
            ) from None
        return self.settled_at


class WorkerProcess:
    """A ``bench.rebalance_worker`` process: commands in, trace lines out."""

    def __init__(self, proc: asyncio.subprocess.Process, holdings: Holdings) -> None:
        self.proc = proc
        self.holdings = holdings
        self.started: dict[str, tuple[str, float]] = {}
        self.stopped: dict[str, float] = {}
        self.arrived = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(
        cls,
        namesrv: str,
        group: str,
        topic: str,
        strategy: str,
        handoff: str,
        holdings: Holdings,
        stderr: Path,
        stats: float = 0.0,
        stats_name: str = "",
        notified: bool = False,
        trace: Path | None = None,
        nice: int = WORKER_NICE,
        options: Sequence[str] = (),
    ) -> WorkerProcess:
        with stderr.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                "nice",
                "-n",
                str(nice),
                sys.executable,
                "-m",
                "bench.rebalance_worker",
                "-n",
                namesrv,
                "-g",
                group,
                "-t",
                topic,
                "--strategy",
                strategy,
                "--handoff",
                handoff,
                *(["--stats", str(stats), "--stats-name", str(stats_name)] if stats else []),
                *(["--notified"] if notified else []),
                *(["--trace", str(trace)] if trace is not None else []),
                *(arg for option in options for arg in ("--option", option)),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                limit=1 << 20,
            )
        return cls(proc, holdings)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            kind, *rest = line.decode().split()
            if kind == "E":
                self.holdings.event(float(rest[0]), rest[1], rest[2], rest[3])
                self.holdings.heard_at = time.monotonic()
            elif kind == "N":
                self.holdings.notified_at(float(rest[0]), rest[1], rest[2] if rest[2:] else "")
                self.holdings.heard_at = time.monotonic()
            elif kind == "S":
                self.started[rest[0]] = (rest[1], float(rest[2]))
                self.arrived.set()
            elif kind == "X":
                self.stopped[rest[0]] = float(rest[1])
                self.arrived.set()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")

    async def client_id(self, name: str, timeout: float) -> str:
        async with asyncio.timeout(timeout):
            while name not in self.started:
                if self.proc.returncode is not None:
                    raise RuntimeError(f"worker exited with {self.proc.returncode}")
                self.arrived.clear()
                await self.arrived.wait()
        return self.started[name][0]

    async def stop(self) -> None:
        if self.proc.returncode is None:
            try:
                self.send("quit")
                await asyncio.wait_for(self.proc.wait(), 60)
            except (TimeoutError, ConnectionError):
                self.proc.kill()
                await self.proc.wait()
        await self.reader


@dataclass
class Case:
    consumers: int
    queues: int
    strategy: str = "AVG"
    handoff: str = "classic"
    changes: int = 100
    kills: int = 0
    spacing: float = SPACING_S
    worker_stats: float = 0.0  # seconds between each worker's stats lines (0: none)
    times_csv: Path | None = None  # every change's time, and the event that settled it
    warmup: float = WARMUP_S  # from the start's settling to the first change
    worker_nice: int = WORKER_NICE  # the consumer processes' nice level
    consumer_options: tuple[str, ...] = ()  # KEY=VALUE, each consumer's PushConsumer option

    @property
    def label(self) -> str:
        return f"{self.consumers} x {self.queues}"


@dataclass
class CaseResult:
    case: Case
    times: dict[str, list[float]]
    start_s: float
    tail_s: float  # after the warm-up, the wait for the group to go quiet
    broker_bytes_per_consumer: float
    worker_bytes_per_consumer: float
    worker_bytes_per_queue: float
    resettled: int
    broker_cpu_per_change: float = 0.0
    worker_cpu_per_change: float = 0.0
    # "join" / "leave" -> (brokers, consumers) CPU seconds per change of that kind, the
    # spacing after it included; and the settled group's CPU per second after the changes
    cpu_per_kind: dict[str, tuple[float, float]] = field(default_factory=dict)
    idle_cpu_per_s: tuple[float, float] = (0.0, 0.0)
    # The host's steal time over the changes, as a share of the machine's cores (None: not
    # known here): a run slowed by its neighbours says so
    host_steal_share: float | None = None


def expected_owners(
    strategy: str, group: str, mq_all: list[MessageQueue], cids: list[str]
) -> dict[str, str]:
    """queue key -> the client id the strategy gives it for this membership."""
    alloc = strategy_by_name(strategy)
    cids = sorted(cids)
    return {queue_key(mq): cid for cid in cids for mq in alloc.allocate(group, cid, mq_all, cids)}


async def _report_start(
    workers: list[WorkerProcess], holdings: Holdings, case: Case, t_start: float
) -> None:
    """Every 15 s of a long start, one line on stderr: consumers started, queues held."""
    while True:
        await asyncio.sleep(15)
        started = sum(len(w.started) for w in workers)
        held = sum(1 for h in holdings.holders.values() if h)
        twice = sum(1 for h in holdings.holders.values() if len(h) > 1)
        wrong = f", {len(holdings.wrong)} not with their final owner" if holdings.expected else ""
        print(
            f"  {case.label}: {time.time() - t_start:.0f} s, {started}/{case.consumers} started, "
            f"{held}/{case.queues} queues held ({twice} by two or more){wrong}",
            file=sys.stderr,
            flush=True,
        )


async def run_case(
    cluster: ProcessCluster, case: Case, workers_n: int, tmp: Path, *, trace: bool = False
) -> CaseResult:
    """Start ``case.consumers`` over ``workers_n`` processes, then time the changes (each
    worker's protocol trace in ``tmp`` when ``trace``)."""
    n_brokers = len(cluster.broker_names)
    tag = f"{case.consumers}x{case.queues}_{case.strategy}_{case.handoff}".replace("_", "-")
    topic, group = f"{TOPIC}-{tag}", f"{GROUP}-{tag}"
    await cluster.create_topic(topic, case.queues // n_brokers)
    mq_all = sorted(
        MessageQueue(topic, b, q)
        for b in cluster.broker_names
        for q in range(case.queues // n_brokers)
    )
    holdings = Holdings({queue_key(mq): set() for mq in mq_all})
    broker_pids = [p.pid for p in cluster.brokers.values()]
    broker_rss0 = sum(rss_bytes(pid) for pid in broker_pids)

    spawned: list[None] = []

    def spawn() -> Awaitable[WorkerProcess]:
        spawned.append(None)
        return WorkerProcess.spawn(
            cluster.namesrv_addr,
            group,
            topic,
            case.strategy,
            case.handoff,
            holdings,
            tmp / "workers.stderr",
            case.worker_stats,
            f"w{len(spawned)}",
            notified=True,  # the quiet wait below reads them too
            trace=tmp / f"trace-{tag}-w{len(spawned)}.jsonl" if trace else None,
            nice=case.worker_nice,
            options=case.consumer_options,
        )

    workers = [await spawn() for _ in range(workers_n)]
    await asyncio.sleep(1.0)  # the workers import the library
    worker_rss0 = sum(rss_bytes(w.proc.pid) for w in workers)
    members: list[tuple[str, str, WorkerProcess]] = []  # (name, client id, worker), oldest first
    times: dict[str, list[float]] = {"join": [], "leave": [], "kill": []}
    resettled = 0
    steal = StealWatch()
    steal_task: asyncio.Task[None] | None = None
    try:
        t_start = time.time()
        names = [f"c{i:04d}" for i in range(case.consumers)]
        for w_i, w in enumerate(workers):
            w.send("start " + " ".join(names[w_i::workers_n]))
        progress = asyncio.create_task(_report_start(workers, holdings, case, t_start))
        try:
            for i, name in enumerate(names):
                w = workers[i % workers_n]
                members.append((name, await w.client_id(name, 60 + case.consumers * 0.5), w))
            holdings.expect(
                expected_owners(case.strategy, group, mq_all, [m[1] for m in members]),
                time.time(),
            )
            start_s = await holdings.settle(120 + case.consumers * 0.5) - t_start
        finally:
            progress.cancel()
        await asyncio.sleep(max(case.spacing, case.warmup))
        tail_s = await holdings.quiet(QUIET_S, QUIET_MAX_S)
        broker_rss = sum(rss_bytes(pid) for pid in broker_pids) - broker_rss0
        worker_rss = sum(rss_bytes(w.proc.pid) for w in workers) - worker_rss0

        def cpu_now() -> tuple[float, float]:
            """CPU seconds so far: (brokers, consumer processes)."""
            return _cpu(broker_pids), _cpu([w.proc.pid for w in workers])

        cpu0 = cpu_now()
        steal_task = steal.start()  # its first sample before the span it measures begins
        changes_t0 = time.time()
        # Each change's kind and the CPU when its command was given: a change's CPU runs to
        # the next one's command (the last one's to the end of the changes).
        cpu_marks: list[tuple[str, tuple[float, float]]] = []
        for i in range(case.changes):
            kind = "join" if i % 2 == 0 else "leave"
            cpu_marks.append((kind, cpu_now()))
            t0 = time.time()
            holdings.issued(t0)
            if kind == "join":
                # Into the process with the fewest members, so that they stay spread as at the
                # start; picking by the change's index put every joiner into the even workers
                # (joins are the even changes), and after as many changes as consumers one
                # process ran them all.
                load = Counter(id(m[2]) for m in members)
                name, w = f"j{i:04d}", min(workers, key=lambda x: load[id(x)])
                w.send(f"start {name}")
                cid = await w.client_id(name, 60)
                members.append((name, cid, w))
            else:
                name, cid, w = members.pop(0)
                w.send(f"stop {name}")
            replied = time.time() - t0
            holdings.expect(
                expected_owners(case.strategy, group, mq_all, [m[1] for m in members]), t0
            )
            await holdings.settle(60)
            await asyncio.sleep(case.spacing)
            if holdings.settled_at is None:  # it came apart after settling: time the final one
                resettled += 1
                await holdings.settle(60)
            assert holdings.settled_at is not None
            times[kind].append(holdings.settled_at - t0)
            if case.times_csv is not None:
                fan_out = holdings.fan_out([m[1] for m in members], t0)
                after_start = t0 - t_start - start_s
                steal_s = steal.between(t0, holdings.settled_at)
                _write_time(
                    case, i, kind, cid, holdings, t0, replied, after_start, fan_out, steal_s
                )
        cpu1 = cpu_now()
        steal_share = steal.share(changes_t0)
        cpu_by_kind: dict[str, list[tuple[float, float]]] = {"join": [], "leave": []}
        ends = [at for _, at in cpu_marks[1:]] + [cpu1]
        for (kind, at), end in zip(cpu_marks, ends, strict=True):
            cpu_by_kind[kind].append((end[0] - at[0], end[1] - at[1]))
        changes = max(1, case.changes)
        cpu_per_change = ((cpu1[0] - cpu0[0]) / changes, (cpu1[1] - cpu0[1]) / changes)
        # The settled group's own cost (heartbeats, periodic passes, watch renewals), which
        # goes on through every change. Read after the changes: before them, the wait would
        # move the first change onto the periodic pass of a group started all at once.
        idle_t0, idle0 = time.time(), cpu_now()
        await asyncio.sleep(IDLE_S)
        idle_s, idle1 = max(1e-3, time.time() - idle_t0), cpu_now()
        idle_cpu = ((idle1[0] - idle0[0]) / idle_s, (idle1[1] - idle0[1]) / idle_s)
        for i in range(case.kills):
            # A consumer alone in its process, killed with SIGKILL: the brokers learn it from
            # the closed connection (the kernel closes the sockets of a dead process).
            victim = await spawn()
            name = f"k{i:04d}"
            victim.send(f"start {name}")
            cid = await victim.client_id(name, 60)
            members.append((name, cid, victim))
            holdings.expect(
                expected_owners(case.strategy, group, mq_all, [m[1] for m in members]),
                time.time(),
            )
            await holdings.settle(60)
            await asyncio.sleep(case.spacing)
            t0 = time.time()
            victim.proc.kill()
            members.pop()
            await victim.proc.wait()
            holdings.forget(cid)
            holdings.expect(
                expected_owners(case.strategy, group, mq_all, [m[1] for m in members]), t0
            )
            await holdings.settle(60)
            await asyncio.sleep(case.spacing)
            if holdings.settled_at is None:
                resettled += 1
                await holdings.settle(60)
            assert holdings.settled_at is not None
            times["kill"].append(holdings.settled_at - t0)
            await victim.reader
    finally:
        if steal_task is not None:
            steal_task.cancel()
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
    return CaseResult(
        case,
        times,
        start_s,
        tail_s,
        broker_bytes_per_consumer=broker_rss / case.consumers,
        worker_bytes_per_consumer=worker_rss / case.consumers,
        worker_bytes_per_queue=worker_rss / case.queues,
        resettled=resettled,
        broker_cpu_per_change=cpu_per_change[0],
        worker_cpu_per_change=cpu_per_change[1],
        cpu_per_kind={
            kind: (sum(c[0] for c in cs) / len(cs), sum(c[1] for c in cs) / len(cs))
            for kind, cs in cpu_by_kind.items()
            if cs
        },
        idle_cpu_per_s=idle_cpu,
        host_steal_share=steal_share,
    )


TIMES_FIELDS = [
    "strategy",
    "handoff",
    "consumers",
    "queues",
    "change_no",
    "change",
    "consumer",
    "ms",
    "reply_ms",
    "settled_by",
    "settled_by_event",
    "after_start_s",
    "first_notified_ms",
    "all_notified_ms",
    "last_notified",
    "host_steal_ms",
]


def _write_time(
    case: Case,
    i: int,
    kind: str,
    cid: str,
    holdings: Holdings,
    t0: float,
    replied: float,
    after_start: float,
    fan_out: tuple[str, str, str],
    steal_s: float | None,
) -> None:
    """One row of ``--times``: the change, its time, for a join when the joiner's ``start()``
    returned (a leave's stop is not waited for: 0), the event that settled it, and when it
    was issued, in seconds after the start settled (the group's timers, the periodic pass and
    the pulls' 15 s long polls, began together then), and the notifications' fan-out: from
    the command to the first member's reading one, and to the last member's (and who that
    was, told by which broker); and the CPU time the host took from the machine's cores
    while it settled (summed over the cores; blank where unknown)."""
    assert case.times_csv is not None and holdings.settled_at is not None
    by_cid, mark, key = holdings.settled_by or ("", "", "")
    values = [
        case.strategy,
        case.handoff,
        case.consumers,
        case.queues,
        i,
        kind,
        cid,
        f"{(holdings.settled_at - t0) * 1000:.1f}",
        f"{replied * 1000:.1f}",
        by_cid,
        f"{'added' if mark == '+' else 'dropped'} {key}" if mark else "",
        f"{after_start:.1f}",
        *fan_out,
        "" if steal_s is None else f"{steal_s * 1000:.0f}",
    ]
    append_csv(case.times_csv, [dict(zip(TIMES_FIELDS, values, strict=True))], TIMES_FIELDS)


CSV_FIELDS = [
    "strategy",
    "handoff",
    "consumers",
    "queues",
    "brokers",
    "change",
    "n",
    "p50_ms",
    "p99_ms",
    "max_ms",
]


def result_rows(r: CaseResult, brokers: int) -> list[dict[str, Any]]:
    """A row per kind of change, and one of the joins and leaves together ("all": with 100
    changes its p99 is the second largest, where the p99 of 50 is the largest)."""
    times = dict(r.times)
    if r.times["join"] and r.times["leave"]:
        times["all"] = r.times["join"] + r.times["leave"]
    return [
        {
            "strategy": r.case.strategy,
            "handoff": r.case.handoff,
            "consumers": r.case.consumers,
            "queues": r.case.queues,
            "brokers": brokers,
            "change": kind,
            "n": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
            "max_ms": round(max(values) * 1000, 1),
        }
        for kind, values in times.items()
        if values
    ]


def append_csv(path: Path, rows: list[dict[str, Any]], fields: list[str] = CSV_FIELDS) -> None:
    """Append ``rows`` to the CSV at ``path``, with its header if the file is new."""
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fields, lineterminator="\n")  # as the files in docs/
        if new:
            writer.writeheader()
        writer.writerows(rows)


def plot(csv_path: Path, png_path: Path) -> None:
    """Convergence p50 and p99 against consumers x queues, one line per strategy and handoff;
    a point measured more than once is drawn from its latest row (the CSV keeps them all)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as f:
        latest = {
            (r["strategy"], r["handoff"], r["consumers"], r["queues"], r["change"]): r
            for r in csv.DictReader(f)
        }
    rows = list(latest.values())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, change in zip(axes, ["join", "leave"], strict=True):
        series: dict[tuple[str, str], list[dict[str, str]]] = {}
        for row in rows:
            if row["change"] == change:
                series.setdefault((row["strategy"], row["handoff"]), []).append(row)
        for (strategy, handoff), pts in sorted(series.items()):
            pts.sort(key=lambda r: int(r["consumers"]))
            xs = [int(r["consumers"]) for r in pts]
            label = f"{'AVG' if strategy == 'AVG' else 'bounded hash'}, {handoff}"
            (line,) = ax.plot(
                xs, [float(r["p99_ms"]) for r in pts], marker="o", label=f"{label} p99"
            )
            ax.plot(
                xs,
                [float(r["p50_ms"]) for r in pts],
                marker=".",
                linestyle=":",
                color=line.get_color(),
                label=f"{label} p50",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = sorted({(int(r["consumers"]), int(r["queues"])) for r in rows})
        ax.set_xticks([c for c, _ in sizes], [f"{c}\nx{q}" for c, q in sizes])
        ax.minorticks_off()
        ax.axhline(2000, color="grey", linewidth=0.8, linestyle="--")
        ax.annotate(
            "target at 1,000 x 4,096",
            (0.01, 2000),
            xycoords=("axes fraction", "data"),
            fontsize=7,
            color="grey",
            va="bottom",
        )
        ax.set_title(f"one consumer {'joins' if change == 'join' else 'leaves'}")
        ax.set_xlabel("consumers x queues")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("convergence, ms (log)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Rebalance convergence: change -> every queue with its final owner only")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def parse_size(text: str) -> tuple[int, int]:
    consumers, _, queues = text.lower().partition("x")
    try:
        return int(consumers), int(queues)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be CONSUMERSxQUEUES, got {text!r}") from None


async def main_async(args: argparse.Namespace, cases: list[Case]) -> int:
    print("Rebalance convergence: membership change -> every queue held by its final owner only")
    print(
        f"(RocketMQ default timings, the notification path; {args.brokers} broker processes, "
        "consumers in worker processes, each with its own client instance)"
    )
    print(
        f"{'size':>12} {'strategy':>24} {'handoff':>8} {'change':>6} {'n':>4} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            tmp = str(args.keep)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rebalance-"))
        settings = "".join(f"{line}\n" for line in args.broker_setting)
        async with ProcessCluster(
            Path(tmp), brokers=args.brokers, settings=settings, trace=args.keep is not None
        ) as cluster:
            for case in cases:
                if case.queues % args.brokers:
                    raise SystemExit(
                        f"{case.label}: queues must divide by --brokers {args.brokers}"
                    )
                workers = args.procs or max(1, min(8, case.consumers // 16))
                try:
                    r = await run_case(
                        cluster, case, workers, Path(tmp), trace=args.keep is not None
                    )
                except TimeoutError as e:  # reported, and the other sizes still run
                    failed.append(f"{case.label} {case.strategy} {case.handoff}: {e}")
                    print(f"{case.label:>12} {case.strategy:>24} {case.handoff:>8} FAILED: {e}")
                    continue
                case_rows = result_rows(r, args.brokers)
                if args.csv:  # case by case: a long sweep keeps what it measured
                    append_csv(args.csv, case_rows)
                for row in case_rows:
                    rows.append(row)
                    print(
                        f"{case.label:>12} {case.strategy:>24} {case.handoff:>8} "
                        f"{row['change']:>6} {row['n']:>4} {row['p50_ms']:8.1f} "
                        f"{row['p99_ms']:8.1f} {row['max_ms']:8.1f}",
                        flush=True,
                    )
                print(
                    f"{'':>12} started and settled in {r.start_s:.1f} s over {workers} "
                    f"processes, quiet {QUIET_S:.0f} s after the warm-up and "
                    f"{r.tail_s:.1f} s more; broker RSS {r.broker_bytes_per_consumer / 1024:.0f} KiB per "
                    f"consumer ({args.brokers} channels each); worker RSS "
                    f"{r.worker_bytes_per_consumer / 1024:.0f} KiB per consumer, "
                    f"{r.worker_bytes_per_queue / 1024:.1f} KiB per queue; "
                    f"{r.resettled} changes came apart after settling; CPU per change "
                    f"(with the {case.spacing} s after it): brokers "
                    f"{r.broker_cpu_per_change * 1000:.0f} ms, consumer processes "
                    f"{r.worker_cpu_per_change * 1000:.0f} ms"
                    + "".join(
                        f"; per {kind} {b * 1000:.0f} / {w * 1000:.0f} ms"
                        for kind, (b, w) in r.cpu_per_kind.items()
                    )
                    + f"; idle {r.idle_cpu_per_s[0] * 1000:.0f} / "
                    f"{r.idle_cpu_per_s[1] * 1000:.0f} ms per s"
                    + (
                        ""
                        if r.host_steal_share is None
                        else f"; host steal {r.host_steal_share * 100:.1f} % of the cores "
                        "during the changes"
                    ),
                    flush=True,
                )
    if args.csv and args.plot:
        plot(args.csv, args.plot)
    for row in rows:
        target = {(32, 128): 100.0, (1000, 4096): 2000.0}.get((row["consumers"], row["queues"]))
        if target is not None:
            verdict = "met" if row["p99_ms"] <= target else "NOT met"
            print(
                f"target p99 <= {target:.0f} ms, {row['consumers']} x {row['queues']} "
                f"{row['strategy']} {row['handoff']} {row['change']}: {verdict} "
                f"({row['p99_ms']:.1f} ms)"
            )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.rebalance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        action="append",
        help="CONSUMERSxQUEUES (repeatable; default 8x32 and 32x128)",
    )
    parser.add_argument("--strategy", default="AVG", help="AVG or CONSISTENT_HASH_BOUNDED")
    parser.add_argument("--handoff", default="classic", choices=["classic", "fenced"])
    parser.add_argument("--changes", type=int, default=100, help="joins + leaves per size")
    parser.add_argument(
        "--kills", type=int, default=0, help="then consumers killed with SIGKILL, one at a time"
    )
    parser.add_argument(
        "--spacing",
        type=float,
        default=SPACING_S,
        help="seconds from a settled change to the next (and the settled group is watched "
        "that long); below about 2 s a change can land in the 1 s minimum interval that "
        "follows the group's passes for the previous change (a pass deferred by RocketMQ's "
        "1 s between rebalances), which at 1.5 s made every leave about 0.5 s slower "
        f"(default {SPACING_S})",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=WARMUP_S,
        help="seconds from the start's settling to the first change, so that the first change "
        f"is not timed in the start's own tail (default {WARMUP_S})",
    )
    parser.add_argument("--brokers", type=int, default=4)
    parser.add_argument(
        "--broker-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line of the brokers' settings file (TOML), repeatable",
    )
    parser.add_argument(
        "--worker-stats",
        type=float,
        default=0.0,
        metavar="S",
        help="each worker writes notifications, passes and memberships seen every S seconds "
        "to workers.stderr (in the run's temporary folder)",
    )
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=WORKER_NICE,
        metavar="N",
        help="the consumer processes' nice level (default %(default)s: the brokers first, "
        "which at 1,000 consumers keeps their heartbeats within the deadline; 0: the "
        "consumers and brokers share the cores as equals)",
    )
    parser.add_argument(
        "--consumer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a PushConsumer or ClientConfig option of every consumer "
        "(handoff_acquire_wait_ms=2000, batch_acquires=false), repeatable",
    )
    parser.add_argument(
        "--procs",
        type=int,
        default=0,
        help="consumer processes (default: one per 16 consumers, 1..8)",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="the sizes of the plot (or those of --size), AVG and bounded hash, classic and fenced",
    )
    parser.add_argument("--csv", type=Path, help="append the figures to this CSV")
    parser.add_argument(
        "--keep",
        type=Path,
        help="run in this folder and keep it: the cluster's files, the workers' stderr, and "
        "the protocol trace of every broker (trace-<broker>.jsonl) and worker "
        "(trace-<size>-w<N>.jsonl), for reading a change's timeline afterwards",
    )
    parser.add_argument(
        "--times",
        type=Path,
        help="append every change to this CSV: its time, when a joiner's start() returned, "
        "the queue event that settled it (and whose), when it came after the start, and when "
        "the first and the last member read a notification, and who the last was and which "
        "broker told it (the workers then report each one)",
    )
    parser.add_argument("--plot", type=Path, help="draw the CSV's figures into this PNG")
    parser.add_argument("--plot-only", action="store_true", help="only draw --csv into --plot")
    args = parser.parse_args(argv)
    if args.plot_only:
        if not (args.csv and args.plot):
            parser.error("--plot-only needs --csv and --plot")
        plot(args.csv, args.plot)
        return 0

    def case(consumers: int, queues: int, strategy: str, handoff: str) -> Case:
        return Case(
            consumers,
            queues,
            strategy,
            handoff,
            args.changes,
            args.kills,
            args.spacing,
            args.worker_stats,
            args.times,
            args.warmup,
            args.worker_nice,
            tuple(args.consumer_option),
        )

    if args.sweep:
        cases = [case(c, q, s, h) for s, h in SWEEP_MODES for c, q in args.size or SWEEP_SIZES]
    else:
        cases = [
            case(c, q, args.strategy, args.handoff) for c, q in args.size or [(8, 32), (32, 128)]
        ]
    from aiorocketmq.logs import configure_logging

    configure_logging("ERROR")
    return asyncio.run(main_async(args, cases))


if __name__ == "__main__":
    sys.exit(main())
