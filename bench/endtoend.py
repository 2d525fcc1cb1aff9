"""End to end as users run it: ``Producer`` and ``PushConsumer`` at once, beside the raw echo and
Redis Streams driven the same way.

A name server, a broker, a gRPC echo server (``bench.echo_server``) and ``redis-server`` run as
separate processes; each row's client (its producer, and the echo's caller) runs in a process
started for that row, so that no row inherits what the rows before it left. Every row moves
batches of ``--batch`` bodies of ``--body-size`` bytes with ``--senders`` producer tasks, each
count in turn (8, 16 and 32 by default): a row's sustained rate is its best over them, each
system at the concurrency it does best with (Redis through redis-py is bound by its producer's
CPU whatever the count; ours, with one send request out per broker, by the send's round trip at
eight), and the report gives the rates at each count too, so the ratios of both systems driven
by the same count are there:

- **echo**: the serialized send request of one batch through the echo server, answered as is:
  what gRPC alone costs (the baseline of ``bench.throughput``), once before our rows and once
  after them, the ratios taken to the mean of the two (a shared host drifts within minutes);
- **aiorocketmq**, a row per ``--transport`` (the clients' ``data_transport``: gRPC calls, or
  remoting frames to the broker's remoting port), ``--pull-batch`` and ``--pull-min`` (that
  fits it; a minimum above one waits at most ``--pull-max-wait-ms``), each on a topic of its own
  (a new group reads a topic from its start: a shared one would count the rows before):
  ``Producer.send_batch`` in every sender task of
  this process while one ``PushConsumer`` in a process of its own (as a consumer application
  runs; its listener given up to ``--consume-batch`` messages per call, its
  ``pull_threshold_for_queue`` raised to four pulls) consumes the same topic. *Sustained*: as
  fast as they go while the backlog (sent but not yet consumed) stays under ``--window``
  messages, for ``--duration`` s, the rate being the messages the listener consumed in that
  time: the highest rate the system keeps up with, the figure OpenMessaging Benchmark calls the
  maximum sustainable rate (a sender waits while the backlog is full, as a producer of a real
  pipeline must: a backlog that grows without end is not a rate anyone can run at). *Open
  loop*, for reference, with the count of the best sustained rate: the senders do not wait,
  and the consumer gets what the broker's one thread leaves it while they keep it busy.
  *Paced*: the senders offer half the (best) sustained rate, and every message's latency from
  the send call to the listener is a sample (its body starts with the send time). Each row also
  gives the CPU time per message of each process in its best sustained phase, and the host's
  steal (what the machine's cores lost to its neighbours meanwhile);
- **Redis Streams, redis-py**, a row per ``--pull-batch`` too: the same with redis-py's
  asyncio client (hiredis parser): each batch one pipeline of XADDs, one consumer in its own
  process reading with XREADGROUP (COUNT = the pull batch of the aiorocketmq row it is compared
  with, BLOCK 100 ms) and acknowledging each read with one XACK;
- **Redis, redis-benchmark**: Redis's own C client pipelining XADDs of the same bodies: the
  server's limit, with no Python in the way (produce only).

Before the rows the free memory is filled with page cache (a file in the run's directory,
kept until the end; ``--no-fill-page-cache`` skips it): a long-running broker's memory is full
of its commit log's pages, and its writes go into pages the kernel reclaims, while on empty
memory they go into pages a virtual machine must first fault in from its host, a cost of the
first gigabytes only (``bench.procs.filled_page_cache``).

``python -m bench.endtoend [--duration S] [--senders N ...] [--batch N] [--body-size B]
[--pull-batch N ...] [--pull-min N ...] [--pull-max-wait-ms MS] [--window N]
[--transport auto|grpc|remoting ...] [--no-fill-page-cache]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.process
import os
import shutil
import signal
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

from aiorocketmq.consumer import ClientConfig, ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.consumer.process_queue import PULL_THRESHOLD_FOR_QUEUE
from aiorocketmq.logs import configure_logging
from aiorocketmq.producer import Producer
from aiorocketmq.protocol.data_path import DATA_TRANSPORTS
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc
from aiorocketmq.runtime import run
from bench.echo_server import ECHO_METHOD
from bench.procs import cpu_seconds, filled_page_cache, host_steal_seconds
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


Clocks = dict[str, Callable[[], float | None]]
"""CPU clocks by the name a row reports them under (a process's, or the host's steal)."""


def read_clocks(clocks: Clocks) -> dict[str, float | None]:
    return {name: clock() for name, clock in clocks.items()}


@dataclass(frozen=True)
class CPUClock:
    """A server process's CPU clock, by pid: what a row needs of a server, and unlike the
    ``Server`` it can be handed to a row's own process."""

    pid: int

    def cpu_seconds(self) -> float | None:
        return cpu_seconds(self.pid)


