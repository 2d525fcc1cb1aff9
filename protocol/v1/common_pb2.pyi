from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResponseCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUCCESS: _ClassVar[ResponseCode]
    SYSTEM_ERROR: _ClassVar[ResponseCode]
    SYSTEM_BUSY: _ClassVar[ResponseCode]
    REQUEST_CODE_NOT_SUPPORTED: _ClassVar[ResponseCode]
    FLUSH_DISK_TIMEOUT: _ClassVar[ResponseCode]
    SLAVE_NOT_AVAILABLE: _ClassVar[ResponseCode]
    FLUSH_SLAVE_TIMEOUT: _ClassVar[ResponseCode]
    MESSAGE_ILLEGAL: _ClassVar[ResponseCode]
    SERVICE_NOT_AVAILABLE: _ClassVar[ResponseCode]
    VERSION_NOT_SUPPORTED: _ClassVar[ResponseCode]
    NO_PERMISSION: _ClassVar[ResponseCode]
    TOPIC_NOT_EXIST: _ClassVar[ResponseCode]
    TOPIC_EXIST_ALREADY: _ClassVar[ResponseCode]
    PULL_NOT_FOUND: _ClassVar[ResponseCode]
    PULL_RETRY_IMMEDIATELY: _ClassVar[ResponseCode]
    PULL_OFFSET_MOVED: _ClassVar[ResponseCode]
    QUERY_NOT_FOUND: _ClassVar[ResponseCode]
    SUBSCRIPTION_PARSE_FAILED: _ClassVar[ResponseCode]
    SUBSCRIPTION_NOT_EXIST: _ClassVar[ResponseCode]
    SUBSCRIPTION_NOT_LATEST: _ClassVar[ResponseCode]
    SUBSCRIPTION_GROUP_NOT_EXIST: _ClassVar[ResponseCode]
    INVALID_PARAMETER: _ClassVar[ResponseCode]
    NO_MESSAGE: _ClassVar[ResponseCode]
    FLOW_CONTROL: _ClassVar[ResponseCode]
    CHANNEL_NOT_FOUND: _ClassVar[ResponseCode]
    QUEUE_FENCED: _ClassVar[ResponseCode]
    QUEUE_HELD_BY_OTHER: _ClassVar[ResponseCode]

class ConsumeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_TYPE_UNSPECIFIED: _ClassVar[ConsumeType]
    CONSUME_ACTIVELY: _ClassVar[ConsumeType]
    CONSUME_PASSIVELY: _ClassVar[ConsumeType]

class MessageModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_MODEL_UNSPECIFIED: _ClassVar[MessageModel]
    CLUSTERING: _ClassVar[MessageModel]
    BROADCASTING: _ClassVar[MessageModel]

class ConsumeFromWhere(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_FROM_WHERE_UNSPECIFIED: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_LAST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_FIRST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_TIMESTAMP: _ClassVar[ConsumeFromWhere]
SUCCESS: ResponseCode
SYSTEM_ERROR: ResponseCode
SYSTEM_BUSY: ResponseCode
REQUEST_CODE_NOT_SUPPORTED: ResponseCode
FLUSH_DISK_TIMEOUT: ResponseCode
SLAVE_NOT_AVAILABLE: ResponseCode
FLUSH_SLAVE_TIMEOUT: ResponseCode
MESSAGE_ILLEGAL: ResponseCode
SERVICE_NOT_AVAILABLE: ResponseCode
VERSION_NOT_SUPPORTED: ResponseCode
NO_PERMISSION: ResponseCode
TOPIC_NOT_EXIST: ResponseCode
TOPIC_EXIST_ALREADY: ResponseCode
PULL_NOT_FOUND: ResponseCode
PULL_RETRY_IMMEDIATELY: ResponseCode
PULL_OFFSET_MOVED: ResponseCode
QUERY_NOT_FOUND: ResponseCode
SUBSCRIPTION_PARSE_FAILED: ResponseCode
SUBSCRIPTION_NOT_EXIST: ResponseCode
SUBSCRIPTION_NOT_LATEST: ResponseCode
SUBSCRIPTION_GROUP_NOT_EXIST: ResponseCode
INVALID_PARAMETER: ResponseCode
NO_MESSAGE: ResponseCode
FLOW_CONTROL: ResponseCode
CHANNEL_NOT_FOUND: ResponseCode
QUEUE_FENCED: ResponseCode
QUEUE_HELD_BY_OTHER: ResponseCode
CONSUME_TYPE_UNSPECIFIED: ConsumeType
CONSUME_ACTIVELY: ConsumeType
CONSUME_PASSIVELY: ConsumeType
MESSAGE_MODEL_UNSPECIFIED: MessageModel
CLUSTERING: MessageModel
BROADCASTING: MessageModel
CONSUME_FROM_WHERE_UNSPECIFIED: ConsumeFromWhere
CONSUME_FROM_LAST_OFFSET: ConsumeFromWhere
CONSUME_FROM_FIRST_OFFSET: ConsumeFromWhere
CONSUME_FROM_TIMESTAMP: ConsumeFromWhere

class MessageQueue(_message.Message):
    __slots__ = ("topic", "broker_name", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    broker_name: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "order")
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    order: bool
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ..., order: _Optional[bool] = ...) -> None: ...

