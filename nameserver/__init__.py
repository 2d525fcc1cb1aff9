"""The name server: route table (``RouteInfoManager``), broker liveness, gRPC service, client."""

from aiorocketmq.nameserver.client import NameServerClient, parse_namesrv_addr
from aiorocketmq.nameserver.config import NamesrvConfig
from aiorocketmq.nameserver.route_info_manager import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
    BrokerAddrInfo,
    BrokerLiveInfo,
    RegisterBrokerResult,
    RouteInfoManager,
)
from aiorocketmq.nameserver.service import NameServer, NameServerService

__all__ = [
    "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS",
    "BrokerAddrInfo",
    "BrokerLiveInfo",
    "NameServer",
    "NameServerClient",
    "NameServerService",
    "NamesrvConfig",
    "RegisterBrokerResult",
    "RouteInfoManager",
    "parse_namesrv_addr",
]
