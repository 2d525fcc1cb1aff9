"""Broker data path throughput, against a plain gRPC echo server on the same machine.

Starts a name server, a broker (ASYNC_FLUSH, the default) and an echo server
(``bench.echo_server``) as separate processes, then measures, with the same batch (100 bodies of
256 bytes) and the same concurrency (8 callers, one call in flight each):

- **produce**: SendMessage over raw stubs (the batch as RocketMQ's batch body, asking for the
  compact result: one answer per batch), and ``Producer.send_batch`` (route, queue selection,
  the batch body's encoding included), in messages per second;
- **pull**: every message just produced is pulled back, queue by queue (one puller per queue),
  with RocketMQ's default ``max_msg_nums`` of 32 and with 1024 (the broker's
  ``max_pull_msg_nums`` cap), as raw records (``raw_records``) that this process decodes into
  ``MessageExt`` with ``aiorocketmq.protocol.record.decode_records``;
- **end to end**: messages produced then pulled back / (produce time + pull time);
- **echo**: the same request bytes, echoed unchanged by a grpc.aio server with a generic
  handler: what gRPC alone costs per message (the baseline); and the batch as 100 protobuf
  messages, parsed and serialized on both sides (gRPC plus protobuf, for reference);
- the ratio end to end / echo baseline, against the target of 40 %.

Each timed phase also reports the server process's CPU time per message (from ``/proc``, on
Linux), which says where the time goes better than the wall clock on a shared machine. Rates
vary run to run: compare within one run. ``--legacy`` adds the wire's older paths for
comparison: sends of protobuf messages, sends answered with one result per message, pulls
answered with decoded messages.

``python -m bench.throughput [--duration S] [--senders N] [--batch N] [--body-size B] [--legacy]``
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from aiorocketmq.logs import configure_logging
from aiorocketmq.producer import Producer
from aiorocketmq.protocol.batch import encode_batch
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.record import decode_records
from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc, common_pb2
from aiorocketmq.runtime import run
from bench.echo_server import ECHO_METHOD, ECHO_SEND_METHOD
from bench.procs import cpu_seconds

__all__ = ["main"]

TARGET_RATIO = 0.40
TOPIC_RAW = "BenchThroughputRaw"
TOPIC_PRODUCER = "BenchThroughputProducer"
PULL_DEFAULT = 32  # RocketMQ's pullBatchSize
PULL_LARGE = 1024  # the broker's max_pull_msg_nums


# ---- processes ---------------------------------------------------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """A server process we started: its name, address, process and log files."""

    name: str
    address: str
    proc: subprocess.Popen[bytes]
    log_dir: Path

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            err = (self.log_dir / f"{self.name}.err").read_text(errors="replace")
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{err[-2000:]}")

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the process so far (Linux ``/proc``), None elsewhere."""
        return cpu_seconds(self.proc.pid)


@contextmanager
def server_process(name: str, argv: list[str], address: str, log_dir: Path) -> Iterator[Server]:
    """Run ``argv`` (output in ``log_dir``); stop it on exit: SIGTERM, then SIGKILL after 10 s."""
    with (
        (log_dir / f"{name}.out").open("wb") as out,
        (log_dir / f"{name}.err").open("wb") as err,
    ):
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        try:
            yield Server(name, address, proc, log_dir)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def start_broker(
    stack: ExitStack, ns_addr: str, broker_addr: str, work_dir: Path, remoting_addr: str = ""
) -> tuple[Server, Server]:
    """A name server and a broker (default settings, store under ``work_dir``; serving remoting
    at ``remoting_addr`` too when given) as processes, stopped when ``stack`` closes."""
    py = sys.executable
    ns = stack.enter_context(
        server_process(
            "mqnamesrv",
            [py, "-m", "aiorocketmq.nameserver", "--listen", ns_addr, "--log-level", "WARNING"],
            ns_addr,
            work_dir,
        )
    )
    broker = stack.enter_context(
        server_process(
            "mqbroker",
            [
                py,
                "-m",
                "aiorocketmq.broker",
                "-n",
                ns_addr,
                "--listen",
                broker_addr,
                "--store-dir",
                str(work_dir / "store"),
                "--broker-name",
                "bench-broker",
                "--log-level",
                "WARNING",
                *(["--remoting-listen", remoting_addr] if remoting_addr else []),
            ],
            broker_addr,
            work_dir,
        )
    )
    return ns, broker


