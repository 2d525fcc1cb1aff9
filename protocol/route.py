"""Route conversions (pure): a ``TopicRouteData`` to what consumers and producers use.

Rules: consumers see every readable queue (``topicRouteData2TopicSubscribeInfo``); producers
see the writable queues of brokers that have a master, sorted by broker name
(``topicRouteData2TopicPublishInfo``), or the ``order_topic_conf`` counts when set.
"""

from __future__ import annotations

from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.v1 import common_pb2

__all__ = [
    "MASTER_ID",
    "master_addr",
    "master_broker_data",
    "route_to_publish_queues",
    "route_to_subscribe_queues",
]

MASTER_ID = 0


def route_to_subscribe_queues(topic: str, route: common_pb2.TopicRouteData) -> set[MessageQueue]:
    """The queues a consumer of ``topic`` may be allocated."""
    return {
        MessageQueue.interned(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if PermName.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


def route_to_publish_queues(topic: str, route: common_pb2.TopicRouteData) -> list[MessageQueue]:
    """The queues a producer of ``topic`` may send to, in RocketMQ's order."""
    if route.order_topic_conf:
        queues: list[MessageQueue] = []
        for part in route.order_topic_conf.split(";"):
            name, _, count = part.partition(":")
            if name and count.isdigit():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(count)))
        return queues
    with_master = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    return [
        MessageQueue(topic, qd.broker_name, i)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if PermName.is_writeable(qd.perm) and qd.broker_name in with_master
        for i in range(qd.write_queue_nums)
    ]


def master_broker_data(
    route: common_pb2.TopicRouteData, broker_name: str
) -> common_pb2.BrokerData | None:
    """``broker_name``'s addresses in the route, if it names a master there."""
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return bd if MASTER_ID in bd.broker_addrs else None
    return None


def master_addr(route: common_pb2.TopicRouteData, broker_name: str) -> str | None:
    """The master address of ``broker_name`` in the route, if it has one."""
    bd = master_broker_data(route, broker_name)
    return bd.broker_addrs[MASTER_ID] if bd is not None else None
