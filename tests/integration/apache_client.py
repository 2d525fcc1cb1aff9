"""Apache's C++ RocketMQ client (PyPI ``rocketmq``) as a process, for the remoting tests.

``python -m tests.integration.apache_client produce -n ADDR -t TOPIC --count N --batch B``
sends N messages (keys ``k<i>``, tag ``TagA``, property ``color=red``) then one batch of B
(keys ``b<i>``, tag ``TagB``), printing one JSON line per send result; ``--linger S`` then
keeps the producer up (heartbeating) for S seconds or until SIGTERM.

``python -m tests.integration.apache_client consume -n ADDR -g GROUP -t TOPIC`` runs a push
consumer until SIGTERM (a graceful shutdown) or SIGKILL, printing ``{"started": pid}`` and then
one JSON line per consumed message. Everything the C++ library logs goes under ``$HOME``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

_lock = threading.Lock()


def emit(record: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")


def produce(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    try:
        for i in range(args.count):
            msg = Message(args.topic)
            msg.set_keys(f"k{i}")
            msg.set_tags("TagA")
            msg.set_property("color", "red")
            msg.set_body(f"apache-{i}")
            result = producer.send_sync(msg)
            emit({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
        if args.batch:
            batch = []
            for i in range(args.batch):
                msg = Message(args.topic)
                msg.set_keys(f"b{i}")
                msg.set_tags("TagB")
                msg.set_body(f"apache-batch-{i}")
                batch.append(msg)
            result = producer.send_batch(batch)
            emit({"status": int(result.status), "batch": args.batch})
        if args.linger:
            emit({"lingering": os.getpid()})
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            stop.wait(args.linger)
    finally:
        producer.shutdown()
    return 0


def consume(args: argparse.Namespace) -> int:
    from rocketmq.client import PushConsumer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def on_message(msg: Any) -> None:
        emit(
            {
                "pid": os.getpid(),
                "topic": msg.topic,
                "queue_id": msg.queue_id,
                "queue_offset": msg.queue_offset,
                "keys": _text(msg.keys),
                "tags": _text(msg.tags),
                "body": _text(msg.body),
                "color": _text(msg.get_property("color")),
                "id": msg.id,
            }
        )

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.subscribe(args.topic, on_message)
    consumer.start()
    emit({"started": os.getpid()})
    while not stop.is_set():
        time.sleep(0.05)
    consumer.shutdown()
    emit({"stopped": os.getpid()})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="apache_client")
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("produce")
    p.add_argument("-n", "--namesrv", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-g", "--group", default="ApacheProducer")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument(
        "--linger", type=float, default=0, help="then stay up this long (or until SIGTERM)"
    )
    c = sub.add_parser("consume")
    c.add_argument("-n", "--namesrv", required=True)
    c.add_argument("-t", "--topic", required=True)
    c.add_argument("-g", "--group", required=True)
    args = parser.parse_args()
    return produce(args) if args.mode == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
