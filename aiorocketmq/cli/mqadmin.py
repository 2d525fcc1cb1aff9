"""``mqadmin``: RocketMQ's admin tool, for this implementation (same subcommands and flags).

Each subcommand is one async function registered with ``@sub_command``; it declares its own
flags and gets an ``AdminContext`` (an ``aiorocketmq.admin.AdminClient``, which does the work,
the output stream, ``--json``): a subcommand parses and prints, nothing more.
Every subcommand takes ``-n host:port[;host:port]`` (default ``$NAMESRV_ADDR``, else
``127.0.0.1:9876``) and ``--json`` (one JSON document on stdout, RocketMQ's field names);
without ``--json`` it prints tables. A failure prints one line on stderr and exits 1.

Subcommands: ``clusterList``, ``topicList``, ``topicRoute`` (name server), ``updateTopic``,
``deleteTopic``, ``topicStatus``, ``sendMessage``, ``consumeMessage``, ``queryMsgById``,
``queryMsgByKey``, ``queryMsgByOffset``, ``printMsg`` (topics and messages, on the brokers),
``consumerConnection``, ``producerConnection``, ``consumerProgress``, ``consumerStatus``
(groups, on the brokers), ``updateSubGroup``, ``deleteSubGroup``, ``resetOffsetByTime``,
``getBrokerConfig``, ``updateBrokerConfig``, ``brokerStatus``, ``cleanExpiredCQ``.
Broker addresses come from the name server: a topic's route, or the masters of the cluster
info.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from aiorocketmq.admin import (
    TOOLS_CONSUMER_GROUP,
    TOOLS_PRODUCER_GROUP,
    AdminClient,
    AdminError,
)
from aiorocketmq.cli.common import (
    ToolArgumentParser,
    ToolError,
    check_namesrv,
    default_namesrv_addr,
    explain,
    namesrv_addr_type,
    quiet_broken_pipe,
    timestamp_ms_type,
)
from aiorocketmq.logs import configure_logging
from aiorocketmq.producer.producer import SendResult
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2, nameserver_pb2
from aiorocketmq.protocol.validators import check_topic
from aiorocketmq.runtime import run

__all__ = [
    "SUB_COMMANDS",
    "TOOLS_CONSUMER_GROUP",
    "TOOLS_PRODUCER_GROUP",
    "AdminContext",
    "AdminError",
    "SubCommand",
    "build_parser",
    "cluster_info_to_json",
    "consumer_connection_to_json",
    "main",
    "message_to_json",
    "route_to_json",
    "send_result_to_json",
    "sub_command",
    "topic_config_to_json",
]

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"


@dataclass
class AdminContext:
    """What a subcommand works with: the admin client, where to print, the mode."""

    admin: AdminClient
    out: TextIO
    as_json: bool

    @property
    def timeout(self) -> float:
        return self.admin.timeout

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
    info = await ctx.admin.cluster_info()
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
    topics = await ctx.admin.topic_list()
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
    route = await ctx.admin.topic_route(args.topic)
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


# -- shared helpers of the broker subcommands ---------------------------------------------------


def _queue_to_json(mq: common_pb2.MessageQueue | MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def topic_config_to_json(tc: common_pb2.TopicConfig) -> dict[str, Any]:
    """A ``TopicConfig`` with RocketMQ's field names."""
    return {
        "topicName": tc.topic_name,
        "readQueueNums": tc.read_queue_nums,
        "writeQueueNums": tc.write_queue_nums,
        "perm": tc.perm,
        "topicSysFlag": tc.topic_sys_flag,
        "order": tc.order,
    }


def _topic_config_text(tc: common_pb2.TopicConfig) -> str:
    """RocketMQ's ``TopicConfig.toString``."""
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={PermName.to_string(tc.perm)}, "
        f"topicSysFlag={tc.topic_sys_flag}, order={str(tc.order).lower()}]"
    )


