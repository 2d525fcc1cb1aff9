"""``mqadmin``: RocketMQ's admin tool, for this implementation (same subcommands and flags).

Each subcommand is one async function registered with ``@sub_command``; it declares its own
flags and gets an ``AdminContext`` (the name server client, the output stream, ``--json``).
Every subcommand takes ``-n host:port[;host:port]`` (default ``$NAMESRV_ADDR``, else
``127.0.0.1:9876``) and ``--json`` (one JSON document on stdout, RocketMQ's field names);
without ``--json`` it prints tables. A failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from aiorocketmq.logs import configure_logging
from aiorocketmq.runtime import run
from nameserver.client import NameServerClient, parse_namesrv_addr
from protocol.errors import MQError
from protocol.perm import PermName
from protocol.v1 import common_pb2, nameserver_pb2

__all__ = [
    "SUB_COMMANDS",
    "AdminContext",
    "SubCommand",
    "build_parser",
    "cluster_info_to_json",
    "main",
    "route_to_json",
    "sub_command",
]

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"


@dataclass
class AdminContext:
    """What a subcommand works with: the name servers, where to print, and the output mode."""

    namesrv: NameServerClient
    out: TextIO
    as_json: bool

    def emit_json(self, document: Any) -> None:
        """Print one JSON document (``--json`` mode)."""
        json.dump(document, self.out, indent=2, sort_keys=False)
        self.out.write("\n")

    def emit_table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Print a left-aligned table with ``#``-prefixed headers, as RocketMQ's mqadmin does."""
        cells = [[f"#{h}" for h in header], *[[str(c) for c in row] for row in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        for row in cells:
            line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
            self.out.write(line.rstrip() + "\n")


Execute = Callable[[argparse.Namespace, AdminContext], Awaitable[int]]


@dataclass(frozen=True)
class SubCommand:
    """One mqadmin subcommand: its name, help, flags and the coroutine that runs it."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    execute: Execute


SUB_COMMANDS: dict[str, SubCommand] = {}


def sub_command(
    name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None] | None = None
) -> Callable[[Execute], Execute]:
    """Register ``execute`` as subcommand ``name`` (RocketMQ's spelling: ``topicRoute``)."""

    def register(execute: Execute) -> Execute:
        if name in SUB_COMMANDS:
            raise ValueError(f"mqadmin subcommand {name} registered twice")
        SUB_COMMANDS[name] = SubCommand(name, help, arguments or (lambda _: None), execute)
        return execute

    return register


# -- JSON shapes (RocketMQ's field names) -------------------------------------------------------


def _broker_data_to_json(bd: common_pb2.BrokerData) -> dict[str, Any]:
    return {
        "cluster": bd.cluster,
        "brokerName": bd.broker_name,
        "brokerAddrs": {str(i): bd.broker_addrs[i] for i in sorted(bd.broker_addrs)},
    }


def route_to_json(route: common_pb2.TopicRouteData) -> dict[str, Any]:
    """A ``TopicRouteData`` as RocketMQ's ``topicRoute`` prints it."""
    document: dict[str, Any] = {
        "brokerDatas": [_broker_data_to_json(bd) for bd in route.broker_datas],
        "queueDatas": [
            {
                "brokerName": qd.broker_name,
                "readQueueNums": qd.read_queue_nums,
                "writeQueueNums": qd.write_queue_nums,
                "perm": qd.perm,
                "topicSysFlag": qd.topic_sys_flag,
            }
            for qd in route.queue_datas
        ],
    }
    if route.order_topic_conf:
        document["orderTopicConf"] = route.order_topic_conf
    return document


def cluster_info_to_json(info: nameserver_pb2.ClusterInfo) -> dict[str, Any]:
    """A ``ClusterInfo`` in RocketMQ's JSON (``brokerAddrTable``, ...) plus liveness."""
    return {
        "brokerAddrTable": {
            name: _broker_data_to_json(info.broker_addr_table[name])
            for name in sorted(info.broker_addr_table)
        },
        "clusterAddrTable": {
            name: list(info.cluster_addr_table[name].broker_names)
            for name in sorted(info.cluster_addr_table)
        },
        "liveBrokers": [
            {
                "cluster": live.cluster,
                "brokerName": live.broker_name,
                "brokerId": live.broker_id,
                "brokerAddr": live.broker_addr,
                "lastUpdateTimestamp": live.last_update_timestamp,
                "dataVersion": live.data_version,
            }
            for live in info.live_brokers
        ],
    }


def _format_timestamp(ms: int, now_ms: int) -> str:
    if ms <= 0:
        return "-"
    stamp = datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp} ({max(0, now_ms - ms) / 1000:.1f}s ago)"


# -- subcommands --------------------------------------------------------------------------------


@sub_command("clusterList", "List the clusters, their brokers and when each last registered.")
async def cluster_list(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_BROKER_CLUSTER_INFO, one row per broker address."""
    info = await ctx.namesrv.get_broker_cluster_info()
    if ctx.as_json:
        ctx.emit_json(cluster_info_to_json(info))
        return 0
    last_update = {(b.cluster, b.broker_addr): b.last_update_timestamp for b in info.live_brokers}
    now_ms = time.time_ns() // 1_000_000
    rows = []
    for cluster in sorted(info.cluster_addr_table):
        for broker_name in info.cluster_addr_table[cluster].broker_names:
            addrs = info.broker_addr_table[broker_name].broker_addrs
            for broker_id in sorted(addrs):
                addr = addrs[broker_id]
                stamp = last_update.get((cluster, addr), 0)
                rows.append(
                    (cluster, broker_name, broker_id, addr, _format_timestamp(stamp, now_ms))
                )
    ctx.emit_table(["Cluster Name", "Broker Name", "BID", "Addr", "Last Update"], rows)
    return 0


@sub_command("topicList", "List every topic a live broker serves.")
async def topic_list(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
    topics = await ctx.namesrv.get_all_topic_list()
    if ctx.as_json:
        ctx.emit_json({"topicList": topics})
    else:
        for topic in topics:
            ctx.out.write(topic + "\n")
    return 0


def _topic_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")


@sub_command(
    "topicRoute", "Show a topic's route: its queue datas and broker datas.", _topic_argument
)
async def topic_route(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_ROUTEINFO_BY_TOPIC."""
    route = await ctx.namesrv.get_route_info_by_topic(args.topic)
    if ctx.as_json:
        ctx.emit_json(route_to_json(route))
        return 0
    ctx.emit_table(
        ["Broker Name", "Read Queues", "Write Queues", "Perm"],
        [
            (
                qd.broker_name,
                qd.read_queue_nums,
                qd.write_queue_nums,
                f"{qd.perm} ({PermName.to_string(qd.perm)})",
            )
            for qd in route.queue_datas
        ],
    )
    ctx.out.write("\n")
    ctx.emit_table(
        ["Cluster Name", "Broker Name", "BID", "Addr"],
        [
            (bd.cluster, bd.broker_name, broker_id, bd.broker_addrs[broker_id])
            for bd in route.broker_datas
            for broker_id in sorted(bd.broker_addrs)
        ],
    )
    if route.order_topic_conf:
        ctx.out.write(f"\norderTopicConf: {route.order_topic_conf}\n")
    return 0


# -- entry point --------------------------------------------------------------------------------


def _namesrv_addr(value: str) -> str:
    try:
        parse_namesrv_addr(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered subcommand and the shared ``-n`` / ``--json`` flags."""
    parser = argparse.ArgumentParser(prog="mqadmin", description="aiorocketmq admin tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in SUB_COMMANDS.values():
        sub = commands.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        sub.add_argument(
            "-n",
            "--namesrvAddr",
            dest="namesrv_addr",
            type=_namesrv_addr,
            default=os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR,
            help="name server address list, host:port[;host:port] (default %(default)s)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON for machines")
        sub.add_argument(
            "--timeout", type=float, default=3.0, help="RPC deadline in seconds (default 3)"
        )
        cmd.arguments(sub)
    return parser


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    async with NameServerClient(args.namesrv_addr, timeout=args.timeout) as namesrv:
        ctx = AdminContext(namesrv=namesrv, out=out, as_json=args.json)
        return await SUB_COMMANDS[args.command].execute(args, ctx)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``mqadmin``: run one subcommand; 0 on success, 1 on failure."""
    args = build_parser().parse_args(argv)
    configure_logging("ERROR")
    try:
        return run(_run(args, sys.stdout))
    except MQError as e:
        print(f"mqadmin {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
