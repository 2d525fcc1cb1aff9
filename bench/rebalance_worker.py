"""One process of ``bench.rebalance``'s scale harness: it hosts many push consumers of a group.

Each consumer is a ``PushConsumer`` with its own instance name, so its own client instance and
its own connections to the brokers, as a separate Java process of RocketMQ would have. The
controller drives it over stdin and reads what happens from stdout, one line each:

- in ``start NAME...``: start those consumers (a few at a time); out ``S NAME CLIENT_ID T``
- in ``stop NAME``: shut one down (a graceful leave); out ``X NAME T`` once it returned
- in ``quit``: shut everything down and exit
- out ``E T CLIENT_ID + QUEUE`` / ``E T CLIENT_ID - QUEUE``: the protocol trace's queue_added
  and queue_dropped, as they are recorded (``T`` is wall-clock seconds, shared by the processes
  of one machine; ``QUEUE`` is ``broker:queue_id`` of the one topic)

``python -m bench.rebalance_worker -n NAMESRV -g GROUP -t TOPIC [--strategy S] [--handoff H]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.consumer.allocate import strategy_by_name
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.trace import tracer

STARTS_AT_ONCE = 8
_MARK = {"queue_added": "+", "queue_dropped": "-"}


async def _accept(
    msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def queue_key(mq: MessageQueue) -> str:
    """How a queue of the one topic is named on the wire between worker and controller."""
    return f"{mq.broker_name}:{mq.queue_id}"


class Worker:
    """The consumers of this process, and the lines it writes about them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.consumers: dict[str, PushConsumer] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.starting = asyncio.Semaphore(STARTS_AT_ONCE)

    def write(self, line: str) -> None:
        sys.stdout.write(line + "\n")

    def on_trace(self, rec: dict[str, Any]) -> None:
        mark = _MARK.get(rec["event"])
        if mark is None:
            return
        mq = MessageQueue.parse(str(rec.get("mq")))
        if mq is not None and mq.topic == self.args.topic:
            self.write(f"E {time.time():.4f} {rec['client_id']} {mark} {queue_key(mq)}")

    async def start(self, name: str) -> None:
        async with self.starting:
            c = PushConsumer(
                self.args.group,
                self.args.namesrv,
                instance_name=name,
                allocate_strategy=strategy_by_name(self.args.strategy),
                handoff=self.args.handoff,
            )
            c.subscribe(self.args.topic, "*")
            c.register_message_listener(_accept)
            self.consumers[name] = c
            await c.start()
            self.write(f"S {name} {c.client_id} {time.time():.4f}")

    async def stop(self, name: str) -> None:
        c = self.consumers.pop(name)
        await c.shutdown()
        self.write(f"X {name} {time.time():.4f}")

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> None:
        tracer.subscribe(self.on_trace)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance_worker", description=__doc__)
    parser.add_argument("-n", "--namesrv", required=True)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("--strategy", default="AVG")
    parser.add_argument("--handoff", default="classic", choices=["classic", "fenced"])
    args = parser.parse_args(argv)
    from aiorocketmq.logs import configure_logging
    from aiorocketmq.runtime import run

    configure_logging("ERROR")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    run(Worker(args).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