def _body_to_text(body: bytes) -> tuple[str, str]:
    """The body as text and how it is encoded: ``utf-8`` when it decodes, else ``base64``."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- topics and messages ------------------------------------------------------------------------


def _update_topic_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="create on this broker")
    target.add_argument(
        "-c", "--clusterName", dest="cluster_name", help="create on every master of this cluster"
    )
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-r",
        "--readQueueNums",
        dest="read_queue_nums",
        type=int,
        default=8,
        help="read queue numbers (default %(default)s)",
    )
    parser.add_argument(
        "-w",
        "--writeQueueNums",
        dest="write_queue_nums",
        type=int,
        default=8,
        help="write queue numbers (default %(default)s)",
    )
    parser.add_argument(
        "-p", "--perm", type=int, default=6, help="permission: 2 W, 4 R, 6 RW (default 6)"
    )


@sub_command(
    "updateTopic",
    "Create or update a topic on a broker (-b) or on every master of a cluster (-c).",
    _update_topic_arguments,
)
async def update_topic(args: argparse.Namespace, ctx: AdminContext) -> int:
    """UPDATE_AND_CREATE_TOPIC on each target broker; the brokers then re-register the route."""
    topic_config, addrs = await ctx.admin.update_topic(
        args.topic,
        args.read_queue_nums,
        args.write_queue_nums,
        perm=args.perm,
        broker_addr=args.broker_addr,
        cluster=args.cluster_name,
    )
    if ctx.as_json:
        ctx.emit_json({"topicConfig": topic_config_to_json(topic_config), "brokerAddrs": addrs})
        return 0
    for addr in addrs:
        ctx.out.write(f"create topic to {addr} success.\n")
    ctx.out.write(_topic_config_text(topic_config) + "\n")
    return 0


def _delete_topic_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-c", "--clusterName", dest="cluster_name", help="only this cluster's masters (default all)"
    )


@sub_command(
    "deleteTopic",
    "Delete a topic from the masters (of a cluster) and from every name server.",
    _delete_topic_arguments,
)
async def delete_topic(args: argparse.Namespace, ctx: AdminContext) -> int:
    """DELETE_TOPIC_IN_BROKER on each master, then DELETE_TOPIC_IN_NAMESRV."""
    had = await ctx.admin.delete_topic(args.topic, cluster=args.cluster_name)
    if ctx.as_json:
        ctx.emit_json({"topic": args.topic, "deletedFrom": had})
        return 0
    if not had:
        ctx.out.write(f"no broker had topic {args.topic}; the name servers forgot it\n")
    for addr in had:
        ctx.out.write(f"delete topic [{args.topic}] from {addr} success.\n")
    ctx.out.write(f"delete topic [{args.topic}] from the name servers success.\n")
    return 0


@sub_command(
    "topicStatus", "Show each queue's min and max offset and last update time.", _topic_argument
)
async def topic_status(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_TOPIC_STATS_INFO on the master of every broker of the topic's route."""
    offsets = await ctx.admin.topic_status(args.topic)
    if ctx.as_json:
        ctx.emit_json(
            {
                "topic": args.topic,
                "offsetTable": [
                    {
                        **_queue_to_json(o.message_queue),
                        "minOffset": o.min_offset,
                        "maxOffset": o.max_offset,
                        "lastUpdateTimestamp": o.last_update_timestamp,
                    }
                    for o in offsets
                ],
            }
        )
        return 0
    now_ms = _now_ms()
    ctx.emit_table(
        ["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"],
        [
            (
                o.message_queue.broker_name,
                o.message_queue.queue_id,
                o.min_offset,
                o.max_offset,
                _format_timestamp(o.last_update_timestamp, now_ms),
            )
            for o in offsets
        ],
    )
    return 0


def _send_message_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-p", "--body", required=True, help="message body (sent as UTF-8)")
    parser.add_argument("-k", "--key", dest="keys", help="message keys")
    parser.add_argument("-c", "--tags", help="message tags")
    parser.add_argument("-b", "--broker", dest="broker_name", help="send to this broker name")
    parser.add_argument("-i", "--qid", dest="queue_id", type=int, help="send to this queue id")


def send_result_to_json(result: SendResult) -> dict[str, Any]:
    """A ``SendResult`` with RocketMQ's field names."""
    return {
        "sendStatus": result.send_status.value,
        "msgId": result.msg_id,
        "messageQueue": _queue_to_json(result.message_queue),
        "queueOffset": result.queue_offset,
    }


@sub_command(
    "sendMessage",
    "Send one message, anywhere or to one queue (-b BROKER_NAME -i QUEUE_ID).",
    _send_message_arguments,
)
async def send_message(args: argparse.Namespace, ctx: AdminContext) -> int:
    """SEND_MESSAGE through a producer (route lookup, queue selection, retries)."""
    result = await ctx.admin.send_message(
        args.topic,
        args.body.encode("utf-8"),
        tags=args.tags,
        keys=args.keys,
        broker_name=args.broker_name,
        queue_id=args.queue_id,
    )
    if ctx.as_json:
        ctx.emit_json(send_result_to_json(result))
        return 0
    ctx.emit_table(
        ["Broker Name", "QID", "Send Result", "MsgId", "Queue Offset"],
        [
            (
                result.message_queue.broker_name,
                result.message_queue.queue_id,
                result.send_status.value,
                result.msg_id,
                result.queue_offset,
            )
        ],
    )
    return 0


def _consume_message_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-b", "--brokerName", dest="broker_name", help="only this broker's queues")
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int, help="only this queue id")
    parser.add_argument(
        "-o", "--offset", type=int, help="start at this offset (default: each queue's min offset)"
    )
    parser.add_argument(
        "-c",
        "--messageNumber",
        dest="count",
        type=int,
        default=128,
        help="messages to print at most, over all queues (default %(default)s)",
    )
    parser.add_argument(
        "-s",
        "--subExpression",
        dest="expression",
        default="*",
        help="tag expression, e.g. 'TagA || TagB' (default '*')",
    )
    parser.add_argument(
        "-g",
        "--consumerGroup",
        dest="group",
        default=TOOLS_CONSUMER_GROUP,
        help="the group to pull as (default %(default)s; no offset is committed)",
    )


