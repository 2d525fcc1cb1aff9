"""End to end as users run it: ``Producer`` and ``PushConsumer`` at once, beside the raw echo and
Redis Streams driven the same way.

A name server, a broker, a gRPC echo server (``bench.echo_server``) and ``redis-server`` run as
separate processes; this process is the client. Every row moves batches of ``--batch`` bodies
of ``--body-size`` bytes with ``--senders`` producer tasks:

- **echo**: the serialized send request of one batch through the echo server, answered as is:
  what gRPC alone costs (the baseline of ``bench.throughput``);
- **aiorocketmq**: ``Producer.send_batch`` in every sender task while one ``PushConsumer`` (its
  listener given up to ``--consume-batch`` messages per call, ``--pull-batch`` per pull)
  consumes the same topic, both in this process. *Sustained*: as fast as they go while the
  backlog (sent but not yet consumed) stays under ``--window`` messages, for ``--duration`` s,
  the rate being the messages the listener consumed in that time: the highest rate the system
  keeps up with, the figure OpenMessaging Benchmark calls the maximum sustainable rate (a
  sender waits while the backlog is full, as a producer of a real pipeline must: a backlog that
  grows without end is not a rate anyone can run at). *Open loop*, for reference: the senders do
  not wait, and the consumer gets what the broker's one thread leaves it while eight senders
  keep it busy. *Paced*: the senders offer half the sustained rate, and every message's latency
  from the send call to the listener is a sample (its body starts with the send time);
- **Redis Streams, redis-py**: the same with redis-py's asyncio client (hiredis parser): each
  batch one pipeline of XADDs, one consumer reading with XREADGROUP (COUNT = the batch,
  BLOCK 100 ms) and acknowledging each read with one XACK;
- **Redis, redis-benchmark**: Redis's own C client pipelining XADDs of the same bodies: the
  server's limit, with no Python in the way (produce only).

``python -m bench.endtoend [--duration S] [--senders N] [--batch N] [--body-size B]
[--pull-batch N] [--window N]``
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.logs import configure_logging
from aiorocketmq.producer import Producer
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc
from aiorocketmq.runtime import run
from bench.echo_server import ECHO_METHOD
from bench.stats import percentile
from bench.throughput import (
    _free_port,
    answers,
    create_topic,
    echo_calls,
    make_bodies,
    send_request,
    server_process,
    start_broker,
    wait_for,
)

__all__ = ["main"]

TOPIC = "BenchEndToEnd"
QUEUES = 8
TARGET_ECHO = 0.45
TARGET_REDIS = 4.0
_STAMP = struct.Struct("<d")


def stamped(bodies: list[bytes]) -> list[bytes]:
    """The bodies with the send time in their first 8 bytes."""
    now = _STAMP.pack(time.perf_counter())
    return [now + b[8:] for b in bodies]


@dataclass
class Run:
    """One system's figures: sustained and open-loop rates, latency samples at a paced rate."""

    name: str
    saturated: float = 0.0  # sustained: the backlog bounded by --window
    open_loop: float | None = None  # the senders not waiting for the consumer
    paced_rate: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def row(self) -> str:
        head = f"{self.name:<38} {self.saturated:>11,.0f}"
        if not self.latencies:
            return head
        lat = self.latencies
        open_loop = "" if self.open_loop is None else f"{self.open_loop:,.0f}"
        return (
            f"{head} {open_loop:>10} {self.paced_rate:>10,.0f} {len(lat):>8} "
            f"{percentile(lat, 50) * 1000:>7.2f} {percentile(lat, 99) * 1000:>7.2f} "
            f"{percentile(lat, 99.9) * 1000:>7.2f}"
        )


class Consumed:
    """What a consumer saw: a count, and latency samples while ``sampling``."""

    def __init__(self, window: int = 0) -> None:
        self.count = 0
        self.produced = 0
        self.drained = asyncio.Event()  # set when all produced so far was consumed
        self.window = window  # senders wait while this many are unconsumed (0: never)
        self.room = asyncio.Event()
        self.room.set()
        self.sampling = False
        self.samples: list[float] = []

    def sent(self, n: int) -> None:
        self.produced += n
        if self.window and self.produced - self.count >= self.window:
            self.room.clear()

    def seen(self, bodies: Sequence[bytes]) -> None:
        self.count += len(bodies)
        if self.count >= self.produced:
            self.drained.set()
        if not self.room.is_set() and self.produced - self.count < self.window:
            self.room.set()
        if self.sampling:
            now = time.perf_counter()
            self.samples.extend(now - _STAMP.unpack_from(b)[0] for b in bodies)


async def saturate(
    senders: int,
    duration: float,
    send: Callable[[], Awaitable[None]],
    consumed: Consumed,
    *,
    bounded: bool = True,
) -> float:
    """Every sender sends as fast as it can for ``duration`` s, waiting while the backlog is at
    the consumer's window when ``bounded``: consumed messages per second (after a warm-up of a
    fifth of the time)."""
    stop = False

    async def loop() -> None:
        while not stop:
            if bounded:
                await consumed.room.wait()
            await send()

    tasks = [asyncio.create_task(loop()) for _ in range(senders)]
    await asyncio.sleep(duration / 5)
    c0, t0 = consumed.count, time.perf_counter()
    await asyncio.sleep(duration)
    rate = (consumed.count - c0) / (time.perf_counter() - t0)
    stop = True
    await asyncio.gather(*tasks)
    return rate


