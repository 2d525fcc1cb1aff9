from aiorocketmq.protocol.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SendStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEND_OK: _ClassVar[SendStatus]
    FLUSH_DISK_TIMEOUT_STATUS: _ClassVar[SendStatus]
    FLUSH_SLAVE_TIMEOUT_STATUS: _ClassVar[SendStatus]
    SLAVE_NOT_AVAILABLE_STATUS: _ClassVar[SendStatus]

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FOUND: _ClassVar[PullStatus]
    NO_NEW_MSG: _ClassVar[PullStatus]
    NO_MATCHED_MSG: _ClassVar[PullStatus]
    OFFSET_ILLEGAL: _ClassVar[PullStatus]
SEND_OK: SendStatus
FLUSH_DISK_TIMEOUT_STATUS: SendStatus
FLUSH_SLAVE_TIMEOUT_STATUS: SendStatus
SLAVE_NOT_AVAILABLE_STATUS: SendStatus
FOUND: PullStatus
NO_NEW_MSG: PullStatus
NO_MATCHED_MSG: PullStatus
OFFSET_ILLEGAL: PullStatus

class OpenChannelRequest(_message.Message):
    __slots__ = ("client_id", "language", "version", "previous_channel_id")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    language: str
    version: int
    previous_channel_id: str
    def __init__(self, client_id: _Optional[str] = ..., language: _Optional[str] = ..., version: _Optional[int] = ..., previous_channel_id: _Optional[str] = ...) -> None: ...

class ChannelOpened(_message.Message):
    __slots__ = ("channel_id", "broker_name", "broker_addr", "grants", "grants_listed")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    GRANTS_LISTED_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    broker_name: str
    broker_addr: str
    grants: _containers.RepeatedCompositeFieldContainer[HeldGrant]
    grants_listed: bool
    def __init__(self, channel_id: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addr: _Optional[str] = ..., grants: _Optional[_Iterable[_Union[HeldGrant, _Mapping]]] = ..., grants_listed: _Optional[bool] = ...) -> None: ...

class HeldGrant(_message.Message):
    __slots__ = ("consumer_group", "message_queue", "epoch")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    message_queue: _common_pb2.MessageQueue
    epoch: int
    def __init__(self, consumer_group: _Optional[str] = ..., message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class NotifyConsumerIdsChanged(_message.Message):
    __slots__ = ("consumer_group", "consumer_id_list", "sent_at_ms", "version", "base_version", "added_ids", "removed_ids")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BASE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDED_IDS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_IDS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    consumer_id_list: _containers.RepeatedScalarFieldContainer[str]
    sent_at_ms: int
    version: int
    base_version: int
    added_ids: _containers.RepeatedScalarFieldContainer[str]
    removed_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer_group: _Optional[str] = ..., consumer_id_list: _Optional[_Iterable[str]] = ..., sent_at_ms: _Optional[int] = ..., version: _Optional[int] = ..., base_version: _Optional[int] = ..., added_ids: _Optional[_Iterable[str]] = ..., removed_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueReleased(_message.Message):
    __slots__ = ("consumer_group", "message_queue")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    message_queue: _common_pb2.MessageQueue
    def __init__(self, consumer_group: _Optional[str] = ..., message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ...) -> None: ...

class ChannelEvent(_message.Message):
    __slots__ = ("opened", "notify_consumer_ids_changed", "queue_released", "get_consumer_running_info", "reset_offset", "messages_arrived")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CONSUMER_IDS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_RELEASED_FIELD_NUMBER: _ClassVar[int]
    GET_CONSUMER_RUNNING_INFO_FIELD_NUMBER: _ClassVar[int]
    RESET_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_ARRIVED_FIELD_NUMBER: _ClassVar[int]
    opened: ChannelOpened
    notify_consumer_ids_changed: NotifyConsumerIdsChanged
    queue_released: QueueReleased
    get_consumer_running_info: GetConsumerRunningInfo
    reset_offset: ResetOffsetEvent
    messages_arrived: MessagesArrived
    def __init__(self, opened: _Optional[_Union[ChannelOpened, _Mapping]] = ..., notify_consumer_ids_changed: _Optional[_Union[NotifyConsumerIdsChanged, _Mapping]] = ..., queue_released: _Optional[_Union[QueueReleased, _Mapping]] = ..., get_consumer_running_info: _Optional[_Union[GetConsumerRunningInfo, _Mapping]] = ..., reset_offset: _Optional[_Union[ResetOffsetEvent, _Mapping]] = ..., messages_arrived: _Optional[_Union[MessagesArrived, _Mapping]] = ...) -> None: ...

class MessagesArrived(_message.Message):
    __slots__ = ("consumer_group", "message_queue", "max_offset")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    message_queue: _common_pb2.MessageQueue
    max_offset: int
    def __init__(self, consumer_group: _Optional[str] = ..., message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., max_offset: _Optional[int] = ...) -> None: ...

class QueueWatch(_message.Message):
    __slots__ = ("topic", "queue_id", "offset", "epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    epoch: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class WatchQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "channel_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    channel_id: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueWatch]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueWatch, _Mapping]]] = ...) -> None: ...