@dataclass
class Run:
    """One system's figures: sustained and open-loop rates, latency samples at a paced rate,
    and the CPU time per message of each process in the sustained phase."""

    name: str
    saturated: float = 0.0  # sustained: the best of by_senders
    senders: int = 0  # the sender count that gave it (the open loop runs with as many)
    by_senders: dict[int, float] = field(default_factory=dict)  # sustained, per sender count
    pull_batch: int = 0  # the pulls (or Redis reads) of the row, when it has them
    open_loop: float | None = None  # the senders not waiting for the consumer
    paced_rate: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu_us: dict[str, float] = field(default_factory=dict)  # process -> µs per message

    def charge(
        self, before: dict[str, float | None], after: dict[str, float | None], moved: int
    ) -> None:
        """Each clock's seconds from ``before`` to ``after`` (``read_clocks``), per message
        moved, into ``cpu_us`` (a clock unknown here is left out)."""
        for name, now in after.items():
            was = before[name]
            if now is not None and was is not None and moved:
                self.cpu_us[name] = (now - was) / moved * 1e6

    def best(self, senders: int, rate: float) -> bool:
        """Record the sustained ``rate`` with ``senders``; whether it is the best so far."""
        self.by_senders[senders] = rate
        if rate <= self.saturated:
            return False
        self.saturated, self.senders = rate, senders
        return True

    def row(self) -> str:
        cpu = ", ".join(f"{k} {v:.2f}" for k, v in self.cpu_us.items())
        head = f"{self.name:<56} {self.saturated:>11,.0f} {self.senders or '':>7}"
        if not self.latencies:
            return f"{head} {'':>10} {'':>10} {'':>8} {'':>7} {'':>7} {'':>7}  {cpu}"
        lat = self.latencies
        open_loop = "" if self.open_loop is None else f"{self.open_loop:,.0f}"
        return (
            f"{head} {open_loop:>10} {self.paced_rate:>10,.0f} {len(lat):>8} "
            f"{percentile(lat, 50) * 1000:>7.2f} {percentile(lat, 99) * 1000:>7.2f} "
            f"{percentile(lat, 99.9) * 1000:>7.2f}  {cpu}"
        )


_MP = multiprocessing.get_context("spawn")
# The backlog is polled (the count lives in memory another process writes: no event to await),
# at 2 ms: libuv timers count whole milliseconds, and a shorter sleep under uvloop spins.
_POLL_S = 0.002


@dataclass
class Shared:
    """What the producer's side and the consumer's process share: the consumer's count and
    whether it takes latency samples (shared memory, one writer each)."""

    count: Any = field(default_factory=lambda: _MP.Value("q", 0, lock=False))
    sampling: Any = field(default_factory=lambda: _MP.Value("b", 0, lock=False))
    stop: Any = field(default_factory=lambda: _MP.Event())
    ready: Any = field(default_factory=lambda: _MP.Event())


