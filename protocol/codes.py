"""RocketMQ's request and response codes, as this implementation uses them.

``ResponseCode`` mirrors the ``ResponseCode`` enum of ``proto/common.proto`` (a test keeps the two
equal); ``RequestCode`` names the RocketMQ request each RPC stands for, so logs, traces and
``docs/protocol.md`` can speak RocketMQ's numbers.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["RPC_REQUEST_CODES", "RequestCode", "ResponseCode"]


class ResponseCode(IntEnum):
    """RocketMQ ``ResponseCode`` values (and ours from 1000 up)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    NO_MESSAGE = 208
    FLOW_CONTROL = 215
    CHANNEL_NOT_FOUND = 1000
    QUEUE_FENCED = 1001
    QUEUE_HELD_BY_OTHER = 1002


class RequestCode(IntEnum):
    """RocketMQ ``RequestCode`` values served here (as an RPC, a stream message, or remoting)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    GET_CONSUMER_LIST_BY_GROUP = 38
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    GET_CONSUME_STATS = 208
    DELETE_SUBSCRIPTIONGROUP = 207
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    RESET_CONSUMER_CLIENT_OFFSET = 220
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    LITE_PULL_MESSAGE = 361


# Which RocketMQ request each RPC (or stream message) of proto/ stands for. ``None``: ours, with
# no RocketMQ counterpart. docs/protocol.md is checked against this table by a test.
RPC_REQUEST_CODES: dict[str, RequestCode | None] = {
    "NameServer.RegisterBroker": RequestCode.REGISTER_BROKER,
    "NameServer.UnregisterBroker": RequestCode.UNREGISTER_BROKER,
    "NameServer.GetRouteInfoByTopic": RequestCode.GET_ROUTEINFO_BY_TOPIC,
    "NameServer.GetBrokerClusterInfo": RequestCode.GET_BROKER_CLUSTER_INFO,
    "NameServer.GetAllTopicList": RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    "NameServer.DeleteTopic": RequestCode.DELETE_TOPIC_IN_NAMESRV,
    "Broker.OpenChannel": None,
    "ChannelEvent.notify_consumer_ids_changed": RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
    "ChannelEvent.queue_released": None,
    "ChannelEvent.messages_arrived": None,
    "ChannelEvent.get_consumer_running_info": RequestCode.GET_CONSUMER_RUNNING_INFO,
    "ChannelEvent.reset_offset": RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    "Broker.Heartbeat": RequestCode.HEART_BEAT,
    "Broker.UnregisterClient": RequestCode.UNREGISTER_CLIENT,
    "Broker.GetConsumerListByGroup": RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    "Broker.LockBatchMQ": RequestCode.LOCK_BATCH_MQ,
    "Broker.UnlockBatchMQ": RequestCode.UNLOCK_BATCH_MQ,
    "Broker.AcquireQueues": None,
    "Broker.AcquireQueuesBatch": None,
    "Broker.ReleaseQueues": None,
    "Broker.WatchQueues": None,
    "Broker.SendMessage": RequestCode.SEND_BATCH_MESSAGE,
    "Broker.PullMessage": RequestCode.PULL_MESSAGE,
    "Broker.ConsumerSendMsgBack": RequestCode.CONSUMER_SEND_MSG_BACK,
    "Broker.QueryConsumerOffset": RequestCode.QUERY_CONSUMER_OFFSET,
    "Broker.QueryConsumerOffsets": RequestCode.QUERY_CONSUMER_OFFSET,
    "Broker.UpdateConsumerOffset": RequestCode.UPDATE_CONSUMER_OFFSET,
    "Broker.GetMinOffset": RequestCode.GET_MIN_OFFSET,
    "Broker.GetMaxOffset": RequestCode.GET_MAX_OFFSET,
    "Broker.SearchOffsetByTimestamp": RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
    "Broker.UpdateAndCreateTopic": RequestCode.UPDATE_AND_CREATE_TOPIC,
    "Broker.GetAllTopicConfig": RequestCode.GET_ALL_TOPIC_CONFIG,
    "Broker.GetTopicStatsInfo": RequestCode.GET_TOPIC_STATS_INFO,
    "Broker.GetConsumerConnectionList": RequestCode.GET_CONSUMER_CONNECTION_LIST,
    "Broker.GetConsumeStats": RequestCode.GET_CONSUME_STATS,
    "Broker.GetBrokerConfig": RequestCode.GET_BROKER_CONFIG,
    "Broker.UpdateBrokerConfig": RequestCode.UPDATE_BROKER_CONFIG,
    "Broker.GetConsumerRunningInfo": RequestCode.GET_CONSUMER_RUNNING_INFO,
    "Broker.ReportConsumerRunningInfo": RequestCode.GET_CONSUMER_RUNNING_INFO,
    "Broker.DeleteTopic": RequestCode.DELETE_TOPIC_IN_BROKER,
    "Broker.ViewMessage": RequestCode.VIEW_MESSAGE_BY_ID,
    "Broker.UpdateAndCreateSubscriptionGroup": RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    "Broker.GetAllSubscriptionGroupConfig": RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    "Broker.DeleteSubscriptionGroup": RequestCode.DELETE_SUBSCRIPTIONGROUP,
    "Broker.ResetOffset": RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
    "Broker.QueryMessage": RequestCode.QUERY_MESSAGE,
    "Broker.CleanExpiredConsumeQueue": RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
    "Broker.GetBrokerRuntimeInfo": RequestCode.GET_BROKER_RUNTIME_INFO,
    "Broker.GetProducerConnectionList": RequestCode.GET_PRODUCER_CONNECTION_LIST,
}
