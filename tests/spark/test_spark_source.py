"""The ``aiorocketmq`` Spark format against real name server and broker processes.

One local[2] Spark session (one JVM) and one cluster serve the whole module: a name server,
``broker-a`` and ``broker-b``, and ``broker-r`` whose retention deletes every commit-log
segment but the current one (8 KiB segments), for the data-loss cases.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java", allow_module_level=True)

from aiorocketmq.consumer import ConsumeFromWhere, LitePullConsumer, MessageExt
from aiorocketmq.pipeline.client import SyncClient, close_channels
from aiorocketmq.pipeline.jobs import order_generator, order_stats
from aiorocketmq.pipeline.session import spark_session
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import wait_until_sync
from tests.spark.brokers import ClusterProcesses, sent_messages

pytestmark = pytest.mark.spark

RETENTION = """
mapped_file_size_commit_log = 8192
file_reserved_time_hours = 0
clean_resource_interval_ms = 100
"""

Sent = tuple[str, str, int, int, str, common_pb2.Message]


# ---- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path_factory.mktemp("spark-cluster"), brokers=2)
    try:
        c.up()
        c.add_broker("broker-r", RETENTION)
        yield c
    finally:
        c.down()
        close_channels()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = spark_session(
            "aiorocketmq-tests",
            master="local[2]",
            config={
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.session.timeZone": "UTC",
                "spark.driver.bindAddress": "127.0.0.1",
            },
        )
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture(scope="module")
def client(cluster: ClusterProcesses) -> SyncClient:
    assert cluster.client is not None
    return cluster.client


@pytest.fixture(scope="module")
def ns(cluster: ClusterProcesses) -> str:
    return cluster.namesrv


def send(client: SyncClient, topic: str, messages: list[common_pb2.Message]) -> list[Sent]:
    """One batch to the next queue of ``topic``."""
    return sent_messages(client.send_batch(topic, messages, group="SPARK_TEST_PG"), messages)


def send_to_queue(
    client: SyncClient, topic: str, broker: str, queue_id: int, messages: list[common_pb2.Message]
) -> list[Sent]:
    response = client.broker_call(
        client.broker_addr(topic, broker),
        "SendMessage",
        broker_pb2.SendMessageRequest(
            producer_group="SPARK_TEST_PG",
            topic=topic,
            queue_id=queue_id,
            messages=messages,
            compact_result=True,
        ),
    )
    return sent_messages(response, messages)


def messages(topic: str, prefix: str, n: int, **kw: Any) -> list[common_pb2.Message]:
    return [
        common_pb2.Message(topic=topic, body=f"{prefix}-{i:04d}".encode(), **kw) for i in range(n)
    ]


def read(spark: Any, ns: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("aiorocketmq").option("nameServer", ns).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def located(rows: list[Any]) -> set[tuple[str, int, int, bytes]]:
    return {(r.brokerName, r.queueId, r.queueOffset, bytes(r.body)) for r in rows}


# ---- batch reads --------------------------------------------------------------------------------
BATCH_TOPIC = "SparkBatch"
TAGS = ("TagA", "TagB", "TagC")


@pytest.fixture(scope="module")
def batch_sent(client: SyncClient) -> list[Sent]:
    """240 messages on 2 brokers x 4 queues, tags cycling TagA/TagB/TagC, keys and a property."""
    client.create_topic(BATCH_TOPIC, 4, brokers=["broker-a", "broker-b"])
    out: list[Sent] = []
    for b in range(24):
        batch = [
            common_pb2.Message(
                topic=BATCH_TOPIC,
                body=f"order-{b * 10 + i:04d}".encode(),
                tags=TAGS[(b * 10 + i) % 3],
                keys=f"key-{b * 10 + i}",
                properties={"n": str(b * 10 + i)},
            )
            for i in range(10)
        ]
        out.extend(send(client, BATCH_TOPIC, batch))
    return out


def test_batch_read_returns_exactly_the_messages_sent(
    spark: Any, ns: str, batch_sent: list[Sent]
) -> None:
    df = read(spark, ns, BATCH_TOPIC)
    assert df.schema.simpleString() == (
        "struct<topic:string,brokerName:string,queueId:int,queueOffset:bigint,msgId:string,"
        "tags:string,keys:string,body:binary,bornTimestamp:timestamp,storeTimestamp:timestamp,"
        "properties:map<string,string>>"
    )
    rows = df.collect()
    assert len(rows) == len(batch_sent) == 240
    got = sorted(
        (
            r.topic,
            r.brokerName,
            r.queueId,
            r.queueOffset,
            r.msgId,
            bytes(r.body),
            r.tags,
            r.keys,
            r.properties,
        )
        for r in rows
    )
    want = sorted(
        (t, b, q, o, mid, m.body, m.tags, m.keys, dict(m.properties))
        for t, b, q, o, mid, m in batch_sent
    )
    assert got == want
    assert {r.brokerName for r in rows} == {"broker-a", "broker-b"}
    assert all(r.storeTimestamp >= r.bornTimestamp for r in rows)
    # One partition per queue with messages.
    assert df.rdd.getNumPartitions() == len({(b, q) for _, b, q, *_ in batch_sent})


def test_batch_read_honours_starting_and_ending_offsets_and_tags(
    spark: Any, ns: str, batch_sent: list[Sent]
) -> None:
    starting = {BATCH_TOPIC: {"broker-a": {"0": 3, "1": -2}, "broker-b": {"2": 5}}}
    ending = {BATCH_TOPIC: {"broker-a": {"0": 8}, "broker-b": {"2": -1, "3": 4}}}
    rows = read(
        spark,
        ns,
        BATCH_TOPIC,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    ).collect()

    def wanted(broker: str, queue_id: int, offset: int) -> bool:
        start = {("broker-a", 0): 3, ("broker-b", 2): 5}.get((broker, queue_id), 0)
        end = {("broker-a", 0): 8, ("broker-b", 3): 4}.get((broker, queue_id), 10**9)
        return start <= offset < end

    expected = {(b, q, o, m.body) for _, b, q, o, _, m in batch_sent if wanted(b, q, o)}
    assert located(rows) == expected and len(rows) == len(expected)
    assert {
        (r.brokerName, r.queueId, r.queueOffset)
        for r in rows
        if (r.brokerName, r.queueId) == ("broker-a", 0)
    } == {("broker-a", 0, o) for o in range(3, 8)}

    tagged = read(spark, ns, BATCH_TOPIC, subExpression="TagA || TagC").collect()
    assert located(tagged) == {
        (b, q, o, m.body) for _, b, q, o, _, m in batch_sent if m.tags in ("TagA", "TagC")
    }
    assert Counter(r.tags for r in tagged) == Counter(
        m.tags for *_, m in batch_sent if m.tags in ("TagA", "TagC")
    )
    # Tags and an end together.
    ends = {("broker-a", 0): 8, ("broker-b", 3): 4}
    both = read(
        spark, ns, BATCH_TOPIC, subExpression="TagB", endingOffsets=json.dumps(ending)
    ).collect()
    assert located(both) == {
        (b, q, o, m.body)
        for _, b, q, o, _, m in batch_sent
        if m.tags == "TagB" and o < ends.get((b, q), 10**9)
    }


def test_min_partitions_splits_the_ranges_and_reads_the_same(
    spark: Any, ns: str, batch_sent: list[Sent]
) -> None:
    df = read(spark, ns, BATCH_TOPIC, minPartitions="20", pullBatchSize="7")
    assert df.rdd.getNumPartitions() >= 20
    rows = df.collect()
    assert located(rows) == {(b, q, o, m.body) for _, b, q, o, _, m in batch_sent}
    assert len(rows) == 240
    capped = read(spark, ns, BATCH_TOPIC, maxRecordsPerPartition="4")
    assert capped.rdd.getNumPartitions() >= 240 // 4
    assert capped.count() == 240


def test_bad_options_fail_with_the_option_named(
    spark: Any, ns: str, batch_sent: list[Sent]
) -> None:
    with pytest.raises(Exception, match="startingOffsets: 'latest' is not allowed"):
        read(spark, ns, BATCH_TOPIC, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="SparkBatch/broker-z/0"):
        read(
            spark, ns, BATCH_TOPIC, startingOffsets='{"SparkBatch": {"broker-z": {"0": 1}}}'
        ).collect()
    with pytest.raises(Exception, match="exactly one of the options topic"):
        spark.read.format("aiorocketmq").option("nameServer", ns).load().collect()
    # a misspelt option is refused, with the name it probably meant
    with pytest.raises(
        Exception, match=r"unknown read option 'startingofsets'; did you mean 'startingOffsets'"
    ):
        read(spark, ns, BATCH_TOPIC, startingOfsets="earliest").collect()


# ---- Kafka's other ways to choose queues and offsets ---------------------------------------------
TIME_TOPIC = "SparkTime"


@pytest.fixture(scope="module")
def timed(client: SyncClient) -> tuple[list[list[Sent]], list[int]]:
    """Three rounds of 4 messages on broker-a's 2 queues, and a time between each two rounds."""
    client.create_topic(TIME_TOPIC, 2, brokers=["broker-a"])
    rounds: list[list[Sent]] = []
    marks: list[int] = []
    for r in range(3):
        if r:
            time.sleep(0.05)
            marks.append(int(time.time() * 1000))
            time.sleep(0.05)
        sent: list[Sent] = []
        for q in (0, 1):
            sent += send_to_queue(
                client, TIME_TOPIC, "broker-a", q, messages(TIME_TOPIC, f"r{r}q{q}", 2)
            )
        rounds.append(sent)
    return rounds, marks