def message_to_json(m: common_pb2.MessageExt) -> dict[str, Any]:
    """A pulled message: where it is, its ids, tags, keys and body (text or base64)."""
    body, encoding = _body_to_text(m.body)
    return {
        "topic": m.topic,
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "msgId": m.msg_id,
        "tags": m.tags or None,
        "keys": m.keys or None,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "reconsumeTimes": m.reconsume_times,
        "properties": dict(sorted(m.properties.items())),
        "body": body,
        "bodyEncoding": encoding,
    }


@sub_command(
    "consumeMessage",
    "Pull and print messages of a topic, or of one broker or queue, without committing.",
    _consume_message_arguments,
)
async def consume_message(args: argparse.Namespace, ctx: AdminContext) -> int:
    """PULL_MESSAGE (no suspend, the expression in the request) from each queue in turn."""
    messages, pulls = await ctx.admin.consume_messages(
        args.topic,
        count=args.count,
        broker_name=args.broker_name,
        queue_id=args.queue_id,
        offset=args.offset,
        expression=args.expression,
        group=args.group,
    )
    summaries = [
        {
            **_queue_to_json(p.queue),
            "startOffset": p.start_offset,
            "minOffset": p.min_offset,
            "maxOffset": p.max_offset,
            "nextOffset": p.next_offset,
            "status": p.status,
        }
        for p in pulls
    ]
    if ctx.as_json:
        ctx.emit_json(
            {
                "topic": args.topic,
                "consumerGroup": args.group,
                "subExpression": args.expression,
                "messages": [message_to_json(m) for m in messages],
                "queues": summaries,
            }
        )
        return 0
    rows = []
    for m in messages:
        body, encoding = _body_to_text(m.body)
        shown = body.replace("\n", "\\n") if encoding == "utf-8" else f"base64:{body}"
        rows.append(
            (
                m.broker_name,
                m.queue_id,
                m.queue_offset,
                m.msg_id,
                m.tags or "-",
                m.keys or "-",
                shown,
            )
        )
    ctx.emit_table(["Broker Name", "QID", "Offset", "MsgId", "Tags", "Keys", "Body"], rows)
    ctx.out.write(f"\n{len(messages)} message(s) from {len(summaries)} queue(s)\n")
    return 0


def _print_message(ctx: AdminContext, m: common_pb2.MessageExt) -> None:
    """One message in RocketMQ's queryMsgById layout: a field per line, then the body."""
    body, encoding = _body_to_text(m.body)
    fields = [
        ("OffsetID", m.msg_id),
        ("Topic", m.topic),
        ("Tags", f"[{m.tags}]"),
        ("Keys", f"[{m.keys}]"),
        ("Queue ID", m.queue_id),
        ("Queue Offset", m.queue_offset),
        ("CommitLog Offset", m.commit_log_offset),
        ("Reconsume Times", m.reconsume_times),
        ("Born Timestamp", _format_time(m.born_timestamp)),
        ("Store Timestamp", _format_time(m.store_timestamp)),
        ("Born Host", m.born_host),
        ("Store Host", m.store_host),
        ("Properties", dict(sorted(m.properties.items()))),
        ("Message Body", body if encoding == "utf-8" else f"base64:{body}"),
    ]
    for name, value in fields:
        ctx.out.write(f"{name + ':':<20s}{value}\n")


def _format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _query_msg_by_id_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i", "--msgId", dest="msg_ids", required=True, help="offset message ids, comma separated"
    )


@sub_command(
    "queryMsgById",
    "Print messages by their offset message id (the broker and commit-log offset it encodes).",
    _query_msg_by_id_arguments,
)
async def query_msg_by_id(args: argparse.Namespace, ctx: AdminContext) -> int:
    """VIEW_MESSAGE_BY_ID on the broker each id names."""
    ids = [i.strip() for i in args.msg_ids.split(",") if i.strip()]
    if not ids:
        raise AdminError("no message id given")
    found = [await ctx.admin.view_message(i) for i in ids]
    if ctx.as_json:
        ctx.emit_json({"messages": [message_to_json(m) for m in found]})
        return 0
    for i, m in enumerate(found):
        if i:
            ctx.out.write("\n")
        _print_message(ctx, m)
    return 0


def _query_msg_by_offset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    parser.add_argument("-o", "--offset", type=int, required=True, help="queue offset")


