"""Apache's producer over remoting against ours over gRPC and over remoting, into the same
broker, in one run.

Starts a name server and one broker (ASYNC_FLUSH) as processes, both with a remoting listener,
and a topic of 8 queues. Then each client, in its own process, sends the same messages one at
a time, synchronously (each send waits for its answer: what ``send_sync`` and ``await
producer.send`` do): first a warm-up, then ``--messages`` timed sends, for ``--rounds`` rounds,
the clients taking turns to go first. Printed per client: messages per second, the send latency
(p50, p99 from every send), and the broker process's CPU time per message (from ``/proc``
before and after the timed sends: what the broker spends on each protocol).

The clients: Apache's C++ client 1.2.3 (PyPI ``rocketmq``, ``Producer.send_sync``: SEND_MESSAGE
with JSON headers over its TCP connection) and ours (``Producer.send``), once over gRPC
(SendMessage) and once with ``data_transport="remoting"`` (SEND_BATCH_MESSAGE over a TCP
connection of its own).

``python -m bench.remoting [--messages N] [--size B] [--rounds R]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.procs import ProcessCluster, cpu_seconds
from bench.stats import percentile

TOPIC = "BenchRemoting"
QUEUES = 8
# Client kind -> how it sends.
CLIENTS = {
    "apache": "remoting (Apache C++ 1.2.3, send_sync)",
    "ours": "gRPC (Producer.send)",
    "ours-remoting": 'remoting (Producer.send, data_transport="remoting")',
}


def _client_apache(namesrv: str, messages: int, size: int) -> list[float]:
    from rocketmq.client import Message, Producer  # type: ignore[import-untyped]

    producer = Producer("bench_apache")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    body = b"x" * size
    latencies = []
    try:
        for warm in (True, False):
            for i in range(200 if warm else messages):
                msg = Message(TOPIC)
                msg.set_keys(f"k{i}")
                msg.set_body(body)
                start = time.perf_counter()
                producer.send_sync(msg)
                if not warm:
                    latencies.append(time.perf_counter() - start)
            if warm:
                print(json.dumps({"ready": True}), flush=True)
                sys.stdin.readline()  # the broker's CPU is read between these lines
    finally:
        producer.shutdown()
    return latencies


async def _client_ours(namesrv: str, messages: int, size: int, transport: str) -> list[float]:
    from aiorocketmq.producer import Message, Producer

    body = b"x" * size
    latencies = []
    async with Producer("bench_ours", namesrv, data_transport=transport) as producer:
        for warm in (True, False):
            for i in range(200 if warm else messages):
                start = time.perf_counter()
                await producer.send(Message(TOPIC, body, keys=f"k{i}"))
                if not warm:
                    latencies.append(time.perf_counter() - start)
            if warm:
                print(json.dumps({"ready": True}), flush=True)
                await asyncio.to_thread(sys.stdin.readline)
    return latencies


def client_main(kind: str, namesrv: str, messages: int, size: int) -> None:
    """The client process: warm up, say ready, wait, send, print the latencies and the time."""
    start = time.perf_counter()
    if kind == "apache":
        latencies = _client_apache(namesrv, messages, size)
    else:
        transport = "remoting" if kind == "ours-remoting" else "grpc"
        latencies = asyncio.run(_client_ours(namesrv, messages, size, transport))
    print(json.dumps({"latencies": latencies, "wall": sum(latencies),
                      "total": time.perf_counter() - start}), flush=True)


async def _run_client(
    kind: str, cluster: ProcessCluster, broker_pid: int, messages: int, size: int, home: Path
) -> dict[str, Any]:
    namesrv = cluster.namesrv_remoting_addr if kind == "apache" else cluster.namesrv_addr
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.remoting", "--client", kind, "--namesrv", namesrv,
        "--messages", str(messages), "--size", str(size),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(home)},
        limit=64 * 1024 * 1024,  # the latencies come back as one JSON line
    )
    assert proc.stdin is not None and proc.stdout is not None
    ready = json.loads(await proc.stdout.readline())
    assert ready == {"ready": True}
    cpu_before = cpu_seconds(broker_pid)
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()
    result = json.loads(await proc.stdout.readline())
    cpu_after = cpu_seconds(broker_pid)
    await proc.wait()
    latencies: list[float] = result["latencies"]
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return {
        "client": kind,
        "messages": len(latencies),
        "rate": len(latencies) / result["wall"],
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "broker_cpu_us": None if cpu is None else cpu / len(latencies) * 1e6,
    }


async def bench(messages: int, size: int, rounds: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-remoting-") as tmp:
        root = Path(tmp)
        async with ProcessCluster(root / "cluster", brokers=1, remoting=True) as cluster:
            await cluster.create_topic(TOPIC, QUEUES)
            broker_pid = next(iter(cluster.brokers.values())).pid
            await asyncio.sleep(1.5)  # the route reaches the remoting side too
            results = []
            kinds = list(CLIENTS)
            for r in range(rounds):
                for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                    results.append(
                        await _run_client(kind, cluster, broker_pid, messages, size, root)
                    )
            return results


def summarize(results: list[dict[str, Any]]) -> str:
    lines = [
        "| client | protocol | sends | msg/s (median of rounds) | p50 ms | p99 ms | broker CPU µs/msg |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, protocol in CLIENTS.items():
        rows = [r for r in results if r["client"] == kind]
        cpu = [r["broker_cpu_us"] for r in rows if r["broker_cpu_us"] is not None]
        cpu_text = f"{statistics.median(cpu):.0f}" if cpu else "-"
        lines.append(
            f"| {kind} | {protocol} | {sum(r['messages'] for r in rows)} | "
            f"{statistics.median(r['rate'] for r in rows):,.0f} | "
            f"{statistics.median(r['p50_ms'] for r in rows):.3f} | "
            f"{statistics.median(r['p99_ms'] for r in rows):.3f} | {cpu_text} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remoting", description=__doc__)
    parser.add_argument("--messages", type=int, default=5000, help="timed sends per round")
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, clients alternating")
    parser.add_argument("--client", choices=list(CLIENTS), help=argparse.SUPPRESS)
    parser.add_argument("--namesrv", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client, args.namesrv, args.messages, args.size)
        return
    results = asyncio.run(bench(args.messages, args.size, args.rounds))
    for r in results:
        print(json.dumps(r))
    print()
    print(summarize(results))


if __name__ == "__main__":
    main()
