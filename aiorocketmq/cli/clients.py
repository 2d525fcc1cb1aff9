"""``aiorocketmq consume`` and ``aiorocketmq produce``: a consumer or a producer as a process.

Used by docker-compose's scalable ``consumer`` and ``producer`` services, by process tests that
kill a consumer with SIGKILL, and by people trying the protocol by hand. Both stop cleanly on
SIGINT/SIGTERM (the consumer persists its offsets and leaves its group).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from aiorocketmq.cli.common import (
    Progress,
    check_namesrv,
    default_namesrv_addr,
    namesrv_addr_type,
    non_negative_type,
)
from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    MessageModel,
    PushConsumer,
)
from aiorocketmq.consumer.allocate import strategy_by_name
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.types import ConsumeOrderlyContext, ConsumeOrderlyStatus
from aiorocketmq.producer import Message, Producer, SelectMessageQueueByHash
from aiorocketmq.protocol.data_path import DATA_TRANSPORTS
from aiorocketmq.runtime import stop_on_signals
from aiorocketmq.trace import tracer

__all__ = ["add_consume_parser", "add_produce_parser", "consume_main", "produce_main"]


def _client_arguments(p: argparse.ArgumentParser) -> None:
    """What every client command takes: where the name servers are, and how messages travel."""
    p.add_argument(
        "-n",
        "--namesrv-addr",
        type=namesrv_addr_type,
        default=default_namesrv_addr(),
        help="name servers, host[:port][;host[:port]] (default $NAMESRV_ADDR, else %(default)s)",
    )
    p.add_argument(
        "--namesrv-wait",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait at start for a name server to answer (one restarting, a "
        "cluster still coming up) before giving up (default %(default)s)",
    )
    p.add_argument(
        "--data-transport",
        choices=DATA_TRANSPORTS,
        default="auto",
        help="how messages travel to and from the brokers: gRPC, or RocketMQ's remoting "
        "protocol to brokers that serve it (faster); auto: remoting where a broker serves it "
        "and its port answers, else gRPC (default %(default)s)",
    )


def _strategy(name: str) -> str:
    try:
        strategy_by_name(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def add_consume_parser(sub: Any) -> None:
    p = sub.add_parser("consume", help="run a push consumer until SIGINT/SIGTERM")
    _client_arguments(p)
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--expression", default="*", help="tag expression: * or 'TagA || TagB'")
    p.add_argument("--instance-name", help="client instance name (default: pid#nanotime)")
    p.add_argument("--from", dest="from_where", choices=("last", "first"), default="last")
    p.add_argument("--model", choices=("clustering", "broadcasting"), default="clustering")
    p.add_argument("--orderly", action="store_true", help="orderly consumption (queue locks)")
    p.add_argument(
        "--strategy",
        type=_strategy,
        default="AVG",
        help="allocation strategy name (AVG, CONSISTENT_HASH, ...)",
    )
    p.add_argument("--handoff", choices=("classic", "fenced"), default="classic")
    p.add_argument("--rebalance-interval-ms", type=int, default=20_000)
    p.add_argument(
        "--consume-ms",
        type=non_negative_type,
        default=0.0,
        metavar="MS",
        help="work each message takes in the listener (a sleep), to watch queues move and "
        "faults land with consumption in flight (default 0)",
    )
    p.add_argument("--trace", type=Path, help="append the protocol trace (JSONL) to this file")
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve this consumer's Prometheus metrics at http://HOST:PORT/metrics",
    )
    p.add_argument(
        "--print", dest="print_messages", action="store_true", help="print each message (JSON)"
    )


def add_produce_parser(sub: Any) -> None:
    p = sub.add_parser("produce", help="send messages to a topic")
    _client_arguments(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("--count", type=int, default=0, help="messages to send (0 = until stopped)")
    p.add_argument(
        "--rate", type=float, default=50.0, help="messages per second (0 = as fast as possible)"
    )
    p.add_argument("--tags", default="")
    p.add_argument(
        "--keys", type=int, default=0, help="shard by N keys (orderly production); 0 = round robin"
    )
    p.add_argument("--prefix", default="msg", help="body prefix (bodies are JSON: prefix, seq, ts)")


async def consume_main(args: argparse.Namespace) -> int:
    # say so now, not by retrying silently forever
    await check_namesrv(args.namesrv_addr, wait=args.namesrv_wait)
    if args.trace:
        tracer.to_file(args.trace)
    progress = Progress("consumed")
    consumer = PushConsumer(
        args.group,
        args.namesrv_addr,
        instance_name=args.instance_name,
        consume_from_where=(
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            if args.from_where == "first"
            else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        ),
        message_model=MessageModel.BROADCASTING
        if args.model == "broadcasting"
        else MessageModel.CLUSTERING,
        allocate_strategy=strategy_by_name(args.strategy),
        handoff=args.handoff,
        client_config=ClientConfig(
            rebalance_wait_interval_ms=args.rebalance_interval_ms,
            data_transport=args.data_transport,
        ),
    )
    consumer.subscribe(args.topic, args.expression)
    stop = stop_on_signals()

    def show(msgs: list[MessageExt]) -> None:
        progress.add(len(msgs))
        if args.print_messages:
            for m in msgs:
                line = {
                    "topic": m.topic,
                    "broker": m.broker_name,
                    "queue": m.queue_id,
                    "offset": m.queue_offset,
                    "msg_id": m.msg_id,
                    "body": m.body.decode("utf-8", "replace"),
                }
                print(json.dumps(line), flush=True)

    async def shown(msgs: list[MessageExt]) -> bool:
        """The work (``--consume-ms``), then whether the messages went out; stdout closed
        (``| head``): stop, gracefully."""
        if args.consume_ms:
            await asyncio.sleep(args.consume_ms * len(msgs) / 1000)
        try:
            show(msgs)
        except BrokenPipeError:
            stop.set()
            return False
        return True

    async def concurrently(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        if not await shown(msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def orderly(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        if not await shown(msgs):
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    if args.orderly:
        consumer.register_message_listener(orderly, orderly=True)
    else:
        consumer.register_message_listener(concurrently)
    await consumer.start()
    metrics = None
    if args.metrics_listen:
        from aiorocketmq.consumer.metrics import collect_consumer
        from aiorocketmq.metrics import ServerMetrics

        metrics = ServerMetrics(
            node_type="consumer",
            cluster=args.group,
            node_id=consumer.client_id,
            collect=lambda out: collect_consumer(consumer, out),
        )
        metrics.start(args.metrics_listen)
    print(
        f"consumer started: group={args.group} client_id={consumer.client_id}"
        + (f" metrics=http://{metrics.address}/metrics" if metrics is not None else ""),
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        if metrics is not None:
            metrics.stop()
        await consumer.shutdown()
        tracer.close_file()
    progress.done(f"messages from {args.topic}")
    return 0


async def produce_main(args: argparse.Namespace) -> int:
    await check_namesrv(args.namesrv_addr, wait=args.namesrv_wait)
    stop = stop_on_signals()
    sent = 0
    started = time.monotonic()
    progress = Progress("sent")
    selector = SelectMessageQueueByHash()
    async with Producer(
        "aiorocketmq_producer", args.namesrv_addr, data_transport=args.data_transport
    ) as producer:
        while not stop.is_set() and (args.count == 0 or sent < args.count):
            body = json.dumps(
                {"prefix": args.prefix, "seq": sent, "ts": int(time.time() * 1000)}
            ).encode()
            msg = Message(args.topic, body, tags=args.tags or None)
            if args.keys:
                await producer.send(msg, selector=selector, arg=sent % args.keys)
            else:
                await producer.send(msg)
            sent += 1
            progress.add()
            if args.rate > 0:
                delay = started + sent / args.rate - time.monotonic()
                if delay > 0:
                    try:
                        async with asyncio.timeout(delay):
                            await stop.wait()
                    except TimeoutError:
                        pass
    progress.done(f"messages to {args.topic}")
    return 0