def bodies(df: Any) -> list[str]:
    return sorted(bytes(r.body).decode() for r in df.select("body").collect())


def test_starting_and_ending_by_timestamp(
    spark: Any, ns: str, timed: tuple[list[list[Sent]], list[int]]
) -> None:
    rounds, (t1, t2) = timed
    names = [sorted(m[5].body.decode() for m in sent) for sent in rounds]
    assert bodies(read(spark, ns, TIME_TOPIC, startingTimestamp=str(t1))) == sorted(
        names[1] + names[2]
    )
    assert (
        bodies(read(spark, ns, TIME_TOPIC, startingTimestamp=str(t1), endingTimestamp=str(t2)))
        == names[1]
    )
    # startingTimestamp wins over startingOffsets, as in Kafka
    assert (
        bodies(read(spark, ns, TIME_TOPIC, startingTimestamp=str(t2), startingOffsets="earliest"))
        == names[2]
    )
    # per queue: queue 0 from t2, queue 1 (not named) from the earliest; ends likewise
    by_queue = json.dumps({TIME_TOPIC: {"broker-a": {"0": t2}}})
    got = bodies(read(spark, ns, TIME_TOPIC, startingOffsetsByTimestamp=by_queue))
    assert got == sorted(
        [n for round_ in names for n in round_ if "q1" in n] + [n for n in names[2] if "q0" in n]
    )
    ending = json.dumps({TIME_TOPIC: {"broker-a": {"0": t1, "1": t1}}})
    assert bodies(read(spark, ns, TIME_TOPIC, endingOffsetsByTimestamp=ending)) == names[0]
    # a time after every message: nothing (each queue at its latest offset)
    assert (
        bodies(read(spark, ns, TIME_TOPIC, startingTimestamp=str(int(time.time() * 1000) + 60_000)))
        == []
    )
    with pytest.raises(Exception, match="startingTimestamp must be >= 0"):
        read(spark, ns, TIME_TOPIC, startingTimestamp="-5").collect()
    with pytest.raises(
        Exception, match="names queues the read does not have: SparkTime/broker-z/0"
    ):
        read(
            spark, ns, TIME_TOPIC,
            startingOffsetsByTimestamp=json.dumps({TIME_TOPIC: {"broker-z": {"0": t1}}}),
        ).collect()  # fmt: skip