async def wait_for(
    what: str, server: Server, probe: Callable[[], Awaitable[bool]], timeout: float = 30.0
) -> None:
    """Poll ``probe`` until true, failing after ``timeout`` s or when the process died."""
    deadline = time.monotonic() + timeout
    while True:
        server.check_alive()
        if await probe():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def answers(call: Callable[[], Awaitable[Any]]) -> bool:
    try:
        await call()
    except grpc.aio.AioRpcError:
        return False
    return True


# ---- measurements ------------------------------------------------------------------------------
@dataclass
class Figure:
    """One timed phase: how many messages in how long, and the CPU it took."""

    name: str
    messages: int
    seconds: float
    server_cpu: float | None  # CPU seconds of the server process during the phase
    client_cpu: float  # CPU seconds of this (client) process during the phase

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


async def timed(name: str, server: Server, phase: Callable[[], Awaitable[int]]) -> Figure:
    """Run ``phase`` (which answers how many messages it moved) and measure it."""
    cpu0, client0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
    messages = await phase()
    seconds = time.perf_counter() - t0
    cpu1, client1 = server.cpu_seconds(), time.process_time()
    server_cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    return Figure(name, messages, seconds, server_cpu, client1 - client0)


async def for_duration(
    senders: int, duration: float, send_one: Callable[[int, int], Awaitable[int]]
) -> int:
    """``senders`` tasks each calling ``send_one(sender, i)`` in turn until ``duration`` s."""
    deadline = time.monotonic() + duration

    async def loop(sender: int) -> int:
        total = 0
        i = sender
        while time.monotonic() < deadline:
            total += await send_one(sender, i)
            i += 1
        return total

    return sum(await asyncio.gather(*(loop(s) for s in range(senders))))


def make_bodies(batch: int, body_size: int) -> list[bytes]:
    return [os.urandom(body_size) for _ in range(batch)]


def send_request(
    topic: str, queue_id: int, bodies: list[bytes], *, compact: bool = True, body: bool = True
) -> broker_pb2.SendMessageRequest:
    """A send of ``bodies``: as a batch body (what ``Producer`` sends) or protobuf messages."""
    request = broker_pb2.SendMessageRequest(
        producer_group="bench-pg",
        topic=topic,
        queue_id=queue_id,
        born_host="127.0.0.1:0",
        compact_result=compact,
    )
    if body:
        request.batch_body = encode_batch([Message(topic, b) for b in bodies])
    else:
        request.messages.extend(common_pb2.Message(topic=topic, body=b) for b in bodies)
    return request


async def produce_raw(
    stub: Any,
    topic: str,
    queues: int,
    senders: int,
    bodies: list[bytes],
    duration: float,
    *,
    compact: bool = True,
    body: bool = True,
) -> int:
    """SendMessage over the stub, each sender cycling over the queues."""
    requests = [send_request(topic, q, bodies, compact=compact, body=body) for q in range(queues)]

    async def send_one(sender: int, i: int) -> int:
        response = await stub.SendMessage(requests[i % queues], timeout=30)
        stored = len(response.commit_log_offsets) if compact else len(response.results)
        if response.send_status != broker_pb2.SEND_OK or stored != len(bodies):
            raise RuntimeError(f"unexpected send response: {response.send_status}")
        return stored

    return await for_duration(senders, duration, send_one)


async def produce_with_producer(
    producer: Producer, topic: str, senders: int, bodies: list[bytes], duration: float
) -> int:
    """``Producer.send_batch`` with RocketMQ's queue selection (round robin)."""
    messages = [Message(topic, b) for b in bodies]

    async def send_one(sender: int, i: int) -> int:
        result = await producer.send_batch(messages, timeout=30)
        return len(result.msg_ids)

    return await for_duration(senders, duration, send_one)


