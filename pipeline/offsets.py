"""Offsets, ranges and limits of the Spark data source: pure functions, no Spark, no network.

A queue is named by ``QueueKey`` (topic, broker name, queue id), RocketMQ's ``MessageQueue``
without the class. Offsets are a ``dict[QueueKey, int]``: for a range, the first offset to read
(inclusive) or the first not to read (exclusive), as RocketMQ's queue offsets count.

Rules:

- **JSON** (the ``startingOffsets`` / ``endingOffsets`` options and the streaming checkpoint) is
  the RocketMQ Spark connector's three levels, topic -> broker name -> queue id -> offset::

      {"TopicA": {"broker-a": {"0": 23, "1": -2}, "broker-b": {"0": -1}}}

  ``-2`` means the queue's earliest offset, ``-1`` its latest (as in Spark's Kafka source). The
  checkpoint form never holds a sentinel and its keys are always sorted, so the same offsets
  are always the same text (Spark compares offsets as JSON).
- **Options** ``startingOffsets``/``endingOffsets`` are ``earliest``, ``latest`` or JSON. A
  queue the JSON does not name takes the option's default (``earliest`` for a start, ``latest``
  for an end). ``startingOffsets=latest`` is refused in a batch query, ``endingOffsets=earliest``
  and ``-2`` in an end always (Kafka's rules).
- **Ranges** ``plan_ranges``: one range per queue with something to read, split when
  ``min_partitions`` asks for more partitions than there are queues (each range gets a share of
  the partitions proportional to its size, as Spark's ``KafkaOffsetRangeCalculator``, the
  shares adding up to at least ``min_partitions``) or when a range is over
  ``max_records_per_partition``; a range is never split below one offset per partition.
- **Rate limit** ``rate_limit`` (``maxOffsetsPerTrigger``): the limit is shared among the
  queues in proportion to their backlog; unlike Kafka's rounding (which can overshoot), the
  shares add up to exactly the limit (largest remainders), and every batch advances.
- **Data loss** ``data_loss``: a checkpoint offset below the queue's min offset (retention
  deleted what was not yet read) or above its max offset (the queue was reset).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "OffsetSpec",
    "QueueKey",
    "QueueStats",
    "data_loss",
    "offsets_from_json",
    "offsets_to_json",
    "parse_offsets_option",
    "plan_ranges",
    "rate_limit",
    "resolve_offsets",
]

QueueKey = tuple[str, str, int]
"""(topic, broker name, queue id)."""

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's offsets as its broker reports them (GET_TOPIC_STATS_INFO)."""

    min_offset: int
    max_offset: int


OffsetSpec = Literal["earliest", "latest"] | dict[QueueKey, int]
"""What an offsets option says: a word, or offsets per queue (which may be -2 or -1)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one queue: what one Spark partition reads."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


# ---- JSON ---------------------------------------------------------------------------------------
def offsets_to_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    """Three levels, every level sorted (queue ids numerically): the checkpoint form."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for topic, broker, qid in sorted(offsets):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(
            offsets[(topic, broker, qid)]
        )
    return out


