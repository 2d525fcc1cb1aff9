"""``BrokerService``: the gRPC servicer; each RPC delegates to the processor that owns it.

Every unary method, and the stream written with ``context.write`` (AcquireQueuesBatch), is
wrapped by ``aiorocketmq.protocol.rpc.guard``: typed errors become gRPC statuses with a RocketMQ
response code, anything unexpected becomes INTERNAL, and the broker keeps serving.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeAlias

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.rpc import abort_with, guard
from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc, common_pb2
from aiorocketmq.trace import tracer

if TYPE_CHECKING:
    from aiorocketmq.broker.broker_controller import BrokerController

__all__ = ["BrokerService"]

log = get_logger("aiorocketmq.broker.service")

Ctx: TypeAlias = Any  # grpc.aio.ServicerContext (grpc ships no type information)


class BrokerService(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    """The Broker service of proto/broker.proto."""

    def __init__(self, broker: BrokerController) -> None:
        self.b = broker

    def observe_rpc(self, rpc: str, response_code: int, seconds: float) -> None:
        """Called by ``guard`` after each RPC: the broker's latency histogram."""
        self.b.observe_rpc(rpc, response_code, seconds)

    # ---- the client channel ----------------------------------------------------------------
    async def OpenChannel(
        self, request: broker_pb2.OpenChannelRequest, context: Ctx
    ) -> AsyncIterator[broker_pb2.ChannelEvent]:
        """The channel: first ChannelOpened, then pushed events until the stream ends."""
        client = self.b.client
        try:
            channel = client.open_channel(request, context.peer())
        except Exception as e:
            await abort_with(context, e if isinstance(e, MQError) else MQError(repr(e)))
            return
        try:
            yield broker_pb2.ChannelEvent(
                opened=broker_pb2.ChannelOpened(
                    channel_id=channel.channel_id,
                    broker_name=self.b.config.broker_name,
                    broker_addr=self.b.address,
                    grants=client.held_grants(channel),
                    grants_listed=True,
                )
            )
            async for event in channel.events():
                yield event
        finally:
            client.close_channel(channel)

    # ---- consumer groups -------------------------------------------------------------------
    @guard
    async def Heartbeat(
        self, request: broker_pb2.HeartbeatRequest, context: Ctx
    ) -> broker_pb2.HeartbeatResponse:
        return await self.b.heartbeat(request)

    @guard
    async def UnregisterClient(
        self, request: broker_pb2.UnregisterClientRequest, context: Ctx
    ) -> broker_pb2.UnregisterClientResponse:
        response = self.b.client.unregister_client(request, context.peer())
        if request.releases:
            await self.b.client.grants_durable()  # as ReleaseQueues answers
        return response

    @guard
    async def WatchQueues(
        self, request: broker_pb2.WatchQueuesRequest, context: Ctx
    ) -> broker_pb2.WatchQueuesResponse:
        return self.b.client.watch_queues(request)

    @guard
    async def GetConsumerListByGroup(
        self, request: broker_pb2.GetConsumerListByGroupRequest, context: Ctx
    ) -> broker_pb2.GetConsumerListByGroupResponse:
        return self.b.client.get_consumer_list_by_group(request)

    @guard
    async def LockBatchMQ(
        self, request: broker_pb2.LockBatchRequest, context: Ctx
    ) -> broker_pb2.LockBatchResponse:
        return self.b.client.lock_batch_mq(request)

    @guard
    async def UnlockBatchMQ(
        self, request: broker_pb2.UnlockBatchRequest, context: Ctx
    ) -> broker_pb2.UnlockBatchResponse:
        return self.b.client.unlock_batch_mq(request)

    @guard
    async def AcquireQueues(
        self, request: broker_pb2.AcquireQueuesRequest, context: Ctx
    ) -> broker_pb2.AcquireQueuesResponse:
        t0 = time.monotonic()
        response = await self.b.client.acquire_queues_waiting(
            request, context.time_remaining(), context.peer()
        )
        t1 = time.monotonic()
        await self.b.client.grants_durable()  # before the answer: a grant survives a crash
        if tracer.enabled:
            self._trace_acquire(request, response, t0, t1)
        return response

    @guard  # a coroutine that writes its stream: guard's errors, statuses and metrics apply
    async def AcquireQueuesBatch(
        self, request: broker_pb2.AcquireQueuesBatchRequest, context: Ctx
    ) -> None:
        """The acquires of a batch, answered as each is done (``acquire_queues_batch``). Sent
        with ``context.write`` inside ``aclosing``: a call the client cancels ends the batch
        (its acquires stop waiting) at once, not when the generator is collected."""
        t0 = time.monotonic()
        batch = self.b.client.acquire_queues_batch(
            request, context.time_remaining(), context.peer()
        )
        async with contextlib.aclosing(batch):
            async for answers in batch:
                if tracer.enabled:
                    for a in answers:
                        if a.HasField("response"):
                            self._trace_acquire(request.acquires[a.index], a.response, t0, None)
                await context.write(broker_pb2.AcquireQueuesBatchResponse(answers=answers))

    def _trace_acquire(
        self,
        request: broker_pb2.AcquireQueuesRequest,
        response: broker_pb2.AcquireQueuesResponse,
        t0: float,
        t1: float | None,
    ) -> None:
        """The protocol trace's record of an acquire answered (``t1``: when it stopped
        waiting for releases, if known apart from the durable write)."""
        now = time.monotonic()
        tracer.record(
            "acquire_answered",
            broker=self.b.config.broker_name,
            group=request.consumer_group,
            client_id=request.client_id,
            asked=len(request.mq_set),
            granted=len(response.granted),
            released=len(response.released),
            wait_ms=round(((t1 if t1 is not None else now) - t0) * 1000, 1),
            durable_ms=round((now - t1) * 1000, 1) if t1 is not None else None,
        )

    @guard
    async def ReleaseQueues(
        self, request: broker_pb2.ReleaseQueuesRequest, context: Ctx
    ) -> broker_pb2.ReleaseQueuesResponse:
        response = self.b.client.release_queues(request, context.peer())
        await self.b.client.grants_durable()
        return response

    # ---- the data path ---------------------------------------------------------------------
    @guard
    async def SendMessage(
        self, request: broker_pb2.SendMessageRequest, context: Ctx
    ) -> broker_pb2.SendMessageResponse:
        return await self.b.send.send(request, context.peer())

    @guard
    async def PullMessage(
        self, request: broker_pb2.PullMessageRequest, context: Ctx
    ) -> broker_pb2.PullMessageResponse:
        return await self.b.pull.pull(request, context.peer())

    @guard
    async def ConsumerSendMsgBack(
        self, request: broker_pb2.ConsumerSendMsgBackRequest, context: Ctx
    ) -> broker_pb2.ConsumerSendMsgBackResponse:
        return await self.b.client.consumer_send_msg_back(request, context.peer())

    @guard
    async def QueryConsumerOffset(
        self, request: broker_pb2.QueryConsumerOffsetRequest, context: Ctx
    ) -> broker_pb2.QueryConsumerOffsetResponse:
        return self.b.offset.query_consumer_offset(request)

    @guard
    async def QueryConsumerOffsets(
        self, request: broker_pb2.QueryConsumerOffsetsRequest, context: Ctx
    ) -> broker_pb2.QueryConsumerOffsetsResponse:
        response = self.b.offset.query_consumer_offsets(request)
        if request.watch_channel_id:
            self.b.client.watch_start_offsets(request, response)
        return response

    @guard
    async def UpdateConsumerOffset(
        self, request: broker_pb2.UpdateConsumerOffsetRequest, context: Ctx
    ) -> broker_pb2.UpdateConsumerOffsetResponse:
        return self.b.offset.update_consumer_offset(request, context.peer())

    @guard
    async def GetMinOffset(
        self, request: broker_pb2.QueueOffsetRequest, context: Ctx
    ) -> broker_pb2.QueueOffsetResponse:
        return self.b.offset.min_offset(request)

    @guard
    async def GetMaxOffset(
        self, request: broker_pb2.QueueOffsetRequest, context: Ctx
    ) -> broker_pb2.QueueOffsetResponse:
        return self.b.offset.max_offset(request)

    @guard
    async def SearchOffsetByTimestamp(
        self, request: broker_pb2.SearchOffsetRequest, context: Ctx
    ) -> broker_pb2.QueueOffsetResponse:
        return self.b.offset.search_offset(request)

    # ---- administration --------------------------------------------------------------------
    @guard
    async def UpdateAndCreateTopic(
        self, request: broker_pb2.UpdateAndCreateTopicRequest, context: Ctx
    ) -> broker_pb2.UpdateAndCreateTopicResponse:
        return self.b.admin.update_and_create_topic(request)

    @guard
    async def GetAllTopicConfig(
        self, request: broker_pb2.GetAllTopicConfigRequest, context: Ctx
    ) -> broker_pb2.GetAllTopicConfigResponse:
        return self.b.admin.get_all_topic_config()

    @guard
    async def GetTopicStatsInfo(
        self, request: broker_pb2.GetTopicStatsInfoRequest, context: Ctx
    ) -> broker_pb2.GetTopicStatsInfoResponse:
        return self.b.admin.get_topic_stats_info(request)

    @guard
    async def GetConsumerConnectionList(
        self, request: broker_pb2.GetConsumerConnectionListRequest, context: Ctx
    ) -> broker_pb2.ConsumerConnection:
        return self.b.client.get_consumer_connection_list(request)

    @guard
    async def GetConsumeStats(
        self, request: broker_pb2.GetConsumeStatsRequest, context: Ctx
    ) -> broker_pb2.ConsumeStats:
        return await self.b.client.get_consume_stats(request)

    @guard
    async def GetBrokerConfig(
        self, request: broker_pb2.GetBrokerConfigRequest, context: Ctx
    ) -> broker_pb2.GetBrokerConfigResponse:
        return self.b.admin.get_broker_config()

    @guard
    async def GetConsumerRunningInfo(
        self, request: broker_pb2.GetConsumerRunningInfoRequest, context: Ctx
    ) -> broker_pb2.ConsumerRunningInfo:
        return await self.b.client.get_consumer_running_info(request)

    @guard
    async def ReportConsumerRunningInfo(
        self, request: broker_pb2.ConsumerRunningInfoReport, context: Ctx
    ) -> broker_pb2.ReportConsumerRunningInfoResponse:
        return self.b.client.report_consumer_running_info(request)

    @guard
    async def DeleteTopic(
        self, request: broker_pb2.DeleteTopicRequest, context: Ctx
    ) -> broker_pb2.DeleteTopicResponse:
        return await self.b.admin.delete_topic(request)

    @guard
    async def ViewMessage(
        self, request: broker_pb2.ViewMessageRequest, context: Ctx
    ) -> common_pb2.MessageExt:
        return self.b.admin.view_message(request)

    @guard
    async def GetBrokerRuntimeInfo(
        self, request: broker_pb2.GetBrokerRuntimeInfoRequest, context: Ctx
    ) -> broker_pb2.BrokerRuntimeInfo:
        return self.b.runtime_info()

    @guard
    async def GetProducerConnectionList(
        self, request: broker_pb2.GetProducerConnectionListRequest, context: Ctx
    ) -> broker_pb2.ProducerConnection:
        return self.b.client.get_producer_connection_list(request)

    @guard
    async def UpdateAndCreateSubscriptionGroup(
        self, request: broker_pb2.SubscriptionGroupConfig, context: Ctx
    ) -> broker_pb2.UpdateAndCreateSubscriptionGroupResponse:
        return self.b.client.update_subscription_group(request)

    @guard
    async def GetAllSubscriptionGroupConfig(
        self, request: broker_pb2.GetAllSubscriptionGroupConfigRequest, context: Ctx
    ) -> broker_pb2.GetAllSubscriptionGroupConfigResponse:
        return self.b.client.get_all_subscription_group_config()

    @guard
    async def DeleteSubscriptionGroup(
        self, request: broker_pb2.DeleteSubscriptionGroupRequest, context: Ctx
    ) -> broker_pb2.DeleteSubscriptionGroupResponse:
        return self.b.client.delete_subscription_group(request)

    @guard
    async def ResetOffset(
        self, request: broker_pb2.ResetOffsetRequest, context: Ctx
    ) -> broker_pb2.ResetOffsetResponse:
        return self.b.client.reset_offset(request)

    @guard
    async def QueryMessage(
        self, request: broker_pb2.QueryMessageRequest, context: Ctx
    ) -> broker_pb2.QueryMessageResponse:
        return await self.b.admin.query_message(request)

    @guard
    async def CleanExpiredConsumeQueue(
        self, request: broker_pb2.CleanExpiredConsumeQueueRequest, context: Ctx
    ) -> broker_pb2.CleanExpiredConsumeQueueResponse:
        return await self.b.admin.clean_expired_consume_queue()

    @guard
    async def UpdateBrokerConfig(
        self, request: broker_pb2.UpdateBrokerConfigRequest, context: Ctx
    ) -> broker_pb2.UpdateBrokerConfigResponse:
        return self.b.admin.update_broker_config(request)
