from aiorocketmq.protocol.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeleteTopicInNamesrvRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class DeleteTopicInNamesrvResponse(_message.Message):
    __slots__ = ("existed",)
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    def __init__(self, existed: _Optional[bool] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "ha_server_addr", "topic_configs", "data_version", "heartbeat_timeout_millis", "remoting_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    topic_configs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConfig]
    data_version: int
    heartbeat_timeout_millis: int
    remoting_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ..., topic_configs: _Optional[_Iterable[_Union[_common_pb2.TopicConfig, _Mapping]]] = ..., data_version: _Optional[int] = ..., heartbeat_timeout_millis: _Optional[int] = ..., remoting_addr: _Optional[str] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("master_addr", "ha_server_addr")
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    master_addr: str
    ha_server_addr: str
    def __init__(self, master_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetRouteInfoByTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GetBrokerClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerLiveInfo(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_id", "broker_addr", "last_update_timestamp", "data_version", "remoting_addr")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_update_timestamp: int
    data_version: int
    remoting_addr: str
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., last_update_timestamp: _Optional[int] = ..., data_version: _Optional[int] = ..., remoting_addr: _Optional[str] = ...) -> None: ...

class BrokerNames(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ClusterInfo(_message.Message):
    __slots__ = ("broker_addr_table", "cluster_addr_table", "live_brokers")
    class BrokerAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _common_pb2.BrokerData
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_common_pb2.BrokerData, _Mapping]] = ...) -> None: ...
    class ClusterAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BrokerNames
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BrokerNames, _Mapping]] = ...) -> None: ...
    BROKER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    LIVE_BROKERS_FIELD_NUMBER: _ClassVar[int]
    broker_addr_table: _containers.MessageMap[str, _common_pb2.BrokerData]
    cluster_addr_table: _containers.MessageMap[str, BrokerNames]
    live_brokers: _containers.RepeatedCompositeFieldContainer[BrokerLiveInfo]
    def __init__(self, broker_addr_table: _Optional[_Mapping[str, _common_pb2.BrokerData]] = ..., cluster_addr_table: _Optional[_Mapping[str, BrokerNames]] = ..., live_brokers: _Optional[_Iterable[_Union[BrokerLiveInfo, _Mapping]]] = ...) -> None: ...

class GetAllTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicList(_message.Message):
    __slots__ = ("topic_list",)
    TOPIC_LIST_FIELD_NUMBER: _ClassVar[int]
    topic_list: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topic_list: _Optional[_Iterable[str]] = ...) -> None: ...
