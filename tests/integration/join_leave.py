"""The join/leave harness: a cluster, a message stream, consumers that come and go, a trace.

A ``Scenario`` records the protocol trace of everything in this process (and reads the trace
files of consumer processes), keeps a producer sending while consumers join, leave or crash,
and answers the two questions every case asks: has the group settled (each queue held by
exactly one live consumer, as AVG computes), and was every message consumed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.trace import tracer
from aiorocketmq.trace_check import TraceReport, check, read_traces
from bench.procs import ConsumerProcess

__all__ = ["CaseResult", "ConsumerProcess", "Scenario"]

SUMMARY: list[CaseResult] = []


@dataclass
class CaseResult:
    """What a case measured (printed at the end of the run, quoted in the notes)."""

    case: str
    settle_ms: list[float]
    sent: int
    duplicates: int
    causes: dict[str, int]
    double_ownership_ms: int


async def _ok(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@dataclass
class Scenario:
    """One case: a group consuming a topic while its membership changes."""

    cluster: LocalCluster
    tmp: Path
    topic: str
    group: str = "join_leave"
    handoff: str = "classic"
    client_config: ClientConfig = field(default_factory=ClientConfig)
    consumer_kwargs: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    consumers: dict[str, PushConsumer] = field(default_factory=dict)
    processes: dict[str, ConsumerProcess] = field(default_factory=dict)
    sent: int = 0
    send_errors: int = 0
    settle_ms: list[float] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _producer_task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> Scenario:
        tracer.subscribe(self.records.append)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_producing()
        for c in list(self.consumers.values()):
            await c.shutdown()
        for p in self.processes.values():
            await p.stop()
        tracer.unsubscribe(self.records.append)

    # ---- membership ------------------------------------------------------------------------
    async def join(self, name: str) -> None:
        c = PushConsumer(
            self.group,
            self.cluster.namesrv_addr,
            instance_name=name,
            client_config=self.client_config,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            handoff=self.handoff,
            **self.consumer_kwargs,
        )
        c.subscribe(self.topic, "*")
        c.register_message_listener(_ok)
        await c.start()
        self.consumers[name] = c

    async def flowing_group(self, n: int) -> None:
        """Producing, ``c0`` .. ``c<n-1>`` join, the group settles and consumes for a moment."""
        self.start_producing()
        for i in range(n):
            await self.join(f"c{i}")
        await self.settle()
        await asyncio.sleep(0.3)

    async def leave(self, name: str) -> None:
        await self.consumers.pop(name).shutdown()

    async def join_process(self, name: str, *, instance_name: str | None = None) -> ConsumerProcess:
        p = ConsumerProcess(
            self.cluster.namesrv_addr,
            self.group,
            self.topic,
            instance_name or name,
            self.tmp / f"{name}.jsonl",
            self.handoff,
            extra=("--from", "first"),
        )
        self.processes[name] = p
        await p.started()
        return p

    async def crash_process(self, name: str) -> None:
        await self.processes.pop(name).kill()

    def live_client_ids(self) -> list[str]:
        ids = [c.client_id for c in self.consumers.values()]
        ids += [p.client_id for p in self.processes.values()]
        return sorted(ids)

    # ---- the stream --------------------------------------------------------------------------
    def start_producing(self, interval_s: float = 0.004) -> None:
        async def run() -> None:
            async with Producer(
                "join_leave_producer", self.cluster.namesrv_addr, send_msg_timeout=5
            ) as p:
                while not self._stop.is_set():
                    try:
                        await p.send(Message(self.topic, b"m%06d" % self.sent))
                        self.sent += 1
                    except MQError:
                        self.send_errors += 1  # not acknowledged: not expected to be consumed
                    await asyncio.sleep(interval_s)

        self._stop.clear()
        self._producer_task = asyncio.create_task(run())

    async def stop_producing(self) -> None:
        self._stop.set()
        if self._producer_task is not None:
            await self._producer_task
            self._producer_task = None

    # ---- the questions -----------------------------------------------------------------------
    def report_records(self) -> list[dict[str, Any]]:
        files = [p.trace for p in self.processes.values()] + list(self.tmp.glob("*.jsonl"))
        return sorted(self.records + read_traces(set(files)), key=lambda r: r.get("ts", 0))

    def report(self) -> TraceReport:
        return check(self.report_records(), group=self.group, topic=self.topic)

    def mq_all(self) -> list[MessageQueue]:
        return sorted(
            MessageQueue(self.topic, b.config.broker_name, q)
            for b in self.cluster.broker_list
            if (cfg := b.topics.select_topic_config(self.topic)) is not None
            for q in range(cfg.read_queue_nums)
        )

    def is_settled(self) -> bool:
        """Every queue held by exactly one live consumer, as AVG over the live consumers says."""
        cids = self.live_client_ids()
        if not cids:
            return False
        holders = self.report().holders_now()
        mq_all = self.mq_all()
        avg = AllocateMessageQueueAveragely()
        want = {str(mq): cid for cid in cids for mq in avg.allocate(self.group, cid, mq_all, cids)}
        have = {mq: hs for mq, hs in holders.items()}
        traced = all(have.get(mq) == [cid] for mq, cid in want.items()) and all(
            mq in want for mq in have
        )
        # The consumers of this process must agree with their trace (none still waits for a
        # queue its previous owner holds).
        return traced and all(
            {str(mq) for mq in c.assigned_queues if mq.topic == self.topic}
            == {mq for mq, cid in want.items() if cid == c.client_id}
            for c in self.consumers.values()
        )

    async def settle(self, timeout: float = 30.0) -> float:
        """Wait until settled; the time it took (ms), also kept in ``settle_ms``."""
        start = time.monotonic()
        while not self.is_settled():
            if time.monotonic() - start > timeout:
                raise AssertionError(
                    f"the group did not settle in {timeout}s: holders {self.report().holders_now()}, "
                    f"live {self.live_client_ids()}"
                )
            await asyncio.sleep(0.02)
        elapsed = (time.monotonic() - start) * 1000
        self.settle_ms.append(elapsed)
        return elapsed

    async def all_consumed(self, timeout: float = 30.0) -> TraceReport:
        """Stop producing and wait until every acknowledged message was consumed."""
        await self.stop_producing()
        deadline = time.monotonic() + timeout
        while True:
            report = self.report()
            if report.sent >= self.sent and not report.never_consumed:
                return report
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{len(report.never_consumed)} of {report.sent} messages never consumed, e.g. "
                    f"{report.never_consumed[:5]}"
                )
            await asyncio.sleep(0.05)

    def uncommitted_by(self, client_id: str) -> int:
        """Messages ``client_id`` consumed past its last offset commit (what a crash repeats)."""
        committed: dict[str, int] = {}
        consumed: list[tuple[str, int]] = []
        for r in self.report_records():
            if r.get("client_id") != client_id:
                continue
            if r["event"] == "offset_commit":
                committed.update(r["offsets"])
            elif r["event"] == "consumed":
                consumed.append((r["mq"], r["offset"]))
        return sum(1 for mq, off in consumed if off >= committed.get(mq, 0))

    def check_handoff(
        self, report: TraceReport, *, graceful: bool = True, broker_restart: bool = False
    ) -> None:
        """Fenced: a graceful change has no double ownership and no duplicate; a broker
        restart has no double ownership either (the grants survive it)."""
        if self.handoff == "fenced" and (graceful or broker_restart):
            assert report.total_double_ownership_ms == 0, report.double_ownership_ms
        if self.handoff == "fenced" and graceful:
            assert report.duplicate_count == 0, list(report.duplicates.items())[:5]

    def record(self, case: str, report: TraceReport) -> CaseResult:
        self.check_handoff(
            report,
            graceful="crash" not in case and "restarted" not in case,
            broker_restart="broker restarted" in case,
        )
        result = CaseResult(
            f"[{self.handoff}] {case}",
            [round(x, 1) for x in self.settle_ms],
            report.sent,
            report.duplicate_count,
            report.duplicate_causes,
            report.total_double_ownership_ms,
        )
        SUMMARY.append(result)
        print(f"\n[join/leave] {result}", file=sys.stderr)
        if os.environ.get("JOIN_LEAVE_SUMMARY"):
            with open(os.environ["JOIN_LEAVE_SUMMARY"], "a") as f:
                f.write(repr(result) + "\n")
        return result
