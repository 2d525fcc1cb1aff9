"""``python -m aiorocketmq.pipeline.jobs.order_stats``: per-minute order statistics from a topic to Parquet.

Reads the JSON order events of ``--topic`` (as ``order_generator`` writes them), parses them,
and aggregates them per ``--window`` (1 minute) of event time::

    window_start, window_end, orders, paid, cancelled, revenue, customers, avg_order_value

``revenue`` and ``avg_order_value`` count paid orders only (quantity x price); ``customers`` is
the number of distinct customers. The result goes to Parquet at ``--output``, and with
``--summary-topic`` each window also goes back to that topic as a JSON message (tag
``order-stats``, key the window start).

Modes:

- ``--mode batch`` (default): everything from ``--starting-offsets`` (earliest) to now; the
  Parquet output is replaced.
- ``--mode stream``: a streaming query with ``--checkpoint`` (default ``<output>-checkpoint``),
  a watermark of ``--watermark`` (2 minutes) on event time, appending each window to Parquet
  once the watermark has passed it. By default it runs with ``trigger(availableNow=True)``:
  reads what is there, then stops; run it again later to go on from the checkpoint.
  ``--continuous SECONDS`` runs micro-batches every SECONDS until interrupted instead.
  ``--group`` commits the read offsets to that consumer group (``mqadmin consumerProgress``).

Spark runs in local mode (``local[2]``) unless ``--master`` (or ``spark-submit --master``) says
otherwise; nothing in the job assumes local mode. Events that are not valid JSON orders are
counted and dropped. The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["ORDER_SCHEMA", "main", "order_stats", "parse_orders", "run"]

ORDER_SCHEMA = (
    "order_id STRING, customer_id STRING, product STRING, quantity INT, price DOUBLE, "
    "status STRING, event_time LONG"
)


def parse_orders(messages: Any) -> Any:
    """The order events of a data frame of messages (the source's schema); bad ones dropped."""
    from pyspark.sql import functions as F

    parsed = messages.select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"))
    return parsed.where(F.col("o.order_id").isNotNull() & F.col("o.event_time").isNotNull()).select(
        "o.order_id",
        "o.customer_id",
        "o.product",
        "o.quantity",
        "o.price",
        "o.status",
        F.timestamp_millis(F.col("o.event_time")).alias("event_time"),
    )


def order_stats(orders: Any, window: str = "1 minute") -> Any:
    """Per event-time window: orders, paid, cancelled, revenue, customers, avg_order_value."""
    from pyspark.sql import functions as F

    paid = F.col("status") == "paid"
    amount = F.col("quantity") * F.col("price")
    return (
        orders.groupBy(F.window("event_time", window).alias("w"))
        .agg(
            F.count("*").alias("orders"),
            F.sum(F.when(paid, 1).otherwise(0)).alias("paid"),
            F.sum(F.when(F.col("status") == "cancelled", 1).otherwise(0)).alias("cancelled"),
            F.round(F.sum(F.when(paid, amount).otherwise(0.0)), 2).alias("revenue"),
            F.approx_count_distinct("customer_id").alias("customers"),
            F.round(F.avg(F.when(paid, amount)), 2).alias("avg_order_value"),
        )
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "orders",
            "paid",
            "cancelled",
            "revenue",
            "customers",
            "avg_order_value",
        )
    )


def summary_messages(stats: Any) -> Any:
    """The rows the summary topic gets: a JSON body per window, tag ``order-stats``."""
    from pyspark.sql import functions as F

    return stats.select(
        F.to_json(F.struct(*[F.col(c) for c in stats.columns])).alias("body"),
        F.lit("order-stats").alias("tags"),
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss").alias("keys"),
    )


