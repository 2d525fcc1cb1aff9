"""The Spark source's options, parsed without Spark: Kafka's names, one subscription, times,
trigger limits, and a misspelt option refused with the closest name."""

from __future__ import annotations

import json

import pytest

from aiorocketmq.pipeline.options import ReadOptions, WriteOptions, duration_ms

NS = {"nameServer": "127.0.0.1:9876"}


def test_exactly_one_way_to_choose_topics() -> None:
    assert ReadOptions.parse({**NS, "subscribe": "A,B"}).topics == ("A", "B")
    pattern = ReadOptions.parse({**NS, "subscribePattern": "Order.+"})
    assert pattern.topics == () and pattern.matches("Orders") and not pattern.matches("Order")
    assert not pattern.matches("%RETRY%Orders") and not ReadOptions.parse(
        {**NS, "subscribePattern": ".*"}
    ).matches("%DLQ%g")
    assign = ReadOptions.parse({**NS, "assign": json.dumps({"T": {"broker-a": [0, 2]}})})
    assert assign.topics == ("T",) and assign.assign == {("T", "broker-a", 0), ("T", "broker-a", 2)}
    for bad, message in (
        ({}, "exactly one of the options topic"),
        ({"topic": "A", "subscribePattern": "A"}, "got topic, subscribePattern"),
        ({"subscribePattern": "(["}, "not a regular expression"),
        ({"assign": "[1]"}, "option assign: expected JSON"),
        ({"assign": json.dumps({"T": {"broker-a": [-1]}})}, "queue ids >= 0"),
        ({"assign": json.dumps({"T": {"broker-a": []}})}, "list of queue ids"),
    ):
        with pytest.raises(ValueError, match=message):
            ReadOptions.parse({**NS, **bad})


def test_times_and_trigger_limits() -> None:
    opts = ReadOptions.parse(
        {
            **NS,
            "topic": "T",
            "startingTimestamp": "1700000000000",
            "endingOffsetsByTimestamp": json.dumps({"T": {"broker-a": {"0": 1700000001000}}}),
            "minOffsetsPerTrigger": "100",
            "maxTriggerDelay": "30s",
        }
    )
    assert opts.starting_timestamp == 1_700_000_000_000
    assert opts.ending_offsets_by_timestamp == {("T", "broker-a", 0): 1_700_000_001_000}
    assert opts.has_end and (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (
        100,
        30_000,
    )
    assert ReadOptions.parse({**NS, "topic": "T"}).max_trigger_delay_ms == 15 * 60_000
    assert [duration_ms(t, option="x") for t in ("500ms", "2s", "15m", "1h", "250")] == [
        500, 2_000, 900_000, 3_600_000, 250,
    ]  # fmt: skip
    for bad, message in (
        ({"startingTimestamp": "yesterday"}, "startingTimestamp must be an integer"),
        ({"endingTimestamp": "-1"}, "endingTimestamp must be >= 0"),
        ({"startingOffsetsByTimestamp": "{"}, "startingOffsetsByTimestamp: expected JSON"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger must be >= 1"),
    ):
        with pytest.raises(ValueError, match=message):
            ReadOptions.parse({**NS, "topic": "T", **bad})


def test_an_unknown_option_names_the_closest_known_one() -> None:
    with pytest.raises(
        ValueError, match="unknown read option 'startingofsets'; did you mean 'startingOffsets'"
    ):
        ReadOptions.parse({**NS, "topic": "T", "startingofsets": "earliest"})
    with pytest.raises(ValueError, match="unknown read option 'nonsense' \\(known: nameServer"):
        ReadOptions.parse({**NS, "topic": "T", "nonsense": "1"})
    with pytest.raises(
        ValueError, match="unknown write option 'batchsise'; did you mean 'batchSize'"
    ):
        WriteOptions.parse({**NS, "batchsise": "10"})
    # Spark's own options pass through
    ReadOptions.parse({**NS, "topic": "T", "path": "x"})
    WriteOptions.parse({**NS, "checkpointLocation": "/tmp/cp"})