async def pull_all(
    stub: Any, topic: str, max_offsets: dict[int, int], max_nums: int, *, raw: bool = True
) -> int:
    """Pull every queue from 0 to its max offset, one puller per queue; how many were pulled.

    ``raw``: ask for the records and decode them here (into ``MessageExt``, as a consumer).
    """

    async def pull_queue(queue_id: int, end: int) -> int:
        offset, pulled = 0, 0
        while offset < end:
            response = await stub.PullMessage(
                broker_pb2.PullMessageRequest(
                    consumer_group="bench-cg",
                    topic=topic,
                    queue_id=queue_id,
                    queue_offset=offset,
                    max_msg_nums=max_nums,
                    has_subscription=True,
                    sub_expression="*",
                    raw_records=raw,
                ),
                timeout=30,
            )
            if response.status != broker_pb2.FOUND:
                raise RuntimeError(f"pull of queue {queue_id} at {offset}: {response.status}")
            if raw:
                pulled += len(decode_records(response.records, response.broker_name))
            else:
                pulled += len(response.messages)
            offset = response.next_begin_offset
        return pulled

    counts = await asyncio.gather(*(pull_queue(q, end) for q, end in max_offsets.items()))
    return sum(counts)


async def echo_calls(
    channel: grpc.aio.Channel, payload: bytes, batch: int, senders: int, duration: float
) -> int:
    """The same request bytes through the echo server; ``batch`` messages per call."""
    echo = channel.unary_unary(ECHO_METHOD)

    async def send_one(sender: int, i: int) -> int:
        answer = await echo(payload, timeout=30)
        if len(answer) != len(payload):
            raise RuntimeError("the echo server answered other bytes")
        return batch

    return await for_duration(senders, duration, send_one)


async def echo_send_calls(
    channel: grpc.aio.Channel,
    request: broker_pb2.SendMessageRequest,
    senders: int,
    duration: float,
) -> int:
    """``request`` through the protobuf echo: serialized, parsed, and back, on both sides."""
    echo = channel.unary_unary(
        ECHO_SEND_METHOD,
        request_serializer=broker_pb2.SendMessageRequest.SerializeToString,
        response_deserializer=broker_pb2.SendMessageRequest.FromString,
    )

    async def send_one(sender: int, i: int) -> int:
        answer = await echo(request, timeout=30)
        return len(answer.messages)

    return await for_duration(senders, duration, send_one)


async def max_offsets_of(stub: Any, topic: str) -> dict[int, int]:
    stats = await stub.GetTopicStatsInfo(
        broker_pb2.GetTopicStatsInfoRequest(topic=topic), timeout=10
    )
    return {o.message_queue.queue_id: o.max_offset for o in stats.offsets}


async def create_topic(stub: Any, topic: str, queues: int) -> None:
    await stub.UpdateAndCreateTopic(
        broker_pb2.UpdateAndCreateTopicRequest(
            topic_config=common_pb2.TopicConfig(
                topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6
            )
        ),
        timeout=10,
    )


# ---- the run -----------------------------------------------------------------------------------
@dataclass
class Results:
    echo: Figure
    echo_protobuf: Figure
    produce_raw: Figure
    pull_default: Figure
    pull_large: Figure
    produce_producer: Figure
    legacy: list[Figure]  # with --legacy: the wire's older paths, for comparison

    def end_to_end(self, pull: Figure) -> Figure:
        return Figure(
            f"end to end (produce + pull {pull.name.rsplit(' ', 1)[-1]})",
            self.produce_raw.messages,
            self.produce_raw.seconds + pull.seconds,
            None
            if self.produce_raw.server_cpu is None or pull.server_cpu is None
            else self.produce_raw.server_cpu + pull.server_cpu,
            self.produce_raw.client_cpu + pull.client_cpu,
        )