def _source(spark: Any, args: argparse.Namespace, *, streaming: bool) -> Any:
    reader = spark.readStream if streaming else spark.read
    reader = (
        reader.format("aiorocketmq")
        .option("nameServer", args.namesrv)
        .option("topic", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.group:
        reader = reader.option("group", args.group)
    if streaming and args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    return reader.load()


def _write_summary(df: Any, args: argparse.Namespace) -> None:
    (
        df.write.format("aiorocketmq")
        .option("nameServer", args.namesrv)
        .option("topic", args.summary_topic)
        .mode("append")
        .save()
    )


def run(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run the job on ``spark``; what it did, as a dict."""
    started = time.monotonic()
    if args.mode == "batch":
        messages = _source(spark, args, streaming=False).cache()
        total = messages.count()
        orders = parse_orders(messages)
        stats = order_stats(orders, args.window).orderBy("window_start").cache()
        stats.write.mode("overwrite").parquet(args.output)
        windows = stats.count()
        parsed = orders.count()
        if args.summary_topic:
            _write_summary(summary_messages(stats), args)
        result = {
            "mode": "batch",
            "messages": total,
            "orders": parsed,
            "bad_messages": total - parsed,
            "windows": windows,
        }
        stats.unpersist()
        messages.unpersist()
    else:
        checkpoint = args.checkpoint or f"{args.output.rstrip('/')}-checkpoint"
        orders = parse_orders(_source(spark, args, streaming=True))
        stats = order_stats(orders.withWatermark("event_time", args.watermark), args.window)
        queries = []
        writer = (
            stats.writeStream.format("parquet")
            .outputMode("append")
            .option("path", args.output)
            .option("checkpointLocation", f"{checkpoint}/parquet")
        )
        writer = (
            writer.trigger(processingTime=f"{args.continuous} seconds")
            if args.continuous
            else writer.trigger(availableNow=True)
        )
        queries.append(writer.start())
        if args.summary_topic:
            summary = (
                summary_messages(stats)
                .writeStream.format("aiorocketmq")
                .option("nameServer", args.namesrv)
                .option("topic", args.summary_topic)
                .option("checkpointLocation", f"{checkpoint}/summary")
            )
            summary = (
                summary.trigger(processingTime=f"{args.continuous} seconds")
                if args.continuous
                else summary.trigger(availableNow=True)
            )
            queries.append(summary.start())
        try:
            for q in queries:
                q.awaitTermination()
        except KeyboardInterrupt:
            for q in queries:
                q.stop()
        progress = queries[0].recentProgress
        result = {
            "mode": "stream",
            "batches": len(progress),
            "messages": sum(int(p["numInputRows"]) for p in progress),
            "checkpoint": checkpoint,
        }
    result["output"] = args.output
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aiorocketmq.pipeline.jobs.order_stats",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-n", "--namesrv", required=True, help="name servers, host:port[;host:port]"
    )
    parser.add_argument(
        "-t", "--topic", default="Orders", help="topic of order events (default Orders)"
    )
    parser.add_argument("-o", "--output", required=True, help="Parquet output path")
    parser.add_argument("--summary-topic", help="also send each window to this topic")
    parser.add_argument("--mode", choices=("batch", "stream"), default="batch")
    parser.add_argument("--window", default="1 minute", help="window length (default '1 minute')")
    parser.add_argument("--watermark", default="2 minutes", help="stream mode: lateness allowed")
    parser.add_argument("--checkpoint", help="stream mode: checkpoint directory")
    parser.add_argument(
        "--continuous",
        type=float,
        default=0,
        metavar="SECONDS",
        help="stream mode: run micro-batches every SECONDS until interrupted",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="earliest, latest (stream mode) or JSON (default earliest)",
    )
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=0,
        help="stream mode: messages per micro-batch at most",
    )
    parser.add_argument("--group", help="stream mode: consumer group to commit read offsets to")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from aiorocketmq.pipeline.session import spark_session

    spark = spark_session(
        "order_stats",
        master=args.master,
        config={"spark.sql.shuffle.partitions": "4", "spark.sql.session.timeZone": "UTC"},
    )
    try:
        result = run(spark, args)
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