@sub_command(
    "queryMsgByOffset",
    "Print the message at a queue offset of one broker's queue.",
    _query_msg_by_offset_arguments,
)
async def query_msg_by_offset(args: argparse.Namespace, ctx: AdminContext) -> int:
    """PULL_MESSAGE of one message at the offset (no commit)."""
    messages, pulls = await ctx.admin.consume_messages(
        args.topic,
        count=1,
        broker_name=args.broker_name,
        queue_id=args.queue_id,
        offset=args.offset,
    )
    if not messages or messages[0].queue_offset != args.offset:
        where = pulls[0] if pulls else None
        bounds = f" (the queue holds [{where.min_offset}, {where.max_offset}))" if where else ""
        raise AdminError(
            f"no message at offset {args.offset} of {args.topic} "
            f"{args.broker_name}:{args.queue_id}{bounds}"
        )
    if ctx.as_json:
        ctx.emit_json(message_to_json(messages[0]))
        return 0
    _print_message(ctx, messages[0])
    return 0


def _query_msg_by_key_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-k", "--msgKey", dest="key", required=True, help="a key (or UNIQ_KEY)")
    parser.add_argument(
        "-b",
        "--beginTimestamp",
        dest="begin",
        type=timestamp_ms_type,
        default=0,
        help="stored from this time: ms, yyyy-MM-dd#HH:mm:ss:SSS or now (default 0)",
    )
    parser.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=timestamp_ms_type,
        help="stored until this time, same forms (default: no end)",
    )
    parser.add_argument(
        "-c", "--maxNum", dest="max_num", type=int, default=32,
        help="messages at most (default %(default)s; a broker answers 64 at most)",
    )  # fmt: skip


@sub_command(
    "queryMsgByKey",
    "Find a topic's messages by key, through each broker's key index.",
    _query_msg_by_key_arguments,
)
async def query_msg_by_key(args: argparse.Namespace, ctx: AdminContext) -> int:
    """QUERY_MESSAGE on every master of the topic."""
    found = await ctx.admin.query_message_by_key(
        args.topic, args.key, max_num=args.max_num, begin_ms=args.begin, end_ms=args.end
    )
    if ctx.as_json:
        ctx.emit_json(
            {"topic": args.topic, "key": args.key, "messages": [message_to_json(m) for m in found]}
        )
        return 0
    ctx.emit_table(
        ["Message ID", "Broker Name", "QID", "Offset"],
        [(m.msg_id, m.broker_name, m.queue_id, m.queue_offset) for m in found],
    )
    return 0


def _print_msg_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-b",
        "--beginTimestamp",
        dest="begin",
        type=timestamp_ms_type,
        default=0,
        help="from this time: ms since the epoch, yyyy-MM-dd#HH:mm:ss:SSS or now (default 0)",
    )
    parser.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=timestamp_ms_type,
        help="before this time, same forms (default: no end)",
    )
    parser.add_argument(
        "-c",
        "--messageNumber",
        dest="count",
        type=int,
        default=1024,
        help="messages to print at most (default %(default)s)",
    )


@sub_command(
    "printMsg",
    "Print a topic's messages stored between two times, every queue.",
    _print_msg_arguments,
)
async def print_msg(args: argparse.Namespace, ctx: AdminContext) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP per queue, then PULL_MESSAGE up to the end time."""
    messages = await ctx.admin.messages_between(args.topic, args.begin, args.end, count=args.count)
    if ctx.as_json:
        ctx.emit_json(
            {
                "topic": args.topic,
                "beginTimestamp": args.begin,
                "endTimestamp": args.end,
                "messages": [message_to_json(m) for m in messages],
            }
        )
        return 0
    for m in messages:
        body, encoding = _body_to_text(m.body)
        shown = body if encoding == "utf-8" else f"base64:{body}"
        ctx.out.write(
            f"MSGID: {m.msg_id} {m.broker_name}:{m.queue_id}@{m.queue_offset} "
            f"{_format_time(m.store_timestamp)} BODY: {shown}\n"
        )
    ctx.out.write(f"\n{len(messages)} message(s)\n")
    return 0


# -- consumer groups ----------------------------------------------------------------------------


def _group_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group")


def _enum_name(enum: Any, value: int) -> str:
    try:
        name: str = enum.Name(value)
    except ValueError:
        return str(value)
    return name


def consumer_connection_to_json(conn: broker_pb2.ConsumerConnection) -> dict[str, Any]:
    """A ``ConsumerConnection`` with RocketMQ's field names."""
    return {
        "connectionSet": [
            {
                "clientId": c.client_id,
                "clientAddr": c.client_addr,
                "language": c.language,
                "version": c.version,
                "lastUpdateTimestamp": c.last_update_timestamp,
            }
            for c in conn.connections
        ],
        "subscriptionTable": {
            s.topic: {
                "topic": s.topic,
                "subString": s.sub_string,
                "tagsSet": list(s.tags_set),
                "codeSet": list(s.code_set),
                "subVersion": s.sub_version,
                "expressionType": s.expression_type,
            }
            for s in conn.subscriptions
        },
        "consumeType": _enum_name(common_pb2.ConsumeType, conn.consume_type),
        "messageModel": _enum_name(common_pb2.MessageModel, conn.message_model),
        "consumeFromWhere": _enum_name(common_pb2.ConsumeFromWhere, conn.consume_from_where),
    }


