"""The name server's remoting side: the requests Apache's clients send it, from the same
``RouteInfoManager`` as the gRPC service.

GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106) and
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206). Routes name each broker by its *remoting* address
(brokers without a remoting listener are left out, since a remoting client could not reach
them). As Apache's name server does, a route for a client older than 4.9.4 (version < 401)
that did not ask for standard JSON has its ``brokerAddrs`` keys unquoted. Anything else is
REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

from aiorocketmq.logs import get_logger
from aiorocketmq.nameserver.route_info_manager import RouteInfoManager
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.remoting.bodies import cluster_info_body, route_body, topic_list_body
from aiorocketmq.protocol.remoting.command import RemotingCommand, not_supported
from aiorocketmq.protocol.remoting.fields import Fields
from aiorocketmq.protocol.remoting.server import RemotingConnection

__all__ = ["STANDARD_JSON_VERSION", "NameServerRemoting"]

log = get_logger("aiorocketmq.nameserver.remoting")

# MQVersion V4_9_4: from this client version on, routes are standard JSON (quoted keys).
STANDARD_JSON_VERSION = 401


class NameServerRemoting:
    """Answers remoting requests from the route table."""

    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes

    async def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        fields = Fields(cmd.ext_fields, cmd.code)
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = fields.string("topic")
            quoted = cmd.version >= STANDARD_JSON_VERSION or fields.boolean(
                "acceptStandardJsonOnly", False
            )
            route = self.routes.pick_topic_route_data(topic)  # TopicNotFound -> 17
            body = route_body(route, self.routes.remoting_addresses().get, quote_int_keys=quoted)
            if body is None:
                return cmd.response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    remark=f"No topic route info in name server for the topic: {topic} "
                    "(no broker serving it has a remoting listener)",
                )
            return cmd.response(body=body)
        if cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            info = self.routes.get_all_cluster_info()
            return cmd.response(body=cluster_info_body(info, self.routes.remoting_addresses().get))
        if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            return cmd.response(body=topic_list_body(self.routes.get_all_topic_list().topic_list))
        log.info("remoting request not supported", code=cmd.code, remote_addr=conn.remote_addr)
        return not_supported(cmd)
