"""A small synchronous client of name servers and brokers, for Spark's driver and executors.

Spark runs the data source in plain Python processes (its Python workers), where a blocking
client is the simplest fit: ``grpc.insecure_channel`` and the generated stubs, no event loop.
What it does is what the asyncio clients do, reduced to the calls the pipeline needs:

- routes from the name servers (GET_ROUTEINFO_BY_TOPIC), tried in order until one answers;
- each queue's min and max offset (GET_TOPIC_STATS_INFO, one call per broker and topic);
- pulls of an offset range (PULL_MESSAGE, no long polling, asking for raw records and reading
  decoded messages too, for a broker that does not know raw records);
- sends of batches to one queue (SEND_MESSAGE with a batch), queues taken round robin, a failed
  batch retried on another broker's queue, as the producer does;
- consumer offsets (UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET).

Rules: every call has a deadline; errors become the protocol's typed errors
(``aiorocketmq.protocol.errors``: the broker's status plus its ``rocketmq-response-code``); channels are
kept per process (``channel``), shared by every client and task in that process, and dropped
when a call to them fails at the transport level. A ``SyncClient`` pickles to its settings only,
so it can travel inside a Spark data source object and reconnect wherever it lands.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import grpc

from aiorocketmq.pipeline.offsets import QueueKey, QueueStats
from aiorocketmq.protocol.errors import (
    MQError,
    QueryNotFound,
    ServiceNotAvailable,
    TopicNotFound,
    from_rpc_error,
)
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.record import decode_records
from aiorocketmq.protocol.route import (
    MASTER_ID,
    master_addr,
    route_to_publish_queues,
    route_to_subscribe_queues,
)
from aiorocketmq.protocol.rpc import CHANNEL_OPTIONS
from aiorocketmq.protocol.v1 import (
    broker_pb2,
    broker_pb2_grpc,
    common_pb2,
    nameserver_pb2,
    nameserver_pb2_grpc,
)

__all__ = [
    "DEFAULT_PULL_GROUP",
    "DataLossError",
    "PulledBatch",
    "SyncClient",
    "channel",
    "close_channels",
]

DEFAULT_PULL_GROUP = "SPARK_AIOROCKETMQ_READER"
"""The consumer group named in pulls when the query names none (pulls need a legal group)."""

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4  # the producer's defaultTopicQueueNums
_ROUTE_MAX_AGE = 30.0  # RocketMQ's pollNameServerInterval

_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}

_channels: dict[str, grpc.Channel] = {}
_channels_lock = threading.Lock()

R = TypeVar("R")


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention deleted them, or the queue was reset)."""


def channel(addr: str) -> grpc.Channel:
    """This process's channel to ``addr`` (opened on first use)."""
    with _channels_lock:
        ch = _channels.get(addr)
        if ch is None:
            ch = grpc.insecure_channel(addr, options=CHANNEL_OPTIONS)
            _channels[addr] = ch
        return ch


def _drop_channel(addr: str) -> None:
    with _channels_lock:
        ch = _channels.pop(addr, None)
    if ch is not None:
        ch.close()


def close_channels() -> None:
    """Close every channel of this process."""
    with _channels_lock:
        chans = list(_channels.values())
        _channels.clear()
    for ch in chans:
        ch.close()


def _typed(error: grpc.RpcError) -> MQError:
    # A synchronous RpcError has the same code()/details()/trailing_metadata() as an aio one.
    return from_rpc_error(cast(Any, error))


class PulledBatch:
    """What one pull found, before offset ``end``, and where the next pull starts.

    ``records`` holds the raw records when the broker answered them (the data source turns
    them into Arrow columns directly); ``messages`` decodes them (or the broker's decoded
    answer) into ``MessageExt`` on first use.
    """

    __slots__ = ("_messages", "_proto", "broker_name", "end", "next_offset", "records")

    def __init__(
        self,
        *,
        records: bytes,
        proto: Sequence[common_pb2.MessageExt],
        broker_name: str,
        end: int,
        next_offset: int,
    ) -> None:
        self.records = records
        self._proto = proto
        self.broker_name = broker_name
        self.end = end
        self.next_offset = next_offset
        self._messages: list[MessageExt] | None = None

    @property
    def messages(self) -> list[MessageExt]:
        if self._messages is None:
            if self.records:
                messages = decode_records(self.records, self.broker_name)
            else:
                messages = [MessageExt.from_proto(m) for m in self._proto]
                for m in messages:
                    m.broker_name = self.broker_name
            if messages and messages[-1].queue_offset >= self.end:
                messages = [m for m in messages if m.queue_offset < self.end]
            self._messages = messages
        return self._messages


