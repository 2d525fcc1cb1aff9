"""Typed errors that cross the wire as a gRPC status plus a RocketMQ response code.

A server raises one of these; ``aiorocketmq.protocol.rpc.guard`` turns it into ``context.abort`` with the
gRPC status, the message, and trailing metadata ``rocketmq-response-code``. A client turns an
``AioRpcError`` back into the same class with ``from_rpc_error``. Each message names the
problem (the topic, the field, the queue) so a user knows what to fix.
"""

from __future__ import annotations

import grpc

from aiorocketmq.protocol.codes import ResponseCode

__all__ = [
    "ERROR_TYPE_FIELD",
    "RESPONSE_CODE_KEY",
    "ChannelNotFound",
    "InvalidArgument",
    "MQError",
    "MessageIllegal",
    "MessageTooLarge",
    "NoPermission",
    "OffsetOutOfRange",
    "QueryNotFound",
    "QueueFenced",
    "QueueHeldByOther",
    "ServiceNotAvailable",
    "SubscriptionGroupNotExist",
    "SubscriptionNotExist",
    "SubscriptionNotLatest",
    "TopicNotFound",
    "from_response_code",
    "from_rpc_error",
]

RESPONSE_CODE_KEY = "rocketmq-response-code"


class MQError(Exception):
    """Base of every error this protocol reports; carries both codes."""

    response_code: ResponseCode = ResponseCode.SYSTEM_ERROR
    grpc_status: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        response_code: ResponseCode | None = None,
        grpc_status: grpc.StatusCode | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if response_code is not None:
            self.response_code = response_code
        if grpc_status is not None:
            self.grpc_status = grpc_status

    def __str__(self) -> str:
        return f"{self.message} (CODE: {int(self.response_code)} {self.response_code.name})"


class TopicNotFound(MQError):
    """The topic has no route, or does not exist on this broker."""

    response_code = ResponseCode.TOPIC_NOT_EXIST
    grpc_status = grpc.StatusCode.NOT_FOUND


class InvalidArgument(MQError):
    """A field of the request is missing or invalid; the message names it."""

    response_code = ResponseCode.INVALID_PARAMETER
    grpc_status = grpc.StatusCode.INVALID_ARGUMENT


class MessageIllegal(InvalidArgument):
    """The message itself is unacceptable (empty body, bad properties)."""

    response_code = ResponseCode.MESSAGE_ILLEGAL


class MessageTooLarge(MQError):
    """The body is over the broker's maximum message size."""

    response_code = ResponseCode.MESSAGE_ILLEGAL
    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED


class OffsetOutOfRange(MQError):
    """A queue id or offset outside what the queue has."""

    response_code = ResponseCode.INVALID_PARAMETER
    grpc_status = grpc.StatusCode.OUT_OF_RANGE


class QueryNotFound(MQError):
    """No committed offset (or no such record) for the query."""

    response_code = ResponseCode.QUERY_NOT_FOUND
    grpc_status = grpc.StatusCode.NOT_FOUND


class NoPermission(MQError):
    """The topic or broker does not allow this (read or write permission)."""

    response_code = ResponseCode.NO_PERMISSION
    grpc_status = grpc.StatusCode.PERMISSION_DENIED


class SubscriptionGroupNotExist(MQError):
    """The consumer group is unknown to this broker."""

    response_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    grpc_status = grpc.StatusCode.NOT_FOUND


class SubscriptionNotExist(MQError):
    """The group has no subscription to this topic here (heartbeat first)."""

    response_code = ResponseCode.SUBSCRIPTION_NOT_EXIST
    grpc_status = grpc.StatusCode.FAILED_PRECONDITION


class SubscriptionNotLatest(MQError):
    """The broker's copy of the subscription is older than the pull's (heartbeat again)."""

    response_code = ResponseCode.SUBSCRIPTION_NOT_LATEST
    grpc_status = grpc.StatusCode.FAILED_PRECONDITION


class ChannelNotFound(MQError):
    """The request names a channel that is not open (open one with OpenChannel first)."""

    response_code = ResponseCode.CHANNEL_NOT_FOUND
    grpc_status = grpc.StatusCode.FAILED_PRECONDITION


