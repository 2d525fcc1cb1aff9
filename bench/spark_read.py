"""Spark's read throughput of a topic, beside a plain Python client pulling the same queues.

Starts a name server and a broker as processes (``aiorocketmq cluster up`` on free ports), fills
a topic (``--messages`` bodies of ``--body-size`` random bytes over ``--queues`` queues), then
reads every message back, alternating, ``--rounds`` times each:

- **python client**: this process pulls each queue in turn with the synchronous client the data
  source uses (``aiorocketmq.pipeline.client.SyncClient.pull_range``: PULL_MESSAGE of up to 1024 raw
  records, decoded into ``MessageExt`` by ``aiorocketmq.protocol.record.decode_records``), one thread;
- **spark**: ``spark.read.format("aiorocketmq")`` in a ``local[2]`` session (started before the
  timing), written to Spark's ``noop`` sink so every row and column is produced: planning,
  one task per queue in two Python workers, pulls, decoding, Arrow batches, the JVM's rows.

It prints msg/s of each round, the best of each, and Spark's best / the client's best against
the target for that size (50 % at 200,000 messages, 80 % from 1,000,000, where Spark's fixed
costs weigh less). Rates vary run to run on a shared machine: compare within one run.

``python -m bench.spark_read [--messages N] [--body-size B] [--queues Q] [--rounds R]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

TARGET_RATIO = 0.5  # at 200,000 messages
TARGET_RATIO_LARGE = 0.8  # from LARGE_READ messages on
LARGE_READ = 1_000_000


def target_ratio(messages: int) -> float:
    """The Spark / client target of a read of ``messages``."""
    return TARGET_RATIO_LARGE if messages >= LARGE_READ else TARGET_RATIO
TOPIC = "BenchSparkRead"


def _cluster_up(root: Path, queues: int) -> str:
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [
            str(bin_dir / "aiorocketmq"),
            "cluster",
            "up",
            "--dir",
            str(root),
            "--base-port",
            "0",
            "--brokers",
            "1",
            "--topic",
            TOPIC,
            "--queues",
            str(queues),
            "--server-log-level",
            "WARNING",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(json.loads((root / "cluster.json").read_text())["namesrv_addr"])


def _cluster_down(root: Path) -> None:
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [str(bin_dir / "aiorocketmq"), "cluster", "down", "--dir", str(root)],
        check=False,
        capture_output=True,
        timeout=60,
    )


def _fill(client: Any, messages: int, body_size: int) -> None:
    from aiorocketmq.protocol.v1 import common_pb2

    rng = random.Random(1)
    bodies = [rng.randbytes(body_size) for _ in range(64)]
    batch = 256
    for start in range(0, messages, batch):
        client.send_batch(
            TOPIC,
            [
                common_pb2.Message(topic=TOPIC, body=bodies[i % 64], tags="bench", keys=str(i))
                for i in range(start, min(messages, start + batch))
            ],
            group="BENCH_SPARK_PG",
        )


def _python_client(client: Any) -> tuple[int, float]:
    stats = client.queue_stats([TOPIC])
    started = time.perf_counter()
    count = 0
    for key, s in sorted(stats.items()):
        for pulled in client.pull_range(key, s.min_offset, s.max_offset, batch_size=1024):
            count += len(pulled.messages)
    return count, time.perf_counter() - started


def _spark(spark: Any, namesrv: str) -> tuple[int, float]:
    df = (
        spark.read.format("aiorocketmq").option("nameServer", namesrv).option("topic", TOPIC).load()
    )
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    return -1, elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.spark_read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body-size", type=int, default=256)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from aiorocketmq.pipeline.client import SyncClient, close_channels
    from aiorocketmq.pipeline.session import spark_session

    with tempfile.TemporaryDirectory(prefix="bench-spark-read-") as tmp:
        root = Path(tmp) / "cluster"
        try:
            namesrv = _cluster_up(root, args.queues)
        except subprocess.CalledProcessError as e:
            print(f"bench.spark_read: cluster up failed: {e.stderr!r}", file=sys.stderr)
            return 1
        try:
            client = SyncClient(namesrv, timeout=30)
            started = time.perf_counter()
            _fill(client, args.messages, args.body_size)
            fill_s = time.perf_counter() - started
            total = sum(s.max_offset for s in client.queue_stats([TOPIC]).values())
            print(
                f"topic {TOPIC}: {total} messages of {args.body_size} B on {args.queues} queues "
                f"(filled in {fill_s:.1f} s)",
                flush=True,
            )

            started = time.perf_counter()
            spark = spark_session(
                "bench-spark-read",
                master="local[2]",
                config={
                    "spark.ui.enabled": "false",
                    "spark.ui.showConsoleProgress": "false",
                    "spark.sql.shuffle.partitions": "2",
                },
            )
            spark.sparkContext.setLogLevel("ERROR")
            print(
                f"spark session (local[2]) started in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            try:
                # Warm up: Python workers started, modules imported, channels opened.
                _spark(spark, namesrv)
                python_rates: list[float] = []
                spark_rates: list[float] = []
                for round_no in range(1, args.rounds + 1):
                    count, seconds = _python_client(client)
                    if count != total:
                        print(
                            f"bench.spark_read: the client read {count} of {total}", file=sys.stderr
                        )
                        return 1
                    python_rates.append(total / seconds)
                    _, seconds = _spark(spark, namesrv)
                    spark_rates.append(total / seconds)
                    print(
                        f"round {round_no}: python client {python_rates[-1] / 1000:7.1f} k msg/s"
                        f"   spark {spark_rates[-1] / 1000:7.1f} k msg/s",
                        flush=True,
                    )
                counted = (
                    spark.read.format("aiorocketmq")
                    .option("nameServer", namesrv)
                    .option("topic", TOPIC)
                    .load()
                    .count()
                )
            finally:
                spark.stop()
            if counted != total:
                print(f"bench.spark_read: spark counted {counted} of {total}", file=sys.stderr)
                return 1
            best_python, best_spark = max(python_rates), max(spark_rates)
            ratio = best_spark / best_python
            print(
                f"best: python client {best_python / 1000:.1f} k msg/s, "
                f"spark {best_spark / 1000:.1f} k msg/s"
            )
            target = target_ratio(total)
            verdict = "meets" if ratio >= target else "misses"
            print(f"spark / python client: {ratio:.0%} ({verdict} the target of {target:.0%})")
        finally:
            close_channels()
            _cluster_down(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