class SyncClient:
    """Blocking calls to the name servers at ``namesrv`` (``"host:port;host:port"``) and brokers."""

    def __init__(self, namesrv: str, *, timeout: float = 3.0) -> None:
        self._setup(namesrv, timeout)

    def _setup(self, namesrv: str, timeout: float) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError(f"no name server address in {namesrv!r}")
        self.namesrv = namesrv
        self.timeout = timeout
        self._routes: dict[str, tuple[float, common_pb2.TopicRouteData]] = {}
        self._round_robin = itertools.count(random.randrange(1 << 16))

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: channels and cached routes stay in the process that made them."""
        return {"namesrv": self.namesrv, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["namesrv"], state["timeout"])

    # ---- calls ----------------------------------------------------------------------------
    def _call(
        self, addr: str, stub_cls: Any, method: str, request: Any, timeout: float | None
    ) -> Any:
        stub = stub_cls(channel(addr))
        try:
            return getattr(stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            if e.code() in _RETRYABLE:
                _drop_channel(addr)
            raise _typed(e) from None

    def broker_call(
        self, addr: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        """``BrokerStub.<method>(request)`` at ``addr``, with the deadline."""
        return self._call(addr, broker_pb2_grpc.BrokerStub, method, request, timeout)

    def _namesrv_call(self, method: str, request: Any) -> Any:
        last: MQError | None = None
        for addr in self.namesrv_addrs:
            try:
                return self._call(addr, nameserver_pb2_grpc.NameServerStub, method, request, None)
            except ServiceNotAvailable as e:
                last = e
        assert last is not None
        raise last

    # ---- routes ---------------------------------------------------------------------------
    def route(self, topic: str, *, max_age: float = _ROUTE_MAX_AGE) -> common_pb2.TopicRouteData:
        """The topic's route (kept ``max_age`` seconds, RocketMQ's route refresh period)."""
        cached = self._routes.get(topic)
        now = time.monotonic()
        if cached is not None and now - cached[0] < max_age:
            return cached[1]
        route = self._namesrv_call(
            "GetRouteInfoByTopic", nameserver_pb2.GetRouteInfoByTopicRequest(topic=topic)
        )
        self._routes[topic] = (now, route)
        return cast(common_pb2.TopicRouteData, route)

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def broker_addr(self, topic: str, broker_name: str) -> str:
        """The master address of ``broker_name`` in the topic's route."""
        addr = master_addr(self.route(topic), broker_name)
        if addr is None:
            self.forget_route(topic)
            addr = master_addr(self.route(topic, max_age=0), broker_name)
        if addr is None:
            raise ServiceNotAvailable(f"broker {broker_name} has no master in the route of {topic}")
        return addr

    def queue_stats(
        self, topics: Sequence[str], *, route_max_age: float = 0.0
    ) -> dict[QueueKey, QueueStats]:
        """Min and max offsets of every readable queue of ``topics``; routes no older than
        ``route_max_age`` seconds (fresh by default)."""
        stats: dict[QueueKey, QueueStats] = {}
        for topic in topics:
            route = self.route(topic, max_age=route_max_age)
            readable = route_to_subscribe_queues(topic, route)
            for broker in sorted({mq.broker_name for mq in readable}):
                addr = master_addr(route, broker)
                if addr is None:
                    continue
                answer = self.broker_call(
                    addr, "GetTopicStatsInfo", broker_pb2.GetTopicStatsInfoRequest(topic=topic)
                )
                for entry in answer.offsets:
                    mq = MessageQueue(topic, broker, entry.message_queue.queue_id)
                    if mq in readable:
                        stats[(topic, broker, mq.queue_id)] = QueueStats(
                            entry.min_offset, entry.max_offset
                        )
        return stats

    def topic_list(self) -> list[str]:
        """Every topic the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
        answer = self._namesrv_call("GetAllTopicList", nameserver_pb2.GetAllTopicListRequest())
        return sorted(answer.topic_list)

    def search_offsets(self, times: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """Each queue's first offset stored at or after its time (ms), its max offset when
        none is (SEARCH_OFFSET_BY_TIMESTAMP, one call per queue)."""
        found: dict[QueueKey, int] = {}
        for key, when in sorted(times.items()):
            found[key] = self.with_retries(functools.partial(self._search_offset, key, when))
        return found

    def _search_offset(self, key: QueueKey, when: int) -> int:
        topic, broker, queue_id = key
        answer = self.broker_call(
            self.broker_addr(topic, broker),
            "SearchOffsetByTimestamp",
            broker_pb2.SearchOffsetRequest(topic=topic, queue_id=queue_id, timestamp=when),
        )
        return int(answer.offset)

    # ---- pull -----------------------------------------------------------------------------
    def pull_range(
        self,
        key: QueueKey,
        start: int,
        end: int,
        *,
        group: str = DEFAULT_PULL_GROUP,
        sub_expression: str = "*",
        batch_size: int = 1024,
        skip_lost: bool = False,
        addr: str | None = None,
    ) -> Iterator[PulledBatch]:
        """The messages of the queue from ``start`` to before ``end``, one batch per pull.

        Offsets that the queue no longer has (below its min offset) raise ``DataLossError``,
        unless ``skip_lost``, which skips them. The range may end early when the queue ends
        before ``end`` (it was reset): that raises too, unless ``skip_lost``.
        """
        topic, broker_name, queue_id = key
        addr = addr or self.broker_addr(topic, broker_name)
        offset = start
        tries = 0
        while offset < end:
            request = broker_pb2.PullMessageRequest(
                consumer_group=group,
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_msg_nums=max(1, min(batch_size, end - offset)),
                has_subscription=True,
                sub_expression=sub_expression,
                expression_type="TAG",
                suspend=False,
                raw_records=True,
            )
            try:
                response = self.broker_call(addr, "PullMessage", request, self.timeout)
            except ServiceNotAvailable:
                tries += 1
                if tries >= 3:
                    raise
                time.sleep(0.2 * tries)
                self.forget_route(topic)
                addr = self.broker_addr(topic, broker_name)
                continue
            tries = 0
            status = response.status
            next_offset = response.next_begin_offset
            if status == broker_pb2.FOUND:
                yield PulledBatch(
                    records=response.records,
                    proto=response.messages,
                    broker_name=broker_name,
                    end=end,
                    next_offset=min(next_offset, end),
                )
            elif status == broker_pb2.NO_MATCHED_MSG:
                if next_offset <= offset:
                    break
            else:  # NO_NEW_MSG or OFFSET_ILLEGAL: the queue does not have ``offset`` now
                min_offset, max_offset = response.min_offset, response.max_offset
                removed = status == broker_pb2.OFFSET_ILLEGAL and offset < max_offset
                if offset < min_offset or (removed and next_offset > offset):
                    # Retention deleted these offsets (or is deleting them right now).
                    lost_to = max(next_offset, min_offset) if offset < min_offset else next_offset
                    if not skip_lost:
                        raise DataLossError(
                            f"{topic}/{broker_name}/{queue_id}: offsets {offset}..{lost_to - 1} "
                            f"were deleted before they were read (the queue starts at "
                            f"{min_offset}); set failOnDataLoss=false to skip them"
                        )
                    next_offset = lost_to
                elif next_offset > offset and offset < max_offset:
                    pass  # blank consume-queue entries: go on after them
                else:  # the queue ends before ``end``
                    if not skip_lost:
                        raise DataLossError(
                            f"{topic}/{broker_name}/{queue_id}: expected offsets up to {end} but "
                            f"the queue ends at {max_offset} (was it reset?); set "
                            "failOnDataLoss=false to go on"
                        )
                    break
            offset = next_offset

    # ---- send -----------------------------------------------------------------------------
    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic``; for an unknown topic, those of the default topic
        (``TBW102``) that a broker with auto-creation creates it on (as the producer does)."""
        try:
            queues = route_to_publish_queues(topic, self.route(topic))
            if not queues:
                self.forget_route(topic)
                queues = route_to_publish_queues(topic, self.route(topic, max_age=0))
        except TopicNotFound:
            route = self.route(AUTO_CREATE_TOPIC_KEY_TOPIC)
            queues = [
                mq
                for mq in route_to_publish_queues(topic, route)
                if mq.queue_id < DEFAULT_TOPIC_QUEUE_NUMS
            ]
            # Borrowed for a second: the topic's own route replaces it once the broker made it.
            self._routes[topic] = (time.monotonic() - _ROUTE_MAX_AGE + 1.0, route)
        if not queues:
            raise TopicNotFound(f"topic {topic} has no writable queue")
        return queues

    def send_batch(
        self,
        topic: str,
        messages: Sequence[common_pb2.Message],
        *,
        group: str,
        born_host: str = "",
        retries: int = 2,
    ) -> broker_pb2.SendMessageResponse:
        """Send ``messages`` (one topic) as one batch to the next queue; on failure, another broker.

        ``retries`` more tries after the first (RocketMQ's ``retryTimesWhenSendFailed``).
        """
        last_broker = None
        last_error: MQError | None = None
        for _ in range(retries + 1):
            queues = self.publish_queues(topic)
            start = next(self._round_robin)
            mq = queues[start % len(queues)]
            if last_broker is not None and len({q.broker_name for q in queues}) > 1:
                for i in range(len(queues)):
                    candidate = queues[(start + i) % len(queues)]
                    if candidate.broker_name != last_broker:
                        mq = candidate
                        break
            request = broker_pb2.SendMessageRequest(
                producer_group=group,
                topic=topic,
                queue_id=mq.queue_id,
                messages=messages,
                born_host=born_host,
                born_timestamp=int(time.time() * 1000),
                compact_result=True,
            )
            try:
                addr = self.broker_addr(topic, mq.broker_name)
                return cast(
                    broker_pb2.SendMessageResponse,
                    self.broker_call(addr, "SendMessage", request, self.timeout),
                )
            except MQError as e:
                if not _retryable_send(e):
                    raise
                last_error, last_broker = e, mq.broker_name
                self.forget_route(topic)
        assert last_error is not None
        raise last_error

    # ---- consumer offsets -----------------------------------------------------------------
    def commit_offsets(self, group: str, offsets: dict[QueueKey, int]) -> None:
        """UPDATE_CONSUMER_OFFSET: one call per broker with that broker's queues."""
        by_broker: dict[tuple[str, str], list[broker_pb2.OffsetCommit]] = {}
        for (topic, broker, qid), offset in sorted(offsets.items()):
            by_broker.setdefault((topic, broker), []).append(
                broker_pb2.OffsetCommit(topic=topic, queue_id=qid, offset=offset)
            )
        per_addr: dict[str, list[broker_pb2.OffsetCommit]] = {}
        for (topic, broker), entries in by_broker.items():
            per_addr.setdefault(self.broker_addr(topic, broker), []).extend(entries)
        for addr, entries in per_addr.items():
            self.broker_call(
                addr,
                "UpdateConsumerOffset",
                broker_pb2.UpdateConsumerOffsetRequest(consumer_group=group, offsets=entries),
            )

    def query_offset(self, group: str, key: QueueKey) -> int:
        """The group's committed offset of the queue; -1 when there is none."""
        topic, broker, qid = key
        try:
            answer = self.broker_call(
                self.broker_addr(topic, broker),
                "QueryConsumerOffset",
                broker_pb2.QueryConsumerOffsetRequest(
                    consumer_group=group, topic=topic, queue_id=qid
                ),
            )
        except QueryNotFound:
            return -1
        return int(answer.offset)

    # ---- administration -------------------------------------------------------------------
    def master_brokers(self) -> dict[str, str]:
        """Broker name -> master address, of every broker the name servers know."""
        info = self._namesrv_call(
            "GetBrokerClusterInfo", nameserver_pb2.GetBrokerClusterInfoRequest()
        )
        return {
            name: bd.broker_addrs[MASTER_ID]
            for name, bd in sorted(info.broker_addr_table.items())
            if MASTER_ID in bd.broker_addrs
        }

    def create_topic(
        self,
        topic: str,
        queues: int,
        *,
        brokers: Sequence[str] | None = None,
        wait: float = 10.0,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC on ``brokers`` (names; default every master), then wait for
        the name servers to route the topic on each of them with ``queues`` queues."""
        masters = self.master_brokers()
        names = list(brokers) if brokers is not None else list(masters)
        missing = [n for n in names if n not in masters]
        if missing:
            raise ValueError(f"no master for broker(s) {missing}; known: {sorted(masters)}")
        for name in names:
            self.broker_call(
                masters[name],
                "UpdateAndCreateTopic",
                broker_pb2.UpdateAndCreateTopicRequest(
                    topic_config=common_pb2.TopicConfig(
                        topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6
                    )
                ),
            )
        deadline = time.monotonic() + wait
        while True:
            try:
                route = self.route(topic, max_age=0)
                counts = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
                if all(counts.get(n) == queues for n in names):
                    return
            except TopicNotFound:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} was not routed on {names} within {wait} s")
            time.sleep(0.05)

    def with_retries(self, fn: Callable[[], R], *, tries: int = 3) -> R:
        """``fn()``, tried again after a transport failure."""
        for attempt in range(tries):
            try:
                return fn()
            except ServiceNotAvailable:
                if attempt == tries - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")


def _retryable_send(error: MQError) -> bool:
    from aiorocketmq.protocol.codes import ResponseCode

    return isinstance(error, (ServiceNotAvailable, TopicNotFound)) or error.response_code in (
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
    )
