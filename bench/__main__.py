"""``python -m bench [NAME ...]``: run every benchmark of ``BENCHMARKS`` (or the named ones).

Each entry names a module ``bench/<name>.py`` with a ``main()`` that runs the benchmark with its
defaults, prints its figures and returns an exit code (0, or None, for success). To add a
benchmark, write the module and add its name here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS: tuple[str, ...] = (
    "throughput",
    "endtoend",
    "rebalance",
    "handoff",
    "allocation",
    "spark_read",
)


def run_one(name: str) -> int:
    """Import ``bench.<name>`` and run its ``main()`` with no command-line arguments."""
    module = importlib.import_module(f"bench.{name}")
    saved = sys.argv
    sys.argv = [f"python -m bench.{name}"]  # a main() that parses sys.argv sees no arguments
    try:
        code = module.main()
    finally:
        sys.argv = saved
    return 0 if code is None else int(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: {BENCHMARKS})"
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    failed: list[str] = []
    for name in args.names or BENCHMARKS:
        print(f"==> bench.{name}", flush=True)
        started = time.monotonic()
        code = run_one(name)
        print(f"<== bench.{name}: exit {code} in {time.monotonic() - started:.1f} s\n", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
