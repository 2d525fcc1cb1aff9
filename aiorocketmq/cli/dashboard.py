"""``aiorocketmq dashboard``: the web dashboard of a running cluster, until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aiorocketmq.cli.common import (
    ToolError,
    check_namesrv,
    default_namesrv_addr,
    namesrv_addr_type,
)
from aiorocketmq.runtime import stop_on_signals

__all__ = ["add_dashboard_parser", "dashboard_main"]


def add_dashboard_parser(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="a web page of the cluster and its live rebalance")
    p.add_argument(
        "-n",
        "--namesrv-addr",
        type=namesrv_addr_type,
        default=default_namesrv_addr(),
        help="name servers, host[:port][;host[:port]] (default $NAMESRV_ADDR, else %(default)s)",
    )
    p.add_argument("--listen", default="127.0.0.1:8080", help="host:port (default %(default)s)")
    p.add_argument(
        "--refresh", type=float, default=1.0, help="seconds between looks at a watched group"
    )
    p.add_argument("--trace", type=Path, help="a recorded trace to show on the replay page")


async def dashboard_main(args: argparse.Namespace) -> int:
    from aiorocketmq.dashboard import Dashboard, TraceError

    if args.refresh <= 0:
        raise ToolError(f"--refresh must be > 0, got {args.refresh}")
    await check_namesrv(args.namesrv_addr, wait=5.0)
    try:
        dashboard = Dashboard(
            args.namesrv_addr, args.listen, refresh=args.refresh, trace=args.trace
        )
    except TraceError as e:
        raise ToolError(f"{args.trace}: {e}") from None
    except (ValueError, OSError) as e:
        raise ToolError(str(e)) from None
    try:
        url = await dashboard.start()
    except OSError as e:
        raise ToolError(f"cannot listen on {args.listen}: {e.strerror or e}") from None
    print(
        f"dashboard of {args.namesrv_addr} at {url} (Ctrl-C to stop)", file=sys.stderr, flush=True
    )
    stop = stop_on_signals()
    try:
        await stop.wait()
    finally:
        await dashboard.stop()
    return 0
