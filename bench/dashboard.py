"""What the dashboard costs the cluster: requests per refresh and broker CPU.

A name server and two brokers as processes, ``--consumers`` consumer processes in one group on
an 8-queue topic (4 on each broker) with a producer sending throughout. Two phases of
``--duration`` seconds each, in the same run: without the dashboard, then with one page of the
group open (the dashboard in this process, watching the group every ``--refresh`` s, its event
stream read). Prints the requests the dashboard made per refresh (from its own count: name
server and broker RPCs; each broker then asks each member for its running info over the
member's channel, counted separately) and the brokers' CPU time per second in each phase.

``python -m bench.dashboard [--consumers N] [--duration S] [--refresh S]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

import aiohttp

from aiorocketmq.dashboard import Dashboard
from aiorocketmq.producer import Message, Producer
from bench.procs import ConsumerProcess, ProcessCluster, cpu_seconds

TOPIC, GROUP = "DashBench", "dash_bench_group"


def brokers_cpu(cluster: ProcessCluster) -> float:
    return sum(cpu_seconds(p.pid) or 0.0 for p in cluster.brokers.values())


async def produce(namesrv: str, stop: asyncio.Event) -> int:
    sent = 0
    async with Producer("dash_bench_pg", namesrv) as producer:
        while not stop.is_set():
            await producer.send(Message(TOPIC, b"x" * 128))
            sent += 1
            await asyncio.sleep(0.01)
    return sent


async def phase(cluster: ProcessCluster, seconds: float) -> float:
    """Broker CPU seconds per wall second over ``seconds``."""
    before, started = brokers_cpu(cluster), time.monotonic()
    await asyncio.sleep(seconds)
    return (brokers_cpu(cluster) - before) / (time.monotonic() - started)


async def read_stream(url: str, payloads: list[int]) -> None:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        async for line in response.content:
            if line.startswith(b"data: "):
                payloads.append(len(line))


async def main(consumers: int, duration: float, refresh: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        root = Path(tmp)
        async with ProcessCluster(root, brokers=2) as cluster:
            await cluster.create_topic(TOPIC, 4)
            members = [
                ConsumerProcess(cluster.namesrv_addr, GROUP, TOPIC, f"c{i}", root / f"c{i}.jsonl")
                for i in range(consumers)
            ]
            try:
                for m in members:
                    await m.started()
                stop = asyncio.Event()
                producer = asyncio.create_task(produce(cluster.namesrv_addr, stop))
                await asyncio.sleep(3)  # the group settles
                without = await phase(cluster, duration)
                async with Dashboard(cluster.namesrv_addr, "127.0.0.1:0", refresh=refresh) as d:
                    payloads: list[int] = []
                    reader = asyncio.create_task(
                        read_stream(f"{d.url}groups/{GROUP}/events", payloads)
                    )
                    await asyncio.sleep(2 * refresh)
                    requests_before, looks_before = d.source.requests, len(payloads)
                    with_page = await phase(cluster, duration)
                    requests = d.source.requests - requests_before
                    looks = len(payloads) - looks_before
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
                stop.set()
                await producer
            finally:
                for m in members:
                    await m.stop()
    print(
        f"dashboard cost: 2 brokers, {consumers} consumers, refresh {refresh:g} s, {duration:g} s per phase"
    )
    print(
        f"  refreshes: {looks}, requests: {requests} ({requests / max(1, looks):.1f} per refresh)"
    )
    print(
        f"  + {2 * consumers} running-info round trips per refresh (each broker asks each member)"
    )
    print(f"  event payload: {sum(payloads) / max(1, len(payloads)) / 1024:.1f} KiB")
    print(
        f"  broker CPU without the page: {without * 1000:.0f} ms/s; with it: {with_page * 1000:.0f} ms/s"
        f" (+{(with_page - without) * 1000:.0f} ms/s, {(with_page - without) * 100 / 2:.1f} % of a core per broker)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--refresh", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(main(args.consumers, args.duration, args.refresh))