async def drain(consumed: Consumed) -> None:
    """Wait until everything sent so far was consumed (the next phase would time the backlog)."""
    consumed.drained.clear()
    if consumed.count < consumed.produced:
        await asyncio.wait_for(consumed.drained.wait(), 300)


async def phases(
    args: argparse.Namespace,
    result: Run,
    send: Callable[[], Coroutine[Any, Any, None]],
    consumed: Consumed,
    *,
    open_loop: bool,
) -> None:
    """The sustained rate, then (``open_loop``) the open-loop one, then the paced latencies."""
    result.saturated = await saturate(args.senders, args.duration, send, consumed)
    if open_loop:
        await drain(consumed)
        result.open_loop = await saturate(
            args.senders, args.duration, send, consumed, bounded=False
        )
    result.paced_rate = result.saturated / 2
    result.latencies = await paced(result.paced_rate, args.batch, args.samples, send, consumed)


async def paced(
    rate: float,
    batch: int,
    samples: int,
    send: Callable[[], Coroutine[Any, Any, None]],
    consumed: Consumed,
) -> list[float]:
    """Batches offered at ``rate`` messages per second until ``samples`` latencies are taken."""
    await drain(consumed)
    consumed.samples = []
    consumed.sampling = True
    interval = batch / rate
    start = time.perf_counter()
    inflight: set[asyncio.Task[None]] = set()
    i = 0
    while len(consumed.samples) < samples:
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send())
        inflight.add(task)
        task.add_done_callback(inflight.discard)
        i += 1
    await asyncio.gather(*inflight)
    consumed.sampling = False
    return list(consumed.samples)


async def measure_aiorocketmq(
    args: argparse.Namespace, ns_addr: str, bodies: list[bytes], pull_batch: int
) -> Run:
    """One row: the producer and a consumer of its own group pulling ``pull_batch`` per call."""
    consumed = Consumed(args.window)

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        consumed.seen([m.body for m in msgs])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        f"bench_endtoend_{pull_batch}",
        ns_addr,
        pull_batch_size=pull_batch,
        consume_message_batch_max_size=args.consume_batch,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    result = Run(f"aiorocketmq, pulls of {pull_batch}")
    async with Producer("bench_endtoend_producer", ns_addr) as producer:
        await consumer.start()
        try:

            async def send() -> None:
                msgs = [Message(TOPIC, b) for b in stamped(bodies)]
                await producer.send_batch(msgs, timeout=30)
                consumed.sent(len(msgs))

            await phases(args, result, send, consumed, open_loop=True)
        finally:
            await consumer.shutdown()
    return result


async def measure_redis_py(args: argparse.Namespace, port: int, bodies: list[bytes]) -> Run:
    import redis.asyncio as aioredis

    client = aioredis.Redis(port=port)
    stream, group = "bench_endtoend", "g"
    await client.xgroup_create(stream, group, id="$", mkstream=True)
    consumed = Consumed(args.window)
    stop = asyncio.Event()

    async def consume() -> None:
        reader = aioredis.Redis(port=port)
        try:
            while not stop.is_set():
                got: Any = await reader.xreadgroup(
                    group, "c1", {stream: ">"}, count=args.batch, block=100
                )
                for _, entries in got or []:
                    consumed.seen([fields[b"b"] for _, fields in entries])
                    await reader.xack(stream, group, *(mid for mid, _ in entries))
        finally:
            await reader.aclose()

    async def send() -> None:
        pipe = client.pipeline(transaction=False)
        for b in stamped(bodies):
            pipe.xadd(stream, {"b": b})
        await pipe.execute()
        consumed.sent(len(bodies))

    result = Run("Redis Streams, redis-py")
    reader_task = asyncio.create_task(consume())
    try:
        await phases(args, result, send, consumed, open_loop=True)
    finally:
        stop.set()
        await reader_task
        await client.aclose()
    return result


