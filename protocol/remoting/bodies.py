"""The JSON bodies of remoting requests and responses, as Apache's servers and clients write them.

Java writes bodies with fastjson: keys sorted, nulls left out, enums as names, numbers as
numbers. Two quirks matter to clients:

- a map with integer keys (``brokerAddrs``) is written with the keys *unquoted*
  (``{0:"1.2.3.4:10911"}``) unless the client asked for standard JSON; Apache's C++ client
  reads both, Java clients from 4.9.4 ask for the quoted form;
- the C++ client's heartbeat uses the enums' ordinals (``"consumeType":1``) and a string
  ``subVersion`` where Java writes names and numbers.

Readers here accept both shapes and name what is wrong in an ``InvalidArgument``; the tag
hash codes of a subscription are computed here, never taken from the client (C++ sends
``atoi(tag)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiorocketmq.protocol.errors import InvalidArgument
from aiorocketmq.protocol.tags import parse_expression
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2

__all__ = [
    "cluster_info_body",
    "consumer_list_body",
    "fastjson",
    "lock_response_body",
    "parse_consumer_list",
    "parse_heartbeat",
    "parse_json",
    "parse_lock_body",
    "parse_route",
    "route_body",
    "topic_list_body",
]

# Java's enum ordinals and names (ConsumeType, MessageModel, ConsumeFromWhere) -> our proto.
_CONSUME_TYPE = {
    0: common_pb2.CONSUME_ACTIVELY, "CONSUME_ACTIVELY": common_pb2.CONSUME_ACTIVELY,
    1: common_pb2.CONSUME_PASSIVELY, "CONSUME_PASSIVELY": common_pb2.CONSUME_PASSIVELY,
    # POP consumers are served as push consumers would be.
    2: common_pb2.CONSUME_PASSIVELY, "CONSUME_POP": common_pb2.CONSUME_PASSIVELY,
}
_MESSAGE_MODEL = {
    0: common_pb2.BROADCASTING, "BROADCASTING": common_pb2.BROADCASTING,
    1: common_pb2.CLUSTERING, "CLUSTERING": common_pb2.CLUSTERING,
}
_CONSUME_FROM_WHERE = {
    0: common_pb2.CONSUME_FROM_LAST_OFFSET, "CONSUME_FROM_LAST_OFFSET": common_pb2.CONSUME_FROM_LAST_OFFSET,
    # the three deprecated ones behave as LAST_OFFSET in RocketMQ 4.x
    1: common_pb2.CONSUME_FROM_LAST_OFFSET,
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST": common_pb2.CONSUME_FROM_LAST_OFFSET,
    2: common_pb2.CONSUME_FROM_LAST_OFFSET, "CONSUME_FROM_MIN_OFFSET": common_pb2.CONSUME_FROM_LAST_OFFSET,
    3: common_pb2.CONSUME_FROM_LAST_OFFSET, "CONSUME_FROM_MAX_OFFSET": common_pb2.CONSUME_FROM_LAST_OFFSET,
    4: common_pb2.CONSUME_FROM_FIRST_OFFSET, "CONSUME_FROM_FIRST_OFFSET": common_pb2.CONSUME_FROM_FIRST_OFFSET,
    5: common_pb2.CONSUME_FROM_TIMESTAMP, "CONSUME_FROM_TIMESTAMP": common_pb2.CONSUME_FROM_TIMESTAMP,
}


# ---- writing ----------------------------------------------------------------------------------
def _write(value: Any, quote_int_keys: bool, out: list[str]) -> None:
    if isinstance(value, Mapping):
        out.append("{")
        first = True
        for key in sorted(value, key=lambda k: (isinstance(k, str), k)):
            item = value[key]
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            if isinstance(key, int) and not quote_int_keys:
                out.append(str(key))
            else:
                out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            _write(item, quote_int_keys, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, quote_int_keys, out)
        out.append("]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def fastjson(value: Any, *, quote_int_keys: bool = True) -> bytes:
    """``value`` as fastjson writes it: sorted keys, no nulls, integer keys quoted or not."""
    out: list[str] = []
    _write(value, quote_int_keys, out)
    return "".join(out).encode()


def _broker_data(
    data: common_pb2.BrokerData, address_of: Callable[[str], str | None]
) -> dict[str, Any] | None:
    addrs = {int(i): address_of(a) for i, a in data.broker_addrs.items()}
    addrs = {i: a for i, a in addrs.items() if a}
    if not addrs:
        return None
    return {
        "brokerAddrs": addrs,
        "brokerName": data.broker_name,
        "cluster": data.cluster,
        "enableActingMaster": False,
    }


def route_body(
    route: common_pb2.TopicRouteData,
    address_of: Callable[[str], str | None],
    *,
    quote_int_keys: bool,
) -> bytes | None:
    """TopicRouteData JSON with each broker's remoting address (``address_of`` maps a broker's
    gRPC address to it); brokers without one are left out. None when no broker remains."""
    brokers = []
    names = set()
    for data in route.broker_datas:
        item = _broker_data(data, address_of)
        if item is not None:
            brokers.append(item)
            names.add(data.broker_name)
    if not brokers:
        return None
    queues = [
        {
            "brokerName": q.broker_name,
            "perm": q.perm,
            "readQueueNums": q.read_queue_nums,
            "topicSysFlag": q.topic_sys_flag,
            "writeQueueNums": q.write_queue_nums,
        }
        for q in route.queue_datas
        if q.broker_name in names
    ]
    body = {"brokerDatas": brokers, "filterServerTable": {}, "queueDatas": queues}
    return fastjson(body, quote_int_keys=quote_int_keys)


def cluster_info_body(
    info: nameserver_pb2.ClusterInfo, address_of: Callable[[str], str | None]
) -> bytes:
    """ClusterInfo JSON (always with unquoted integer keys, as Apache's name server writes it)."""
    table = {}
    for name, data in info.broker_addr_table.items():
        item = _broker_data(data, address_of)
        if item is not None:
            table[name] = item
    clusters = {
        cluster: [n for n in names.broker_names if n in table]
        for cluster, names in info.cluster_addr_table.items()
    }
    return fastjson(
        {"brokerAddrTable": table, "clusterAddrTable": clusters}, quote_int_keys=False
    )


def topic_list_body(topics: Iterable[str]) -> bytes:
    return fastjson({"topicList": sorted(topics)})


def consumer_list_body(client_ids: Iterable[str]) -> bytes:
    return fastjson({"consumerIdList": list(client_ids)})


def lock_response_body(queues: Iterable[common_pb2.MessageQueue]) -> bytes:
    return fastjson({"lockOKMQSet": [_mq_json(q) for q in queues]})


def _mq_json(mq: common_pb2.MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


# ---- reading ----------------------------------------------------------------------------------
def parse_json(body: bytes, what: str) -> Any:
    """A JSON body (C++ ends it with a newline or a NUL); ``InvalidArgument`` if it is not JSON."""
    try:
        return json.loads(body.rstrip(b"\x00").decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidArgument(f"the {what} body is not JSON: {e}") from None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{what} must be a JSON array")
    return value


def _enum(table: Mapping[Any, int], value: Any, what: str, default: int) -> int:
    if value is None:
        return default
    try:
        return table[value]
    except (KeyError, TypeError):
        raise InvalidArgument(f"{what} has an unknown value {value!r}") from None


def _int(value: Any, what: str) -> int:
    if value is None or value == "":
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{what} is not an integer: {value!r}") from None


def parse_heartbeat(body: bytes) -> common_pb2.HeartbeatData:
    """HeartbeatData in Java's shape (enum names) or the C++ client's (ordinals)."""
    data = _object(parse_json(body, "heartbeat"), "the heartbeat")
    client_id = data.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise InvalidArgument("the heartbeat's clientID is missing")
    result = common_pb2.HeartbeatData(client_id=client_id)
    for i, p in enumerate(_list(data.get("producerDataSet"), "producerDataSet")):
        p = _object(p, f"producerDataSet[{i}]")
        result.producer_data_set.add(group_name=str(p.get("groupName", "")))
    for i, c in enumerate(_list(data.get("consumerDataSet"), "consumerDataSet")):
        where = f"consumerDataSet[{i}]"
        c = _object(c, where)
        consumer = result.consumer_data_set.add(
            group_name=str(c.get("groupName", "")),
            consume_type=_enum(
                _CONSUME_TYPE, c.get("consumeType"), f"{where}.consumeType",
                common_pb2.CONSUME_PASSIVELY,
            ),
            message_model=_enum(
                _MESSAGE_MODEL, c.get("messageModel"), f"{where}.messageModel",
                common_pb2.CLUSTERING,
            ),
            consume_from_where=_enum(
                _CONSUME_FROM_WHERE, c.get("consumeFromWhere"), f"{where}.consumeFromWhere",
                common_pb2.CONSUME_FROM_LAST_OFFSET,
            ),
            unit_mode=bool(c.get("unitMode", False)),
        )
        subs = _list(c.get("subscriptionDataSet"), f"{where}.subscriptionDataSet")
        for j, s in enumerate(subs):
            sub_where = f"{where}.subscriptionDataSet[{j}]"
            s = _object(s, sub_where)
            expression_type = str(s.get("expressionType") or "TAG")
            if expression_type != "TAG":
                raise InvalidArgument(
                    f"{sub_where}.expressionType {expression_type!r} is not supported (only TAG)"
                )
            parsed = parse_expression(str(s.get("subString") or "*"))
            consumer.subscription_data_set.add(
                topic=str(s.get("topic", "")),
                sub_string=parsed.sub_string,
                tags_set=sorted(parsed.tags_set),
                code_set=sorted(parsed.code_set),
                sub_version=_int(s.get("subVersion"), f"{sub_where}.subVersion"),
                expression_type="TAG",
            )
    return result


def parse_lock_body(
    body: bytes,
) -> tuple[str, str, bool, list[common_pb2.MessageQueue]]:
    """Lock/UnlockBatchRequestBody: ``(client id, group, only this broker, queues)``."""
    data = _object(parse_json(body, "lock"), "the lock request")
    queues = []
    for i, m in enumerate(_list(data.get("mqSet"), "mqSet")):
        m = _object(m, f"mqSet[{i}]")
        queues.append(
            common_pb2.MessageQueue(
                topic=str(m.get("topic", "")),
                broker_name=str(m.get("brokerName", "")),
                queue_id=_int(m.get("queueId"), f"mqSet[{i}].queueId"),
            )
        )
    return (
        str(data.get("clientId", "")),
        str(data.get("consumerGroup", "")),
        bool(data.get("onlyThisBroker", False)),
        queues,
    )


def parse_consumer_list(body: bytes) -> list[str]:
    """GetConsumerListByGroupResponseBody (for clients and tests)."""
    data = _object(parse_json(body, "consumer list"), "the consumer list")
    return [str(x) for x in _list(data.get("consumerIdList"), "consumerIdList")]


def parse_route(body: bytes) -> dict[str, Any]:
    """TopicRouteData as a client reads it, quoted or unquoted integer keys alike."""
    import re

    text = body.decode()
    # fastjson's unquoted integer keys -> quoted, so the standard parser reads them.
    text = re.sub(r"([{,])(-?\d+):", r'\1"\2":', text)
    return _object(json.loads(text), "the route")
