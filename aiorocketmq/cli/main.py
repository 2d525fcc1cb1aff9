"""``aiorocketmq``: the demo, consumer and producer processes, traces and local clusters."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiorocketmq.cli.clients import (
    add_consume_parser,
    add_produce_parser,
    consume_main,
    produce_main,
)
from aiorocketmq.cli.cluster import add_cluster_parser, cluster_main
from aiorocketmq.cli.common import ToolArgumentParser, ToolError, explain, quiet_broken_pipe
from aiorocketmq.cli.dashboard import add_dashboard_parser, dashboard_main
from aiorocketmq.logs import configure_logging
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.runtime import run

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = ToolArgumentParser(prog="aiorocketmq", description=__doc__)
    parser.add_argument("--log-level", default="WARNING")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="watch consumers join and leave a group, narrated")
    demo.add_argument("--step", type=float, default=4.0, help="seconds between joins and leaves")
    demo.add_argument(
        "--dashboard",
        nargs="?",
        const="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="watch it in the web dashboard (default address %(const)s), kept up until Ctrl-C",
    )
    add_consume_parser(sub)
    add_produce_parser(sub)
    add_cluster_parser(sub)
    add_dashboard_parser(sub)
    trace = sub.add_parser("trace", help="protocol traces")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    report = trace_sub.add_parser("report", help="who held which queue, duplicates, losses")
    report.add_argument("files", nargs="+", type=Path, help="JSONL trace files (merged by time)")
    report.add_argument("-g", "--group", help="only this consumer group")
    report.add_argument("-t", "--topic", help="only this topic")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        return _command(parser, args)
    except ToolError as e:
        print(f"aiorocketmq {args.command}: {e}", file=sys.stderr)
        return 1
    except MQError as e:
        print(
            f"aiorocketmq {args.command}: {explain(e, getattr(args, 'namesrv_addr', ''))}",
            file=sys.stderr,
        )
        return 1
    except BrokenPipeError:
        return quiet_broken_pipe()
    except KeyboardInterrupt:
        return 130


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "demo":
        from aiorocketmq.cli.demo import run_demo

        return run(run_demo(sys.stdout, step_s=args.step, dashboard=args.dashboard))
    if args.command == "trace":
        from aiorocketmq.trace_check import check, format_report, read_traces

        print(format_report(check(read_traces(args.files), group=args.group, topic=args.topic)))
        return 0
    if args.command == "consume":
        return run(consume_main(args))
    if args.command == "produce":
        return run(produce_main(args))
    if args.command == "cluster":
        return cluster_main(args)
    if args.command == "dashboard":
        return run(dashboard_main(args))
    parser.error(f"unknown command {args.command}")
    return 2
