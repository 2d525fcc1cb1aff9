"""Rebalance convergence: how long from a membership change to a settled group.

N consumers share Q queues of one topic on one broker (a separate process), at RocketMQ's
default timings (20 s periodic rebalance, 30 s heartbeat), so the only fast path is the
notification: heartbeat -> CHANGE -> NOTIFY_CONSUMER_IDS_CHANGED -> each consumer rebalances.
One consumer joins, then one leaves, repeated; for each change it measures the time from the
call (``start()`` / ``shutdown()``) to the moment every consumer holds exactly its AVG share and
no queue is held twice, and prints p50 and p99. ``python -m bench.rebalance``.

Changes are spaced ``SPACING_S`` apart: a joining consumer rebalances twice (its own start,
then the broker's notification of its own arrival, deferred by RocketMQ's 1 s minimum interval
between rebalances), so a change within ~2 s of a join waits for that window; that is
RocketMQ's behaviour, not measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from aiorocketmq.trace import tracer
from bench.procs import BrokerProcesses
from consumer import (
    AllocateMessageQueueAveragely,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    MessageQueue,
    PushConsumer,
)

TOPIC = "BenchRebalance"
SPACING_S = 2.2
GROUP = "bench_rebalance"


async def _listener(
    msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def _consumer(namesrv: str, name: str) -> PushConsumer:
    c = PushConsumer(GROUP, namesrv, instance_name=name)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(_listener)
    return c


def _settled(
    consumers: list[PushConsumer], mq_all: list[MessageQueue], leaving: PushConsumer | None = None
) -> bool:
    cids = sorted(c.client_id for c in consumers)
    if len(set(cids)) != len(cids):
        return False
    avg = AllocateMessageQueueAveragely()
    seen: set[MessageQueue] = set(leaving.assigned_queues) if leaving is not None else set()
    for c in consumers:
        held = c.assigned_queues
        if held & seen or held != set(avg.allocate(GROUP, c.client_id, mq_all, cids)):
            return False
        seen |= held
    return seen == set(mq_all) and (leaving is None or not leaving.assigned_queues)


async def _converge(
    consumers: list[PushConsumer],
    mq_all: list[MessageQueue],
    timeout: float = 30.0,
    leaving: PushConsumer | None = None,
) -> float:
    """Seconds until settled, checked at every queue added/dropped (and every 5 ms)."""
    changed = asyncio.Event()

    def on_event(rec: dict[str, object]) -> None:
        if rec["event"] in ("queue_added", "queue_dropped"):
            changed.set()

    tracer.subscribe(on_event)
    start = time.perf_counter()
    try:
        while not _settled(consumers, mq_all, leaving):
            if time.perf_counter() - start > timeout:
                raise TimeoutError("the group did not settle")
            changed.clear()
            try:
                async with asyncio.timeout(0.005):
                    await changed.wait()
            except TimeoutError:
                pass
        return time.perf_counter() - start
    finally:
        tracer.unsubscribe(on_event)


async def run_case(
    procs: BrokerProcesses, consumers_n: int, queues: int, rounds: int
) -> dict[str, list[float]]:
    await procs.create_topic(TOPIC, queues)
    mq_all = sorted(MessageQueue(TOPIC, procs.broker_name, q) for q in range(queues))
    consumers = [_consumer(procs.namesrv_addr, f"c{i:03d}") for i in range(consumers_n)]
    for c in consumers:
        await c.start()
    await _converge(consumers, mq_all, timeout=60)
    times: dict[str, list[float]] = {"join": [], "leave": []}
    try:
        for r in range(rounds):
            await asyncio.sleep(SPACING_S)
            joiner = _consumer(procs.namesrv_addr, f"j{r:03d}")
            t0 = time.perf_counter()
            await joiner.start()
            consumers.append(joiner)
            times["join"].append(time.perf_counter() - t0 + await _converge(consumers, mq_all))
            await asyncio.sleep(SPACING_S)
            leaver = consumers.pop(0)
            t0 = time.perf_counter()
            shutdown = asyncio.create_task(leaver.shutdown())
            await _converge(consumers, mq_all, leaving=leaver)
            times["leave"].append(time.perf_counter() - t0)
            await shutdown
    finally:
        for c in consumers:
            await c.shutdown()
    return times


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def main_async(cases: list[tuple[int, int]], rounds: int) -> int:
    print("Rebalance convergence: membership change -> every consumer holds its final AVG share,")
    print(
        "no queue held twice (RocketMQ default timings; the notification path). Broker: own process."
    )
    print(
        f"{'consumers x queues':>20} {'change':>7} {'n':>3} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        async with BrokerProcesses(Path(tmp)) as procs:
            for n, q in cases:
                times = await run_case(procs, n, q, rounds)
                for kind, values in times.items():
                    p99 = _pct(values, 99) * 1000
                    if (n, q) == (32, 128):
                        worst = max(worst, p99)
                    print(
                        f"{f'{n} x {q}':>20} {kind:>7} {len(values):>3} {_pct(values, 50) * 1000:8.1f} "
                        f"{p99:8.1f} {max(values) * 1000:8.1f}"
                    )
    if worst:
        print(
            f"target: p99 <= 100 ms for 32 x 128: {'met' if worst <= 100 else 'NOT met'} ({worst:.1f} ms)"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    from aiorocketmq.logs import configure_logging

    configure_logging("WARNING")
    return asyncio.run(main_async([(4, 16), (32, 128)], args.rounds))


if __name__ == "__main__":
    sys.exit(main())
