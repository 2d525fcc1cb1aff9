"""A tiny plain client of the broker protocol for tests: raw stubs, nothing from ``consumer``.

``ProtocolClient`` is one client instance talking to one broker the way the wire describes it:
its own gRPC connection, one ``OpenChannel`` stream (the broker's channel), heartbeats naming
that channel, and the rest of the consumer-group RPCs. A reader task moves every pushed event
into ``events`` so that a test can wait for the next one with a deadline (``next_event``)
without cancelling the stream, and can check that nothing else arrived (``pending``).

Also the request builders (``heartbeat_request``, ``mq``) that tests and child processes share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import grpc

from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc, common_pb2

__all__ = [
    "RPC_TIMEOUT",
    "ProtocolClient",
    "consumer_data",
    "heartbeat_request",
    "mq",
    "response_code",
]

# Every unary call of these tests has this deadline (s).
RPC_TIMEOUT = 3.0

# Each client gets its own TCP connection (gRPC shares one between channels with the same
# arguments otherwise), as each RocketMQ client instance has its own.
GRPC_OPTIONS: list[tuple[str, Any]] = [("grpc.use_local_subchannel_pool", 1)]


def mq(topic: str, queue_id: int, broker_name: str = "broker-a") -> common_pb2.MessageQueue:
    return common_pb2.MessageQueue(topic=topic, broker_name=broker_name, queue_id=queue_id)


def consumer_data(
    group: str,
    topics: list[str],
    *,
    sub_version: int = 1,
    message_model: common_pb2.MessageModel = common_pb2.CLUSTERING,
) -> common_pb2.ConsumerData:
    """A push consumer of ``group`` subscribing ``*`` of each topic."""
    return common_pb2.ConsumerData(
        group_name=group,
        consume_type=common_pb2.CONSUME_PASSIVELY,
        message_model=message_model,
        consume_from_where=common_pb2.CONSUME_FROM_LAST_OFFSET,
        subscription_data_set=[
            common_pb2.SubscriptionData(
                topic=t, sub_string="*", sub_version=sub_version, expression_type="TAG"
            )
            for t in topics
        ],
    )


def heartbeat_request(
    channel_id: str,
    client_id: str,
    groups: dict[str, list[str]],
    *,
    message_model: common_pb2.MessageModel = common_pb2.CLUSTERING,
    notified_elsewhere: bool = False,
) -> broker_pb2.HeartbeatRequest:
    """HEART_BEAT on ``channel_id``: ``client_id`` consumes in each group, its topics."""
    return broker_pb2.HeartbeatRequest(
        channel_id=channel_id,
        notified_elsewhere=notified_elsewhere,
        heartbeat=common_pb2.HeartbeatData(
            client_id=client_id,
            consumer_data_set=[
                consumer_data(g, topics, message_model=message_model)
                for g, topics in groups.items()
            ],
        ),
    )


def response_code(error: grpc.aio.AioRpcError) -> int | None:
    """The RocketMQ response code in the trailing metadata of a failed call."""
    for key, value in error.trailing_metadata() or ():
        if key == "rocketmq-response-code":
            return int(value)
    return None


class ProtocolClient:
    """One client instance (``client_id``) and its channel to the broker at ``addr``."""

    def __init__(self, addr: str, client_id: str) -> None:
        self.addr = addr
        self.client_id = client_id
        self.grpc_channel = grpc.aio.insecure_channel(addr, options=GRPC_OPTIONS)
        self.stub = broker_pb2_grpc.BrokerStub(self.grpc_channel)
        self.channel_id = ""
        self.events: asyncio.Queue[broker_pb2.ChannelEvent] = asyncio.Queue()
        # Set when the OpenChannel stream ended, for any reason.
        self.ended = asyncio.Event()
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    # ---- the channel -----------------------------------------------------------------------
    async def open(self, timeout: float = 5.0, *, previous_channel_id: str = "") -> str:
        """OpenChannel (in place of ``previous_channel_id``, if given) and read ChannelOpened;
        the channel id."""
        self._call = self.stub.OpenChannel(
            broker_pb2.OpenChannelRequest(
                client_id=self.client_id,
                language="PYTHON",
                version=1,
                previous_channel_id=previous_channel_id,
            )
        )
        first = await asyncio.wait_for(self._call.read(), timeout)
        assert first is not grpc.aio.EOF, "OpenChannel ended before ChannelOpened"
        assert first.WhichOneof("event") == "opened", f"first event is not opened: {first}"
        self.channel_id = first.opened.channel_id
        assert self.channel_id
        self._reader = asyncio.create_task(self._read_loop(), name=f"reader-{self.client_id}")
        return self.channel_id

    async def _read_loop(self) -> None:
        try:
            while True:
                event = await self._call.read()
                if event is grpc.aio.EOF:
                    return
                self.events.put_nowait(event)
        except grpc.aio.AioRpcError:
            return  # the status is read from the call by whoever cares
        finally:
            self.ended.set()

    async def next_event(self, timeout: float = 5.0) -> broker_pb2.ChannelEvent:
        """The next pushed event; fails after ``timeout`` s or when the stream ended first."""
        if not self.events.empty():
            return self.events.get_nowait()
        get = asyncio.ensure_future(self.events.get())
        ended = asyncio.ensure_future(self.ended.wait())
        try:
            done, _ = await asyncio.wait(
                {get, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for f in (get, ended):
                if not f.done():
                    f.cancel()
        if get in done:
            return get.result()
        if not self.events.empty():
            return self.events.get_nowait()
        if ended in done:
            raise AssertionError(f"{self.client_id}: the stream ended with no further event")
        raise AssertionError(f"{self.client_id}: no event within {timeout}s")

    async def expect_notify(
        self, group: str, timeout: float = 5.0
    ) -> broker_pb2.NotifyConsumerIdsChanged:
        """The next event is NOTIFY_CONSUMER_IDS_CHANGED for ``group``: it."""
        event = await self.next_event(timeout)
        assert event.WhichOneof("event") == "notify_consumer_ids_changed", (
            f"{self.client_id}: expected a notification for {group}, got {event}"
        )
        assert event.notify_consumer_ids_changed.consumer_group == group, (
            f"{self.client_id}: notified for the wrong group: {event}"
        )
        return event.notify_consumer_ids_changed

    def pending(self) -> list[broker_pb2.ChannelEvent]:
        """The events received and not read yet (taken)."""
        out = []
        while not self.events.empty():
            out.append(self.events.get_nowait())
        return out

    async def stream_code(self) -> grpc.StatusCode:
        """The status the OpenChannel stream ended with (wait for ``ended`` first)."""
        code: grpc.StatusCode = await self._call.code()
        return code

    def cut(self) -> None:
        """Cut the stream (cancel the OpenChannel call); the connection stays."""
        if self._call is not None:
            self._call.cancel()

    async def close(self) -> None:
        """Cancel the stream, stop the reader, close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.cut()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait([self._reader])
        await self.grpc_channel.close()

    async def __aenter__(self) -> ProtocolClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ---- consumer-group RPCs ---------------------------------------------------------------
    async def heartbeat(
        self,
        group: str,
        topics: list[str],
        *,
        message_model: common_pb2.MessageModel = common_pb2.CLUSTERING,
        notified_elsewhere: bool = False,
    ) -> broker_pb2.HeartbeatResponse:
        return await self.heartbeat_groups(
            {group: topics}, message_model=message_model, notified_elsewhere=notified_elsewhere
        )

    async def heartbeat_groups(
        self,
        groups: dict[str, list[str]],
        *,
        message_model: common_pb2.MessageModel = common_pb2.CLUSTERING,
        notified_elsewhere: bool = False,
    ) -> broker_pb2.HeartbeatResponse:
        request = heartbeat_request(
            self.channel_id,
            self.client_id,
            groups,
            message_model=message_model,
            notified_elsewhere=notified_elsewhere,
        )
        response: broker_pb2.HeartbeatResponse = await self.stub.Heartbeat(
            request, timeout=RPC_TIMEOUT
        )
        return response

    async def unregister(self, group: str) -> None:
        await self.stub.UnregisterClient(
            broker_pb2.UnregisterClientRequest(
                channel_id=self.channel_id, client_id=self.client_id, consumer_group=group
            ),
            timeout=RPC_TIMEOUT,
        )

    async def consumer_list(
        self, group: str, known_version: int = 0
    ) -> broker_pb2.GetConsumerListByGroupResponse:
        """GetConsumerListByGroup as answered, asked with ``known_version``."""
        request = broker_pb2.GetConsumerListByGroupRequest(
            consumer_group=group, known_version=known_version
        )
        response: broker_pb2.GetConsumerListByGroupResponse = (
            await self.stub.GetConsumerListByGroup(request, timeout=RPC_TIMEOUT)
        )
        return response

    async def consumer_ids(self, group: str) -> list[str]:
        """GetConsumerListByGroup, sorted; [] when the broker does not know the group."""
        try:
            response = await self.stub.GetConsumerListByGroup(
                broker_pb2.GetConsumerListByGroupRequest(consumer_group=group),
                timeout=RPC_TIMEOUT,
            )
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return []
            raise
        return sorted(response.consumer_id_list)

    async def lock(self, group: str, mqs: list[common_pb2.MessageQueue]) -> list[tuple[str, int]]:
        """LockBatchMQ; the (topic, queue id) locked for this client, sorted."""
        response = await self.stub.LockBatchMQ(
            broker_pb2.LockBatchRequest(consumer_group=group, client_id=self.client_id, mq_set=mqs),
            timeout=RPC_TIMEOUT,
        )
        return sorted((m.topic, m.queue_id) for m in response.lock_ok_mq_set)

    async def unlock(self, group: str, mqs: list[common_pb2.MessageQueue]) -> None:
        await self.stub.UnlockBatchMQ(
            broker_pb2.UnlockBatchRequest(
                consumer_group=group, client_id=self.client_id, mq_set=mqs
            ),
            timeout=RPC_TIMEOUT,
        )

    async def push_queue_released(
        self, group: str, queue: common_pb2.MessageQueue, to: Sequence[ProtocolClient] = ()
    ) -> None:
        """Make the broker push QueueReleased(group, queue) to ``to`` (default: this client).

        A holder of its own (a channel in no group) acquires the queue, each client of ``to``
        asks for it and is denied (the broker's waiters of a queue are told of its release),
        then the holder releases it: the broker pushes the event whatever the notification
        switches say. Events of a channel arrive in order, so a test that reads this event
        next knows nothing was pushed before it (a barrier).
        """
        receivers = list(to) or [self]
        async with ProtocolClient(self.addr, f"{self.client_id}-barrier") as holder:
            await holder.open()
            acquired = await holder.acquire(group, [queue])
            assert len(acquired.granted) == 1, f"barrier queue not granted: {acquired}"
            for receiver in receivers:
                denied = await receiver.acquire(group, [queue])
                assert len(denied.denied) == 1, f"barrier queue not denied: {denied}"
            released = await holder.stub.ReleaseQueues(
                broker_pb2.ReleaseQueuesRequest(
                    consumer_group=group,
                    client_id=holder.client_id,
                    releases=[
                        broker_pb2.QueueRelease(
                            message_queue=queue, epoch=acquired.granted[0].epoch, final_offset=-1
                        )
                    ],
                ),
                timeout=RPC_TIMEOUT,
            )
            assert len(released.released) == 1, f"barrier queue not released: {released}"

    async def acquire(
        self,
        group: str,
        queues: Sequence[common_pb2.MessageQueue],
        *,
        wait_ms: int = 0,
        watch: bool = False,
        releases: Sequence[broker_pb2.QueueRelease] = (),
    ) -> broker_pb2.AcquireQueuesResponse:
        """AcquireQueues through this client's channel (waiting up to ``wait_ms`` for queues
        held by others; ``watch``: idle grants watched; ``releases`` riding along)."""
        response: broker_pb2.AcquireQueuesResponse = await self.stub.AcquireQueues(
            broker_pb2.AcquireQueuesRequest(
                consumer_group=group,
                client_id=self.client_id,
                channel_id=self.channel_id,
                mq_set=list(queues),
                wait_millis=wait_ms,
                watch=watch,
                releases=list(releases),
            ),
            timeout=RPC_TIMEOUT,
        )
        return response

    async def release(
        self, group: str, queue: common_pb2.MessageQueue, epoch: int, final_offset: int = -1
    ) -> broker_pb2.ReleaseQueuesResponse:
        """ReleaseQueues of one grant."""
        response: broker_pb2.ReleaseQueuesResponse = await self.stub.ReleaseQueues(
            broker_pb2.ReleaseQueuesRequest(
                consumer_group=group,
                client_id=self.client_id,
                releases=[
                    broker_pb2.QueueRelease(
                        message_queue=queue, epoch=epoch, final_offset=final_offset
                    )
                ],
            ),
            timeout=RPC_TIMEOUT,
        )
        return response

    async def expect_queue_released(self, group: str, timeout: float = 5.0) -> None:
        """The next event is QueueReleased for ``group`` (nothing came before the barrier)."""
        event = await self.next_event(timeout)
        assert event.WhichOneof("event") == "queue_released", (
            f"{self.client_id}: expected only the barrier, got {event}"
        )
        assert event.queue_released.consumer_group == group