def redis_benchmark(args: argparse.Namespace, port: int) -> Run:
    """redis-benchmark pipelining XADDs (``--batch`` per round trip, ``--senders`` clients)."""
    value = "x" * args.body_size
    out = subprocess.run(
        [
            "redis-benchmark",
            "-p",
            str(port),
            "-c",
            str(args.senders),
            "-P",
            str(args.batch),
            "-n",
            "1000000",
            "-q",
            "XADD",
            "bench_c",
            "*",
            "b",
            value,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    # -q prints "<command>: <rate> requests per second, p50=... msec"
    found = [line for line in out.replace("\r", "\n").splitlines() if "requests per second" in line]
    if not found:
        raise RuntimeError(f"redis-benchmark said: {out[-500:]}")
    rate = float(found[-1].split("requests per second")[0].rsplit(":", 1)[-1])
    return Run("Redis, redis-benchmark (C), XADD only", saturated=rate)


async def measure(args: argparse.Namespace, work: Path) -> list[Run]:
    py = sys.executable
    ns_addr, broker_addr, echo_addr = (f"127.0.0.1:{_free_port()}" for _ in range(3))
    redis_port = _free_port()
    bodies = make_bodies(args.batch, args.body_size)
    runs: list[Run] = []
    with ExitStack() as stack:
        echo_server = stack.enter_context(
            server_process(
                "echo", [py, "-m", "bench.echo_server", "--listen", echo_addr], echo_addr, work
            )
        )
        channel = insecure_channel(echo_addr)
        echo = channel.unary_unary(ECHO_METHOD)
        await wait_for(
            "the echo server", echo_server, lambda: answers(lambda: echo(b"", timeout=0.5))
        )
        payload = send_request(TOPIC, 0, bodies).SerializeToString()
        t0 = time.perf_counter()
        moved = await echo_calls(channel, payload, args.batch, args.senders, args.duration)
        runs.append(
            Run("echo, raw bytes (gRPC alone)", saturated=moved / (time.perf_counter() - t0))
        )
        await channel.close()
        stack.close()  # the echo server stops before the broker starts: one server at a time

        _, broker = start_broker(stack, ns_addr, broker_addr, work)
        broker_channel = insecure_channel(broker_addr)
        stub = broker_pb2_grpc.BrokerStub(broker_channel)
        await wait_for(
            "the broker",
            broker,
            lambda: answers(
                lambda: stub.GetAllTopicConfig(broker_pb2.GetAllTopicConfigRequest(), timeout=0.5)
            ),
        )
        await create_topic(stub, TOPIC, QUEUES)
        await asyncio.sleep(1.5)  # the broker registers the topic with the name server
        for pull_batch in args.pull_batch:
            runs.append(await measure_aiorocketmq(args, ns_addr, bodies, pull_batch))
        await broker_channel.close()
        stack.close()

        if shutil.which("redis-server") is None:
            print("redis-server is not installed (make bench installs it): no Redis rows")
            return runs
        redis = stack.enter_context(
            server_process(
                "redis",
                [
                    "redis-server",
                    "--port",
                    str(redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
                f"127.0.0.1:{redis_port}",
                work,
            )
        )
        await wait_for("redis", redis, lambda: _redis_up(redis_port))
        runs.append(await measure_redis_py(args, redis_port, bodies))
        runs.append(await asyncio.to_thread(redis_benchmark, args, redis_port))
    return runs


async def _redis_up(port: int) -> bool:
    import redis.asyncio as aioredis

    client = aioredis.Redis(port=port)
    try:
        return bool(await client.ping())
    except Exception:
        return False
    finally:
        await client.aclose()


def report(runs: list[Run], args: argparse.Namespace) -> str:
    lines = [
        f"End to end: batches of {args.batch} x {args.body_size} B, {args.senders} senders; "
        "Producer.send_batch + PushConsumer, listener batches of "
        f"{args.consume_batch}; "
        f"sustained: backlog under {args.window:,} messages",
        f"{'':<38} {'sustained':>11} {'open loop':>10} {'paced':>10} {'samples':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'p99.9':>7}",
        f"{'':<38} {'msg/s':>11} {'msg/s':>10} {'msg/s':>10}",
    ]
    lines += [r.row() for r in runs]
    echo = next((r for r in runs if r.name.startswith("echo")), None)
    redis_py = next((r for r in runs if r.name.startswith("Redis Streams")), None)
    for ours in (r for r in runs if r.name.startswith("aiorocketmq")):
        for peer, target in ((echo, TARGET_ECHO), (redis_py, TARGET_REDIS)):
            if peer is None or not peer.saturated:
                continue
            ratio = ours.saturated / peer.saturated
            verdict = "met" if ratio >= target else "NOT met"
            lines.append(
                f"{ours.name} / {peer.name}: {ratio:.2f} (target >= {target}: {verdict})"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.endtoend",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=10.0, help="saturated phase, s")
    parser.add_argument("--senders", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--body-size", type=int, default=256)
    parser.add_argument("--samples", type=int, default=20_000, help="latencies per paced run")
    parser.add_argument(
        "--pull-batch",
        type=int,
        nargs="+",
        default=[32, 1024],
        help="PushConsumer pull_batch_size, a row each (default: RocketMQ's 32 and the broker's "
        "cap of 1024)",
    )
    parser.add_argument(
        "--consume-batch", type=int, default=32, help="PushConsumer consume_message_batch_max_size"
    )
    parser.add_argument(
        "--window",
        type=int,
        default=10_000,
        help="sustained rate: the senders wait while this many messages are sent and not yet "
        "consumed",
    )
    args = parser.parse_args(argv)
    if args.window < args.batch:
        parser.error("--window must hold at least one --batch")
    if args.body_size < 8:
        parser.error("--body-size must be at least 8 (the send time rides in the body)")
    configure_logging("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-endtoend-") as tmp:
        runs = run(measure(args, Path(tmp)))
    print(report(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