async def measure(args: argparse.Namespace, work_dir: Path) -> Results:
    py = sys.executable
    ns_addr = f"127.0.0.1:{_free_port()}"
    broker_addr = f"127.0.0.1:{_free_port()}"
    echo_addr = f"127.0.0.1:{_free_port()}"
    bodies = make_bodies(args.batch, args.body_size)
    with ExitStack() as stack:
        ns, broker = start_broker(stack, ns_addr, broker_addr, work_dir)
        echo_server = stack.enter_context(
            server_process(
                "echo",
                [py, "-m", "bench.echo_server", "--listen", echo_addr],
                echo_addr,
                work_dir,
            )
        )
        broker_channel = insecure_channel(broker_addr)
        echo_channel = insecure_channel(echo_addr)
        producer = Producer("bench-producer", ns_addr)
        try:
            stub = broker_pb2_grpc.BrokerStub(broker_channel)
            echo = echo_channel.unary_unary(ECHO_METHOD)
            await wait_for(
                "the echo server", echo_server, lambda: answers(lambda: echo(b"", timeout=0.5))
            )
            await wait_for(
                "the broker",
                broker,
                lambda: answers(
                    lambda: stub.GetAllTopicConfig(
                        broker_pb2.GetAllTopicConfigRequest(), timeout=0.5
                    )
                ),
            )
            for topic in (TOPIC_RAW, TOPIC_PRODUCER):
                await create_topic(stub, topic, args.queues)

            # (c) the baseline first, while the broker is idle.
            request = send_request(TOPIC_RAW, 0, bodies)
            payload = request.SerializeToString()
            await echo_calls(echo_channel, payload, args.batch, args.senders, args.warmup)
            echo_figure = await timed(
                "echo, raw bytes (the baseline)",
                echo_server,
                lambda: echo_calls(echo_channel, payload, args.batch, args.senders, args.duration),
            )
            as_messages = send_request(TOPIC_RAW, 0, bodies, body=False)
            echo_protobuf = await timed(
                "echo, protobuf messages parsed",
                echo_server,
                lambda: echo_send_calls(echo_channel, as_messages, args.senders, args.duration),
            )

            # (a) produce over raw stubs, then (b) pull everything back. (The warm-up writes to
            # the other topic, so the pulls read exactly what the timed phase sent.)
            await produce_raw(stub, TOPIC_PRODUCER, args.queues, args.senders, bodies, args.warmup)
            raw = await timed(
                "produce, raw stub SendMessage",
                broker,
                lambda: produce_raw(
                    stub, TOPIC_RAW, args.queues, args.senders, bodies, args.duration
                ),
            )
            max_offsets = await max_offsets_of(stub, TOPIC_RAW)
            if sum(max_offsets.values()) != raw.messages:
                raise RuntimeError(f"sent {raw.messages}, the broker holds {max_offsets}")
            pulls = []
            for max_nums in (PULL_DEFAULT, PULL_LARGE):
                figure = await timed(
                    f"pull, max_msg_nums {max_nums}",
                    broker,
                    functools.partial(pull_all, stub, TOPIC_RAW, max_offsets, max_nums),
                )
                if figure.messages != raw.messages:
                    raise RuntimeError(f"pulled {figure.messages} of {raw.messages}")
                pulls.append(figure)
            legacy = []
            if args.legacy:  # the same pulls answered with decoded messages
                for max_nums in (PULL_DEFAULT, PULL_LARGE):
                    figure = await timed(
                        f"pull {max_nums}, messages (legacy)",
                        broker,
                        functools.partial(
                            pull_all, stub, TOPIC_RAW, max_offsets, max_nums, raw=False
                        ),
                    )
                    if figure.messages != raw.messages:
                        raise RuntimeError(f"pulled {figure.messages} of {raw.messages}")
                    legacy.append(figure)

            # (a) produce through the Producer (routes from the name server).
            ns.check_alive()
            await producer.start()
            await wait_for(
                "the topic's route",
                ns,
                lambda: routed(producer, TOPIC_PRODUCER, args.queues),
            )
            await produce_with_producer(producer, TOPIC_PRODUCER, args.senders, bodies, 0.5)
            with_producer = await timed(
                "produce, Producer.send_batch",
                broker,
                lambda: produce_with_producer(
                    producer, TOPIC_PRODUCER, args.senders, bodies, args.duration
                ),
            )
            if args.legacy:  # sends of protobuf messages; sends answered per message
                legacy.insert(
                    0,
                    await timed(
                        "produce, protobuf messages (legacy)",
                        broker,
                        lambda: produce_raw(
                            stub,
                            TOPIC_PRODUCER,
                            args.queues,
                            args.senders,
                            bodies,
                            args.duration,
                            body=False,
                        ),
                    ),
                )
                legacy.insert(
                    1,
                    await timed(
                        "produce, per-message results (legacy)",
                        broker,
                        lambda: produce_raw(
                            stub,
                            TOPIC_PRODUCER,
                            args.queues,
                            args.senders,
                            bodies,
                            args.duration,
                            compact=False,
                        ),
                    ),
                )
        finally:
            await producer.shutdown()
            await broker_channel.close()
            await echo_channel.close()
    return Results(echo_figure, echo_protobuf, raw, pulls[0], pulls[1], with_producer, legacy)