class Consumed:
    """The consumer's side: counts what the listener got, and samples latencies while asked."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.samples: list[float] = []

    def seen(self, bodies: Sequence[bytes]) -> None:
        self.shared.count.value += len(bodies)
        if self.shared.sampling.value:
            now = time.perf_counter()  # CLOCK_MONOTONIC: the sender's clock too
            self.samples.extend(now - _STAMP.unpack_from(b)[0] for b in bodies)


class Backlog:
    """The producer's side: what was sent, what the consumer's process has counted."""

    def __init__(self, shared: Shared, window: int) -> None:
        self.shared = shared
        self.window = window
        self.produced = 0
        self._room = asyncio.Event()
        self._room.set()
        self._watch: asyncio.Task[None] | None = None  # kept: a task nobody holds may be collected

    @property
    def consumed(self) -> int:
        return int(self.shared.count.value)

    def sent(self, n: int) -> None:
        self.produced += n
        if self.produced - self.consumed >= self.window and self._room.is_set():
            self._room.clear()
            self._watch = asyncio.create_task(self._watch_for_room())

    async def _watch_for_room(self) -> None:
        """One poller for all the senders (eight polling would spend the CPU they measure)."""
        while self.produced - self.consumed >= self.window:  # noqa: ASYNC110 (see _POLL_S)
            await asyncio.sleep(_POLL_S)
        self._room.set()

    async def room(self) -> None:
        """Until the backlog is under the window."""
        await self._room.wait()

    async def drain(self, timeout: float = 300.0) -> None:
        """Until everything sent so far was consumed (the next phase would time the backlog)."""
        async with asyncio.timeout(timeout):
            while self.consumed < self.produced:  # noqa: ASYNC110 (see _POLL_S)
                await asyncio.sleep(_POLL_S)


async def saturate(
    senders: int,
    duration: float,
    send: Callable[[], Awaitable[None]],
    backlog: Backlog,
    *,
    bounded: bool = True,
) -> float:
    """Every sender sends as fast as it can for ``duration`` s, waiting while the backlog is at
    the window when ``bounded``: consumed messages per second (after a warm-up of a fifth of
    the time)."""
    stop = False

    async def loop() -> None:
        while not stop:
            if bounded:
                await backlog.room()
            await send()

    tasks = [asyncio.create_task(loop()) for _ in range(senders)]
    await asyncio.sleep(duration / 5)
    c0, t0 = backlog.consumed, time.perf_counter()
    await asyncio.sleep(duration)
    rate = (backlog.consumed - c0) / (time.perf_counter() - t0)
    stop = True
    await asyncio.gather(*tasks)
    return rate


@dataclass
class ConsumerProcess:
    """A consumer running in a process of its own (``target``, which calls
    ``_serve_consumer``), as a consumer application runs beside its producers."""

    proc: multiprocessing.process.BaseProcess
    shared: Shared
    samples: Any  # the receiving end of a pipe: the latency samples, sent at the end

    @classmethod
    def start(cls, target: Callable[..., None], *args: Any) -> ConsumerProcess:
        shared = Shared()
        receive, send = _MP.Pipe(duplex=False)
        proc = _MP.Process(target=target, args=(*args, shared, send), daemon=True)
        proc.start()
        send.close()
        if not shared.ready.wait(60):
            proc.kill()
            raise RuntimeError(f"the consumer process did not start (exit code {proc.exitcode})")
        return cls(proc, shared, receive)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid or 0) or 0.0

    def stop(self) -> list[float]:
        """Stop it (once; later calls return nothing); the latency samples it took."""
        if self.shared.stop.is_set():
            return []
        self.shared.stop.set()
        samples: list[float] = self.samples.recv() if self.samples.poll(60) else []
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
        return samples


def _serve_consumer(
    shared: Shared, send: Any, body: Callable[[Consumed], Coroutine[Any, Any, None]]
) -> None:
    """A consumer process's life: ``body`` runs until the parent says stop; then the samples
    go back through ``send``."""
    configure_logging("ERROR")
    consumed = Consumed(shared)
    try:
        run(body(consumed))
    finally:
        send.send(consumed.samples)
        send.close()


async def _until_stopped(shared: Shared) -> None:
    shared.ready.set()
    await asyncio.to_thread(shared.stop.wait)


def aiorocketmq_consumer(
    ns_addr: str,
    topic: str,
    group: str,
    pull_batch: int,
    pull_min: int,
    max_wait_ms: int,
    consume_batch: int,
    transport: str,
    shared: Shared,
    send: Any,
) -> None:
    """The consumer process of an aiorocketmq row: one ``PushConsumer`` pulling over
    ``transport``."""

    async def body(consumed: Consumed) -> None:
        async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
            consumed.seen([m.body for m in msgs])
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            group,
            ns_addr,
            pull_batch_size=pull_batch,
            pull_min_batch_size=pull_min,
            pull_max_wait_ms=max_wait_ms,
            consume_message_batch_max_size=consume_batch,
            # Room for a few pulls per queue: at RocketMQ's 1,000 a pull of 1,024 trips the
            # flow control at once, and every next pull waits 50 ms (as in RocketMQ).
            pull_threshold_for_queue=max(PULL_THRESHOLD_FOR_QUEUE, 4 * pull_batch),
            client_config=ClientConfig(data_transport=transport),
        )
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            await _until_stopped(shared)
        finally:
            await consumer.shutdown()

    _serve_consumer(shared, send, body)


def redis_consumer(
    port: int, stream: str, group: str, count: int, shared: Shared, send: Any
) -> None:
    """The consumer process of the Redis row: XREADGROUP (``count`` a read) and one XACK a
    read, with redis-py's asyncio client."""

    async def body(consumed: Consumed) -> None:
        import redis.asyncio as aioredis

        reader = aioredis.Redis(port=port)
        shared.ready.set()
        try:
            while not shared.stop.is_set():
                got: Any = await reader.xreadgroup(
                    group, "c1", {stream: ">"}, count=count, block=100
                )
                for _, entries in got or []:
                    consumed.seen([fields[b"b"] for _, fields in entries])
                    await reader.xack(stream, group, *(mid for mid, _ in entries))
        finally:
            await reader.aclose()

    _serve_consumer(shared, send, body)