def test_subscribe_pattern_and_assign(
    spark: Any, ns: str, client: SyncClient, batch_sent: list[Sent]
) -> None:
    for name in ("SparkPatOne", "SparkPatTwo"):
        client.create_topic(name, 1, brokers=["broker-a"])
        send(client, name, messages(name, name, 3))
    df = (
        spark.read.format("aiorocketmq").option("nameServer", ns)
        .option("subscribePattern", "SparkPat.*").load()
    )  # fmt: skip
    rows = df.select("topic", "body").collect()
    assert Counter(r.topic for r in rows) == {"SparkPatOne": 3, "SparkPatTwo": 3}
    with pytest.raises(Exception, match=r"subscribePattern 'NoSuch\.\*' matches no topic"):
        spark.read.format("aiorocketmq").option("nameServer", ns).option(
            "subscribePattern", "NoSuch.*"
        ).load().collect()

    assign = json.dumps({BATCH_TOPIC: {"broker-b": [1, 3]}})
    df = spark.read.format("aiorocketmq").option("nameServer", ns).option("assign", assign).load()
    got = {(r.brokerName, r.queueId, r.queueOffset) for r in df.collect()}
    want = {(b, q, o) for _, b, q, o, _, _ in batch_sent if b == "broker-b" and q in (1, 3)}
    assert got == want and want
    with pytest.raises(Exception, match="exactly one of the options topic"):
        read(spark, ns, BATCH_TOPIC, assign=assign).collect()
    with pytest.raises(Exception, match="assign names queues the topics do not have"):
        spark.read.format("aiorocketmq").option("nameServer", ns).option(
            "assign", json.dumps({BATCH_TOPIC: {"broker-a": [9]}})
        ).load().collect()