def offsets_from_json(data: object, *, what: str = "offsets") -> dict[QueueKey, int]:
    """The offsets of the three-level form; ``ValueError`` naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected a JSON object topic -> broker -> queue id -> offset")
    offsets: dict[QueueKey, int] = {}
    for topic, brokers in data.items():
        if not isinstance(brokers, dict):
            raise ValueError(f"{what}: topic {topic!r} must map broker names to objects")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ValueError(
                    f'{what}: {topic!r}/{broker!r} must map queue ids to offsets (e.g. {{"0": 23}})'
                )
            for qid, offset in queues.items():
                try:
                    queue_id = int(qid)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"{what}: queue id {qid!r} of {topic!r}/{broker!r} is not an integer"
                    ) from None
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ValueError(
                        f"{what}: offset {offset!r} of {topic}/{broker}/{qid} must be an "
                        "integer >= 0, or -2 (earliest) or -1 (latest)"
                    )
                offsets[(str(topic), str(broker), queue_id)] = offset
    return offsets


def parse_offsets_option(
    text: str | None,
    *,
    option: str,
    default: Literal["earliest", "latest"],
    allow_earliest: bool = True,
    allow_latest: bool = True,
) -> OffsetSpec:
    """The value of ``startingOffsets`` or ``endingOffsets``; ``ValueError`` naming the option."""
    if text is None or not text.strip():
        return default
    word = text.strip().lower()
    if word == "earliest":
        if not allow_earliest:
            raise ValueError(f"{option}: 'earliest' is not allowed here")
        return "earliest"
    if word == "latest":
        if not allow_latest:
            raise ValueError(f"{option}: 'latest' is not allowed here")
        return "latest"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{option}: expected 'earliest', 'latest' or JSON like "
            f'{{"TopicA": {{"broker-a": {{"0": 23}}}}}}, got {text!r} ({e.msg})'
        ) from None
    offsets = offsets_from_json(data, what=option)
    for key, offset in offsets.items():
        if offset == EARLIEST and not allow_earliest:
            raise ValueError(
                f"{option}: -2 (earliest) is not allowed here ({'/'.join(map(str, key))})"
            )
        if offset == LATEST and not allow_latest:
            raise ValueError(
                f"{option}: -1 (latest) is not allowed here ({'/'.join(map(str, key))})"
            )
    return offsets


def resolve_offsets(
    spec: OffsetSpec,
    stats: Mapping[QueueKey, QueueStats],
    *,
    default: Literal["earliest", "latest"],
) -> dict[QueueKey, int]:
    """Concrete offsets for every queue of ``stats``: words and sentinels looked up.

    A queue named in ``spec`` but unknown to ``stats`` is an error (a typo in a broker name
    would otherwise read nothing quietly).
    """

    def word(w: str, s: QueueStats) -> int:
        return s.min_offset if w == "earliest" else s.max_offset

    if isinstance(spec, str):
        return {key: word(spec, s) for key, s in sorted(stats.items())}
    unknown = sorted(set(spec) - set(stats))
    if unknown:
        known = ", ".join("/".join(map(str, k)) for k in sorted(stats)) or "none"
        raise ValueError(
            f"offsets name queues the topics do not have: "
            f"{', '.join('/'.join(map(str, k)) for k in unknown)} (known: {known})"
        )
    out: dict[QueueKey, int] = {}
    for key, s in sorted(stats.items()):
        offset = spec.get(key)
        if offset is None:
            out[key] = word(default, s)
        elif offset == EARLIEST:
            out[key] = s.min_offset
        elif offset == LATEST:
            out[key] = s.max_offset
        else:
            out[key] = offset
    return out


# ---- ranges -------------------------------------------------------------------------------------
def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    step, extra = divmod(r.size, parts)
    out = []
    start = r.start
    for i in range(parts):
        end = start + step + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.broker_name, r.queue_id, start, end))
        start = end
    return out


def plan_ranges(
    start: Mapping[QueueKey, int],
    end: Mapping[QueueKey, int],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The ranges to read between ``start`` and ``end`` (queues of ``end``; missing starts are 0).

    Empty ranges are left out. Ranges come sorted by queue, then offset.
    """
    ranges = [
        OffsetRange(topic, broker, qid, start.get((topic, broker, qid), 0), stop)
        for (topic, broker, qid), stop in sorted(end.items())
    ]
    ranges = [r for r in ranges if r.size > 0]
    parts = [1] * len(ranges)
    total = sum(r.size for r in ranges)
    if min_partitions and min_partitions > len(ranges) and total:
        # Shares of min_partitions by size: floors (at least 1), then the largest remainders.
        exact = [r.size * min_partitions / total for r in ranges]
        parts = [max(1, math.floor(e)) for e in exact]
        order = sorted(range(len(ranges)), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
        for i in order[: max(0, min_partitions - sum(parts))]:
            parts[i] += 1
    if max_records_per_partition:
        parts = [
            max(p, math.ceil(r.size / max_records_per_partition))
            for p, r in zip(parts, ranges, strict=True)
        ]
    out: list[OffsetRange] = []
    for r, p in zip(ranges, parts, strict=True):
        out.extend(_split(r, p))
    return out


# ---- rate limit ---------------------------------------------------------------------------------
def rate_limit(
    start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], limit: int
) -> dict[QueueKey, int]:
    """``latest`` cut so that at most ``limit`` offsets lie between ``start`` and the result.

    Each queue gets a share of ``limit`` proportional to its backlog (floors, then the
    remainder to the largest fractions, ties by queue order). A queue of ``latest`` not in
    ``start`` counts from 0. ``limit`` < 1 is treated as 1 so every batch advances.
    """
    limit = max(1, limit)
    backlog = {k: max(0, v - start.get(k, 0)) for k, v in latest.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares: dict[QueueKey, int] = {}
    fractions: list[tuple[float, QueueKey]] = []
    for key in sorted(backlog):
        exact = backlog[key] * limit / total
        shares[key] = math.floor(exact)
        fractions.append((exact - shares[key], key))
    left = limit - sum(shares.values())
    for _, key in sorted(fractions, key=lambda f: (-f[0], f[1]))[:left]:
        shares[key] += 1
    return {
        key: (start.get(key, 0) + shares[key]) if backlog[key] else latest[key] for key in latest
    }


# ---- data loss ----------------------------------------------------------------------------------
def data_loss(offsets: Mapping[QueueKey, int], stats: Mapping[QueueKey, QueueStats]) -> list[str]:
    """What of ``offsets`` (the next offsets to read) the queues no longer have, one line each.

    A queue missing from ``stats`` is not reported (its broker may be restarting).
    """
    problems = []
    for key in sorted(offsets):
        s = stats.get(key)
        if s is None:
            continue
        offset = offsets[key]
        name = "/".join(map(str, key))
        if offset < s.min_offset:
            problems.append(
                f"{name}: offsets {offset}..{s.min_offset - 1} were deleted before they were read "
                f"(the queue now starts at {s.min_offset})"
            )
        elif offset > s.max_offset:
            problems.append(
                f"{name}: the checkpoint expects offset {offset} but the queue ends at "
                f"{s.max_offset} (was it reset?)"
            )
    return problems
