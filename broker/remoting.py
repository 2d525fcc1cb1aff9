"""The broker's remoting side: Apache's clients served by the same processors as gRPC.

Each remoting request is read into the protobuf request of the matching RPC and handed to the
processor that serves that RPC (send, pull, offsets, client management), whose answer is
written back as RocketMQ's response header and body. So a message, an offset or a group
member is the same whichever protocol brought it.

The TCP connection is the channel. At its first HEART_BEAT (which names the client id) the
connection opens a ``Channel`` in the broker's channel table, exactly as a gRPC client's
``OpenChannel`` stream does; NOTIFY_CONSUMER_IDS_CHANGED events queued on that channel are
written to the socket as one-way requests (code 40); the socket's close runs the channel-close
path. A group can therefore mix remoting and gRPC members, each notified in its protocol.

Where the wire differs from our store:

- pulls answer version-1 records (``protocol/remoting/records.py``) with the remoting address
  as STOREHOST, and send answers name messages by offset ids made from that address (our own
  clients ask for the stored records and the commit log offsets instead:
  ``protocol/remoting/data.py``);
- a compressed body (sysFlag bit 0, zlib) is inflated before it is stored;
- a request code we do not serve answers REQUEST_CODE_NOT_SUPPORTED (3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.errors import SubscriptionGroupNotExist
from aiorocketmq.protocol.record import parse_host
from aiorocketmq.protocol.remoting.bodies import (
    consumer_list_body,
    lock_response_body,
    parse_heartbeat,
    parse_lock_body,
)
from aiorocketmq.protocol.remoting.command import RemotingCommand, not_supported
from aiorocketmq.protocol.remoting.data import (
    PULL_RESPONSE_CODES,
    pull_answer,
    pull_request,
    send_answer,
    send_request,
)
from aiorocketmq.protocol.remoting.fields import Fields
from aiorocketmq.protocol.remoting.records import to_v1_records
from aiorocketmq.protocol.remoting.server import RemotingConnection
from aiorocketmq.protocol.v1 import broker_pb2

if TYPE_CHECKING:
    from aiorocketmq.broker.broker_controller import BrokerController

__all__ = ["PULL_RESPONSE_CODES", "BrokerRemoting"]

log = get_logger("aiorocketmq.broker.remoting")

Route = Callable[[RemotingConnection, RemotingCommand, Fields], Awaitable[RemotingCommand]]


class BrokerRemoting:
    """Turns remoting requests into the broker's processor calls, and channels into sockets."""

    def __init__(self, broker: BrokerController) -> None:
        self.b = broker
        self.address = ""
        self.store_host = (bytes(4), 0)
        self._forwarders: set[asyncio.Task[None]] = set()
        self.routes: dict[int, Route] = {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.LITE_PULL_MESSAGE: self.pull_message,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_msg_store_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back,
        }

    def bind(self, address: str) -> None:
        """The address remoting clients dial: STOREHOST of the records and message ids."""
        self.address = address
        self.store_host = parse_host(address)

    async def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        route = self.routes.get(cmd.code)
        if route is None:
            log.info("remoting request not supported", code=cmd.code, remote_addr=conn.remote_addr)
            return not_supported(cmd)
        return await route(conn, cmd, Fields(cmd.ext_fields, cmd.code))

    # ---- the channel -----------------------------------------------------------------------
    def _channel(self, conn: RemotingConnection, client_id: str) -> Channel:
        """The connection's channel, opened at its first heartbeat (which names the client)."""
        channel = conn.context
        if isinstance(channel, Channel) and not channel.closed:
            return channel
        channel = self.b.client.open_channel(
            broker_pb2.OpenChannelRequest(
                client_id=client_id, language=conn.language or "JAVA", version=conn.version
            ),
            conn.remote_addr,
            protocol="remoting",
        )
        conn.context = channel
        task = asyncio.get_running_loop().create_task(
            self._forward(conn, channel), name=f"remoting-channel-{channel.channel_id}"
        )
        self._forwarders.add(task)
        task.add_done_callback(self._forwarders.discard)
        return channel

    async def _forward(self, conn: RemotingConnection, channel: Channel) -> None:
        """Write the channel's NOTIFY_CONSUMER_IDS_CHANGED events to the socket (one-way, 40)."""
        async for event in channel.events():
            if event.HasField("notify_consumer_ids_changed"):
                group = event.notify_consumer_ids_changed.consumer_group
                conn.push_oneway(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})

    def on_close(self, conn: RemotingConnection) -> None:
        """The socket closed: the channel-close path, as when a gRPC channel stream ends."""
        channel = conn.context
        conn.context = None
        if isinstance(channel, Channel):
            self.b.client.close_channel(channel)

    # ---- consumer groups -------------------------------------------------------------------
    async def heartbeat(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        data = parse_heartbeat(cmd.body)
        channel = self._channel(conn, data.client_id)
        await self.b.heartbeat(
            broker_pb2.HeartbeatRequest(channel_id=channel.channel_id, heartbeat=data)
        )
        return cmd.response()

    async def unregister_client(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        channel = conn.context
        if not isinstance(channel, Channel):
            return cmd.response()  # never sent a heartbeat here: nothing to leave
        self.b.client.unregister_client(
            broker_pb2.UnregisterClientRequest(
                channel_id=channel.channel_id,
                client_id=f.string("clientID"),
                producer_group=f.string("producerGroup", ""),
                consumer_group=f.string("consumerGroup", ""),
            )
        )
        return cmd.response()

    async def get_consumer_list_by_group(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        group = f.string("consumerGroup")
        try:
            answer = self.b.client.get_consumer_list_by_group(
                broker_pb2.GetConsumerListByGroupRequest(consumer_group=group)
            )
        except SubscriptionGroupNotExist:
            # RocketMQ answers SYSTEM_ERROR here, and clients expect exactly that.
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, remark=f"no consumer for this group, {group}"
            )
        return cmd.response(body=consumer_list_body(answer.consumer_id_list))

    async def lock_batch_mq(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        client_id, group, only_this_broker, queues = parse_lock_body(cmd.body)
        answer = self.b.client.lock_batch_mq(
            broker_pb2.LockBatchRequest(
                consumer_group=group,
                client_id=client_id,
                only_this_broker=only_this_broker,
                mq_set=queues,
            )
        )
        return cmd.response(body=lock_response_body(answer.lock_ok_mq_set))

    async def unlock_batch_mq(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        client_id, group, only_this_broker, queues = parse_lock_body(cmd.body)
        self.b.client.unlock_batch_mq(
            broker_pb2.UnlockBatchRequest(
                consumer_group=group,
                client_id=client_id,
                only_this_broker=only_this_broker,
                mq_set=queues,
            )
        )
        return cmd.response()

    # ---- the data path (``protocol/remoting/data.py`` reads and writes the frames) ---------
    async def send_message(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320, or 10/310 with
        ``batch``): one message or a batch body, through the send processor."""
        answer = await self.b.send.send(send_request(cmd, conn.remote_addr), conn.remote_addr)
        return send_answer(cmd, answer, self.store_host)

    async def pull_message(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        """PULL_MESSAGE (11, and 361): long polling and the piggy-backed commit included."""
        request = pull_request(f)
        answer = await self.b.pull.pull(
            request, conn.remote_addr, holder=self._holder(conn, request.consumer_group)
        )
        return pull_answer(cmd, answer, self.store_host)

    async def consumer_send_msg_back(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        await self.b.client.consumer_send_msg_back(
            broker_pb2.ConsumerSendMsgBackRequest(
                group=f.string("group"),
                commit_log_offset=f.integer("offset"),
                delay_level=f.integer("delayLevel", 0),
                origin_msg_id=f.string("originMsgId", ""),
                origin_topic=f.string("originTopic", ""),
                max_reconsume_times=f.integer("maxReconsumeTimes", 0),
            ),
            conn.remote_addr,
        )
        return cmd.response()

    # ---- offsets ---------------------------------------------------------------------------
    async def query_consumer_offset(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        answer = self.b.offset.query_consumer_offset(
            broker_pb2.QueryConsumerOffsetRequest(
                consumer_group=f.string("consumerGroup"),
                topic=f.string("topic"),
                queue_id=f.integer("queueId"),
                # Absent (C++ never sends it) means true, as in RocketMQ's broker: the
                # young-queue rule applies and a new group misses nothing.
                set_zero_if_not_found=f.boolean("setZeroIfNotFound", True),
            )
        )  # QueryNotFound answers QUERY_NOT_FOUND (22)
        return cmd.response(ext_fields={"offset": str(answer.offset)})

    async def update_consumer_offset(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        group, topic, queue_id = f.string("consumerGroup"), f.string("topic"), f.integer("queueId")
        request = broker_pb2.UpdateConsumerOffsetRequest(consumer_group=group)
        request.offsets.add(topic=topic, queue_id=queue_id, offset=f.integer("commitOffset"))
        self.b.offset.update_consumer_offset(request, conn.remote_addr)
        holder = self._holder(conn, group)
        if holder is not None:
            self.b.hold.release(topic, queue_id, holder)
        return cmd.response()

    @staticmethod
    def _holder(conn: RemotingConnection, group: str) -> tuple[int, str] | None:
        """Whose held pulls a commit on this connection releases: Apache's C++ client only.

        The C++ client 1.2.3 commits a queue's offset as it drops the queue, but leaves its
        held pull outstanding; if the queue comes back before that pull is answered, it waits
        for the answer while holding its consumer table's lock, on one of its two callback
        threads, and with two brokers' notifications taking both threads the answer can never
        be handled (fixed upstream in 1.2.5). A commit from that connection therefore answers
        its held pull on the queue at once, as the pull's timeout would have.
        """
        return (id(conn), group) if conn.language == "CPP" else None

    def _queue(self, f: Fields) -> broker_pb2.QueueOffsetRequest:
        return broker_pb2.QueueOffsetRequest(topic=f.string("topic"), queue_id=f.integer("queueId"))

    async def max_offset(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        offset = self.b.offset.max_offset(self._queue(f)).offset
        return cmd.response(ext_fields={"offset": str(offset)})

    async def min_offset(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        offset = self.b.offset.min_offset(self._queue(f)).offset
        return cmd.response(ext_fields={"offset": str(offset)})

    async def search_offset(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        offset = self.b.offset.search_offset(
            broker_pb2.SearchOffsetRequest(
                topic=f.string("topic"),
                queue_id=f.integer("queueId"),
                timestamp=f.integer("timestamp"),
            )
        ).offset
        return cmd.response(ext_fields={"offset": str(offset)})

    async def earliest_msg_store_time(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        queue = self._queue(f)
        first = self.b.offset.min_offset(queue).offset
        stamp = self.b.store.get_store_timestamp(queue.topic, queue.queue_id, first)
        return cmd.response(ext_fields={"timestamp": str(stamp if stamp is not None else -1)})

    async def view_message_by_id(
        self, conn: RemotingConnection, cmd: RemotingCommand, f: Fields
    ) -> RemotingCommand:
        offset = f.integer("offset")
        record = self.b.store.read_record(offset) if offset >= 0 else None
        if record is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"no message at commit log offset {offset} on broker "
                f"{self.b.config.broker_name}",
            )
        return cmd.response(body=to_v1_records(record, self.store_host))