async def phases(
    args: argparse.Namespace,
    result: Run,
    send: Callable[[], Coroutine[Any, Any, None]],
    consumer: ConsumerProcess,
    backlog: Backlog,
    cpu: Clocks,
) -> None:
    """The sustained rate (with each process's CPU per message), the open-loop one, then the
    paced latencies."""
    # The host's steal too: CPU time the machine's cores lost to its neighbours, per message.
    cpu = {
        **cpu,
        "consumer": consumer.cpu_seconds,
        "producer": time.process_time,
        "host steal": host_steal_seconds,
    }
    for senders in args.senders:
        before = read_clocks(cpu)
        c0 = backlog.consumed
        rate = await saturate(senders, args.duration, send, backlog)
        moved = backlog.consumed - c0
        used = read_clocks(cpu)
        await backlog.drain()
        if result.best(senders, rate):
            result.charge(before, used, moved)
    result.open_loop = await saturate(result.senders, args.duration, send, backlog, bounded=False)
    result.paced_rate = result.saturated / 2
    await backlog.drain()
    await paced(result.paced_rate, args.batch, args.samples, send, backlog)
    result.latencies = consumer.stop()


async def paced(
    rate: float,
    batch: int,
    samples: int,
    send: Callable[[], Coroutine[Any, Any, None]],
    backlog: Backlog,
) -> None:
    """Batches offered at ``rate`` messages per second until ``samples`` messages were
    consumed while the consumer took samples."""
    shared = backlog.shared
    shared.sampling.value = 1
    c0 = backlog.consumed
    interval = batch / rate
    start = time.perf_counter()
    inflight: set[asyncio.Task[None]] = set()
    i = 0
    while backlog.consumed - c0 < samples:
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send())
        inflight.add(task)
        task.add_done_callback(inflight.discard)
        i += 1
    await asyncio.gather(*inflight)
    await backlog.drain()
    shared.sampling.value = 0


def row_topic(transport: str, pull_batch: int, pull_min: int) -> str:
    """Each row its own topic: a consumer group new to a topic reads it from the start, so a
    row sharing one with the rows before it would count their messages as its own."""
    return f"{TOPIC}_{transport}_{pull_batch}_{pull_min}"


def aiorocketmq_row(transport: str, pull_batch: int, pull_min: int, max_wait_ms: int) -> str:
    """The name of the row sending and pulling over ``transport`` whose pulls take up to
    ``pull_batch``, waiting up to ``max_wait_ms`` for ``pull_min`` when that is more than
    one."""
    name = "aiorocketmq" if transport == "grpc" else f"aiorocketmq ({transport})"
    name = f"{name}, pulls of {pull_batch}"
    return f"{name}, min {pull_min} / {max_wait_ms} ms" if pull_min > 1 else name


