"""``python -m aiorocketmq.pipeline.jobs.order_generator``: fill a topic with JSON order events.

Each message is one order event, tagged with its status (``created``, ``paid``, ``cancelled``)
and keyed by its order id::

    {"order_id": "o-0000042", "customer_id": "c-0017", "product": "lamp", "quantity": 2,
     "price": 19.5, "status": "paid", "event_time": 1767225600123}

``event_time`` is milliseconds since the epoch, spread over the last ``--minutes`` minutes (so
the per-minute windows of ``order_stats`` have something in each). ``--create-topic`` creates
the topic with ``--queues`` queues on every broker first. ``--rate`` sends that many events per
second instead of all at once (for watching a streaming query). ``--seed`` makes a run
repeatable. The last line printed is a JSON summary (``sent``, ``by_status``, ``seconds``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence

from aiorocketmq.pipeline.client import SyncClient
from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["PRODUCTS", "STATUSES", "main", "order_events"]

PRODUCTS = {"lamp": 19.5, "chair": 49.0, "desk": 129.0, "mug": 7.25, "plant": 12.0}
STATUSES = ("created", "paid", "paid", "paid", "cancelled")  # most orders get paid


def order_events(
    count: int, *, minutes: int, seed: int | None, now_ms: int
) -> Iterator[dict[str, object]]:
    """``count`` order events with event times in the ``minutes`` before ``now_ms``."""
    rng = random.Random(seed)
    span = max(1, minutes) * 60_000
    for i in range(count):
        product = rng.choice(sorted(PRODUCTS))
        yield {
            "order_id": f"o-{i:07d}",
            "customer_id": f"c-{rng.randrange(500):04d}",
            "product": product,
            "quantity": rng.randint(1, 5),
            "price": PRODUCTS[product],
            "status": rng.choice(STATUSES),
            "event_time": now_ms - span + (i * span) // max(1, count),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiorocketmq.pipeline.jobs.order_generator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-n", "--namesrv", required=True, help="name servers, host:port[;host:port]"
    )
    parser.add_argument("-t", "--topic", default="Orders", help="topic (default Orders)")
    parser.add_argument("--count", type=int, default=10_000, help="events to send (default 10000)")
    parser.add_argument("--minutes", type=int, default=10, help="event times span (default 10)")
    parser.add_argument(
        "--rate", type=float, default=0, help="events per second (default: no limit)"
    )
    parser.add_argument("--batch", type=int, default=100, help="messages per send (default 100)")
    parser.add_argument("--seed", type=int, default=None, help="random seed")
    parser.add_argument(
        "--create-topic", action="store_true", help="create the topic on every broker"
    )
    parser.add_argument(
        "--queues", type=int, default=4, help="queues per broker when creating (default 4)"
    )
    args = parser.parse_args(argv)
    if args.count < 0 or args.batch < 1:
        parser.error("--count must be >= 0 and --batch >= 1")

    client = SyncClient(args.namesrv, timeout=10)
    if args.create_topic:
        client.create_topic(args.topic, args.queues)
    started = time.monotonic()
    by_status: Counter[str] = Counter()
    batch: list[common_pb2.Message] = []
    sent = 0

    def flush() -> None:
        nonlocal sent
        if batch:
            client.send_batch(args.topic, batch, group="ORDER_GENERATOR")
            sent += len(batch)
            batch.clear()
            if args.rate > 0:  # pace: sent events take sent/rate seconds
                ahead = sent / args.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)

    for event in order_events(
        args.count, minutes=args.minutes, seed=args.seed, now_ms=int(time.time() * 1000)
    ):
        status = str(event["status"])
        by_status[status] += 1
        batch.append(
            common_pb2.Message(
                topic=args.topic,
                body=json.dumps(event, separators=(",", ":")).encode(),
                tags=status,
                keys=str(event["order_id"]),
            )
        )
        if len(batch) >= args.batch:
            flush()
    flush()
    summary = {
        "topic": args.topic,
        "sent": sent,
        "by_status": dict(sorted(by_status.items())),
        "seconds": round(time.monotonic() - started, 3),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