class WatchQueuesResponse(_message.Message):
    __slots__ = ("watching",)
    WATCHING_FIELD_NUMBER: _ClassVar[int]
    watching: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, watching: _Optional[_Iterable[bool]] = ...) -> None: ...

class ResetOffsetEvent(_message.Message):
    __slots__ = ("topic", "consumer_group", "offsets", "broker_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    broker_name: str
    def __init__(self, topic: _Optional[str] = ..., consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ..., broker_name: _Optional[str] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("queue_id", "offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    offset: int
    def __init__(self, queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class GetConsumerRunningInfo(_message.Message):
    __slots__ = ("request_id", "consumer_group")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    consumer_group: str
    def __init__(self, request_id: _Optional[int] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("channel_id", "heartbeat", "notified_elsewhere")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    NOTIFIED_ELSEWHERE_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    heartbeat: _common_pb2.HeartbeatData
    notified_elsewhere: bool
    def __init__(self, channel_id: _Optional[str] = ..., heartbeat: _Optional[_Union[_common_pb2.HeartbeatData, _Mapping]] = ..., notified_elsewhere: _Optional[bool] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("silent_groups",)
    SILENT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    silent_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, silent_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class UnregisterClientRequest(_message.Message):
    __slots__ = ("channel_id", "client_id", "producer_group", "consumer_group", "releases")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    client_id: str
    producer_group: str
    consumer_group: str
    releases: _containers.RepeatedCompositeFieldContainer[QueueRelease]
    def __init__(self, channel_id: _Optional[str] = ..., client_id: _Optional[str] = ..., producer_group: _Optional[str] = ..., consumer_group: _Optional[str] = ..., releases: _Optional[_Iterable[_Union[QueueRelease, _Mapping]]] = ...) -> None: ...

class UnregisterClientResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, released: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class GetConsumerListByGroupRequest(_message.Message):
    __slots__ = ("consumer_group", "known_version")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    known_version: int
    def __init__(self, consumer_group: _Optional[str] = ..., known_version: _Optional[int] = ...) -> None: ...

class GetConsumerListByGroupResponse(_message.Message):
    __slots__ = ("consumer_id_list", "version", "unchanged")
    CONSUMER_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    consumer_id_list: _containers.RepeatedScalarFieldContainer[str]
    version: int
    unchanged: bool
    def __init__(self, consumer_id_list: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., unchanged: _Optional[bool] = ...) -> None: ...

class LockBatchRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "only_this_broker", "mq_set")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ONLY_THIS_BROKER_FIELD_NUMBER: _ClassVar[int]
    MQ_SET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    only_this_broker: bool
    mq_set: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., only_this_broker: _Optional[bool] = ..., mq_set: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class LockBatchResponse(_message.Message):
    __slots__ = ("lock_ok_mq_set",)
    LOCK_OK_MQ_SET_FIELD_NUMBER: _ClassVar[int]
    lock_ok_mq_set: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, lock_ok_mq_set: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class UnlockBatchRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "only_this_broker", "mq_set")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ONLY_THIS_BROKER_FIELD_NUMBER: _ClassVar[int]
    MQ_SET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    only_this_broker: bool
    mq_set: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., only_this_broker: _Optional[bool] = ..., mq_set: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class UnlockBatchResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AcquireQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "channel_id", "mq_set", "watch", "wait_millis", "releases")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    MQ_SET_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    WAIT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    channel_id: str
    mq_set: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    watch: bool
    wait_millis: int
    releases: _containers.RepeatedCompositeFieldContainer[QueueRelease]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., mq_set: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ..., watch: _Optional[bool] = ..., wait_millis: _Optional[int] = ..., releases: _Optional[_Iterable[_Union[QueueRelease, _Mapping]]] = ...) -> None: ...

class QueueGrant(_message.Message):
    __slots__ = ("message_queue", "epoch", "committed_offset", "watching")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WATCHING_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    epoch: int
    committed_offset: int
    watching: bool
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., epoch: _Optional[int] = ..., committed_offset: _Optional[int] = ..., watching: _Optional[bool] = ...) -> None: ...

class QueueDenied(_message.Message):
    __slots__ = ("message_queue", "holder_client_id", "epoch")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    holder_client_id: str
    epoch: int
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., holder_client_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class AcquireQueuesResponse(_message.Message):
    __slots__ = ("granted", "denied", "released")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[QueueGrant]
    denied: _containers.RepeatedCompositeFieldContainer[QueueDenied]
    released: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, granted: _Optional[_Iterable[_Union[QueueGrant, _Mapping]]] = ..., denied: _Optional[_Iterable[_Union[QueueDenied, _Mapping]]] = ..., released: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class AcquireQueuesBatchRequest(_message.Message):
    __slots__ = ("acquires",)
    ACQUIRES_FIELD_NUMBER: _ClassVar[int]
    acquires: _containers.RepeatedCompositeFieldContainer[AcquireQueuesRequest]
    def __init__(self, acquires: _Optional[_Iterable[_Union[AcquireQueuesRequest, _Mapping]]] = ...) -> None: ...

class AcquireAnswer(_message.Message):
    __slots__ = ("index", "response", "response_code", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    response: AcquireQueuesResponse
    response_code: int
    error: str
    def __init__(self, index: _Optional[int] = ..., response: _Optional[_Union[AcquireQueuesResponse, _Mapping]] = ..., response_code: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class AcquireQueuesBatchResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[AcquireAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[AcquireAnswer, _Mapping]]] = ...) -> None: ...

class QueueRelease(_message.Message):
    __slots__ = ("message_queue", "epoch", "final_offset")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FINAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    epoch: int
    final_offset: int
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., epoch: _Optional[int] = ..., final_offset: _Optional[int] = ...) -> None: ...

class ReleaseQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "releases")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    releases: _containers.RepeatedCompositeFieldContainer[QueueRelease]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., releases: _Optional[_Iterable[_Union[QueueRelease, _Mapping]]] = ...) -> None: ...

class ReleaseQueuesResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, released: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("producer_group", "topic", "queue_id", "messages", "born_host", "born_timestamp", "reconsume_times", "max_reconsume_times", "compact_result", "batch_body")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    COMPACT_RESULT_FIELD_NUMBER: _ClassVar[int]
    BATCH_BODY_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    topic: str
    queue_id: int
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.Message]
    born_host: str
    born_timestamp: int
    reconsume_times: int
    max_reconsume_times: int
    compact_result: bool
    batch_body: bytes
    def __init__(self, producer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_common_pb2.Message, _Mapping]]] = ..., born_host: _Optional[str] = ..., born_timestamp: _Optional[int] = ..., reconsume_times: _Optional[int] = ..., max_reconsume_times: _Optional[int] = ..., compact_result: _Optional[bool] = ..., batch_body: _Optional[bytes] = ...) -> None: ...

class SendResultEntry(_message.Message):
    __slots__ = ("msg_id", "queue_offset", "commit_log_offset")
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    msg_id: str
    queue_offset: int
    commit_log_offset: int
    def __init__(self, msg_id: _Optional[str] = ..., queue_offset: _Optional[int] = ..., commit_log_offset: _Optional[int] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("send_status", "message_queue", "results", "first_queue_offset", "commit_log_offsets", "store_host")
    SEND_STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    FIRST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    send_status: SendStatus
    message_queue: _common_pb2.MessageQueue
    results: _containers.RepeatedCompositeFieldContainer[SendResultEntry]
    first_queue_offset: int
    commit_log_offsets: _containers.RepeatedScalarFieldContainer[int]
    store_host: str
    def __init__(self, send_status: _Optional[_Union[SendStatus, str]] = ..., message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., results: _Optional[_Iterable[_Union[SendResultEntry, _Mapping]]] = ..., first_queue_offset: _Optional[int] = ..., commit_log_offsets: _Optional[_Iterable[int]] = ..., store_host: _Optional[str] = ...) -> None: ...

class PullMessageRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "queue_offset", "max_msg_nums", "max_msg_bytes", "commit_offset_enabled", "commit_offset", "suspend", "suspend_timeout_millis", "has_subscription", "sub_expression", "expression_type", "sub_version", "epoch", "client_id", "raw_records", "min_msg_nums", "max_wait_millis", "watch", "channel_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MSG_NUMS_FIELD_NUMBER: _ClassVar[int]
    MAX_MSG_BYTES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_ENABLED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    HAS_SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUB_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_VERSION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    RAW_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MIN_MSG_NUMS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    max_msg_bytes: int
    commit_offset_enabled: bool
    commit_offset: int
    suspend: bool
    suspend_timeout_millis: int
    has_subscription: bool
    sub_expression: str
    expression_type: str
    sub_version: int
    epoch: int
    client_id: str
    raw_records: bool
    min_msg_nums: int
    max_wait_millis: int
    watch: bool
    channel_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_msg_nums: _Optional[int] = ..., max_msg_bytes: _Optional[int] = ..., commit_offset_enabled: _Optional[bool] = ..., commit_offset: _Optional[int] = ..., suspend: _Optional[bool] = ..., suspend_timeout_millis: _Optional[int] = ..., has_subscription: _Optional[bool] = ..., sub_expression: _Optional[str] = ..., expression_type: _Optional[str] = ..., sub_version: _Optional[int] = ..., epoch: _Optional[int] = ..., client_id: _Optional[str] = ..., raw_records: _Optional[bool] = ..., min_msg_nums: _Optional[int] = ..., max_wait_millis: _Optional[int] = ..., watch: _Optional[bool] = ..., channel_id: _Optional[str] = ...) -> None: ...

