"""One process of ``bench.rebalance``'s scale harness: it hosts many push consumers of a group.

Each consumer is a ``PushConsumer`` with its own instance name, so its own client instance
(its own client id, channel streams, heartbeats and rebalance), as a separate RocketMQ client
would have; the instances of a process share their gRPC connections (``share_connections``),
one per broker and name server, as the consumers of one RocketMQ ``MQClientInstance`` do. The
controller drives it over stdin and reads what happens from stdout, one line each:

- in ``start NAME...``: start those consumers (a few at a time); out ``S NAME CLIENT_ID T``
- in ``stop NAME``: shut one down (a graceful leave); out ``X NAME T`` once it returned
- in ``quit``: shut everything down and exit
- out ``E T CLIENT_ID + QUEUE`` / ``E T CLIENT_ID - QUEUE``: the protocol trace's queue_added
  and queue_dropped, as they are recorded (``T`` is wall-clock seconds, shared by the processes
  of one machine; ``QUEUE`` is ``broker:queue_id`` of the one topic)
- with ``--notified``, out ``N T CLIENT_ID BROKER``: a consumer read a NOTIFY_CONSUMER_IDS_CHANGED
- with ``--stats S``, every S seconds a line on stderr: notifications received, rebalance
  passes that made an allocation, and how many distinct memberships those used (each one an
  allocation this process computes)

``python -m bench.rebalance_worker -n NAMESRV -g GROUP -t TOPIC [--strategy S] [--handoff H]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.consumer.allocate import strategy_by_name
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.trace import tracer

STARTS_AT_ONCE = 32
FLUSH_S = 0.01  # the longest a line waits before the controller can read it
START_ATTEMPTS = 5
_MARK = {"queue_added": "+", "queue_dropped": "-"}


async def _accept(
    msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def queue_key(mq: MessageQueue) -> str:
    """How a queue of the one topic is named on the wire between worker and controller."""
    return f"{mq.broker_name}:{mq.queue_id}"


def option_value(option: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, value): an int, a float, a bool (true/false) or the string."""
    key, sep, text = option.partition("=")
    if not sep or not key:
        raise SystemExit(f"--option needs KEY=VALUE, not {option!r}")
    value: object = text
    if text.lower() in ("true", "false"):
        value = text.lower() == "true"
    else:
        for kind in (int, float):
            try:
                value = kind(text)
                break
            except ValueError:
                pass
    return key, value