@sub_command(
    "consumerConnection",
    "Show a consumer group's clients and subscriptions (from the first broker that knows it).",
    _group_argument,
)
async def consumer_connection(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_CONSUMER_CONNECTION_LIST, asking the masters in name order."""
    answered_by, _, conn = await ctx.admin.consumer_connection(args.group)
    document = consumer_connection_to_json(conn)
    if ctx.as_json:
        ctx.emit_json({"consumerGroup": args.group, "brokerName": answered_by, **document})
        return 0
    ctx.emit_table(
        ["ClientId", "ClientAddr", "Language", "Version"],
        [(c.client_id, c.client_addr, c.language, c.version) for c in conn.connections],
    )
    ctx.out.write("\nBelow is subscription:\n")
    ctx.emit_table(
        ["Topic", "SubExpression"], [(s.topic, s.sub_string) for s in conn.subscriptions]
    )
    ctx.out.write(
        f"\nConsumeType: {document['consumeType']}\n"
        f"MessageModel: {document['messageModel']}\n"
        f"ConsumeFromWhere: {document['consumeFromWhere']}\n"
    )
    return 0


def _producer_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--producerGroup", dest="group", required=True)
    parser.add_argument("-t", "--topic", required=True, help="a topic the group sends to")


@sub_command(
    "producerConnection",
    "Show a producer group's clients (those that heartbeat) on the brokers of a topic.",
    _producer_connection_arguments,
)
async def producer_connection(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_PRODUCER_CONNECTION_LIST on the masters of the topic."""
    connections = await ctx.admin.producer_connection(args.group, args.topic)
    if ctx.as_json:
        ctx.emit_json(
            {
                "producerGroup": args.group,
                "connectionSet": [
                    {
                        "clientId": c.client_id,
                        "clientAddr": c.client_addr,
                        "language": c.language,
                        "version": c.version,
                        "lastUpdateTimestamp": c.last_update_timestamp,
                    }
                    for c in connections
                ],
            }
        )
        return 0
    ctx.emit_table(
        ["ClientId", "ClientAddr", "Language", "Version"],
        [(c.client_id, c.client_addr, c.language, c.version) for c in connections],
    )
    return 0


def running_info_to_json(info: broker_pb2.ConsumerRunningInfo) -> dict[str, Any]:
    """A ``ConsumerRunningInfo`` with RocketMQ's field names."""
    return {
        "clientId": info.client_id,
        "consumerGroup": info.consumer_group,
        "language": info.language,
        "startTimestamp": info.start_timestamp,
        "properties": dict(sorted(info.properties.items())),
        "subscriptionSet": [
            {"topic": s.topic, "subString": s.sub_string, "subVersion": s.sub_version}
            for s in info.subscriptions
        ],
        "mqTable": [
            {
                **_queue_to_json(q.message_queue),
                "commitOffset": q.commit_offset,
                "cachedMsgCount": q.cached_msg_count,
                "cachedMsgSizeInBytes": q.cached_msg_size_bytes,
                "locked": q.locked,
                "droped": q.dropped,  # RocketMQ's spelling
                "lastPullTimestamp": q.last_pull_timestamp,
                "lastConsumeTimestamp": q.last_consume_timestamp,
                "epoch": q.epoch,
            }
            for q in info.mq_table
        ],
        "statusTable": {
            s.topic: {
                "pullTPS": round(s.pull_tps, 2),
                "consumeOKTPS": round(s.consume_ok_tps, 2),
                "consumeFailedTPS": round(s.consume_failed_tps, 2),
                "consumeFailedMsgs": s.consume_failed_msgs,
                "consumeRT": round(s.consume_rt_ms, 2),
            }
            for s in info.status_table
        },
    }


def _consumer_status_arguments(parser: argparse.ArgumentParser) -> None:
    _group_argument(parser)
    parser.add_argument("-i", "--clientId", dest="client_id", help="only this client")


@sub_command(
    "consumerStatus",
    "Show what each client of a consumer group holds and its rates (its running info, asked "
    "through its channel).",
    _consumer_status_arguments,
)
async def consumer_status(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_CONSUMER_CONNECTION_LIST, then GET_CONSUMER_RUNNING_INFO for each client."""
    infos: list[dict[str, Any]] = []
    for status in await ctx.admin.consumer_status(args.group, args.client_id):
        if status.info is None:
            infos.append(
                {
                    "clientId": status.connection.client_id,
                    "language": status.connection.language,
                    "error": status.error,
                }
            )
        else:
            infos.append(running_info_to_json(status.info))
    if ctx.as_json:
        ctx.emit_json({"consumerGroup": args.group, "clients": infos})
        return 0
    for info in infos:
        ctx.out.write(f"# client {info['clientId']}\n")
        if "error" in info:
            ctx.out.write(f"  running info not available: {info['error']}\n\n")
            continue
        for key, value in info["properties"].items():
            ctx.out.write(f"  {key}: {value}\n")
        ctx.emit_table(
            ["Topic", "Broker Name", "QID", "Commit Offset", "Cached Msgs", "Locked", "Epoch"],
            [
                (
                    q["topic"],
                    q["brokerName"],
                    q["queueId"],
                    q["commitOffset"],
                    q["cachedMsgCount"],
                    q["locked"],
                    q["epoch"],
                )
                for q in info["mqTable"]
            ],
        )
        ctx.emit_table(
            ["Topic", "Pull TPS", "Consume OK TPS", "Failed TPS", "Failed Msgs", "RT ms"],
            [
                (
                    t,
                    s["pullTPS"],
                    s["consumeOKTPS"],
                    s["consumeFailedTPS"],
                    s["consumeFailedMsgs"],
                    s["consumeRT"],
                )
                for t, s in info["statusTable"].items()
            ],
        )
        ctx.out.write("\n")
    return 0


def _consumer_progress_arguments(parser: argparse.ArgumentParser) -> None:
    _group_argument(parser)
    parser.add_argument("-t", "--topic", help="only this topic (default: every subscribed topic)")


@sub_command(
    "consumerProgress",
    "Show a consumer group's progress: per queue broker offset, consumer offset and lag.",
    _consumer_progress_arguments,
)
async def consumer_progress(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_CONSUME_STATS from every master; brokers that do not know the group are skipped."""
    if args.topic is not None:
        check_topic(args.topic)
    queues, consume_tps = await ctx.admin.consume_stats(args.group, args.topic)

    def diff(q: broker_pb2.QueueConsumeStats) -> int:
        # RocketMQ counts a queue with no committed offset from 0.
        return q.broker_offset - max(q.consumer_offset, 0)

    diff_total = sum(diff(q) for q in queues)
    if ctx.as_json:
        ctx.emit_json(
            {
                "consumerGroup": args.group,
                "offsetTable": [
                    {
                        **_queue_to_json(q.message_queue),
                        "brokerOffset": q.broker_offset,
                        "consumerOffset": q.consumer_offset,
                        "diff": diff(q),
                        "clientId": q.holder_client_id,
                        "lastTimestamp": q.last_timestamp,
                    }
                    for q in queues
                ],
                "consumeTps": consume_tps,
                "diffTotal": diff_total,
            }
        )
        return 0
    now_ms = _now_ms()
    ctx.emit_table(
        [
            "Topic",
            "Broker Name",
            "QID",
            "Broker Offset",
            "Consumer Offset",
            "Client IP",
            "Diff",
            "LastTime",
        ],
        [
            (
                q.message_queue.topic,
                q.message_queue.broker_name,
                q.message_queue.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.holder_client_id or "N/A",
                diff(q),
                _format_timestamp(q.last_timestamp, now_ms),
            )
            for q in queues
        ],
    )
    ctx.out.write(f"\nConsume TPS: {consume_tps:.2f}\nConsume Diff Total: {diff_total}\n")
    return 0


# -- subscription groups and offset resets ------------------------------------------------------


def _bool_type(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


# flag, long name, field, type, help
_SUB_GROUP_FLAGS: list[tuple[str, str, str, Callable[[str], Any], str]] = [
    ("-s", "--consumeEnable", "consume_enable", _bool_type, "may the group consume"),
    ("-m", "--consumeFromMinEnable", "consume_from_min_enable", _bool_type, "start at min offset"),
    ("-d", "--consumeBroadcastEnable", "consume_broadcast_enable", _bool_type, "broadcasting"),
    ("-q", "--retryQueueNums", "retry_queue_nums", int, "queues of its retry topic"),
    ("-r", "--retryMaxTimes", "retry_max_times", int, "retries before the DLQ"),
    ("-i", "--brokerId", "broker_id", int, "consume from this broker id"),
    ("-w", "--whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", int, "slow id"),
    ("-a", "--notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable", _bool_type,
     "notify members when the group changes"),
]  # fmt: skip


def sub_group_to_json(c: broker_pb2.SubscriptionGroupConfig) -> dict[str, Any]:
    """A ``SubscriptionGroupConfig`` with RocketMQ's field names."""
    return {
        "groupName": c.group_name,
        "consumeEnable": c.consume_enable,
        "consumeFromMinEnable": c.consume_from_min_enable,
        "consumeBroadcastEnable": c.consume_broadcast_enable,
        "retryQueueNums": c.retry_queue_nums,
        "retryMaxTimes": c.retry_max_times,
        "brokerId": c.broker_id,
        "whichBrokerWhenConsumeSlowly": c.which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": c.notify_consumer_ids_changed_enable,
    }


def _update_sub_group_arguments(parser: argparse.ArgumentParser) -> None:
    _broker_target_arguments(parser)
    parser.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group")
    for flag, long, field, kind, help_text in _SUB_GROUP_FLAGS:
        parser.add_argument(flag, long, dest=field, type=kind, help=help_text)


@sub_command(
    "updateSubGroup",
    "Create a consumer group or change its settings on a broker (-b) or a cluster's masters (-c).",
    _update_sub_group_arguments,
)
async def update_sub_group(args: argparse.Namespace, ctx: AdminContext) -> int:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with the flags given over the current settings."""
    settings = {
        field: getattr(args, field)
        for _, _, field, _, _ in _SUB_GROUP_FLAGS
        if getattr(args, field) is not None
    }
    done = await ctx.admin.update_sub_group(
        args.group, broker_addr=args.broker_addr, cluster=args.cluster_name, **settings
    )
    if ctx.as_json:
        ctx.emit_json({addr: sub_group_to_json(c) for addr, c in done.items()})
        return 0
    for addr, config in done.items():
        ctx.out.write(f"create subscription group to {addr} success.\n{config}\n")
    return 0


def _delete_sub_group_arguments(parser: argparse.ArgumentParser) -> None:
    _broker_target_arguments(parser)
    parser.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group")
    parser.add_argument(
        "-r",
        "--removeOffset",
        dest="remove_offset",
        type=_bool_type,
        default=False,
        help="also forget the group's committed offsets (default false)",
    )


@sub_command(
    "deleteSubGroup",
    "Delete a consumer group's settings from a broker (-b) or a cluster's masters (-c).",
    _delete_sub_group_arguments,
)
async def delete_sub_group(args: argparse.Namespace, ctx: AdminContext) -> int:
    """DELETE_SUBSCRIPTIONGROUP on each target broker."""
    had = await ctx.admin.delete_sub_group(
        args.group,
        broker_addr=args.broker_addr,
        cluster=args.cluster_name,
        remove_offset=args.remove_offset,
    )
    if ctx.as_json:
        ctx.emit_json({"groupName": args.group, "deletedFrom": had})
        return 0
    if not had:
        ctx.out.write(f"no broker had subscription group {args.group}\n")
    for addr in had:
        ctx.out.write(f"delete subscription group [{args.group}] from broker [{addr}] success.\n")
    return 0


def _reset_offset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--group", required=True, help="consumer group")
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-s",
        "--timestamp",
        required=True,
        type=timestamp_ms_type,
        help="ms since the epoch, yyyy-MM-dd#HH:mm:ss:SSS or now",
    )
    parser.add_argument(
        "-f",
        "--force",
        type=_bool_type,
        default=True,
        help="also move offsets forward (default true; false only moves them back)",
    )


@sub_command(
    "resetOffsetByTime",
    "Move a group's offsets of a topic to a time; running consumers re-read from there.",
    _reset_offset_arguments,
)
async def reset_offset_by_time(args: argparse.Namespace, ctx: AdminContext) -> int:
    """INVOKE_BROKER_TO_RESET_OFFSET on every master of the topic."""
    offsets, told = await ctx.admin.reset_offset_by_time(
        args.group, args.topic, args.timestamp, force=args.force
    )
    if ctx.as_json:
        ctx.emit_json(
            {
                "consumerGroup": args.group,
                "topic": args.topic,
                "timestamp": args.timestamp,
                "offsetTable": [
                    {**_queue_to_json(mq), "offset": offset} for mq, offset in offsets.items()
                ],
                "clientsTold": told,
            }
        )
        return 0
    ctx.emit_table(
        ["brokerName", "queueId", "offset"],
        [(mq.broker_name, mq.queue_id, offset) for mq, offset in offsets.items()],
    )
    ctx.out.write(f"\n{len(told)} running client(s) told\n")
    return 0


# -- broker settings ----------------------------------------------------------------------------


def _broker_target_arguments(
    parser: argparse.ArgumentParser, *, required: bool = True, cluster_flag: str = "--clusterName"
) -> None:
    """``-b ADDR`` or ``-c CLUSTER`` (optional: then every master)."""
    target = parser.add_mutually_exclusive_group(required=required)
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="this broker")
    target.add_argument(
        "-c",
        cluster_flag,
        dest="cluster_name",
        help="every master of this cluster" + ("" if required else " (default: all)"),
    )


@sub_command(
    "getBrokerConfig",
    "Print a broker's settings (RocketMQ's names), or every master's of a cluster (-c).",
    _broker_target_arguments,
)
async def get_broker_config(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_BROKER_CONFIG on each target broker."""
    found: dict[str, dict[str, str]] = {}
    for addr in await ctx.admin.target_brokers(args.broker_addr, args.cluster_name):
        found[addr] = await ctx.admin.broker_config(addr)
    if ctx.as_json:
        ctx.emit_json(found)
        return 0
    for addr, props in found.items():
        ctx.out.write(f"============{addr}============\n")
        for key, value in props.items():
            ctx.out.write(f"{key:<50s}=  {value}\n")
    return 0


@sub_command(
    "brokerStatus",
    "Print a broker's runtime figures (-b), or every master's of a cluster (-c).",
    _broker_target_arguments,
)
async def broker_status(args: argparse.Namespace, ctx: AdminContext) -> int:
    """GET_BROKER_RUNTIME_INFO on each target broker."""
    found = {
        addr: await ctx.admin.broker_status(addr)
        for addr in await ctx.admin.target_brokers(args.broker_addr, args.cluster_name)
    }
    if ctx.as_json:
        ctx.emit_json(found)
        return 0
    for addr, table in found.items():
        for key, value in table.items():
            prefix = f"{addr:<24s}" if len(found) > 1 else ""
            ctx.out.write(f"{prefix}{key:<40s}: {value}\n")
    return 0


def _clean_expired_cq_arguments(parser: argparse.ArgumentParser) -> None:
    _broker_target_arguments(parser, required=False, cluster_flag="--cluster")


@sub_command(
    "cleanExpiredCQ",
    "Delete consume-queue files the commit log outlived, and queues of deleted topics.",
    _clean_expired_cq_arguments,
)
async def clean_expired_cq(args: argparse.Namespace, ctx: AdminContext) -> int:
    """CLEAN_EXPIRED_CONSUMEQUEUE on each target broker."""
    done = await ctx.admin.clean_expired_cq(broker_addr=args.broker_addr, cluster=args.cluster_name)
    if ctx.as_json:
        ctx.emit_json(
            {
                addr: {"filesRemoved": r.files_removed, "topicsRemoved": list(r.topics_removed)}
                for addr, r in done.items()
            }
        )
        return 0
    for addr, r in done.items():
        removed = ", ".join(r.topics_removed) or "none"
        ctx.out.write(
            f"{addr}: {r.files_removed} expired file(s) removed; queues of deleted topics: "
            f"{removed}\n"
        )
    return 0


def _update_broker_config_arguments(parser: argparse.ArgumentParser) -> None:
    _broker_target_arguments(parser)
    parser.add_argument("-k", "--key", required=True, help="setting name, e.g. maxPullMsgNums")
    parser.add_argument("-v", "--value", required=True, help="new value")


@sub_command(
    "updateBrokerConfig",
    "Change a setting of a running broker (-b) or of every master of a cluster (-c).",
    _update_broker_config_arguments,
)
async def update_broker_config(args: argparse.Namespace, ctx: AdminContext) -> int:
    """UPDATE_BROKER_CONFIG on each target broker (only settings that apply while running)."""
    changed: dict[str, dict[str, str]] = {}
    for addr in await ctx.admin.target_brokers(args.broker_addr, args.cluster_name):
        changed[addr] = await ctx.admin.update_broker_config(addr, {args.key: args.value})
        if not ctx.as_json:
            ctx.out.write(f"update broker config success, {addr}\n")
    if ctx.as_json:
        ctx.emit_json(changed)
    return 0


# -- entry point --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered subcommand and the shared ``-n`` / ``--json`` flags."""
    parser = ToolArgumentParser(prog="mqadmin", description="aiorocketmq admin tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in SUB_COMMANDS.values():
        sub = commands.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        sub.add_argument(
            "-n",
            "--namesrvAddr",
            dest="namesrv_addr",
            type=namesrv_addr_type,
            default=default_namesrv_addr(),
            help="name servers, host[:port][;host[:port]] (default $NAMESRV_ADDR, else "
            "%(default)s)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON for machines")
        sub.add_argument(
            "--timeout", type=float, default=3.0, help="RPC deadline in seconds (default 3)"
        )
        cmd.arguments(sub)
    return parser


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    await check_namesrv(args.namesrv_addr, args.timeout)
    async with AdminClient(args.namesrv_addr, timeout=args.timeout) as admin:
        ctx = AdminContext(admin=admin, out=out, as_json=args.json)
        return await SUB_COMMANDS[args.command].execute(args, ctx)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``mqadmin``: run one subcommand; 0 on success, 1 on failure."""
    args = build_parser().parse_args(argv)
    configure_logging("ERROR")
    try:
        return run(_run(args, sys.stdout))
    except (AdminError, ToolError) as e:
        print(f"mqadmin {args.command}: {e}", file=sys.stderr)
        return 1
    except MQError as e:
        print(f"mqadmin {args.command}: {explain(e, args.namesrv_addr)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return quiet_broken_pipe()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