def test_min_offsets_per_trigger_waits_for_enough_or_for_the_delay(
    spark: Any, ns: str, client: SyncClient, tmp_path: Path
) -> None:
    topic = "SparkMinTrigger"
    client.create_topic(topic, 1, brokers=["broker-a"])
    sizes: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        n = df.count()
        if n:
            sizes.append(n)

    def start(name: str, **options: str) -> Any:
        reader = (
            spark.readStream.format("aiorocketmq").option("nameServer", ns).option("topic", topic)
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return (
            reader.load().writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip

    query = start("enough", minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    try:
        wait_until_sync(lambda: query.lastProgress is not None, timeout=60, message="started")
        send_to_queue(client, topic, "broker-a", 0, messages(topic, "few", 4))
        triggers = len(query.recentProgress)
        wait_until_sync(
            lambda: len(query.recentProgress) >= triggers + 5, timeout=60, message="5 triggers"
        )
        assert sizes == []  # 4 < 10: no batch, however many triggers
        send_to_queue(client, topic, "broker-a", 0, messages(topic, "more", 8))
        wait_until_sync(lambda: sizes == [12], timeout=60, message="one batch of 12")
    finally:
        query.stop()
    sizes.clear()
    query = start(
        "delay", minOffsetsPerTrigger="1000", maxTriggerDelay="1s", startingOffsets="latest"
    )
    try:
        wait_until_sync(lambda: query.lastProgress is not None, timeout=60, message="started")
        send_to_queue(client, topic, "broker-a", 0, messages(topic, "late", 3))
        wait_until_sync(lambda: sizes == [3], timeout=60, message="the delay lets 3 through")
    finally:
        query.stop()
    with pytest.raises(Exception, match="maxTriggerDelay must be a duration"):
        start("bad", maxTriggerDelay="soon").processAllAvailable()


# ---- streaming reads ----------------------------------------------------------------------------
STREAM_TOPIC = "SparkStream"


def run_available_now(
    spark: Any, ns: str, checkpoint: Path, seen: list[Any], **options: str
) -> list[int]:
    """One availableNow run; rows of each batch appended to ``seen``; rows per batch."""
    reader = spark.readStream.format("aiorocketmq").option("nameServer", ns)
    for key, value in options.items():
        reader = reader.option(key, value)
    sizes: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.select("topic", "brokerName", "queueId", "queueOffset", "body").collect()
        sizes.append(len(rows))
        seen.extend(rows)

    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(90)
    assert not query.isActive
    return sizes


def consumer_progress(ns: str, group: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "mqadmin"),
            "consumerProgress",
            "-n",
            ns,
            "-g",
            group,
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return list(json.loads(out.stdout)["offsetTable"])


def test_available_now_reads_new_messages_across_two_runs_with_one_checkpoint(
    spark: Any, ns: str, client: SyncClient, tmp_path: Path
) -> None:
    client.create_topic(STREAM_TOPIC, 2, brokers=["broker-a", "broker-b"])
    first: list[Sent] = []
    for b in range(4):
        first.extend(send(client, STREAM_TOPIC, messages(STREAM_TOPIC, f"first{b}", 10)))
    checkpoint = tmp_path / "checkpoint"
    options = {
        "topic": STREAM_TOPIC,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "15",
        "group": "spark-stream-group",
    }
    seen1: list[Any] = []
    sizes1 = run_available_now(spark, ns, checkpoint, seen1, **options)
    assert sizes1 == [15, 15, 10]
    assert located(seen1) == {(b, q, o, m.body) for _, b, q, o, _, m in first}

    # The topic grows a queue on broker-a; new messages land there and on the old queues.
    client.create_topic(STREAM_TOPIC, 3, brokers=["broker-a"])
    second = send_to_queue(client, STREAM_TOPIC, "broker-a", 2, messages(STREAM_TOPIC, "newq", 7))
    for b in range(2):
        second.extend(send(client, STREAM_TOPIC, messages(STREAM_TOPIC, f"second{b}", 10)))
    seen2: list[Any] = []
    sizes2 = run_available_now(spark, ns, checkpoint, seen2, **options)
    assert sum(sizes2) == 27 and max(sizes2) <= 15
    assert located(seen2) == {(b, q, o, m.body) for _, b, q, o, _, m in second}
    keys = [(r.brokerName, r.queueId, r.queueOffset) for r in seen1 + seen2]
    assert len(keys) == len(set(keys)) == 67  # nothing read twice

    # A third run finds nothing new and reads nothing.
    seen3: list[Any] = []
    run_available_now(spark, ns, checkpoint, seen3, **options)
    assert seen3 == []

    # The group's offsets follow the query: consumerProgress shows no lag, the new queue too.
    table = consumer_progress(ns, "spark-stream-group")
    assert {(e["brokerName"], e["queueId"]) for e in table} == {
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-b", 0),
        ("broker-b", 1),
    }
    assert all(e["consumerOffset"] == e["brokerOffset"] and e["diff"] == 0 for e in table), table


LOSS_TOPIC = "SparkLoss"


def test_fail_on_data_loss_when_retention_deleted_what_the_checkpoint_expects(
    spark: Any, ns: str, client: SyncClient, tmp_path: Path
) -> None:
    client.create_topic(LOSS_TOPIC, 1, brokers=["broker-r"])
    key = (LOSS_TOPIC, "broker-r", 0)
    body = "x" * 200
    send(
        client,
        LOSS_TOPIC,
        [common_pb2.Message(topic=LOSS_TOPIC, body=f"{i}{body}".encode()) for i in range(10)],
    )
    checkpoint = tmp_path / "checkpoint"
    options = {"topic": LOSS_TOPIC, "startingOffsets": "earliest"}
    seen: list[Any] = []
    assert run_available_now(spark, ns, checkpoint, seen, **options) == [10]

    # Enough to roll many 8 KiB segments: retention deletes all but the current one.
    for b in range(30):
        send(
            client,
            LOSS_TOPIC,
            [
                common_pb2.Message(topic=LOSS_TOPIC, body=f"{b}-{i}{body}".encode())
                for i in range(10)
            ],
        )
    # Retention passes run every 100 ms: wait until one deleted the unread offsets and the next
    # few deleted nothing more.
    seen_min: list[int] = []

    def settled() -> bool:
        seen_min.append(client.queue_stats([LOSS_TOPIC])[key].min_offset)
        return len(seen_min) >= 6 and seen_min[-1] > 10 and len(set(seen_min[-6:])) == 1

    wait_until_sync(settled, timeout=20, interval=0.1, message="retention to delete and settle")
    stats = client.queue_stats([LOSS_TOPIC])[key]
    assert stats.max_offset == 310

    with pytest.raises(Exception, match="deleted before they were read"):
        run_available_now(spark, ns, checkpoint, [], **options)

    rest: list[Any] = []
    run_available_now(spark, ns, checkpoint, rest, failOnDataLoss="false", **options)
    offsets = sorted(r.queueOffset for r in rest)
    assert offsets == list(range(stats.min_offset, 310))

    # A batch read asked for offset 0 fails the same way, or skips what is gone.
    start = json.dumps({LOSS_TOPIC: {"broker-r": {"0": 0}}})
    with pytest.raises(Exception, match="deleted before they were read"):
        read(spark, ns, LOSS_TOPIC, startingOffsets=start).collect()
    assert read(spark, ns, LOSS_TOPIC, startingOffsets=start, failOnDataLoss="false").count() == (
        310 - stats.min_offset
    )


# ---- writes -------------------------------------------------------------------------------------
async def consume_all(
    ns: str, topics: list[str], count: int, timeout: float = 30
) -> list[MessageExt]:
    """Every message of ``topics`` through the project's own lite pull consumer."""
    client = SyncClient(ns)
    queues = [MessageQueue(t, b, q) for t in topics for (_, b, q) in client.queue_stats([t])]
    consumer = LitePullConsumer(
        "spark-sink-check",
        ns,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
    )
    consumer.assign(queues)
    got: list[MessageExt] = []
    await consumer.start()
    try:
        async with asyncio.timeout(timeout):
            while len(got) < count:
                got.extend(await consumer.poll(timeout=0.5))
        got.extend(await consumer.poll(timeout=0.5))  # nothing more should come
    finally:
        await consumer.shutdown()
    return got


def test_batch_write_messages_are_readable_by_a_consumer(
    spark: Any, ns: str, client: SyncClient
) -> None:
    client.create_topic("SparkSinkA", 2, brokers=["broker-a", "broker-b"])
    client.create_topic("SparkSinkB", 2, brokers=["broker-a", "broker-b"])
    rows = [
        (f"w-{i:03d}", "SparkSinkA" if i % 3 == 0 else None, f"Tag{i % 2}", f"key-{i}", i)
        for i in range(150)
    ]
    df = spark.createDataFrame(rows, "body string, topic string, tags string, keys string, n int")
    df.repartition(3).write.format("aiorocketmq").option("nameServer", ns).option(
        "topic", "SparkSinkB"
    ).option("batchSize", "16").mode("append").save()
    got = asyncio.run(consume_all(ns, ["SparkSinkA", "SparkSinkB"], 150))
    assert len(got) == 150
    by_body = {m.body.decode(): m for m in got}
    assert len(by_body) == 150
    for body, topic, tags, keys, _ in rows:
        m = by_body[body]
        assert (m.topic, m.tags, m.keys) == (topic or "SparkSinkB", tags, keys)
    # Read back through the source too, both topics in one read (a comma list).
    both = read(spark, ns, "SparkSinkA,SparkSinkB").collect()
    assert sorted((r.topic, bytes(r.body).decode(), r.tags, r.keys) for r in both) == sorted(
        (topic or "SparkSinkB", body, tags, keys) for body, topic, tags, keys, _ in rows
    )

    with pytest.raises(Exception, match="needs a 'body' column"):
        spark.createDataFrame([("x",)], "value string").write.format("aiorocketmq").option(
            "nameServer", ns
        ).option("topic", "SparkSinkB").mode("append").save()


def test_streaming_write_does_not_resend_a_batch_spark_runs_again(
    spark: Any, ns: str, client: SyncClient, batch_sent: list[Sent], tmp_path: Path
) -> None:
    out_topic = "SparkSinkStream"
    client.create_topic(out_topic, 2, brokers=["broker-a"])
    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        query = (
            spark.readStream.format("aiorocketmq")
            .option("nameServer", ns)
            .option("topic", BATCH_TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .selectExpr("body", "tags", "keys")
            .writeStream.format("aiorocketmq")
            .option("nameServer", ns)
            .option("topic", out_topic)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(90)
        return query

    def total() -> int:
        return sum(s.max_offset for s in client.queue_stats([out_topic]).values())

    first = run()
    assert [p["numInputRows"] for p in first.recentProgress] == [100, 100, 40]
    assert total() == 240
    # As if Spark stopped after the sink committed batch 2 but before it recorded it as done.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    again = run()
    assert [(p["batchId"], p["numInputRows"]) for p in again.recentProgress] == [(2, 40)]
    assert total() == 240  # batch 2 was not sent again
    rows = read(spark, ns, out_topic).collect()
    assert Counter(bytes(r.body) for r in rows) == Counter(m.body for *_, m in batch_sent)
    assert Counter((bytes(r.body), r.tags, r.keys) for r in rows) == Counter(
        (m.body, m.tags, m.keys) for *_, m in batch_sent
    )


# ---- the example job ----------------------------------------------------------------------------
def test_order_stats_job_from_generated_orders_to_parquet_and_a_summary_topic(
    spark: Any, ns: str, client: SyncClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for topic in ("SparkOrders", "SparkOrderStats"):  # not on broker-r and its short retention
        client.create_topic(topic, 2, brokers=["broker-a", "broker-b"])
    assert (
        order_generator.main(
            ["-n", ns, "-t", "SparkOrders", "--count", "600", "--minutes", "3", "--seed", "7"]
        )
        == 0
    )
    generated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert generated["sent"] == 600
    send(client, "SparkOrders", [common_pb2.Message(topic="SparkOrders", body=b"not json")])

    out = tmp_path / "stats"
    args = order_stats.build_parser().parse_args(
        ["-n", ns, "-t", "SparkOrders", "-o", str(out), "--summary-topic", "SparkOrderStats"]
    )
    result = order_stats.run(spark, args)
    assert (result["messages"], result["orders"], result["bad_messages"]) == (601, 600, 1)
    stats = spark.read.parquet(str(out)).collect()
    assert len(stats) == result["windows"] >= 3
    assert sum(r.orders for r in stats) == 600
    assert sum(r.paid for r in stats) == generated["by_status"]["paid"]
    assert sum(r.cancelled for r in stats) == generated["by_status"]["cancelled"]
    assert all(r.window_end.timestamp() - r.window_start.timestamp() == 60 for r in stats)
    summary = read(spark, ns, "SparkOrderStats").collect()
    assert len(summary) == len(stats)
    assert {r.tags for r in summary} == {"order-stats"}
    assert sum(json.loads(bytes(r.body))["orders"] for r in summary) == 600

    stream_args = order_stats.build_parser().parse_args(
        [
            "-n",
            ns,
            "-t",
            "SparkOrders",
            "-o",
            str(tmp_path / "stream"),
            "--mode",
            "stream",
            "--group",
            "spark-order-stats",
        ]
    )
    streamed = order_stats.run(spark, stream_args)
    assert streamed["messages"] == 601
    assert (tmp_path / "stream-checkpoint" / "parquet" / "offsets").is_dir()
    assert all(e["diff"] == 0 for e in consumer_progress(ns, "spark-order-stats"))
