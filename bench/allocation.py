"""Allocation stability: queues moved when one consumer joins or leaves, and the busiest consumer.

No broker, no processes: the strategies of ``aiorocketmq.consumer.allocate`` are pure functions, run here as
every consumer of a group runs them (each computes its own share from the same sorted inputs).
For 32 consumers x 128 queues by default, over ``--trials`` random sets of client ids (the
same sets for every strategy), it prints for ``AVG``, ``CONSISTENT_HASH`` and
``CONSISTENT_HASH_BOUNDED``:

- **join** (32 -> 33) and **leave** (33 -> 32, any of the 33 leaving): queues whose owner
  changed, p50 and mean over the trials, the mean against the ideal ``n / (c + 1)`` (the
  queues the joiner must take, or the leaver hand over), and the worst trial;
- **max load**: the busiest consumer of every group computed (32 and 33 consumers), mean and
  worst, against the bound of ``CONSISTENT_HASH_BOUNDED``, ``ceil((1 + epsilon) * n / c)``;

then, on a line of its own, the leave 32 -> 31 that steps that bound up (5 -> 6 queues at 128
queues), where every consumer that was full takes back a queue it had overflowed: the one case
well above the ideal. Exit code 1 if ``CONSISTENT_HASH_BOUNDED`` ever exceeds its bound or a
strategy leaves a queue unowned or owned twice.

``python -m bench.allocation [--queues N] [--consumers C] [--trials T] [--seed S]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiorocketmq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueConsistentHashBounded,
    AllocateMessageQueueStrategy,
)
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["main"]

GROUP = "bench_allocation"


def _client_id(rnd: random.Random) -> str:
    """A client id as RocketMQ builds them: ``ip@pid#nanotime``."""
    ip = f"10.0.{rnd.randrange(256)}.{rnd.randrange(256)}"
    return f"{ip}@{rnd.randrange(1 << 16)}#{rnd.randrange(1 << 40)}"


def owners(
    strategy: AllocateMessageQueueStrategy, mq_all: list[MessageQueue], cid_all: Sequence[str]
) -> dict[MessageQueue, str]:
    """Every consumer's share, as each consumer computes it; checked to partition ``mq_all``."""
    cids = sorted(cid_all)
    owner: dict[MessageQueue, str] = {}
    for cid in cids:
        for mq in strategy.allocate(GROUP, cid, list(mq_all), list(cids)):
            if mq in owner:
                raise AssertionError(f"{strategy.name}: {mq} owned by {owner[mq]} and {cid}")
            owner[mq] = cid
    if len(owner) != len(mq_all):
        raise AssertionError(f"{strategy.name}: {len(mq_all) - len(owner)} queue(s) unowned")
    return owner


def _moved(before: dict[MessageQueue, str], after: dict[MessageQueue, str]) -> int:
    return sum(before[mq] != after[mq] for mq in before)


def _max_load(owner: dict[MessageQueue, str]) -> int:
    return max(Counter(owner.values()).values())


@dataclass(frozen=True)
class Trial:
    """One random group: ``base`` (c consumers), a joiner, and who leaves in each case."""

    base: tuple[str, ...]
    joiner: str
    leaver: str  # one of base + joiner: the leave c + 1 -> c
    step_leaver: str  # one of base: the leave c -> c - 1


@dataclass
class Figures:
    joins: list[int] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    max_loads: list[int] = field(default_factory=list)


def trials(count: int, consumers: int, seed: int) -> list[Trial]:
    rnd = random.Random(seed)
    result = []
    for _ in range(count):
        base = tuple(sorted({_client_id(rnd) for _ in range(consumers)}))
        joiner = _client_id(rnd)
        result.append(Trial(base, joiner, rnd.choice([*base, joiner]), rnd.choice(base)))
    return result


def measure(
    strategy: AllocateMessageQueueStrategy, mq_all: list[MessageQueue], groups: list[Trial]
) -> Figures:
    figures = Figures()
    for t in groups:
        bigger = [*t.base, t.joiner]
        base = owners(strategy, mq_all, t.base)
        joined = owners(strategy, mq_all, bigger)
        left = owners(strategy, mq_all, [c for c in bigger if c != t.leaver])
        stepped = owners(strategy, mq_all, [c for c in t.base if c != t.step_leaver])
        figures.joins.append(_moved(base, joined))
        figures.leaves.append(_moved(joined, left))
        figures.steps.append(_moved(base, stepped))
        figures.max_loads += [_max_load(base), _max_load(joined)]
    return figures


def _moves(counts: list[int], ideal: float) -> str:
    """p50, mean, mean / ideal and worst, in the columns of ``HEADER``."""
    mean = statistics.mean(counts)
    return f"{statistics.median(counts):9.1f} {mean:6.2f} {mean / ideal:6.2f}x {max(counts):5d}"


HEADER = (
    f"{'strategy':<24} {'join p50':>9} {'mean':>6} {'/ideal':>7} {'worst':>5}   "
    f"{'leave p50':>9} {'mean':>6} {'/ideal':>7} {'worst':>5}   max load mean / worst"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.allocation", description=__doc__)
    parser.add_argument("--queues", type=int, default=128, help="queues of the topic (128)")
    parser.add_argument("--consumers", type=int, default=32, help="consumers before a join (32)")
    parser.add_argument("--trials", type=int, default=200, help="random client-id sets (200)")
    parser.add_argument("--seed", type=int, default=2024, help="seed of the client ids (2024)")
    args = parser.parse_args(argv)
    n, c = args.queues, args.consumers
    if n < 1 or c < 2 or args.trials < 1:
        parser.error("need --queues >= 1, --consumers >= 2 and --trials >= 1")

    mq_all = sorted(MessageQueue("BenchAllocation", f"broker-{i % 4}", i // 4) for i in range(n))
    groups = trials(args.trials, c, args.seed)
    bounded = AllocateMessageQueueConsistentHashBounded()
    bound = max(bounded.capacity(n, c), bounded.capacity(n, c + 1))
    strategies: list[AllocateMessageQueueStrategy] = [
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueConsistentHash(),
        bounded,
    ]
    ideal = n / (c + 1)
    print(
        f"{n} queues, {c} consumers, {args.trials} trials (seed {args.seed}); "
        f"queues moved per join {c} -> {c + 1} and leave {c + 1} -> {c}, "
        f"ideal n / (c + 1) = {ideal:.2f}; bound ceil({1 + bounded.epsilon:g} * n / c) = {bound}"
    )
    print(HEADER)
    failed = False
    step: Figures | None = None
    for strategy in strategies:
        started = time.perf_counter()
        figures = measure(strategy, mq_all, groups)
        elapsed = time.perf_counter() - started
        worst = max(figures.max_loads)
        print(
            f"{strategy.name:<24} {_moves(figures.joins, ideal)}   "
            f"{_moves(figures.leaves, ideal)}   "
            f"{statistics.mean(figures.max_loads):8.2f} / {worst:2d} (bound {bound})"
            f"   ({elapsed:.1f} s)"
        )
        if strategy is bounded:
            step = figures
            failed |= worst > bound
    assert step is not None
    before, after = bounded.capacity(n, c), bounded.capacity(n, c - 1)
    print(
        f"{bounded.name} leave {c} -> {c - 1} (capacity {before} -> {after}): "
        f"p50 {statistics.median(step.steps):.1f}, mean {statistics.mean(step.steps):.2f} "
        f"= {statistics.mean(step.steps) / (n / c):.2f}x the ideal n / c = {n / c:.2f}, "
        f"worst {max(step.steps)}"
    )
    if failed:
        print(f"{bounded.name} exceeded its bound of {bound}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