class Worker:
    """The consumers of this process, and the lines it writes about them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        options: dict[str, Any] = dict(option_value(o) for o in args.option)
        # The ClientConfig fields among them (batch_acquires=false) go to the client config.
        client_fields = {f.name for f in fields(ClientConfig)}
        self.client_options = {k: v for k, v in options.items() if k in client_fields}
        self.options = {k: v for k, v in options.items() if k not in client_fields}
        self.consumers: dict[str, PushConsumer] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.starting = asyncio.Semaphore(STARTS_AT_ONCE)
        self.notified = 0
        self.passes = 0
        self.memberships: set[int] = set()
        self.lag_max = 0.0
        self._lines: list[str] = []
        # A queue's str() as the trace records it -> its name on the wire (None: another topic).
        self._keys: dict[str, str | None] = {}
        self._flush_scheduled = False

    def write(self, line: str) -> None:
        """Queue a line; the lines go out together within ``FLUSH_S``. Every line carries
        the time of its event, so the wait delays only when the controller reads it, not what
        it measures; a write and a read per line cost the processes being measured a system
        call and a wake-up each, thousands per change at 1,000 consumers."""
        self._lines.append(line)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._lines:
            sys.stdout.write("\n".join(self._lines) + "\n")
            sys.stdout.flush()
            self._lines.clear()

    def on_trace(self, rec: dict[str, Any]) -> None:
        event = rec["event"]
        if event == "notify_received":
            self.notified += 1
            if self.args.notified:
                self.write(f"N {time.time():.4f} {rec['client_id']} {rec.get('addr') or '-'}")
        elif event == "rebalance_result":
            self.passes += 1
            self.memberships.add(hash(tuple(rec["cid_all"])))
        mark = _MARK.get(event)
        if mark is None:
            return
        text = str(rec.get("mq"))
        key = self._keys.get(text, "")
        if key == "":  # the first event of this queue: parsed once (3.6 us), then looked up
            mq = MessageQueue.parse(text)
            key = self._keys[text] = (
                queue_key(mq) if mq is not None and mq.topic == self.args.topic else None
            )
        if key is not None:
            self.write(f"E {time.time():.4f} {rec['client_id']} {mark} {key}")

    async def start(self, name: str) -> None:
        """Start ``name``; a start that fails (a deadline on a saturated machine) is reported
        on stderr and tried again with a new consumer, as an operator would restart it."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                await self._start_once(name)
                return
            except MQError as e:
                print(f"start of {name} failed (attempt {attempt}): {e}", file=sys.stderr)
                failed = self.consumers.pop(name, None)
                if failed is not None:
                    await failed.shutdown()
                await asyncio.sleep(attempt)
        print(f"start of {name} gave up after {START_ATTEMPTS} attempts", file=sys.stderr)

    async def _start_once(self, name: str) -> None:
        async with self.starting:
            c = PushConsumer(
                self.args.group,
                self.args.namesrv,
                instance_name=name,
                allocate_strategy=strategy_by_name(self.args.strategy),
                handoff=self.args.handoff,
                client_config=ClientConfig(share_connections=True, **self.client_options),
                **self.options,
            )
            c.subscribe(self.args.topic, "*")
            c.register_message_listener(_accept)
            self.consumers[name] = c
            await c.start()
            self.write(f"S {name} {c.client_id} {time.time():.4f}")
            self.flush()  # the controller waits for it (reply_ms)

    async def stop(self, name: str) -> None:
        c = self.consumers.pop(name)
        await c.shutdown()
        self.write(f"X {name} {time.time():.4f}")
        self.flush()

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def probe_lag(self) -> None:
        """How late the event loop runs a 0.1 s timer: how far behind this process is."""
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(0.1)
            self.lag_max = max(self.lag_max, loop.time() - t0 - 0.1)

    def _gc_timer(self, phase: str, info: dict[str, int]) -> None:
        """A ``gc.callbacks`` entry: the longest pause of each generation's collections."""
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        gen = info.get("generation", 0)
        pause = time.perf_counter() - self._gc_started
        self.gc_max[gen] = max(self.gc_max.get(gen, 0.0), pause)
        self.gc_time += pause

    async def report(self, every_s: float) -> None:
        """The ``--stats`` lines (counts since the last line)."""
        self.spawn(self.probe_lag())
        self.gc_max: dict[int, float] = {}
        self.gc_time = 0.0
        self._gc_started = 0.0
        gc.callbacks.append(self._gc_timer)
        while True:
            await asyncio.sleep(every_s)
            reopened = sum(
                max(0, ch.opened_count - 1)
                for c in self.consumers.values()
                if c._impl.client is not None
                for ch in c._impl.client.channels.values()
            )
            print(
                f"worker {self.args.stats_name}: {len(self.consumers)} consumers "
                f"({reopened} channel reopens so far); in {every_s:.0f} s "
                f"{self.notified} notifications, {self.passes} allocating passes, "
                f"{len(self.memberships)} memberships, event loop up to {self.lag_max:.2f} s late; "
                f"garbage collection {self.gc_time:.2f} s, longest pause by generation "
                + ", ".join(f"{g}: {self.gc_max[g] * 1000:.0f} ms" for g in sorted(self.gc_max)),
                file=sys.stderr,
                flush=True,
            )
            self.notified = self.passes = 0
            self.lag_max = 0.0
            self.gc_max.clear()
            self.gc_time = 0.0
            self.memberships.clear()

    async def run(self) -> None:
        # Only what the controller and the stats read: the other events (grants, releases,
        # commits) would be built for nothing in the processes being measured.
        events = {*_MARK}
        if self.args.notified or self.args.stats:
            events.add("notify_received")
        if self.args.stats:
            events.add("rebalance_result")
        tracer.subscribe(self.on_trace, events)
        if self.args.stats:
            self.spawn(self.report(self.args.stats))
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        try:
            while line := (await reader.readline()).decode():
                cmd, *names = line.split()
                if cmd == "start":
                    for name in names:
                        self.spawn(self.start(name))
                elif cmd == "stop":
                    for name in names:
                        self.spawn(self.stop(name))
                elif cmd == "quit":
                    break
        finally:
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await asyncio.gather(
                *(c.shutdown() for c in self.consumers.values()), return_exceptions=True
            )
            tracer.unsubscribe(self.on_trace)
            self.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance_worker", description=__doc__)
    parser.add_argument("-n", "--namesrv", required=True)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("--strategy", default="AVG")
    parser.add_argument("--handoff", default="classic", choices=["classic", "fenced"])
    parser.add_argument("--stats", type=float, default=0.0, help="seconds between stats lines")
    parser.add_argument(
        "--notified",
        action="store_true",
        help="a line for every notification read (N time client-id): the fan-out's timeline",
    )
    parser.add_argument("--stats-name", default="", help="this worker's name in them")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a PushConsumer or ClientConfig option of every consumer (an int, a float, "
        "true/false or a string)",
    )
    parser.add_argument(
        "--trace", type=Path, help="also append every protocol-trace record to this JSONL file"
    )
    args = parser.parse_args(argv)
    from aiorocketmq.logs import configure_logging
    from aiorocketmq.runtime import run

    configure_logging("ERROR")
    if args.trace is not None:
        tracer.to_file(args.trace)
    sys.stdout.reconfigure(line_buffering=False)  # type: ignore[union-attr]
    run(Worker(args).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
