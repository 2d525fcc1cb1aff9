"""``Producer``: route-aware sending with RocketMQ's queue selection, retries and fault tolerance.

Theory of operation: routes come from the name servers at first use of a topic and every
``poll_name_server_interval`` (30 s) for the topics in use. A send picks the next writable queue
round robin; on a failure it retries (``retry_times_when_send_failed``, 2 by default, so 3 tries)
on a queue of another broker than the one that failed (seed 004), within ``send_msg_timeout``.
An unknown topic is sent through the default topic's route (``TBW102``) so a broker with
auto-creation creates it, as RocketMQ does. Batches go in one RPC to one queue; batches sent
at once by several tasks to one broker may share an RPC (``producer.coalescer``: at most
``max_in_flight_sends`` requests out per broker, the batches that wait go together).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import TracebackType
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.producer.coalescer import SendCoalescer, Slice
from aiorocketmq.producer.fault import LatencyFaultTolerance
from aiorocketmq.producer.selector import MessageQueueSelector, TopicPublishInfo
from aiorocketmq.producer.settings import ProducerSettings, build_producer_settings
from aiorocketmq.protocol.batch import encode_batch
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.client_id import build_client_id, default_instance_name, local_ip
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.data_path import DataPath
from aiorocketmq.protocol.errors import (
    InvalidArgument,
    MessageIllegal,
    MessageTooLarge,
    MQError,
    ServiceNotAvailable,
    TopicNotFound,
)
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.record import create_message_ids, parse_host
from aiorocketmq.protocol.route import MASTER_ID, master_broker_data, route_to_publish_queues
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.protocol.validators import SYSTEM_TOPICS, check_group, check_topic
from aiorocketmq.trace import tracer

__all__ = ["AUTO_CREATE_TOPIC_KEY_TOPIC", "Producer", "SendResult", "SendStatus"]

log = get_logger("aiorocketmq.producer")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
# The most a request of batches sent together carries (one batch bigger goes alone).
COALESCED_MAX_BYTES = 1024 * 1024
# retryResponseCodes: broker answers worth trying elsewhere.
_RETRY_CODES = {
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.NO_PERMISSION,
}


class SendStatus(Enum):
    """How a send ended (RocketMQ's ``SendStatus``)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS = {
    broker_pb2.SEND_OK: SendStatus.SEND_OK,
    broker_pb2.FLUSH_DISK_TIMEOUT_STATUS: SendStatus.FLUSH_DISK_TIMEOUT,
    broker_pb2.FLUSH_SLAVE_TIMEOUT_STATUS: SendStatus.FLUSH_SLAVE_TIMEOUT,
    broker_pb2.SLAVE_NOT_AVAILABLE_STATUS: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class SendResult:
    """Where a message (or the first of a batch) was stored."""

    send_status: SendStatus
    msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    msg_ids: list[str] = field(default_factory=list)  # every id of a batch, in order


def _now_ms() -> int:
    return int(time.time() * 1000)


class Producer:
    """An async RocketMQ producer: ``await send(Message(...))``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        settings: ProducerSettings | None = None,
        **options: Any,
    ) -> None:
        """``settings`` and keyword options: every one is documented in ``ProducerSettings``."""
        check_group(group)
        self.settings = s = build_producer_settings(settings, options)
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.instance_name = s.instance_name or default_instance_name()
        self.client_id = build_client_id(local_ip(), self.instance_name)
        # Seconds, for the deadlines of the calls.
        self.send_msg_timeout = s.send_msg_timeout_ms / 1000
        self.retry_times_when_send_failed = s.retry_times_when_send_failed
        self.send_latency_fault_enable = s.send_latency_fault_enable
        self.poll_name_server_interval = s.poll_name_server_interval_ms / 1000
        self.max_message_size = s.max_message_size
        self.default_topic_queue_nums = s.default_topic_queue_nums
        self.fault = LatencyFaultTolerance()
        self._namesrv: NameServerClient | None = None
        self._brokers = BrokerConnections()
        self._data = DataPath(self._brokers, s.data_transport)
        self._coalescer = SendCoalescer(
            self._send_request,
            max_in_flight=s.max_in_flight_sends,
            max_bytes=min(s.max_message_size, COALESCED_MAX_BYTES),
        )
        self._routes: dict[str, common_pb2.TopicRouteData] = {}
        self._publish: dict[str, TopicPublishInfo] = {}
        self._route_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = False

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        self._namesrv = NameServerClient(self.namesrv_addr)
        self._running = True
        task = asyncio.create_task(self._poll_routes(), name=f"producer-{self.group}-routes")
        self._tasks.add(task)
        log.info("the producer started", group=self.group, client_id=self.client_id)

    async def shutdown(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._coalescer.close()
        await self._data.close()
        await self._brokers.close()
        if self._namesrv is not None:
            await self._namesrv.close()
            self._namesrv = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    # ---- routes ----------------------------------------------------------------------------
    async def _poll_routes(self) -> None:
        while True:
            await asyncio.sleep(self.poll_name_server_interval)
            for topic in list(self._publish):
                try:
                    await self.update_topic_route(topic)
                except MQError as e:
                    log.warning("update topic route failed", topic=topic, error=str(e))

    async def update_topic_route(self, topic: str) -> TopicPublishInfo:
        """Fetch ``topic``'s route (or the default topic's) and rebuild its publish info."""
        if self._namesrv is None:
            raise ServiceNotAvailable("the producer is not started; call start() first")
        async with self._route_lock:
            try:
                route = await self._namesrv.get_route_info_by_topic(topic)
                queues = route_to_publish_queues(topic, route)
            except TopicNotFound:
                route = await self._namesrv.get_route_info_by_topic(AUTO_CREATE_TOPIC_KEY_TOPIC)
                queues = [
                    mq
                    for mq in route_to_publish_queues(topic, route)
                    if mq.queue_id < self.default_topic_queue_nums
                ]
            self._routes[topic] = route
            old = self._publish.get(topic)
            if old is None or old.message_queue_list != queues:
                self._publish[topic] = TopicPublishInfo(queues)
            return self._publish[topic]

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (RocketMQ's ``fetchPublishMessageQueues``)."""
        info = self._publish.get(topic) or await self.update_topic_route(topic)
        return list(info.message_queue_list)

    def _broker_addrs(self, topic: str, broker_name: str) -> tuple[str, str | None]:
        """The master of ``broker_name``: its gRPC address, and its remoting one if it serves
        remoting (from ``topic``'s route, else any route that names it)."""
        route = self._routes.get(topic)
        bd = master_broker_data(route, broker_name) if route is not None else None
        if bd is None:
            for other in self._routes.values():
                bd = master_broker_data(other, broker_name)
                if bd is not None:
                    break
        if bd is None:
            raise ServiceNotAvailable(f"no master address for broker {broker_name}")
        return bd.broker_addrs[MASTER_ID], bd.remoting_addrs.get(MASTER_ID)

    # ---- sending ---------------------------------------------------------------------------
    def _check(self, messages: Sequence[Message]) -> str:
        if not messages:
            raise InvalidArgument("nothing to send")
        topic = messages[0].topic
        check_topic(topic)
        if topic in SYSTEM_TOPICS:
            raise InvalidArgument(f"sending message to topic[{topic}] is forbidden")
        for m in messages:
            if m.topic != topic:
                raise InvalidArgument(f"a batch must have one topic: {topic!r} and {m.topic!r}")
            if not m.body:
                raise MessageIllegal("the message body is empty")
            if len(m.body) > self.max_message_size:
                raise MessageTooLarge(
                    f"the message body size over max value, MAX: {self.max_message_size}, got {len(m.body)}"
                )
        return topic

    async def _send_to(
        self,
        mq: MessageQueue,
        messages: Sequence[Message],
        timeout: float,
        oneway: bool = False,
        *,
        movable: bool = False,
    ) -> SendResult:
        """Send ``messages`` to ``mq`` (or, ``movable``, to a queue of its broker that batches
        sent at the same time go to) and make their result."""
        piece = await self._coalescer.send(
            mq,
            encode_batch(messages),
            len(messages),
            timeout,
            movable=movable,
            alone=any(m.delay_time_level > 0 for m in messages),
        )
        return self._result(piece, oneway)

    async def _send_request(
        self, mq: MessageQueue, batch_body: bytes, timeout: float
    ) -> broker_pb2.SendMessageResponse:
        """One SendMessage RPC of batch bodies (one batch's, or several joined) to ``mq``."""
        addr, remoting_addr = self._broker_addrs(mq.topic, mq.broker_name)
        request = broker_pb2.SendMessageRequest(
            producer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            batch_body=batch_body,
            born_host=self.client_id.partition("@")[0],
            born_timestamp=_now_ms(),
            compact_result=True,
        )
        # A transport failure raises ServiceNotAvailable and leaves the shared channel open (gRPC
        # reconnects it; a remoting connection reopens at the next send); the caller retries on
        # another broker.
        return await self._data.send(addr, remoting_addr, mq.broker_name, request, timeout)

    @staticmethod
    def _result(piece: Slice, oneway: bool) -> SendResult:
        """A batch's ``SendResult`` from its slice of the answer."""
        response, start, end = piece.response, piece.start, piece.start + piece.count
        if response.results:  # a broker without compact results, or a batch with delays
            results = response.results[start:end]
            ids = [r.msg_id for r in results]
            queue_offset = results[0].queue_offset if results else -1
        elif response.commit_log_offsets:
            # The compact result: an id is the store host and a commit log offset, made here.
            ip, port = parse_host(response.store_host)
            ids = create_message_ids(ip, port, response.commit_log_offsets[start:end])
            queue_offset = response.first_queue_offset + start
        else:
            ids, queue_offset = [], -1
        mq = MessageQueue.from_proto(response.message_queue)
        if tracer.enabled and ids:
            # A one-way send is marked: nothing acknowledged it to the application.
            tracer.record(
                "sent",
                mq=str(mq),
                offset=queue_offset,
                count=len(ids),
                **({"oneway": True} if oneway else {}),
            )
        return SendResult(
            send_status=_STATUS.get(response.send_status, SendStatus.SEND_OK),
            msg_id=ids[0] if ids else "",
            message_queue=mq,
            queue_offset=queue_offset,
            msg_ids=ids,
        )

    async def _send_default(
        self, messages: Sequence[Message], timeout: float | None, oneway: bool = False
    ) -> SendResult:
        topic = self._check(messages)
        deadline = time.monotonic() + (timeout or self.send_msg_timeout)
        info = self._publish.get(topic) or await self.update_topic_route(topic)
        if not info.ok():
            info = await self.update_topic_route(topic)
            if not info.ok():
                raise TopicNotFound(
                    f"no writable queue for topic {topic} (no route info of this topic)"
                )
        last_broker: str | None = None
        errors: list[str] = []
        for attempt in range(1 + self.retry_times_when_send_failed):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            mq = info.select_one_message_queue(
                last_broker,
                fault=self.fault if self.send_latency_fault_enable else None,
                now_ms=_now_ms(),
            )
            started = time.monotonic()
            try:
                result = await self._send_to(mq, messages, remaining, oneway, movable=True)
            except MQError as e:
                latency = (time.monotonic() - started) * 1000
                self.fault.update_fault_item(mq.broker_name, latency, _now_ms(), isolation=True)
                retryable = isinstance(e, ServiceNotAvailable) or e.response_code in _RETRY_CODES
                errors.append(f"{mq}: {e}")
                log.warning(
                    "send failed",
                    attempt=attempt + 1,
                    mq=str(mq),
                    error=str(e),
                    will_retry=retryable,
                )
                if not retryable:
                    raise
                last_broker = mq.broker_name
                continue
            latency = (time.monotonic() - started) * 1000
            self.fault.update_fault_item(mq.broker_name, latency, _now_ms(), isolation=False)
            return result
        raise ServiceNotAvailable(
            f"send to topic {topic} failed after {len(errors)} tries: " + "; ".join(errors)
        )

    async def send(
        self,
        msg: Message,
        mq: MessageQueue | None = None,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send one message: anywhere (with retries), to ``mq``, or where ``selector`` says."""
        return await self.send_batch([msg], mq, selector=selector, arg=arg, timeout=timeout)

    async def send_batch(
        self,
        msgs: Sequence[Message],
        mq: MessageQueue | None = None,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send messages of one topic in one RPC to one queue."""
        if mq is None and selector is None:
            return await self._send_default(msgs, timeout)
        topic = self._check(msgs)
        if mq is None:
            assert selector is not None
            queues = await self.fetch_publish_message_queues(topic)
            if not queues:
                raise TopicNotFound(f"no writable queue for topic {topic}")
            mq = selector.select(queues, msgs[0], arg)
        elif mq.topic != topic:
            raise InvalidArgument(f"message topic {topic!r} differs from the queue's {mq.topic!r}")
        if mq.topic not in self._routes:
            await self.update_topic_route(topic)
        return await self._send_to(mq, msgs, timeout or self.send_msg_timeout)

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for the broker's answer (errors are logged, not raised)."""

        async def one() -> None:
            try:
                await self._send_default([msg], None, oneway=True)
            except MQError as e:
                log.warning("oneway send failed", topic=msg.topic, error=str(e))

        task = asyncio.create_task(one())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
