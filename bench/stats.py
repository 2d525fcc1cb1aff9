"""The one percentile the benchmarks report: nearest rank, so a p99 is a sample that was seen."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile"]


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by nearest rank: the smallest sample with at least ``p`` %
    of the samples at or below it (p99 of 100 samples is the 99th smallest); 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(len(ordered) * p / 100)
    return ordered[min(len(ordered), max(1, rank)) - 1]
