"""``aiorocketmq``: the demo, and (as they land) local clusters, traces and benchmarks."""

from __future__ import annotations

import argparse
import sys

from aiorocketmq.logs import configure_logging
from aiorocketmq.runtime import run

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiorocketmq", description=__doc__)
    parser.add_argument("--log-level", default="WARNING")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="watch consumers join and leave a group, narrated")
    demo.add_argument("--step", type=float, default=4.0, help="seconds between joins and leaves")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    if args.command == "demo":
        from aiorocketmq.demo import run_demo

        return run(run_demo(sys.stdout, step_s=args.step))
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