class PullMessageResponse(_message.Message):
    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "suggest_which_broker_id", "messages", "records", "broker_name", "watching")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEGIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUGGEST_WHICH_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    WATCHING_FIELD_NUMBER: _ClassVar[int]
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageExt]
    records: bytes
    broker_name: str
    watching: bool
    def __init__(self, status: _Optional[_Union[PullStatus, str]] = ..., next_begin_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., suggest_which_broker_id: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_common_pb2.MessageExt, _Mapping]]] = ..., records: _Optional[bytes] = ..., broker_name: _Optional[str] = ..., watching: _Optional[bool] = ...) -> None: ...

class ConsumerSendMsgBackRequest(_message.Message):
    __slots__ = ("group", "commit_log_offset", "delay_level", "origin_msg_id", "origin_topic", "max_reconsume_times")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TOPIC_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    group: str
    commit_log_offset: int
    delay_level: int
    origin_msg_id: str
    origin_topic: str
    max_reconsume_times: int
    def __init__(self, group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., delay_level: _Optional[int] = ..., origin_msg_id: _Optional[str] = ..., origin_topic: _Optional[str] = ..., max_reconsume_times: _Optional[int] = ...) -> None: ...

class ConsumerSendMsgBackResponse(_message.Message):
    __slots__ = ("target_topic", "reconsume_times")
    TARGET_TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    target_topic: str
    reconsume_times: int
    def __init__(self, target_topic: _Optional[str] = ..., reconsume_times: _Optional[int] = ...) -> None: ...

class QueryConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "set_zero_if_not_found")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    SET_ZERO_IF_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., set_zero_if_not_found: _Optional[bool] = ...) -> None: ...

class QueryConsumerOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class QueryConsumerOffsetsRequest(_message.Message):
    __slots__ = ("consumer_group", "queues", "set_zero_if_not_found", "watch_channel_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    SET_ZERO_IF_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    WATCH_CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    set_zero_if_not_found: bool
    watch_channel_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ..., set_zero_if_not_found: _Optional[bool] = ..., watch_channel_id: _Optional[str] = ...) -> None: ...

class QueryConsumerOffsetsResponse(_message.Message):
    __slots__ = ("offsets", "watching")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    WATCHING_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    watching: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, offsets: _Optional[_Iterable[int]] = ..., watching: _Optional[_Iterable[bool]] = ...) -> None: ...

class OffsetCommit(_message.Message):
    __slots__ = ("topic", "queue_id", "offset", "epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    epoch: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class UpdateConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "offsets", "client_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[OffsetCommit]
    client_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[OffsetCommit, _Mapping]]] = ..., client_id: _Optional[str] = ...) -> None: ...

class UpdateConsumerOffsetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class QueueOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class SearchOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "timestamp")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    timestamp: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class UpdateAndCreateTopicRequest(_message.Message):
    __slots__ = ("topic_config",)
    TOPIC_CONFIG_FIELD_NUMBER: _ClassVar[int]
    topic_config: _common_pb2.TopicConfig
    def __init__(self, topic_config: _Optional[_Union[_common_pb2.TopicConfig, _Mapping]] = ...) -> None: ...

class UpdateAndCreateTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllTopicConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllTopicConfigResponse(_message.Message):
    __slots__ = ("topic_configs",)
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    topic_configs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConfig]
    def __init__(self, topic_configs: _Optional[_Iterable[_Union[_common_pb2.TopicConfig, _Mapping]]] = ...) -> None: ...

class GetTopicStatsInfoRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class TopicOffset(_message.Message):
    __slots__ = ("message_queue", "min_offset", "max_offset", "last_update_timestamp")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_update_timestamp: _Optional[int] = ...) -> None: ...

class GetTopicStatsInfoResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[TopicOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[TopicOffset, _Mapping]]] = ...) -> None: ...

class GetConsumerConnectionListRequest(_message.Message):
    __slots__ = ("consumer_group",)
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    def __init__(self, consumer_group: _Optional[str] = ...) -> None: ...

class Connection(_message.Message):
    __slots__ = ("client_id", "client_addr", "language", "version", "last_update_timestamp", "protocol")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_addr: str
    language: str
    version: int
    last_update_timestamp: int
    protocol: str
    def __init__(self, client_id: _Optional[str] = ..., client_addr: _Optional[str] = ..., language: _Optional[str] = ..., version: _Optional[int] = ..., last_update_timestamp: _Optional[int] = ..., protocol: _Optional[str] = ...) -> None: ...

class ConsumerConnection(_message.Message):
    __slots__ = ("connections", "subscriptions", "consume_type", "message_model", "consume_from_where")
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    connections: _containers.RepeatedCompositeFieldContainer[Connection]
    subscriptions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SubscriptionData]
    consume_type: _common_pb2.ConsumeType
    message_model: _common_pb2.MessageModel
    consume_from_where: _common_pb2.ConsumeFromWhere
    def __init__(self, connections: _Optional[_Iterable[_Union[Connection, _Mapping]]] = ..., subscriptions: _Optional[_Iterable[_Union[_common_pb2.SubscriptionData, _Mapping]]] = ..., consume_type: _Optional[_Union[_common_pb2.ConsumeType, str]] = ..., message_model: _Optional[_Union[_common_pb2.MessageModel, str]] = ..., consume_from_where: _Optional[_Union[_common_pb2.ConsumeFromWhere, str]] = ...) -> None: ...

class GetConsumeStatsRequest(_message.Message):
    __slots__ = ("consumer_group", "topic")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueueConsumeStats(_message.Message):
    __slots__ = ("message_queue", "broker_offset", "consumer_offset", "last_timestamp", "holder_client_id")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    HOLDER_CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    holder_client_id: str
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., last_timestamp: _Optional[int] = ..., holder_client_id: _Optional[str] = ...) -> None: ...