class QueueFenced(MQError):
    """Fenced handoff: the request's epoch is stale; the queue moved on."""

    response_code = ResponseCode.QUEUE_FENCED
    grpc_status = grpc.StatusCode.ABORTED


class QueueHeldByOther(MQError):
    """Fenced handoff: the queue is granted to another client."""

    response_code = ResponseCode.QUEUE_HELD_BY_OTHER
    grpc_status = grpc.StatusCode.FAILED_PRECONDITION


class ServiceNotAvailable(MQError):
    """The peer could not be reached or is shutting down."""

    response_code = ResponseCode.SERVICE_NOT_AVAILABLE
    grpc_status = grpc.StatusCode.UNAVAILABLE


_BY_CODE: dict[ResponseCode, type[MQError]] = {
    ResponseCode.TOPIC_NOT_EXIST: TopicNotFound,
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegal,
    ResponseCode.INVALID_PARAMETER: InvalidArgument,
    ResponseCode.QUERY_NOT_FOUND: QueryNotFound,
    ResponseCode.NO_PERMISSION: NoPermission,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: SubscriptionGroupNotExist,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: SubscriptionNotExist,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: SubscriptionNotLatest,
    ResponseCode.CHANNEL_NOT_FOUND: ChannelNotFound,
    ResponseCode.QUEUE_FENCED: QueueFenced,
    ResponseCode.QUEUE_HELD_BY_OTHER: QueueHeldByOther,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailable,
}

_BY_STATUS: dict[grpc.StatusCode, type[MQError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: OffsetOutOfRange,
    grpc.StatusCode.RESOURCE_EXHAUSTED: MessageTooLarge,
    grpc.StatusCode.UNAVAILABLE: ServiceNotAvailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: ServiceNotAvailable,
    grpc.StatusCode.CANCELLED: ServiceNotAvailable,
}


def from_rpc_error(error: grpc.aio.AioRpcError) -> MQError:
    """The typed error an RPC failure stands for (its response code decides, then its status)."""
    status = error.code()
    code: ResponseCode | None = None
    for key, value in error.trailing_metadata() or ():
        if key == RESPONSE_CODE_KEY:
            try:
                code = ResponseCode(int(value))
            except ValueError:
                code = None
    message = error.details() or status.name
    if code is ResponseCode.MESSAGE_ILLEGAL:
        cls: type[MQError] = (
            MessageTooLarge if status is grpc.StatusCode.RESOURCE_EXHAUSTED else MessageIllegal
        )
    elif code is ResponseCode.INVALID_PARAMETER and status is grpc.StatusCode.OUT_OF_RANGE:
        cls = OffsetOutOfRange
    elif code is not None and code in _BY_CODE:
        cls = _BY_CODE[code]
    else:
        cls = _BY_STATUS.get(status, MQError)
    return cls(message, response_code=code, grpc_status=status)


# Each typed error by its class name: how a remoting response of our servers names it
# (``ERROR_TYPE_FIELD``), where a response code alone is ambiguous (MESSAGE_ILLEGAL is also
# MessageTooLarge; INVALID_PARAMETER also OffsetOutOfRange).
_BY_NAME: dict[str, type[MQError]] = {
    cls.__name__: cls
    for cls in (
        TopicNotFound,
        InvalidArgument,
        MessageIllegal,
        MessageTooLarge,
        OffsetOutOfRange,
        QueryNotFound,
        NoPermission,
        SubscriptionGroupNotExist,
        SubscriptionNotExist,
        SubscriptionNotLatest,
        ChannelNotFound,
        QueueFenced,
        QueueHeldByOther,
        ServiceNotAvailable,
    )
}
#: The ext field of a remoting error response that names the error's class (ours).
ERROR_TYPE_FIELD = "errorType"


def from_response_code(code: int, message: str, error_type: str | None = None) -> MQError:
    """The typed error a response code stands for, where no gRPC status comes with it (an
    answer within a batch: ``AcquireAnswer``; a remoting response, whose ``error_type`` names
    the class when our server sent it)."""
    try:
        response_code = ResponseCode(code)
    except ValueError:
        return MQError(f"{message} (response code {code})")
    named = _BY_NAME.get(error_type or "")
    if named is not None:
        return named(message, response_code=response_code)
    return _BY_CODE.get(response_code, MQError)(message, response_code=response_code)
