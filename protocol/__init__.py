"""What every role shares: the generated wire types and RocketMQ's vocabulary."""

from protocol.client_id import build_client_id
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import MQError
from protocol.message import Message, MessageConst, MessageExt
from protocol.message_queue import MessageQueue
from protocol.perm import PermName
from protocol.validators import check_group, check_topic

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