async def measure_aiorocketmq(
    args: argparse.Namespace,
    ns_addr: str,
    broker: CPUClock,
    bodies: list[bytes],
    transport: str,
    pull_batch: int,
    pull_min: int,
) -> Run:
    """One row: ``Producer.send_batch`` here, a ``PushConsumer`` of its own group pulling
    ``pull_batch`` per call in its own process (the broker holding a pull up to
    ``--pull-max-wait-ms`` for ``pull_min`` messages when that is more than one), both sending
    and pulling over ``transport`` (their ``data_transport``)."""
    name = aiorocketmq_row(transport, pull_batch, pull_min, args.pull_max_wait_ms)
    result = Run(name, pull_batch=pull_batch)
    topic = row_topic(transport, pull_batch, pull_min)
    consumer = ConsumerProcess.start(
        aiorocketmq_consumer,
        ns_addr,
        topic,
        f"bench_endtoend_{transport}_{pull_batch}_{pull_min}",
        pull_batch,
        pull_min,
        args.pull_max_wait_ms,
        args.consume_batch,
        transport,
    )
    backlog = Backlog(consumer.shared, args.window)
    try:
        async with Producer(
            "bench_endtoend_producer", ns_addr, data_transport=transport
        ) as producer:

            async def send() -> None:
                msgs = [Message(topic, b) for b in stamped(bodies)]
                await producer.send_batch(msgs, timeout=30)
                backlog.sent(len(msgs))

            await phases(args, result, send, consumer, backlog, {"broker": broker.cpu_seconds})
    finally:
        consumer.stop()
    return result


def redis_row(count: int) -> str:
    """The name of the Redis Streams row whose reads take ``count`` entries."""
    return f"Redis Streams, redis-py, reads of {count}"


async def measure_redis_py(
    args: argparse.Namespace, port: int, server: CPUClock, bodies: list[bytes], count: int
) -> Run:
    """The same with Redis Streams and redis-py: a pipeline of XADDs per batch here, the
    reader in its own process reading ``count`` entries per XREADGROUP."""
    import redis.asyncio as aioredis

    client = aioredis.Redis(port=port)
    stream, group = f"bench_endtoend_{count}", "g"
    await client.xgroup_create(stream, group, id="$", mkstream=True)
    result = Run(redis_row(count))
    consumer = ConsumerProcess.start(redis_consumer, port, stream, group, count)
    backlog = Backlog(consumer.shared, args.window)
    try:

        async def send() -> None:
            pipe = client.pipeline(transaction=False)
            for b in stamped(bodies):
                pipe.xadd(stream, {"b": b})
            await pipe.execute()
            backlog.sent(len(bodies))

        await phases(args, result, send, consumer, backlog, {"redis-server": server.cpu_seconds})
    finally:
        consumer.stop()
        await client.aclose()
    return result


