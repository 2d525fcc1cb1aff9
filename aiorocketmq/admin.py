"""``AdminClient``: the cluster's administration as async methods (RocketMQ's ``DefaultMQAdminExt``).

Everything ``mqadmin`` does is a method here; ``mqadmin`` only parses flags and prints. Usage::

    async with AdminClient("127.0.0.1:9876") as admin:
        info = await admin.cluster_info()
        await admin.update_topic("TopicTest", 8, cluster="DefaultCluster")
        stats = await admin.consume_stats("my_group")

Results are the protocol's messages (``aiorocketmq.protocol.v1``) or plain Python values.
Failures are the typed ``MQError`` of the RPC that failed (its message names the broker), or an
``AdminError`` for a request that cannot be carried out (an unknown cluster, no such queue).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiorocketmq.broker.subscription_group_manager import SubscriptionGroupConfig
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import InvalidArgument, MQError, SubscriptionGroupNotExist
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.record import decode_message_id
from aiorocketmq.protocol.route import MASTER_ID, master_addr, route_to_subscribe_queues
from aiorocketmq.protocol.rpc import DEFAULT_RPC_TIMEOUT, call
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2, nameserver_pb2
from aiorocketmq.protocol.validators import check_group, check_topic

__all__ = [
    "PULL_BATCH_SIZE",
    "TOOLS_CONSUMER_GROUP",
    "TOOLS_PRODUCER_GROUP",
    "AdminClient",
    "AdminError",
    "ClientStatus",
    "QueuePull",
]

# MixAll.TOOLS_CONSUMER_GROUP: the group the admin pulls as (it never commits an offset).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
# The producer group of ``send_message``.
TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"
# Messages asked for per PullMessage of ``consume_messages`` (the client's pullBatchSize).
PULL_BATCH_SIZE = 32


class AdminError(Exception):
    """A request that cannot be carried out: bad arguments together, unknown cluster, no queue."""


@dataclass
class QueuePull:
    """What ``consume_messages`` did on one queue."""

    queue: MessageQueue
    start_offset: int
    next_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    status: str = "NO_NEW_MSG"


@dataclass
class ClientStatus:
    """One client of a group: its connection, and its running info or why there is none."""

    connection: broker_pb2.Connection
    info: broker_pb2.ConsumerRunningInfo | None
    error: str = ""


class AdminClient:
    """The name servers and brokers of one cluster, administered."""

    def __init__(self, namesrv_addr: str, *, timeout: float = DEFAULT_RPC_TIMEOUT) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout
        self.namesrv = NameServerClient(namesrv_addr, timeout=timeout)
        self.brokers = BrokerConnections()

    async def close(self) -> None:
        await self.brokers.close()
        await self.namesrv.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def broker_call(self, addr: str, method: str, request: Any) -> Any:
        """``method`` of the broker at ``addr`` with the deadline; errors name the broker."""
        try:
            return await call(getattr(self.brokers.stub(addr), method), request, self.timeout)
        except MQError as e:
            e.message = f"broker {addr}: {e.message}"
            raise

    # ---- the name server -------------------------------------------------------------------
    async def cluster_info(self) -> nameserver_pb2.ClusterInfo:
        """GET_BROKER_CLUSTER_INFO."""
        return await self.namesrv.get_broker_cluster_info()

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        return list(await self.namesrv.get_all_topic_list())

    async def topic_route(self, topic: str) -> common_pb2.TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC."""
        return await self.namesrv.get_route_info_by_topic(topic)

    async def master_brokers(self, cluster: str | None = None) -> list[tuple[str, str]]:
        """``(broker name, master address)`` of every master, or of ``cluster``'s, by name."""
        info = await self.cluster_info()
        if cluster is None:
            names: Sequence[str] = list(info.broker_addr_table)
        elif cluster in info.cluster_addr_table:
            names = list(info.cluster_addr_table[cluster].broker_names)
        else:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster} not found on the name server (known: {known})")
        masters = []
        for name in sorted(names):
            if name in info.broker_addr_table:
                addrs = info.broker_addr_table[name].broker_addrs
                if MASTER_ID in addrs:
                    masters.append((name, addrs[MASTER_ID]))
        return masters

    async def target_brokers(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """One broker, or every master of a cluster."""
        if broker_addr:
            return [broker_addr]
        addrs = [addr for _, addr in await self.master_brokers(cluster)]
        if not addrs:
            raise AdminError(f"cluster {cluster} has no master broker")
        return addrs

    @staticmethod
    def _route_master(route: common_pb2.TopicRouteData, broker_name: str, topic: str) -> str:
        addr = master_addr(route, broker_name)
        if addr is None:
            raise AdminError(f"broker {broker_name} of topic {topic} has no master address")
        return addr

    # ---- topics ----------------------------------------------------------------------------
    async def update_topic(
        self,
        topic: str,
        read_queue_nums: int = 8,
        write_queue_nums: int | None = None,
        *,
        perm: int = 6,
        broker_addr: str | None = None,
        cluster: str | None = None,
    ) -> tuple[common_pb2.TopicConfig, list[str]]:
        """UPDATE_AND_CREATE_TOPIC on one broker or every master of a cluster; the config and
        the brokers it went to."""
        check_topic(topic)
        write = read_queue_nums if write_queue_nums is None else write_queue_nums
        for flag, value in (("-r", read_queue_nums), ("-w", write)):
            if value <= 0:
                raise InvalidArgument(f"{flag} (queue numbers) must be positive, got {value}")
        if not PermName.is_valid(perm):
            raise InvalidArgument(f"-p (perm) must be in 0..7, got {perm}")
        config = common_pb2.TopicConfig(
            topic_name=topic, read_queue_nums=read_queue_nums, write_queue_nums=write, perm=perm
        )
        addrs = await self.target_brokers(broker_addr, cluster)
        request = broker_pb2.UpdateAndCreateTopicRequest(topic_config=config)
        for addr in addrs:
            await self.broker_call(addr, "UpdateAndCreateTopic", request)
        return config, addrs

    async def topic_status(self, topic: str) -> list[broker_pb2.TopicOffset]:
        """GET_TOPIC_STATS_INFO on the master of every broker of the topic, sorted by queue."""
        route = await self.topic_route(topic)
        offsets: list[broker_pb2.TopicOffset] = []
        for broker_name in sorted({bd.broker_name for bd in route.broker_datas}):
            addr = self._route_master(route, broker_name, topic)
            stats: broker_pb2.GetTopicStatsInfoResponse = await self.broker_call(
                addr, "GetTopicStatsInfo", broker_pb2.GetTopicStatsInfoRequest(topic=topic)
            )
            offsets.extend(stats.offsets)
        offsets.sort(key=lambda o: MessageQueue.from_proto(o.message_queue))
        return offsets

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on every master (of ``cluster``), then
        DELETE_TOPIC_IN_NAMESRV on every name server; the brokers that had it."""
        check_topic(topic)
        had = []
        for _, addr in await self.master_brokers(cluster):
            response: broker_pb2.DeleteTopicResponse = await self.broker_call(
                addr, "DeleteTopic", broker_pb2.DeleteTopicRequest(topic=topic)
            )
            if response.existed:
                had.append(addr)
        await self.namesrv.delete_topic(topic)
        return had

    # ---- subscription groups ---------------------------------------------------------------
    async def sub_group_configs(self, addr: str) -> list[broker_pb2.SubscriptionGroupConfig]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every consumer group's settings on a broker."""
        response: broker_pb2.GetAllSubscriptionGroupConfigResponse = await self.broker_call(
            addr, "GetAllSubscriptionGroupConfig", broker_pb2.GetAllSubscriptionGroupConfigRequest()
        )
        return list(response.configs)

    async def update_sub_group(
        self,
        group: str,
        *,
        broker_addr: str | None = None,
        cluster: str | None = None,
        **settings: bool | int,
    ) -> dict[str, broker_pb2.SubscriptionGroupConfig]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker or every master of a cluster:
        the group's current settings there (the defaults for a new group) with ``settings``
        (``SubscriptionGroupConfig`` field names, e.g. ``consume_enable=False``) applied."""
        check_group(group)
        known = set(broker_pb2.SubscriptionGroupConfig.DESCRIPTOR.fields_by_name) - {"group_name"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise AdminError(
                f"unknown subscription group settings {unknown}; known: {sorted(known)}"
            )
        done = {}
        for addr in await self.target_brokers(broker_addr, cluster):
            current = {c.group_name: c for c in await self.sub_group_configs(addr)}.get(group)
            config = broker_pb2.SubscriptionGroupConfig()
            config.CopyFrom(
                current if current is not None else SubscriptionGroupConfig(group).to_proto()
            )
            for name, value in settings.items():
                setattr(config, name, value)
            await self.broker_call(addr, "UpdateAndCreateSubscriptionGroup", config)
            done[addr] = config
        return done

    async def delete_sub_group(
        self,
        group: str,
        *,
        broker_addr: str | None = None,
        cluster: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP on one broker or every master of a cluster; the brokers
        that had the group."""
        check_group(group)
        had = []
        for addr in await self.target_brokers(broker_addr, cluster):
            response: broker_pb2.DeleteSubscriptionGroupResponse = await self.broker_call(
                addr,
                "DeleteSubscriptionGroup",
                broker_pb2.DeleteSubscriptionGroupRequest(
                    group_name=group, remove_offset=remove_offset
                ),
            )
            if response.existed:
                had.append(addr)
        return had

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> tuple[dict[MessageQueue, int], list[str]]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every master of the topic: the group's new offsets
        and the clients told (running consumers re-read from there)."""
        check_group(group)
        check_topic(topic)
        if timestamp_ms < 0:
            raise AdminError(f"timestamp must be >= 0, got {timestamp_ms}")
        route = await self.topic_route(topic)
        offsets: dict[MessageQueue, int] = {}
        told: set[str] = set()
        for broker_name in sorted({bd.broker_name for bd in route.broker_datas}):
            addr = self._route_master(route, broker_name, topic)
            response: broker_pb2.ResetOffsetResponse = await self.broker_call(
                addr,
                "ResetOffset",
                broker_pb2.ResetOffsetRequest(
                    topic=topic, consumer_group=group, timestamp=timestamp_ms, force=force
                ),
            )
            for o in response.offsets:
                offsets[MessageQueue(topic, broker_name, o.queue_id)] = o.offset
            told.update(response.clients_told)
        return dict(sorted(offsets.items())), sorted(told)

    # ---- messages --------------------------------------------------------------------------
    async def view_message(self, msg_id: str) -> common_pb2.MessageExt:
        """VIEW_MESSAGE_BY_ID: the message an offset message id names (store host + offset)."""
        try:
            host, port, offset = decode_message_id(msg_id.strip())
        except ValueError as e:
            raise AdminError(f"{msg_id!r} is not an offset message id: {e}") from None
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        message: common_pb2.MessageExt = await self.broker_call(
            addr, "ViewMessage", broker_pb2.ViewMessageRequest(commit_log_offset=offset)
        )
        return message

    async def query_message_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[common_pb2.MessageExt]:
        """QUERY_MESSAGE on every master of the topic: its messages with ``key`` (among their
        KEYS, or as their UNIQ_KEY) stored in ``[begin_ms, end_ms]``, newest first."""
        check_topic(topic)
        if not key:
            raise AdminError("a key is required")
        if end_ms is not None and end_ms < begin_ms:
            raise AdminError("the end time must not be before the begin time")
        route = await self.topic_route(topic)
        found: list[common_pb2.MessageExt] = []
        for broker_name in sorted({bd.broker_name for bd in route.broker_datas}):
            addr = self._route_master(route, broker_name, topic)
            response: broker_pb2.QueryMessageResponse = await self.broker_call(
                addr,
                "QueryMessage",
                broker_pb2.QueryMessageRequest(
                    topic=topic,
                    key=key,
                    max_num=max_num,
                    begin_timestamp=begin_ms,
                    end_timestamp=end_ms or 0,
                ),
            )
            found.extend(response.messages)
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return found[:max_num]

    async def clean_expired_cq(
        self, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> dict[str, broker_pb2.CleanExpiredConsumeQueueResponse]:
        """CLEAN_EXPIRED_CONSUMEQUEUE on one broker or every master (of a cluster)."""
        done = {}
        for addr in await self.target_brokers(broker_addr, cluster):
            done[addr] = await self.broker_call(
                addr, "CleanExpiredConsumeQueue", broker_pb2.CleanExpiredConsumeQueueRequest()
            )
        return done

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the queue's first offset stored at or after the time."""
        route = await self.topic_route(mq.topic)
        addr = self._route_master(route, mq.broker_name, mq.topic)
        found: broker_pb2.QueueOffsetResponse = await self.broker_call(
            addr,
            "SearchOffsetByTimestamp",
            broker_pb2.SearchOffsetRequest(
                topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms
            ),
        )
        return found.offset

    async def messages_between(
        self, topic: str, begin_ms: int, end_ms: int | None = None, *, count: int = 1024
    ) -> list[common_pb2.MessageExt]:
        """Every queue's messages stored in ``[begin_ms, end_ms)`` (printMsg), up to ``count``."""
        if end_ms is not None and end_ms <= begin_ms:
            raise AdminError("the end time must be after the begin time")
        route = await self.topic_route(topic)
        found: list[common_pb2.MessageExt] = []
        for mq in sorted(route_to_subscribe_queues(topic, route)):
            start = await self.search_offset(mq, begin_ms)
            got, _ = await self.consume_messages(
                topic, count=count, broker_name=mq.broker_name, queue_id=mq.queue_id, offset=start
            )
            found.extend(m for m in got if end_ms is None or m.store_timestamp < end_ms)
        return found[:count]

    async def broker_status(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime figures by RocketMQ's names."""
        info: broker_pb2.BrokerRuntimeInfo = await self.broker_call(
            addr, "GetBrokerRuntimeInfo", broker_pb2.GetBrokerRuntimeInfoRequest()
        )
        return dict(sorted(info.table.items()))

    async def producer_connection(self, group: str, topic: str) -> list[broker_pb2.Connection]:
        """GET_PRODUCER_CONNECTION_LIST from the masters of ``topic``: the group's clients."""
        check_group(group)
        route = await self.topic_route(topic)
        seen: dict[str, broker_pb2.Connection] = {}
        for broker_name in sorted({bd.broker_name for bd in route.broker_datas}):
            addr = self._route_master(route, broker_name, topic)
            try:
                conn: broker_pb2.ProducerConnection = await self.broker_call(
                    addr,
                    "GetProducerConnectionList",
                    broker_pb2.GetProducerConnectionListRequest(producer_group=group),
                )
            except MQError:
                continue
            for c in conn.connections:
                seen.setdefault(c.client_id, c)
        if not seen:
            raise AdminError(f"the producer group[{group}] is not online on the brokers of {topic}")
        return [seen[k] for k in sorted(seen)]

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
    ) -> Any:
        """SEND_MESSAGE through a producer (route, queue selection, retries); its SendResult."""
        from aiorocketmq.producer import Producer

        if (broker_name is None) != (queue_id is None):
            raise AdminError("-b (broker name) and -i (queue id) go together")
        message = Message(topic, body, tags=tags, keys=keys)
        producer = Producer(TOOLS_PRODUCER_GROUP, self.namesrv_addr, send_msg_timeout=self.timeout)
        await producer.start()
        try:
            if broker_name is None or queue_id is None:
                return await producer.send(message)
            return await producer.send(message, MessageQueue(topic, broker_name, queue_id))
        finally:
            await producer.shutdown()

    async def consume_messages(
        self,
        topic: str,
        *,
        count: int = 128,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        expression: str = "*",
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> tuple[list[common_pb2.MessageExt], list[QueuePull]]:
        """PULL_MESSAGE (no suspend, the expression in the request) from each queue in turn,
        from ``offset`` or each queue's min offset, up to ``count`` messages; commits nothing."""
        check_topic(topic)
        check_group(group)
        if count <= 0:
            raise InvalidArgument(f"-c (message number) must be positive, got {count}")
        if offset is not None and offset < 0:
            raise InvalidArgument(f"-o (offset) must be >= 0, got {offset}")
        route = await self.topic_route(topic)
        queues = sorted(
            mq
            for mq in route_to_subscribe_queues(topic, route)
            if (broker_name is None or mq.broker_name == broker_name)
            and (queue_id is None or mq.queue_id == queue_id)
        )
        if not queues:
            where = " ".join(
                part
                for part in (
                    f"on broker {broker_name}" if broker_name is not None else "",
                    f"with queue id {queue_id}" if queue_id is not None else "",
                )
                if part
            )
            raise AdminError(f"topic {topic} has no readable queue {where}".rstrip())
        messages: list[common_pb2.MessageExt] = []
        pulls: list[QueuePull] = []
        for mq in queues:
            if len(messages) >= count:
                break
            addr = self._route_master(route, mq.broker_name, topic)
            got, pull = await self._pull_queue(
                addr, mq, count - len(messages), offset, expression, group
            )
            messages.extend(got)
            pulls.append(pull)
        return messages, pulls

    async def _pull_queue(
        self,
        addr: str,
        mq: MessageQueue,
        limit: int,
        start: int | None,
        expression: str,
        group: str,
    ) -> tuple[list[common_pb2.MessageExt], QueuePull]:
        """Pull ``mq`` from its start offset until it is exhausted or ``limit`` messages came."""
        if start is None:
            found: broker_pb2.QueueOffsetResponse = await self.broker_call(
                addr,
                "GetMinOffset",
                broker_pb2.QueueOffsetRequest(topic=mq.topic, queue_id=mq.queue_id),
            )
            start = found.offset
        offset = start
        pull = QueuePull(mq, start)
        messages: list[common_pb2.MessageExt] = []
        while len(messages) < limit:
            response: broker_pb2.PullMessageResponse = await self.broker_call(
                addr,
                "PullMessage",
                broker_pb2.PullMessageRequest(
                    consumer_group=group,
                    topic=mq.topic,
                    queue_id=mq.queue_id,
                    queue_offset=offset,
                    max_msg_nums=min(PULL_BATCH_SIZE, limit - len(messages)),
                    suspend=False,
                    has_subscription=True,
                    sub_expression=expression,
                    expression_type="TAG",
                ),
            )
            pull.status = broker_pb2.PullStatus.Name(response.status)
            pull.min_offset, pull.max_offset = response.min_offset, response.max_offset
            if response.status == broker_pb2.FOUND:
                taken = response.messages[: limit - len(messages)]
                messages.extend(taken)
                if len(taken) < len(response.messages):
                    offset = taken[-1].queue_offset + 1
                    break
            elif response.status != broker_pb2.NO_MATCHED_MSG:
                break  # NO_NEW_MSG: read to the end; OFFSET_ILLEGAL: nothing at this offset
            if response.next_begin_offset <= offset:
                break
            offset = response.next_begin_offset
            if offset >= response.max_offset:
                break
        pull.next_offset = offset
        return messages, pull

    # ---- consumer groups -------------------------------------------------------------------
    async def consumer_connection(
        self, group: str
    ) -> tuple[str, str, broker_pb2.ConsumerConnection]:
        """GET_CONSUMER_CONNECTION_LIST from the first master (by name) that knows the group:
        ``(broker name, address, connection)``."""
        check_group(group)
        request = broker_pb2.GetConsumerConnectionListRequest(consumer_group=group)
        for broker_name, addr in await self.master_brokers():
            try:
                conn = await self.broker_call(addr, "GetConsumerConnectionList", request)
            except SubscriptionGroupNotExist:
                continue
            return broker_name, addr, conn
        raise SubscriptionGroupNotExist(f"the consumer group[{group}] is not online on any broker")

    async def consume_stats(
        self, group: str, topic: str | None = None
    ) -> tuple[list[broker_pb2.QueueConsumeStats], float]:
        """GET_CONSUME_STATS from every master: every queue (sorted) and the group's TPS."""
        check_group(group)
        request = broker_pb2.GetConsumeStatsRequest(consumer_group=group, topic=topic or "")
        queues: list[broker_pb2.QueueConsumeStats] = []
        consume_tps = 0.0
        known = False
        for _, addr in await self.master_brokers():
            try:
                stats: broker_pb2.ConsumeStats = await self.broker_call(
                    addr, "GetConsumeStats", request
                )
            except SubscriptionGroupNotExist:
                continue
            known = True
            queues.extend(stats.queues)
            # every broker reports the group's whole rate (its clients' reports): not a sum
            consume_tps = max(consume_tps, stats.consume_tps)
        if not known:
            raise SubscriptionGroupNotExist(
                f"the consumer group[{group}] has no subscription or offset on any broker"
            )
        queues.sort(key=lambda q: MessageQueue.from_proto(q.message_queue))
        return queues, consume_tps

    async def consumer_running_info(
        self, group: str, client_id: str, *, broker_addr: str | None = None
    ) -> broker_pb2.ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO: one client's, asked through its channel to a broker."""
        if broker_addr is None:
            _, broker_addr, _ = await self.consumer_connection(group)
        info: broker_pb2.ConsumerRunningInfo = await self.broker_call(
            broker_addr,
            "GetConsumerRunningInfo",
            broker_pb2.GetConsumerRunningInfoRequest(consumer_group=group, client_id=client_id),
        )
        return info

    async def consumer_status(self, group: str, client_id: str | None = None) -> list[ClientStatus]:
        """Each client of the group (or one) with its running info, or why there is none."""
        _, addr, conn = await self.consumer_connection(group)
        clients = [c for c in conn.connections if not client_id or c.client_id == client_id]
        if not clients:
            raise AdminError(f"client {client_id} is not a member of {group}")
        result = []
        for client in clients:
            try:
                info = await self.consumer_running_info(group, client.client_id, broker_addr=addr)
            except MQError as e:
                result.append(ClientStatus(client, None, e.message))
                continue
            result.append(ClientStatus(client, info))
        return result

    # ---- broker settings -------------------------------------------------------------------
    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting by RocketMQ's name, as text."""
        response = await self.broker_call(
            addr, "GetBrokerConfig", broker_pb2.GetBrokerConfigRequest()
        )
        return dict(sorted(response.properties.items()))

    async def update_broker_config(self, addr: str, properties: dict[str, str]) -> dict[str, str]:
        """UPDATE_BROKER_CONFIG: change settings a running broker reads live; what changed."""
        response = await self.broker_call(
            addr, "UpdateBrokerConfig", broker_pb2.UpdateBrokerConfigRequest(properties=properties)
        )
        return dict(response.properties)
