"""``RouteInfoManager``: the name server's route table, as a pure core (no I/O, clock passed in).

RocketMQ's tables, under their names:

- ``topic_queue_table``: topic -> broker name -> ``QueueData`` (one broker's share of a topic).
- ``broker_addr_table``: broker name -> ``BrokerData`` (cluster, name, addresses by broker id;
  id 0 is the master).
- ``cluster_addr_table``: cluster name -> set of broker names.
- ``broker_live_table``: ``BrokerAddrInfo(cluster, addr)`` -> ``BrokerLiveInfo`` (last update,
  heartbeat timeout, data version, HA address).

Rules:

1. ``register_broker`` validates the whole request first (non-blank cluster, broker name and
   address; ``broker_id >= 0``; every topic config has a legal name, a valid perm and
   non-negative queue numbers) and raises ``InvalidArgument`` naming the field; nothing changes
   on a rejected request.
2. Registering adds the broker name to its cluster, removes any *other* broker id registered
   under the same address (a slave that became master), and sets ``broker_addrs[id] = addr``.
3. Only the master (id 0), or the "prime slave" (the smallest id while there is no master),
   writes its topic configs into ``topic_queue_table``, and only for a topic when this is the
   broker's first registration, its ``data_version`` changed, or the topic has no queue data for
   this broker name yet. Slaves otherwise only refresh their liveness.
4. Every registration refreshes ``broker_live_table``; a timeout of 0 means the default (120 s).
5. ``unregister_broker`` removes the address from the live table and from its ``BrokerData``; a
   broker name left with no address leaves its cluster (an empty cluster is dropped) and every
   topic; a topic left with no broker is dropped, so it has no route.
6. ``scan_not_active_broker(now)`` unregisters every broker whose
   ``last_update_timestamp + heartbeat_timeout_millis < now`` and returns what it removed.
7. ``pick_topic_route_data`` answers from live brokers only: a broker name appears (with its
   queue data) only if at least one of its addresses is in the live table; no such broker means
   ``TopicNotFound``.

Where we differ from RocketMQ: there is no lock (every method runs to completion on one event
loop); there is no ``stateVersion`` check, acting-master write-perm wiping, filter server table,
static-topic mapping or ``deleteTopicWithBrokerRegistration`` (all off or unused by default in
RocketMQ); a route never lists queue data of a broker that has no live address, while RocketMQ
lists the topic's queue data as stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiorocketmq.protocol.errors import InvalidArgument, TopicNotFound
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.route import MASTER_ID
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2
from aiorocketmq.protocol.validators import check_topic

__all__ = [
    "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS",
    "BrokerAddrInfo",
    "BrokerLiveInfo",
    "RegisterBrokerResult",
    "RouteInfoManager",
]

# RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: a broker silent this long is dropped.
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000


@dataclass(frozen=True, slots=True)
class BrokerAddrInfo:
    """The key of ``broker_live_table``: a broker address within its cluster."""

    cluster_name: str
    broker_addr: str


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the name server knows of a live broker address (RocketMQ's ``BrokerLiveInfo``).

    Unlike RocketMQ it also keeps the broker's name and id, so expiry can unregister it without
    searching ``broker_addr_table``.
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: int
    ha_server_addr: str = ""
    remoting_addr: str = ""

    def expired(self, now: int) -> bool:
        """True once the broker has been silent for longer than its timeout."""
        return self.last_update_timestamp + self.heartbeat_timeout_millis < now


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """What a registration answers (``RegisterBrokerResult``): a slave learns its master."""

    master_addr: str = ""
    ha_server_addr: str = ""
    first_registration: bool = False


def _require_name(field: str, value: str) -> None:
    if not value or not value.strip():
        raise InvalidArgument(f"{field} must not be blank")


def _require_broker_id(broker_id: int) -> None:
    if broker_id < 0:
        raise InvalidArgument(f"broker_id must be >= 0, got {broker_id}")


def _validate_topic_configs(topic_configs: Sequence[common_pb2.TopicConfig]) -> None:
    """Check every topic config; the error names ``topic_configs[i].<field>``."""
    seen: dict[str, int] = {}
    for i, tc in enumerate(topic_configs):
        field = f"topic_configs[{i}]"
        try:
            check_topic(tc.topic_name)
        except InvalidArgument as e:
            raise InvalidArgument(f"{field}.topic_name is invalid: {e.message}") from None
        if tc.topic_name in seen:
            raise InvalidArgument(
                f"{field}.topic_name {tc.topic_name!r} repeats topic_configs[{seen[tc.topic_name]}]"
            )
        seen[tc.topic_name] = i
        if not PermName.is_valid(tc.perm):
            raise InvalidArgument(f"{field}.perm must be in [0, 8), got {tc.perm}")
        for name in ("read_queue_nums", "write_queue_nums"):
            value: int = getattr(tc, name)
            if value < 0:
                raise InvalidArgument(f"{field}.{name} must be >= 0, got {value}")


class RouteInfoManager:
    """The route table of one name server; callers pass the time (ms since the epoch)."""

    def __init__(
        self, *, default_heartbeat_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
    ) -> None:
        self.default_heartbeat_timeout_ms = default_heartbeat_timeout_ms
        self.topic_queue_table: dict[str, dict[str, common_pb2.QueueData]] = {}
        self.broker_addr_table: dict[str, common_pb2.BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}

    # -- registration -------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        now: int,
        ha_server_addr: str = "",
        topic_configs: Sequence[common_pb2.TopicConfig] = (),
        data_version: int = 0,
        heartbeat_timeout_millis: int = 0,
        remoting_addr: str = "",
    ) -> RegisterBrokerResult:
        """REGISTER_BROKER: record the broker and its topics, refresh its liveness at ``now``."""
        _require_name("cluster_name", cluster_name)
        _require_name("broker_name", broker_name)
        _require_name("broker_addr", broker_addr)
        _require_broker_id(broker_id)
        if heartbeat_timeout_millis < 0:
            raise InvalidArgument(
                f"heartbeat_timeout_millis must be >= 0, got {heartbeat_timeout_millis}"
            )
        _validate_topic_configs(topic_configs)

        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        broker_data = self.broker_addr_table.get(broker_name)
        first = broker_data is None
        if broker_data is None:
            broker_data = common_pb2.BrokerData(cluster=cluster_name, broker_name=broker_name)
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # Same address under another id: the broker switched role (slave -> master, say).
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            # The id moved to a new address; the old one is no longer this broker.
            self.broker_live_table.pop(BrokerAddrInfo(cluster_name, old_addr), None)
        first = first or not old_addr
        addrs[broker_id] = broker_addr

        key = BrokerAddrInfo(cluster_name, broker_addr)
        prev = self.broker_live_table.get(key)
        version_changed = prev is None or prev.data_version != data_version
        is_master = broker_id == MASTER_ID
        is_prime_slave = not is_master and broker_id == min(addrs)
        if is_master or is_prime_slave:
            for tc in topic_configs:
                queues = self.topic_queue_table.get(tc.topic_name)
                if first or version_changed or not queues or broker_name not in queues:
                    self._create_and_update_queue_data(broker_name, tc)

        self.broker_live_table[key] = BrokerLiveInfo(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            last_update_timestamp=now,
            heartbeat_timeout_millis=heartbeat_timeout_millis or self.default_heartbeat_timeout_ms,
            data_version=data_version,
            ha_server_addr=ha_server_addr,
            remoting_addr=remoting_addr,
        )

        if is_master:
            return RegisterBrokerResult(first_registration=prev is None)
        master_addr = addrs.get(MASTER_ID, "")
        master_live = (
            self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
            if master_addr
            else None
        )
        return RegisterBrokerResult(
            master_addr=master_addr,
            ha_server_addr=master_live.ha_server_addr if master_live else "",
            first_registration=prev is None,
        )

    def _create_and_update_queue_data(
        self, broker_name: str, topic_config: common_pb2.TopicConfig
    ) -> None:
        """Set ``topic_queue_table[topic][broker_name]`` from the broker's topic config."""
        self.topic_queue_table.setdefault(topic_config.topic_name, {})[broker_name] = (
            common_pb2.QueueData(
                broker_name=broker_name,
                read_queue_nums=topic_config.read_queue_nums,
                write_queue_nums=topic_config.write_queue_nums,
                perm=topic_config.perm,
                topic_sys_flag=topic_config.topic_sys_flag,
            )
        )

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> bool:
        """UNREGISTER_BROKER: forget the address; True if the name server knew it."""
        _require_name("cluster_name", cluster_name)
        _require_name("broker_name", broker_name)
        _require_name("broker_addr", broker_addr)
        _require_broker_id(broker_id)

        known = (
            self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None) is not None
        )
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return known
        addrs = broker_data.broker_addrs
        for i in [i for i, a in addrs.items() if a == broker_addr]:
            del addrs[i]
            known = True
        if addrs:
            return known

        # The broker name has no address left: it leaves its cluster and every topic.
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(broker_data.cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[broker_data.cluster]
        self._remove_topic_by_broker_name(broker_name)
        return known

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        """Drop the broker name's queue data everywhere, and topics left with none."""
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def scan_not_active_broker(self, now: int) -> list[BrokerLiveInfo]:
        """Unregister every broker silent for longer than its timeout; return the removed ones."""
        expired = [info for info in self.broker_live_table.values() if info.expired(now)]
        for info in expired:
            self.unregister_broker(
                cluster_name=info.cluster_name,
                broker_addr=info.broker_addr,
                broker_name=info.broker_name,
                broker_id=info.broker_id,
            )
        return expired

    # -- queries ------------------------------------------------------------------------------

    def _live_addrs(self, broker_data: common_pb2.BrokerData) -> dict[int, str]:
        """The broker's addresses that are in the live table."""
        return {
            i: a
            for i, a in broker_data.broker_addrs.items()
            if BrokerAddrInfo(broker_data.cluster, a) in self.broker_live_table
        }

    def pick_topic_route_data(self, topic: str) -> common_pb2.TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC: the topic's queues on live brokers, sorted by broker name."""
        route = common_pb2.TopicRouteData()
        for broker_name, queue_data in sorted(self.topic_queue_table.get(topic, {}).items()):
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            live = self._live_addrs(broker_data)
            if not live:
                continue
            route.queue_datas.append(queue_data)
            # Ours: where each of them serves remoting too, for clients sending and pulling so.
            cluster = broker_data.cluster
            remoting = {
                i: r
                for i, a in live.items()
                if (r := self.broker_live_table[BrokerAddrInfo(cluster, a)].remoting_addr)
            }
            route.broker_datas.append(
                common_pb2.BrokerData(
                    cluster=broker_data.cluster,
                    broker_name=broker_name,
                    broker_addrs=live,
                    remoting_addrs=remoting,
                )
            )
        if not route.broker_datas:
            raise TopicNotFound(f"No topic route info in name server for the topic: {topic}")
        return route

    def get_all_cluster_info(self) -> nameserver_pb2.ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every cluster, its broker names and addresses, and liveness."""
        info = nameserver_pb2.ClusterInfo()
        for broker_name, broker_data in self.broker_addr_table.items():
            info.broker_addr_table[broker_name].CopyFrom(broker_data)
        for cluster_name, names in self.cluster_addr_table.items():
            info.cluster_addr_table[cluster_name].broker_names.extend(sorted(names))
        for live in sorted(
            self.broker_live_table.values(),
            key=lambda b: (b.cluster_name, b.broker_name, b.broker_id, b.broker_addr),
        ):
            info.live_brokers.append(
                nameserver_pb2.BrokerLiveInfo(
                    cluster=live.cluster_name,
                    broker_name=live.broker_name,
                    broker_id=live.broker_id,
                    broker_addr=live.broker_addr,
                    last_update_timestamp=live.last_update_timestamp,
                    data_version=live.data_version,
                    remoting_addr=live.remoting_addr,
                )
            )
        return info

    def delete_topic(self, topic: str) -> bool:
        """DELETE_TOPIC_IN_NAMESRV: forget the topic's queue datas; whether it was known."""
        check_topic(topic)
        return self.topic_queue_table.pop(topic, None) is not None

    def remoting_addresses(self) -> dict[str, str]:
        """Each live broker's gRPC address -> its remoting address (those that have one)."""
        return {
            live.broker_addr: live.remoting_addr
            for live in self.broker_live_table.values()
            if live.remoting_addr
        }

    def get_all_topic_list(self) -> nameserver_pb2.TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic some registered broker serves."""
        return nameserver_pb2.TopicList(topic_list=sorted(self.topic_queue_table))