def redis_benchmark(args: argparse.Namespace, port: int) -> Run:
    """redis-benchmark pipelining XADDs (``--batch`` per round trip, as many clients as the
    largest ``--senders``)."""
    value = "x" * args.body_size
    out = subprocess.run(
        [
            "redis-benchmark",
            "-p",
            str(port),
            "-c",
            str(max(args.senders)),
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


ECHO_ROW = "echo, raw bytes (gRPC alone)"


async def measure_echo(args: argparse.Namespace, work: Path, bodies: list[bytes], when: str) -> Run:
    """The echo row: its server started, driven for ``--duration`` s and stopped (one server
    at a time)."""
    echo_addr = f"127.0.0.1:{_free_port()}"
    with ExitStack() as stack:
        echo_server = stack.enter_context(
            server_process(
                "echo",
                [sys.executable, "-m", "bench.echo_server", "--listen", echo_addr],
                echo_addr,
                work,
            )
        )
        channel = insecure_channel(echo_addr)
        echo = channel.unary_unary(ECHO_METHOD)
        await wait_for(
            "the echo server", echo_server, lambda: answers(lambda: echo(b"", timeout=0.5))
        )
        payload = send_request(TOPIC, 0, bodies).SerializeToString()
        echo_run = Run(f"{ECHO_ROW}, {when}")
        clocks: Clocks = {
            "echo server": echo_server.cpu_seconds,
            "client": time.process_time,
            "host steal": host_steal_seconds,
        }
        for senders in args.senders:
            before = read_clocks(clocks)
            t0 = time.perf_counter()
            moved = await echo_calls(channel, payload, args.batch, senders, args.duration)
            rate = moved / (time.perf_counter() - t0)
            used = read_clocks(clocks)
            if echo_run.best(senders, rate):
                echo_run.charge(before, used, moved)
        await channel.close()
    return echo_run


def _row_child(
    row: Callable[..., Coroutine[Any, Any, Run]], row_args: tuple[Any, ...], send: Any
) -> None:
    """A row's process: the row, its ``Run`` (or what stopped it) sent back through ``send``."""
    configure_logging("ERROR")
    try:
        send.send(run(row(*row_args)))
    except Exception as e:  # handed to the parent, which raises it
        send.send(RuntimeError(f"{getattr(row, '__name__', row)}: {type(e).__name__}: {e}"))
    finally:
        send.close()


async def fresh(row: Callable[..., Coroutine[Any, Any, Run]], *row_args: Any) -> Run:
    """``row(*row_args)`` in a process started for it, so that every row's producer starts
    from the same state (run in this process after our rows, redis-py's producer took 23.1 µs
    a message, 41,961 msg/s; in processes of their own, within the hour, 19.0 to 20.1 µs)."""
    receive, send = _MP.Pipe(duplex=False)
    # Not a daemon: the row starts its consumer's process.
    proc = _MP.Process(target=_row_child, args=(row, row_args, send))
    proc.start()
    send.close()
    try:
        got = await asyncio.to_thread(receive.recv)
    except EOFError:
        got = RuntimeError(f"{getattr(row, '__name__', row)}: its process ended with no result")
    except BaseException:
        # Stopped here (cancelled, interrupted): the row stops too, its consumer's process
        # with it (SIGINT unwinds the row as Ctrl-C would), then is killed if it lingers.
        if proc.pid is not None and proc.is_alive():
            os.kill(proc.pid, signal.SIGINT)
        await asyncio.to_thread(proc.join, 30)
        if proc.is_alive():
            proc.kill()
        raise
    finally:
        await asyncio.to_thread(proc.join)
    if isinstance(got, Exception):
        raise got
    assert isinstance(got, Run)
    return got


async def measure(args: argparse.Namespace, work: Path) -> list[Run]:
    ns_addr, broker_addr, remoting_addr = (f"127.0.0.1:{_free_port()}" for _ in range(3))
    redis_port = _free_port()
    bodies = make_bodies(args.batch, args.body_size)
    # The echo runs before and after our rows: a shared host's speed drifts within minutes,
    # and the ratio is taken to the mean of the two.
    runs = [await fresh(measure_echo, args, work, bodies, "before")]
    with ExitStack() as stack:
        _, broker = start_broker(stack, ns_addr, broker_addr, work, remoting_addr)
        broker_channel = insecure_channel(broker_addr)
        stub = broker_pb2_grpc.BrokerStub(broker_channel)
        await wait_for(
            "the broker",
            broker,
            lambda: answers(
                lambda: stub.GetAllTopicConfig(broker_pb2.GetAllTopicConfigRequest(), timeout=0.5)
            ),
        )
        rows = [
            (transport, pull_batch, pull_min)
            for transport in args.transport
            for pull_batch in args.pull_batch
            for pull_min in sorted({m for m in args.pull_min if m <= pull_batch} or {1})
        ]
        for row in rows:
            await create_topic(stub, row_topic(*row), QUEUES)
        await asyncio.sleep(1.5)  # the broker registers the topics with the name server
        for row in rows:
            runs.append(
                await fresh(
                    measure_aiorocketmq, args, ns_addr, CPUClock(broker.proc.pid), bodies, *row
                )
            )
        await broker_channel.close()
        stack.close()
        runs.append(await fresh(measure_echo, args, work, bodies, "after"))

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
        for count in args.pull_batch:
            runs.append(
                await fresh(
                    measure_redis_py, args, redis_port, CPUClock(redis.proc.pid), bodies, count
                )
            )
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


def _mean(runs: Sequence[Run], name: str) -> Run | None:
    """A row whose rates are the mean of ``runs``' at each sender count (the echo before and
    after ours)."""
    if not runs:
        return None
    mean = Run(name)
    for senders in runs[0].by_senders:
        mean.best(senders, sum(r.by_senders.get(senders, 0.0) for r in runs) / len(runs))
    return mean


def report(runs: list[Run], args: argparse.Namespace) -> str:
    counts = ", ".join(map(str, args.senders))
    lines = [
        f"End to end: batches of {args.batch} x {args.body_size} B, senders {counts} (a row's "
        "sustained rate is its best of these); Producer.send_batch + PushConsumer, listener "
        f"batches of {args.consume_batch}; sustained: backlog under {args.window:,} messages",
        f"{'':<56} {'sustained':>11} {'senders':>7} {'open loop':>10} {'paced':>10} "
        f"{'samples':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99.9':>7}  CPU µs per message, sustained",
        f"{'':<56} {'msg/s':>11} {'':>7} {'msg/s':>10} {'msg/s':>10}",
    ]
    lines += [r.row() for r in runs]
    swept = [r for r in runs if len(r.by_senders) > 1]
    if swept:
        lines.append("")
        lines.append(
            f"{'sustained msg/s by senders':<56} " + " ".join(f"{n:>11}" for n in args.senders)
        )
        lines += [
            f"{r.name:<56} " + " ".join(f"{r.by_senders.get(n, 0):>11,.0f}" for n in args.senders)
            for r in swept
        ]
        lines.append("")
    echo = _mean([r for r in runs if r.name.startswith(ECHO_ROW)], f"{ECHO_ROW}, mean")
    by_name = {r.name: r for r in runs}
    for ours in (r for r in runs if r.name.startswith("aiorocketmq")):
        # Redis with the same batching: its reads take as many entries as our pulls.
        redis_py = by_name.get(redis_row(ours.pull_batch))
        for peer, target in ((echo, TARGET_ECHO), (redis_py, TARGET_REDIS)):
            if peer is None or not peer.saturated:
                continue
            same = " / ".join(
                f"{ours.by_senders[n] / peer.by_senders[n]:.2f}"
                for n in args.senders
                if peer.by_senders.get(n) and n in ours.by_senders
            )
            ratio = ours.saturated / peer.saturated
            verdict = "met" if ratio >= target else "NOT met"
            lines.append(
                f"{ours.name} / {peer.name}: {ratio:.2f} at each one's best "
                f"(target >= {target}: {verdict}); with the same senders ({counts}): {same}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.endtoend",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=10.0, help="saturated phase, s")
    parser.add_argument(
        "--senders",
        type=int,
        nargs="+",
        default=[8, 16, 32],
        help="producer tasks: the sustained phase runs with each count, a row's rate is its best "
        "(the maximum sustainable rate), and the open loop runs with that count",
    )
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
        "--pull-min",
        type=int,
        nargs="+",
        default=[1, 512],
        help="PushConsumer pull_min_batch_size, a row each per pull batch it fits (default: "
        "1, answered at once as in RocketMQ, and 512)",
    )
    parser.add_argument(
        "--pull-max-wait-ms",
        type=int,
        default=20,
        help="PushConsumer pull_max_wait_ms of the rows whose --pull-min is more than 1",
    )
    parser.add_argument(
        "--consume-batch", type=int, default=32, help="PushConsumer consume_message_batch_max_size"
    )
    parser.add_argument(
        "--transport",
        nargs="+",
        choices=DATA_TRANSPORTS,
        default=["grpc", "remoting"],
        help="the data_transport of the producer and the consumer, a row each (default: grpc "
        "and remoting; auto, the clients' default, takes remoting here: the broker serves it)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=10_000,
        help="sustained rate: the senders wait while this many messages are sent and not yet "
        "consumed",
    )
    parser.add_argument(
        "--no-fill-page-cache",
        dest="fill_page_cache",
        action="store_false",
        help="start on the memory as it is, not filled with page cache first (the broker's "
        "commit log then grows the page cache during the rows: on a virtual machine each new "
        "page first costs a fault to the host)",
    )
    args = parser.parse_args(argv)
    if args.window < args.batch:
        parser.error("--window must hold at least one --batch")
    if args.body_size < 8:
        parser.error("--body-size must be at least 8 (the send time rides in the body)")
    configure_logging("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-endtoend-") as tmp:
        with ExitStack() as fill:
            if args.fill_page_cache:
                started = time.perf_counter()
                filled = fill.enter_context(filled_page_cache(Path(tmp)))
                print(
                    f"page cache filled with {filled / 1024**3:.1f} GiB in "
                    f"{time.perf_counter() - started:.0f} s: the broker writes into reclaimed "
                    "pages, as a long-running one does",
                    flush=True,
                )
            runs = run(measure(args, Path(tmp)))
    print(report(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