class ConsumeStats(_message.Message):
    __slots__ = ("queues", "consume_tps")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TPS_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueConsumeStats]
    consume_tps: float
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueConsumeStats, _Mapping]]] = ..., consume_tps: _Optional[float] = ...) -> None: ...

class GetBrokerConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerConfigResponse(_message.Message):
    __slots__ = ("properties",)
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateBrokerConfigRequest(_message.Message):
    __slots__ = ("properties",)
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateBrokerConfigResponse(_message.Message):
    __slots__ = ("properties",)
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetConsumerRunningInfoRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "timeout_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    timeout_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ProcessQueueInfo(_message.Message):
    __slots__ = ("message_queue", "commit_offset", "cached_msg_count", "cached_msg_size_bytes", "locked", "dropped", "last_pull_timestamp", "last_consume_timestamp", "epoch")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CACHED_MSG_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHED_MSG_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_PULL_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LAST_CONSUME_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    message_queue: _common_pb2.MessageQueue
    commit_offset: int
    cached_msg_count: int
    cached_msg_size_bytes: int
    locked: bool
    dropped: bool
    last_pull_timestamp: int
    last_consume_timestamp: int
    epoch: int
    def __init__(self, message_queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., commit_offset: _Optional[int] = ..., cached_msg_count: _Optional[int] = ..., cached_msg_size_bytes: _Optional[int] = ..., locked: _Optional[bool] = ..., dropped: _Optional[bool] = ..., last_pull_timestamp: _Optional[int] = ..., last_consume_timestamp: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ConsumeStatus(_message.Message):
    __slots__ = ("topic", "pull_tps", "consume_ok_tps", "consume_failed_tps", "consume_failed_msgs", "consume_rt_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PULL_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_OK_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FAILED_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FAILED_MSGS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_RT_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    pull_tps: float
    consume_ok_tps: float
    consume_failed_tps: float
    consume_failed_msgs: int
    consume_rt_ms: float
    def __init__(self, topic: _Optional[str] = ..., pull_tps: _Optional[float] = ..., consume_ok_tps: _Optional[float] = ..., consume_failed_tps: _Optional[float] = ..., consume_failed_msgs: _Optional[int] = ..., consume_rt_ms: _Optional[float] = ...) -> None: ...

class ConsumerRunningInfo(_message.Message):
    __slots__ = ("client_id", "consumer_group", "properties", "subscriptions", "mq_table", "status_table", "start_timestamp", "language")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    MQ_TABLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_TABLE_FIELD_NUMBER: _ClassVar[int]
    START_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    consumer_group: str
    properties: _containers.ScalarMap[str, str]
    subscriptions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SubscriptionData]
    mq_table: _containers.RepeatedCompositeFieldContainer[ProcessQueueInfo]
    status_table: _containers.RepeatedCompositeFieldContainer[ConsumeStatus]
    start_timestamp: int
    language: str
    def __init__(self, client_id: _Optional[str] = ..., consumer_group: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., subscriptions: _Optional[_Iterable[_Union[_common_pb2.SubscriptionData, _Mapping]]] = ..., mq_table: _Optional[_Iterable[_Union[ProcessQueueInfo, _Mapping]]] = ..., status_table: _Optional[_Iterable[_Union[ConsumeStatus, _Mapping]]] = ..., start_timestamp: _Optional[int] = ..., language: _Optional[str] = ...) -> None: ...

class ConsumerRunningInfoReport(_message.Message):
    __slots__ = ("channel_id", "request_id", "info", "error")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    request_id: int
    info: ConsumerRunningInfo
    error: str
    def __init__(self, channel_id: _Optional[str] = ..., request_id: _Optional[int] = ..., info: _Optional[_Union[ConsumerRunningInfo, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ReportConsumerRunningInfoResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ("existed",)
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    def __init__(self, existed: _Optional[bool] = ...) -> None: ...

class ViewMessageRequest(_message.Message):
    __slots__ = ("commit_log_offset",)
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    commit_log_offset: int
    def __init__(self, commit_log_offset: _Optional[int] = ...) -> None: ...

class GetBrokerRuntimeInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerRuntimeInfo(_message.Message):
    __slots__ = ("table",)
    class TableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _containers.ScalarMap[str, str]
    def __init__(self, table: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetProducerConnectionListRequest(_message.Message):
    __slots__ = ("producer_group",)
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    def __init__(self, producer_group: _Optional[str] = ...) -> None: ...

class ProducerConnection(_message.Message):
    __slots__ = ("connections",)
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    connections: _containers.RepeatedCompositeFieldContainer[Connection]
    def __init__(self, connections: _Optional[_Iterable[_Union[Connection, _Mapping]]] = ...) -> None: ...

class SubscriptionGroupConfig(_message.Message):
    __slots__ = ("group_name", "consume_enable", "consume_from_min_enable", "consume_broadcast_enable", "retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly", "notify_consumer_ids_changed_enable")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_MIN_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_BROADCAST_ENABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    RETRY_MAX_TIMES_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    WHICH_BROKER_WHEN_CONSUME_SLOWLY_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CONSUMER_IDS_CHANGED_ENABLE_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    consume_enable: bool
    consume_from_min_enable: bool
    consume_broadcast_enable: bool
    retry_queue_nums: int
    retry_max_times: int
    broker_id: int
    which_broker_when_consume_slowly: int
    notify_consumer_ids_changed_enable: bool
    def __init__(self, group_name: _Optional[str] = ..., consume_enable: _Optional[bool] = ..., consume_from_min_enable: _Optional[bool] = ..., consume_broadcast_enable: _Optional[bool] = ..., retry_queue_nums: _Optional[int] = ..., retry_max_times: _Optional[int] = ..., broker_id: _Optional[int] = ..., which_broker_when_consume_slowly: _Optional[int] = ..., notify_consumer_ids_changed_enable: _Optional[bool] = ...) -> None: ...

class UpdateAndCreateSubscriptionGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllSubscriptionGroupConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllSubscriptionGroupConfigResponse(_message.Message):
    __slots__ = ("configs",)
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.RepeatedCompositeFieldContainer[SubscriptionGroupConfig]
    def __init__(self, configs: _Optional[_Iterable[_Union[SubscriptionGroupConfig, _Mapping]]] = ...) -> None: ...

class DeleteSubscriptionGroupRequest(_message.Message):
    __slots__ = ("group_name", "remove_offset")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    REMOVE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    remove_offset: bool
    def __init__(self, group_name: _Optional[str] = ..., remove_offset: _Optional[bool] = ...) -> None: ...

class DeleteSubscriptionGroupResponse(_message.Message):
    __slots__ = ("existed",)
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    def __init__(self, existed: _Optional[bool] = ...) -> None: ...

class ResetOffsetRequest(_message.Message):
    __slots__ = ("topic", "consumer_group", "timestamp", "force")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    consumer_group: str
    timestamp: int
    force: bool
    def __init__(self, topic: _Optional[str] = ..., consumer_group: _Optional[str] = ..., timestamp: _Optional[int] = ..., force: _Optional[bool] = ...) -> None: ...

class ResetOffsetResponse(_message.Message):
    __slots__ = ("offsets", "clients_told")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_TOLD_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    clients_told: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ..., clients_told: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryMessageRequest(_message.Message):
    __slots__ = ("topic", "key", "max_num", "begin_timestamp", "end_timestamp")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., max_num: _Optional[int] = ..., begin_timestamp: _Optional[int] = ..., end_timestamp: _Optional[int] = ...) -> None: ...

class QueryMessageResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageExt]
    def __init__(self, messages: _Optional[_Iterable[_Union[_common_pb2.MessageExt, _Mapping]]] = ...) -> None: ...

class CleanExpiredConsumeQueueRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanExpiredConsumeQueueResponse(_message.Message):
    __slots__ = ("files_removed", "topics_removed")
    FILES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    TOPICS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    files_removed: int
    topics_removed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, files_removed: _Optional[int] = ..., topics_removed: _Optional[_Iterable[str]] = ...) -> None: ...
