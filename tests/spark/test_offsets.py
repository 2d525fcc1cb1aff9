"""The data source's pure parts: offsets JSON, options, ranges, rate limits, data loss."""

from __future__ import annotations

import datetime
import itertools
import json
import pickle

import pytest

from aiorocketmq.pipeline.client import SyncClient
from aiorocketmq.pipeline.offsets import (
    OffsetRange,
    QueueStats,
    data_loss,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_option,
    plan_ranges,
    rate_limit,
    resolve_offsets,
)
from aiorocketmq.pipeline.options import ReadOptions, WriteOptions

A0 = ("T", "broker-a", 0)
A1 = ("T", "broker-a", 1)
B0 = ("T", "broker-b", 0)
B10 = ("T", "broker-b", 10)


def test_offsets_json_is_three_levels_sorted_and_round_trips() -> None:
    offsets = {B10: 5, A1: 7, B0: 1, ("S", "broker-a", 0): 0, A0: 3}
    data = offsets_to_json(offsets)
    assert json.dumps(data) == (
        '{"S": {"broker-a": {"0": 0}}, "T": {"broker-a": {"0": 3, "1": 7}, '
        '"broker-b": {"0": 1, "10": 5}}}'
    )
    assert offsets_from_json(json.loads(json.dumps(data))) == offsets
    # The same offsets in another order are the same text (Spark compares offsets as JSON).
    assert json.dumps(offsets_to_json(dict(reversed(list(offsets.items()))))) == json.dumps(data)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([1], "expected a JSON object"),
        ({"T": 1}, "must map broker names"),
        ({"T": {"b": 1}}, "must map queue ids"),
        ({"T": {"b": {"x": 1}}}, "queue id 'x'"),
        ({"T": {"b": {"0": -3}}}, "offset -3"),
        ({"T": {"b": {"0": "5"}}}, "offset '5'"),
        ({"T": {"b": {"0": True}}}, "offset True"),
    ],
)
def test_bad_offsets_json_names_the_problem(data: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        offsets_from_json(data)


def test_offsets_option_words_json_and_refusals() -> None:
    assert parse_offsets_option(None, option="startingOffsets", default="earliest") == "earliest"
    assert parse_offsets_option(" LATEST ", option="x", default="earliest") == "latest"
    assert parse_offsets_option('{"T": {"broker-a": {"0": -2}}}', option="x", default="latest") == {
        A0: -2
    }
    with pytest.raises(ValueError, match="startingOffsets: 'latest' is not allowed"):
        parse_offsets_option(
            "latest", option="startingOffsets", default="earliest", allow_latest=False
        )
    with pytest.raises(ValueError, match="-2 \\(earliest\\) is not allowed"):
        parse_offsets_option(
            '{"T": {"broker-a": {"0": -2}}}',
            option="endingOffsets",
            default="latest",
            allow_earliest=False,
        )
    with pytest.raises(ValueError, match="endingOffsets: expected 'earliest', 'latest' or JSON"):
        parse_offsets_option("soon", option="endingOffsets", default="latest")


def test_resolve_offsets_fills_words_sentinels_and_defaults() -> None:
    stats = {A0: QueueStats(2, 10), A1: QueueStats(0, 4), B0: QueueStats(5, 5)}
    assert resolve_offsets("earliest", stats, default="latest") == {A0: 2, A1: 0, B0: 5}
    assert resolve_offsets("latest", stats, default="earliest") == {A0: 10, A1: 4, B0: 5}
    spec = {A0: 7, A1: -1}
    assert resolve_offsets(spec, stats, default="earliest") == {A0: 7, A1: 4, B0: 5}
    assert resolve_offsets({A0: -2}, stats, default="latest") == {A0: 2, A1: 4, B0: 5}
    with pytest.raises(ValueError, match="T/broker-c/0"):
        resolve_offsets({("T", "broker-c", 0): 1}, stats, default="latest")


def test_plan_ranges_one_per_queue_with_data() -> None:
    ranges = plan_ranges({A0: 2, A1: 4, B0: 0}, {A0: 10, A1: 4, B0: 3})
    assert ranges == [OffsetRange("T", "broker-a", 0, 2, 10), OffsetRange("T", "broker-b", 0, 0, 3)]
    # A queue of the end that the start lacks is read from 0.
    assert plan_ranges({}, {A0: 2}) == [OffsetRange("T", "broker-a", 0, 0, 2)]


def test_min_partitions_splits_ranges_in_proportion_and_covers_them_exactly() -> None:
    start = {A0: 0, A1: 100, B0: 0}
    end = {A0: 900, A1: 190, B0: 10}
    ranges = plan_ranges(start, end, min_partitions=10)
    assert len(ranges) == 11
    by_queue: dict[tuple[str, str, int], list[OffsetRange]] = {}
    for r in ranges:
        by_queue.setdefault(r.key, []).append(r)
    assert len(by_queue[A0]) == 9 and len(by_queue[A1]) == 1 and len(by_queue[B0]) == 1
    for key, parts in by_queue.items():
        assert parts[0].start == start[key] and parts[-1].end == end[key]
        assert all(a.end == b.start for a, b in itertools.pairwise(parts))
    # Equal ranges: at least the partitions asked for.
    even = {("T", "b", i): 30 for i in range(8)}
    assert len(plan_ranges({}, even, min_partitions=20)) == 20
    # Fewer partitions asked than queues: nothing is split.
    assert len(plan_ranges(start, end, min_partitions=2)) == 3


def test_max_records_per_partition_caps_every_range() -> None:
    ranges = plan_ranges({A0: 0}, {A0: 1001}, max_records_per_partition=250)
    assert [r.size for r in ranges] == [201, 200, 200, 200, 200]


def test_rate_limit_shares_by_backlog_and_adds_up_exactly() -> None:
    start = {A0: 0, A1: 0, B0: 50}
    latest = {A0: 60, A1: 30, B0: 60}
    capped = rate_limit(start, latest, 10)
    advanced = {k: capped[k] - start[k] for k in start}
    assert sum(advanced.values()) == 10
    assert advanced[A0] >= advanced[A1] >= advanced[B0]
    assert all(start[k] <= capped[k] <= latest[k] for k in start)
    # Under the limit: everything.
    assert rate_limit(start, latest, 1000) == latest
    # Many small queues, a small limit: still exactly the limit (Kafka's rounding overshoots).
    many = {("T", "b", i): 5 for i in range(20)}
    out = rate_limit({}, many, 7)
    assert sum(out.values()) == 7
    # A limit below 1 still advances.
    assert sum(rate_limit({}, {A0: 5}, 0).values()) == 1


def test_data_loss_reports_deleted_and_reset_offsets_only() -> None:
    stats = {A0: QueueStats(10, 20), A1: QueueStats(0, 5), B0: QueueStats(0, 3)}
    problems = data_loss({A0: 4, A1: 5, B0: 9, B10: 1}, stats)
    assert len(problems) == 2
    assert "T/broker-a/0: offsets 4..9 were deleted" in problems[0]
    assert "T/broker-b/0: the checkpoint expects offset 9 but the queue ends at 3" in problems[1]


def test_read_options_parse_case_insensitively_and_name_bad_values() -> None:
    opts = ReadOptions.parse(
        {
            "nameServer": "127.0.0.1:9876",
            "TOPIC": "A, B",
            "subexpression": "TagA || TagB",
            "minPartitions": "8",
            "maxOffsetsPerTrigger": "100",
            "failOnDataLoss": "FALSE",
            "group": "g1",
        }
    )
    assert opts.topics == ("A", "B") and opts.sub_expression == "TagA || TagB"
    assert opts.min_partitions == 8 and opts.max_offsets_per_trigger == 100
    assert opts.fail_on_data_loss is False and opts.pull_group == "g1"
    for options, fragment in [
        ({"topic": "A"}, "nameServer is required"),
        ({"nameserver": "x:1"}, "exactly one of the options topic"),
        ({"nameserver": "x:1", "topic": "A,A"}, "names a topic twice"),
        ({"nameserver": "x:1", "topic": "bad topic"}, "option topic"),
        (
            {"nameserver": "x:1", "topic": "A", "minPartitions": "many"},
            "minPartitions must be an integer",
        ),
        ({"nameserver": "x:1", "topic": "A", "maxOffsetsPerTrigger": "0"}, "must be >= 1"),
        ({"nameserver": "x:1", "topic": "A", "failOnDataLoss": "maybe"}, "true or false"),
        ({"nameserver": "x:1", "topic": "A", "pullBatchSize": "5000"}, "<= 1024"),
        ({"nameserver": "x:1", "topic": "A", "group": "g g"}, "option group"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            ReadOptions.parse(options)


def test_write_options() -> None:
    opts = WriteOptions.parse({"namesrvAddr": "h:1", "topic": "Out", "batchSize": "10"})
    assert (opts.namesrv, opts.topic, opts.batch_size) == ("h:1", "Out", 10)
    with pytest.raises(ValueError, match="producerGroup"):
        WriteOptions.parse({"nameserver": "h:1", "producerGroup": "no spaces"})


def test_client_pickles_to_its_settings_only() -> None:
    client = SyncClient("127.0.0.1:1;127.0.0.1:2", timeout=2.5)
    client._routes["T"] = (0.0, None)  # type: ignore[assignment]
    copy = pickle.loads(pickle.dumps(client))
    assert copy.namesrv_addrs == ["127.0.0.1:1", "127.0.0.1:2"] and copy.timeout == 2.5
    assert copy._routes == {}


def test_source_objects_carry_settings_only_and_pickle() -> None:
    """Spark pickles readers and writers to its workers: nothing in them may hold a connection."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from pyspark import cloudpickle

    from aiorocketmq.pipeline.source import SCHEMA, RocketMQDataSource

    source = RocketMQDataSource(
        {"nameServer": "127.0.0.1:1", "topic": "T", "startingOffsets": "earliest"}
    )
    sink = RocketMQDataSource({"nameServer": "127.0.0.1:1", "topic": "T"})
    writer_schema = SCHEMA  # has a binary body and a string topic
    for obj in (
        source,
        source.reader(SCHEMA),
        source.streamReader(SCHEMA),
        sink.writer(writer_schema, False),
        sink.streamWriter(writer_schema, False),
    ):
        copy = cloudpickle.loads(cloudpickle.dumps(obj))
        assert type(copy) is type(obj)
        client = getattr(copy, "client", None)
        if client is not None:
            assert client.namesrv_addrs == ["127.0.0.1:1"] and client._routes == {}
    from pyspark.sql.types import StringType, StructField, StructType

    other = StructType([*SCHEMA.fields, StructField("extra", StringType())])
    with pytest.raises(ValueError, match="fixed schema"):
        source.reader(other)
    with pytest.raises(ValueError, match="endingOffsetsByTimestamp are for batch queries only"):
        RocketMQDataSource(
            {"nameServer": "h:1", "topic": "T", "endingOffsets": "latest"}
        ).streamReader(SCHEMA)


def test_raw_records_become_rows_cut_at_the_end_offset() -> None:
    """The reader's columnar path: every column of every record, cut at ``end``."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from aiorocketmq.pipeline.arrow import arrow_schema, messages_to_batch, records_to_batch
    from aiorocketmq.pipeline.source import SCHEMA
    from aiorocketmq.protocol.record import (
        RecordBatchEncoder,
        create_message_id,
        decode_records_py,
        encode_properties,
    )

    encoder = RecordBatchEncoder(
        topic=b"Orders",
        queue_id=3,
        born_timestamp=1_700_000_000_123,
        born_host=(bytes([10, 0, 0, 7]), 5555),
        store_timestamp=1_700_000_000_456,
        store_host=(bytes([127, 0, 0, 1]), 10911),
        reconsume_times=0,
    )
    properties = [
        {"TAGS": "paid", "KEYS": "o-1", "n": "1"},
        {},
        {"KEYS": "o-3 o-3b"},
        {"TAGS": "created", "a": "x", "b": "y"},
    ]
    items = [
        (f"body-{i}".encode(), encode_properties(p).encode(), 0) for i, p in enumerate(properties)
    ]
    out: list[bytes] = []
    placed: list[int] = []
    encoder.encode(items, 40, 4096, out, placed)
    data = b"".join(out)
    schema = arrow_schema(SCHEMA)
    rows = records_to_batch(data, "broker-a", 10**9, schema).to_pylist()
    utc = datetime.UTC
    born = datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc)
    stored = datetime.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=utc)
    expected_maps = [[("n", "1")], [], [], [("a", "x"), ("b", "y")]]
    tags = ["paid", None, None, "created"]
    keys = ["o-1", None, "o-3 o-3b", None]
    assert rows == [
        {
            "topic": "Orders",
            "brokerName": "broker-a",
            "queueId": 3,
            "queueOffset": 40 + i,
            "msgId": create_message_id(bytes([127, 0, 0, 1]), 10911, placed[i]),
            "tags": tags[i],
            "keys": keys[i],
            "body": f"body-{i}".encode(),
            "bornTimestamp": born,
            "storeTimestamp": stored,
            "properties": expected_maps[i],
        }
        for i in range(4)
    ]
    # The Python decoder gives the same batch (the C one is the default where built).
    assert messages_to_batch(decode_records_py(data, "broker-a"), schema).to_pylist() == rows
    cut = records_to_batch(data, "broker-a", 42, schema)
    assert cut.to_pylist() == rows[:2]
    assert records_to_batch(data, "broker-a", 40, schema) is None
    with pytest.raises(ValueError, match="not a commit-log record"):
        records_to_batch(data[:-3], "broker-a", 10**9, schema)