class QueueData(_message.Message):
    __slots__ = ("broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    def __init__(self, broker_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ...) -> None: ...

class BrokerData(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_addrs", "remoting_addrs")
    class BrokerAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class RemotingAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDRS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_addrs: _containers.ScalarMap[int, str]
    remoting_addrs: _containers.ScalarMap[int, str]
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addrs: _Optional[_Mapping[int, str]] = ..., remoting_addrs: _Optional[_Mapping[int, str]] = ...) -> None: ...

class TopicRouteData(_message.Message):
    __slots__ = ("queue_datas", "broker_datas", "order_topic_conf")
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_DATAS_FIELD_NUMBER: _ClassVar[int]
    ORDER_TOPIC_CONF_FIELD_NUMBER: _ClassVar[int]
    queue_datas: _containers.RepeatedCompositeFieldContainer[QueueData]
    broker_datas: _containers.RepeatedCompositeFieldContainer[BrokerData]
    order_topic_conf: str
    def __init__(self, queue_datas: _Optional[_Iterable[_Union[QueueData, _Mapping]]] = ..., broker_datas: _Optional[_Iterable[_Union[BrokerData, _Mapping]]] = ..., order_topic_conf: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("topic", "body", "tags", "keys", "flag", "properties", "delay_time_level")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    DELAY_TIME_LEVEL_FIELD_NUMBER: _ClassVar[int]
    topic: str
    body: bytes
    tags: str
    keys: str
    flag: int
    properties: _containers.ScalarMap[str, str]
    delay_time_level: int
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ..., tags: _Optional[str] = ..., keys: _Optional[str] = ..., flag: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., delay_time_level: _Optional[int] = ...) -> None: ...

class MessageExt(_message.Message):
    __slots__ = ("topic", "body", "tags", "keys", "flag", "properties", "broker_name", "queue_id", "queue_offset", "commit_log_offset", "msg_id", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times", "store_size", "body_crc")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    STORE_SIZE_FIELD_NUMBER: _ClassVar[int]
    BODY_CRC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    body: bytes
    tags: str
    keys: str
    flag: int
    properties: _containers.ScalarMap[str, str]
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    store_size: int
    body_crc: int
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ..., tags: _Optional[str] = ..., keys: _Optional[str] = ..., flag: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commit_log_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., born_timestamp: _Optional[int] = ..., born_host: _Optional[str] = ..., store_timestamp: _Optional[int] = ..., store_host: _Optional[str] = ..., reconsume_times: _Optional[int] = ..., store_size: _Optional[int] = ..., body_crc: _Optional[int] = ...) -> None: ...

class SubscriptionData(_message.Message):
    __slots__ = ("topic", "sub_string", "tags_set", "code_set", "sub_version", "expression_type")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUB_STRING_FIELD_NUMBER: _ClassVar[int]
    TAGS_SET_FIELD_NUMBER: _ClassVar[int]
    CODE_SET_FIELD_NUMBER: _ClassVar[int]
    SUB_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    sub_string: str
    tags_set: _containers.RepeatedScalarFieldContainer[str]
    code_set: _containers.RepeatedScalarFieldContainer[int]
    sub_version: int
    expression_type: str
    def __init__(self, topic: _Optional[str] = ..., sub_string: _Optional[str] = ..., tags_set: _Optional[_Iterable[str]] = ..., code_set: _Optional[_Iterable[int]] = ..., sub_version: _Optional[int] = ..., expression_type: _Optional[str] = ...) -> None: ...

class ConsumerData(_message.Message):
    __slots__ = ("group_name", "consume_type", "message_model", "consume_from_where", "subscription_data_set", "unit_mode")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_DATA_SET_FIELD_NUMBER: _ClassVar[int]
    UNIT_MODE_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    unit_mode: bool
    def __init__(self, group_name: _Optional[str] = ..., consume_type: _Optional[_Union[ConsumeType, str]] = ..., message_model: _Optional[_Union[MessageModel, str]] = ..., consume_from_where: _Optional[_Union[ConsumeFromWhere, str]] = ..., subscription_data_set: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ..., unit_mode: _Optional[bool] = ...) -> None: ...

class ProducerData(_message.Message):
    __slots__ = ("group_name",)
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    def __init__(self, group_name: _Optional[str] = ...) -> None: ...

class HeartbeatData(_message.Message):
    __slots__ = ("client_id", "producer_data_set", "consumer_data_set")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_DATA_SET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_DATA_SET_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    producer_data_set: _containers.RepeatedCompositeFieldContainer[ProducerData]
    consumer_data_set: _containers.RepeatedCompositeFieldContainer[ConsumerData]
    def __init__(self, client_id: _Optional[str] = ..., producer_data_set: _Optional[_Iterable[_Union[ProducerData, _Mapping]]] = ..., consumer_data_set: _Optional[_Iterable[_Union[ConsumerData, _Mapping]]] = ...) -> None: ...
