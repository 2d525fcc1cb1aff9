"""What every role shares: the generated wire types and RocketMQ's vocabulary."""

from aiorocketmq.protocol.client_id import build_client_id
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message import Message, MessageConst, MessageExt
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.validators import check_group, check_topic

__all__ = [
    "MQError",
    "Message",
    "MessageConst",
    "MessageExt",
    "MessageQueue",
    "PermName",
    "RequestCode",
    "ResponseCode",
    "build_client_id",
    "check_group",
    "check_topic",
]