async def routed(producer: Producer, topic: str, queues: int) -> bool:
    try:
        info = await producer.update_topic_route(topic)
    except MQError:
        return False
    return len(info.message_queue_list) >= queues


# ---- the report --------------------------------------------------------------------------------
def _row(f: Figure) -> str:
    per_msg = "" if f.server_cpu is None else f"{f.server_cpu / f.messages * 1e6:8.1f}"
    cpu_pct = "" if f.server_cpu is None else f"{100 * f.server_cpu / f.seconds:5.0f}%"
    client = f"{f.client_cpu / f.messages * 1e6:8.1f}"
    return (
        f"{f.name:<38} {f.messages:>9,} {f.seconds:>7.2f} {f.rate:>11,.0f} "
        f"{cpu_pct:>7} {per_msg:>8} {client:>8}"
    )


def report(results: Results, args: argparse.Namespace) -> str:
    e2e_default = results.end_to_end(results.pull_default)
    e2e_large = results.end_to_end(results.pull_large)
    lines = [
        f"Broker data path: {args.batch} x {args.body_size}-byte bodies per call, "
        f"{args.senders} callers, {args.queues} queues, {os.cpu_count()} cores",
        "",
        f"{'phase':<38} {'messages':>9} {'seconds':>7} {'msg/s':>11} "
        f"{'srv cpu':>7} {'srv µs/m':>8} {'cli µs/m':>8}",
        "-" * 95,
    ]
    for f in (
        results.echo,
        results.echo_protobuf,
        results.produce_raw,
        results.produce_producer,
        results.pull_default,
        results.pull_large,
        e2e_default,
        e2e_large,
        *results.legacy,
    ):
        lines.append(_row(f))
    lines.append("")
    baseline = results.echo.rate
    for f in (e2e_default, e2e_large):
        ratio = f.rate / baseline if baseline else 0.0
        verdict = "meets" if ratio >= TARGET_RATIO else "BELOW"
        lines.append(
            f"{f.name}: {ratio:6.1%} of the echo baseline ({verdict} the {TARGET_RATIO:.0%} target)"
        )
    echo_cpu = results.echo.server_cpu
    if echo_cpu is not None and echo_cpu < 0.9 * results.echo.seconds:
        lines.append(
            f"(the echo server had {echo_cpu / results.echo.seconds:.0%} of a core: the machine "
            "was busy, the baseline is low and these ratios are too high; run again)"
        )
    lines.append(
        "(srv = the server process of the phase: echo server or broker; cli = this process)"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per timed send phase")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per target")
    p.add_argument("--senders", type=int, default=8, help="concurrent callers")
    p.add_argument("--batch", type=int, default=100, help="messages per call")
    p.add_argument("--body-size", type=int, default=256, help="bytes per message body")
    p.add_argument("--queues", type=int, default=8, help="queues of the benchmark topics")
    p.add_argument(
        "--legacy",
        action="store_true",
        help="also time the older wire paths (per-message send results, decoded pulls)",
    )
    args = p.parse_args(argv)
    for name in ("duration", "senders", "batch", "body_size", "queues"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING")
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        try:
            results = run(measure(args, Path(tmp)))
        except RuntimeError as e:
            print(f"bench.throughput: {e}", file=sys.stderr)
            return 1
    print(report(results, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
