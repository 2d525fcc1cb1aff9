"""Classic vs fenced handoff: what a join or a leave costs while messages flow.

32 consumers share a topic of 128 queues on one broker (its own process); a producer sends all
along; a scripted sequence of joins and leaves runs once with ``handoff="classic"`` (RocketMQ's
behaviour) and once with ``handoff="fenced"``. From the protocol trace it prints, side by side:
duplicates, double-ownership time, unowned time per handoff (p50/p99), and the convergence
time of each change (p50/p99: from the call to every consumer holding its final AVG share with
no queue held twice). ``python -m bench.handoff [--rounds N] [--consume-ms MS]``.

``--consume-ms MS`` makes every consumer slow: its listener takes MS per message, so each queue
has messages being consumed at the moment it moves. Duplicates are then counted twice over:
from the trace (acknowledged deliveries), and as the application sees them (a listener that
ran for a message another listener had already run for, acknowledged or not: a batch whose
queue was taken away while it ran is discarded by the client, but its work was done).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiorocketmq.cli.common import non_negative_type
from aiorocketmq.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.producer import Message, Producer
from aiorocketmq.trace import tracer
from aiorocketmq.trace_check import TraceReport, check
from bench.procs import BrokerProcesses
from bench.rebalance import SPACING_S, converge, new_consumer
from bench.stats import percentile

TOPIC = "BenchHandoff"
CONSUMERS = 32
QUEUES = 128


async def run_mode(
    procs: BrokerProcesses, handoff: str, rounds: int, consume_ms: float = 0.0
) -> dict[str, Any]:
    group = f"bench_handoff_{handoff}"
    ran: dict[bytes, int] = {}  # body -> listener runs (what the application saw)

    async def slow(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            await asyncio.sleep(consume_ms / 1000)
            ran[m.body] = ran.get(m.body, 0) + 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    mq_all = sorted(MessageQueue(TOPIC, procs.broker_name, q) for q in range(QUEUES))
    records: list[dict[str, Any]] = []
    tracer.subscribe(records.append)
    stop = asyncio.Event()
    sent = 0

    def consumer(name: str) -> PushConsumer:
        return new_consumer(
            procs.namesrv_addr,
            f"{handoff}-{name}",
            group=group,
            topic=TOPIC,
            handoff=handoff,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            listener=slow,
        )

    async def produce() -> None:
        nonlocal sent
        async with Producer("bench_handoff_producer", procs.namesrv_addr) as p:
            while not stop.is_set():
                await p.send_batch(
                    [Message(TOPIC, f"{handoff}-{sent + i:08d}".encode()) for i in range(16)]
                )
                sent += 16
                await asyncio.sleep(0.01)

    consumers = [consumer(f"c{i:03d}") for i in range(CONSUMERS)]
    convergence: list[float] = []
    producer = asyncio.create_task(produce())
    try:
        for c in consumers:
            await c.start()
        await converge(consumers, mq_all, timeout=120)
        start_ts = int(time.time() * 1000)
        for r in range(rounds):
            await asyncio.sleep(SPACING_S)
            joiner = consumer(f"j{r:03d}")
            t0 = time.perf_counter()
            await joiner.start()
            consumers.append(joiner)
            await converge(consumers, mq_all, timeout=60)
            convergence.append(time.perf_counter() - t0)
            await asyncio.sleep(SPACING_S)
            leaver = consumers.pop(0)
            t0 = time.perf_counter()
            shutdown = asyncio.create_task(leaver.shutdown())
            await converge(consumers, mq_all, timeout=60, leaving=leaver)
            convergence.append(time.perf_counter() - t0)
            await shutdown
        stop.set()
        await producer
        deadline = time.monotonic() + 60
        while True:
            report = check(records, group=group, topic=TOPIC)
            if not report.never_consumed or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(producer, return_exceptions=True)
        for c in consumers:
            await c.shutdown()
        tracer.unsubscribe(records.append)
    # Loss over the whole run; everything else over the scripted joins and leaves only.
    lost = len(check(records, group=group, topic=TOPIC).never_consumed)
    report = check([r for r in records if r.get("ts", 0) >= start_ts], group=group, topic=TOPIC)
    kinds = ["join", "leave"] * rounds
    print(
        f"  {handoff}: convergence per change (ms): "
        + ", ".join(f"{k} {x * 1000:.0f}" for k, x in zip(kinds, convergence, strict=False))
    )
    repeated = sum(n - 1 for n in ran.values() if n > 1)
    return {
        "report": report,
        "convergence": convergence,
        "sent": sent,
        "lost": lost,
        "app_duplicates": repeated,
    }


def _row(name: str, classic: str, fenced: str) -> str:
    return f"  {name:38} {classic:>16} {fenced:>16}"


def _summary(result: dict[str, Any]) -> dict[str, str]:
    report: TraceReport = result["report"]
    unowned = [float(h.unowned_ms) for h in report.handoffs]
    conv = [x * 1000 for x in result["convergence"]]
    return {
        "messages": f"{result['sent']}",
        "lost": f"{result['lost']}",
        "duplicates": f"{report.duplicate_count}",
        "app_duplicates": f"{result['app_duplicates']}",
        "double": f"{report.total_double_ownership_ms} ms",
        "handoffs": f"{len(report.handoffs)}",
        "unowned": f"{percentile(unowned, 50):.0f} / {percentile(unowned, 99):.0f} ms",
        "convergence": f"{percentile(conv, 50):.0f} / {percentile(conv, 99):.0f} ms",
        "conv_p99": f"{percentile(conv, 99):.1f}",
    }


async def main_async(rounds: int, consume_ms: float = 0.0) -> int:
    print(
        f"Handoff: {CONSUMERS} consumers x {QUEUES} queues, {rounds} joins and {rounds} leaves, "
        "messages flowing (broker in its own process; RocketMQ default timings)"
        + (f"; each message takes {consume_ms:g} ms to consume" if consume_ms else "")
    )
    with tempfile.TemporaryDirectory(prefix="bench-handoff-") as tmp:
        async with BrokerProcesses(Path(tmp)) as procs:
            await procs.create_topic(TOPIC, QUEUES)
            results = {
                mode: _summary(await run_mode(procs, mode, rounds, consume_ms))
                for mode in ("classic", "fenced")
            }
    c, f = results["classic"], results["fenced"]
    print(_row("", "classic", "fenced"))
    for key, label in (
        ("messages", "messages sent"),
        ("lost", "messages lost"),
        ("duplicates", "duplicates (graceful changes)"),
        ("app_duplicates", "listener runs repeated (application)"),
        ("double", "double-ownership time"),
        ("handoffs", "handoffs"),
        ("unowned", "unowned per handoff p50 / p99"),
        ("convergence", "convergence p50 / p99"),
    ):
        print(_row(label, c[key], f[key]))
    ok = f["duplicates"] == "0" and float(f["conv_p99"]) <= 250 and f["lost"] == "0"
    print(
        f"targets (fenced: 0 duplicates, convergence p99 <= 250 ms, nothing lost): {'met' if ok else 'NOT met'}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--consume-ms",
        type=non_negative_type,
        default=0.0,
        help="time each message takes to consume",
    )
    args = parser.parse_args(argv)
    from aiorocketmq.logs import configure_logging

    configure_logging("WARNING")
    return asyncio.run(main_async(args.rounds, args.consume_ms))


if __name__ == "__main__":
    sys.exit(main())
