"""The data path in remoting frames: sends and pulls, both ends, free of I/O.

Apache's clients send SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (10, 310, 320) and
PULL_MESSAGE (11) with RocketMQ's request headers. The broker reads each into the protobuf
request of the matching RPC (``send_request``, ``pull_request``), so one processor serves both
protocols, and writes the processor's answer back as RocketMQ's response (``send_answer``,
``pull_answer``).

Our own clients, set to ``data_transport="remoting"``, send the same two codes (320 and 11)
with RocketMQ's headers (``send_command``, ``pull_command``) and read the answers back into the
protobuf responses the rest of the client already handles (``send_response``,
``pull_response``). What RocketMQ's headers cannot say travels in ext fields of ours, which a
broker that does not know them ignores (as Java's header decoding ignores unknown fields):

- ``compactResult`` (send): the answer's body is the stored messages' commit log offsets (int64
  big-endian each), with ``storeHost`` (the address in their records) and the first queue
  offset, instead of a comma-joined list of message ids: the producer makes the ids, as it does
  from gRPC's compact result (a batch with delayed messages, each stored in its delay level's
  queue, answers ``msgIds`` and ``queueOffsets`` per message instead, as gRPC's results);
- ``bornHost`` (send): the producer's host, as gRPC's request carries it (else the
  connection's peer address);
- ``rawRecords`` (pull): the body is the stored records as they are (gRPC's ``raw_records``),
  not rewritten as version 1 for Apache's clients;
- ``epoch``, ``clientId``, ``minMsgNums``, ``maxWaitMillis``, ``watch``, ``channelId`` (pull):
  ``PullMessageRequest``'s fields of the same meaning (the fenced handoff, the pull's minimum,
  the watch of an idle queue), and ``watching`` in the answer;
- ``errorType`` (any error response of our servers): the typed error's class, where the
  response code alone is ambiguous (``MessageTooLarge`` and ``MessageIllegal`` share one).
"""

from __future__ import annotations

import sys
import zlib
from array import array

from aiorocketmq.protocol.batch import batch_item
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.errors import (
    ERROR_TYPE_FIELD,
    InvalidArgument,
    MQError,
    from_response_code,
)
from aiorocketmq.protocol.record import create_message_ids
from aiorocketmq.protocol.remoting.command import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand
from aiorocketmq.protocol.remoting.fields import Fields, send_fields
from aiorocketmq.protocol.remoting.records import to_v1_records
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = [
    "PULL_MAX_BYTES",
    "PULL_RESPONSE_CODES",
    "pull_answer",
    "pull_command",
    "pull_request",
    "pull_response",
    "send_answer",
    "send_command",
    "send_request",
    "send_response",
]

# The most a pull over remoting asks for, in record bytes: half the frame limit.
PULL_MAX_BYTES = DEFAULT_MAX_FRAME_LENGTH // 2
# PullStatus -> the response code a remoting pull answers, and back.
PULL_RESPONSE_CODES = {
    broker_pb2.FOUND: ResponseCode.SUCCESS,
    broker_pb2.NO_NEW_MSG: ResponseCode.PULL_NOT_FOUND,
    broker_pb2.NO_MATCHED_MSG: ResponseCode.PULL_RETRY_IMMEDIATELY,
    broker_pb2.OFFSET_ILLEGAL: ResponseCode.PULL_OFFSET_MOVED,
}
_PULL_STATUS = {int(code): status for status, code in PULL_RESPONSE_CODES.items()}
# SendStatus -> response code (all four mean "stored"), and back.
_SEND_RESPONSE_CODES = {
    broker_pb2.SEND_OK: ResponseCode.SUCCESS,
    broker_pb2.FLUSH_DISK_TIMEOUT_STATUS: ResponseCode.FLUSH_DISK_TIMEOUT,
    broker_pb2.FLUSH_SLAVE_TIMEOUT_STATUS: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    broker_pb2.SLAVE_NOT_AVAILABLE_STATUS: ResponseCode.SLAVE_NOT_AVAILABLE,
}
_SEND_STATUS = {int(code): status for status, code in _SEND_RESPONSE_CODES.items()}
# MessageSysFlag
_COMPRESSED_FLAG = 0x1
# PullSysFlag
_PULL_COMMIT_OFFSET = 0x1
_PULL_SUSPEND = 0x2
_PULL_SUBSCRIPTION = 0x4
_TRUE = "true"


_SWAP = sys.byteorder == "little"  # the wire is big-endian


def _offsets_body(offsets: list[int]) -> bytes:
    """Commit log offsets as int64 big-endian, back to back."""
    packed = array("q", offsets)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def _offsets_of(body: bytes) -> array[int]:
    if len(body) % 8:
        raise MQError(f"a compact send answer of {len(body)} bytes is not int64 offsets")
    offsets = array("q", body)
    if _SWAP:
        offsets.byteswap()
    return offsets


def _error(cmd: RemotingCommand) -> MQError:
    """The typed error of a response that is not an answer (its class named by our servers)."""
    return from_response_code(
        cmd.code, cmd.remark or f"response code {cmd.code}", cmd.ext_fields.get(ERROR_TYPE_FIELD)
    )


# ---- sends -------------------------------------------------------------------------------------
def send_command(request: broker_pb2.SendMessageRequest) -> RemotingCommand:
    """A client's SEND_BATCH_MESSAGE (320) of ``request``'s batch body, compact answer asked."""
    return RemotingCommand(
        code=RequestCode.SEND_BATCH_MESSAGE,
        language="PYTHON",
        ext_fields={
            "a": request.producer_group,
            "b": request.topic,
            "c": "TBW102",
            "d": "4",
            "e": str(request.queue_id),
            "f": "0",
            "g": str(request.born_timestamp),
            "h": "0",
            "i": "",
            "j": str(request.reconsume_times),
            "k": "false",
            "l": str(request.max_reconsume_times),
            "m": _TRUE,
            "compactResult": _TRUE if request.compact_result else "false",
            "bornHost": request.born_host,
        },
        body=request.batch_body,
    )


def send_request(cmd: RemotingCommand, born_host: str) -> broker_pb2.SendMessageRequest:
    """The broker's reading of SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) or SEND_BATCH_MESSAGE
    (320, or 10/310 with ``batch``): one message or a batch body."""
    f = send_fields(cmd.ext_fields, cmd.code)
    batch = cmd.code == RequestCode.SEND_BATCH_MESSAGE or f.boolean("batch", False)
    if batch:
        body = cmd.body
    else:
        payload = cmd.body
        if f.integer("sysFlag", 0) & _COMPRESSED_FLAG:
            try:
                payload = zlib.decompress(payload)
            except zlib.error as e:
                raise InvalidArgument(
                    f"the compressed message body does not inflate: {e}"
                ) from None
        properties = f.string("properties", "").encode()
        body = batch_item(payload, properties, f.integer("flag", 0))
    return broker_pb2.SendMessageRequest(
        producer_group=f.string("producerGroup", ""),
        topic=f.string("topic"),
        queue_id=f.integer("queueId", -1),
        batch_body=body,
        born_host=f.string("bornHost", "") or born_host,
        born_timestamp=f.integer("bornTimestamp", 0),
        reconsume_times=f.integer("reconsumeTimes", 0),
        max_reconsume_times=f.integer("maxReconsumeTimes", 0),
        compact_result=True,
    )


def send_answer(
    cmd: RemotingCommand,
    answer: broker_pb2.SendMessageResponse,
    store_host: tuple[bytes, int],
) -> RemotingCommand:
    """The broker's response to a send: the message ids (made from ``store_host``, the remoting
    address Apache's clients know the broker by), or the compact answer when asked."""
    if answer.results:  # a batch with delayed messages answers per message
        first = answer.results[0].queue_offset
        offsets = [r.commit_log_offset for r in answer.results]
    else:
        first = answer.first_queue_offset
        offsets = list(answer.commit_log_offsets)
    code = _SEND_RESPONSE_CODES.get(answer.send_status, ResponseCode.SUCCESS)
    ext = {"queueId": str(answer.message_queue.queue_id), "queueOffset": str(first)}
    if Fields(cmd.ext_fields).boolean("compactResult", False):
        if answer.results:  # delayed messages, each in its schedule queue: one by one
            ext["msgIds"] = ",".join(r.msg_id for r in answer.results)
            ext["queueOffsets"] = ",".join(str(r.queue_offset) for r in answer.results)
        else:
            ext["storeHost"] = answer.store_host
        return cmd.response(code, ext_fields=ext, body=_offsets_body(offsets))
    ext["msgId"] = ",".join(create_message_ids(*store_host, offsets))
    ext["MSG_REGION"] = "DefaultRegion"
    ext["TRACE_ON"] = _TRUE
    return cmd.response(code, ext_fields=ext)


def send_response(
    cmd: RemotingCommand, request: broker_pb2.SendMessageRequest, broker_name: str
) -> broker_pb2.SendMessageResponse:
    """A client's reading of the compact answer to ``send_command(request)``; an error
    response raises its typed ``MQError``."""
    status = _SEND_STATUS.get(cmd.code)
    if status is None:
        raise _error(cmd)
    f = Fields(cmd.ext_fields)
    response = broker_pb2.SendMessageResponse(
        send_status=status,
        first_queue_offset=f.integer("queueOffset", -1),
        store_host=f.string("storeHost", ""),
    )
    queue = response.message_queue
    queue.topic, queue.broker_name = request.topic, broker_name
    queue.queue_id = f.integer("queueId", request.queue_id)
    offsets = _offsets_of(cmd.body)
    ids = f.string("msgIds", "")
    if not ids:
        response.commit_log_offsets.extend(offsets)
        return response
    # Per message (a batch with delayed messages), as gRPC's results.
    id_list, queue_offsets = ids.split(","), f.string("queueOffsets", "").split(",")
    if not len(id_list) == len(queue_offsets) == len(offsets):
        raise MQError(
            f"a send answer names {len(id_list)} ids, {len(queue_offsets)} queue offsets and "
            f"{len(offsets)} commit log offsets"
        )
    try:
        for msg_id, queue_offset, offset in zip(id_list, queue_offsets, offsets, strict=True):
            response.results.add(
                msg_id=msg_id, queue_offset=int(queue_offset), commit_log_offset=offset
            )
    except ValueError:
        raise MQError(f"a send answer's queue offsets are not numbers: {queue_offsets}") from None
    return response


# ---- pulls -------------------------------------------------------------------------------------
def pull_command(request: broker_pb2.PullMessageRequest) -> RemotingCommand:
    """A client's PULL_MESSAGE (11) of ``request``, its records asked for as stored."""
    sys_flag = (
        (_PULL_COMMIT_OFFSET if request.commit_offset_enabled else 0)
        | (_PULL_SUSPEND if request.suspend else 0)
        | (_PULL_SUBSCRIPTION if request.has_subscription else 0)
    )
    ext = {
        "consumerGroup": request.consumer_group,
        "topic": request.topic,
        "queueId": str(request.queue_id),
        "queueOffset": str(request.queue_offset),
        "maxMsgNums": str(request.max_msg_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(request.commit_offset),
        "suspendTimeoutMillis": str(request.suspend_timeout_millis),
        "subscription": request.sub_expression,
        "subVersion": str(request.sub_version),
        "expressionType": request.expression_type or "TAG",
        "rawRecords": _TRUE,
    }
    # The answer must fit a frame: the bodies asked for are capped at half of one (the store
    # still answers a first message of any size, and a message is at most a few MiB).
    max_bytes = request.max_msg_bytes
    ext["maxMsgBytes"] = str(max_bytes if 0 < max_bytes <= PULL_MAX_BYTES else PULL_MAX_BYTES)
    if request.epoch:
        ext["epoch"] = str(request.epoch)
    if request.client_id:
        ext["clientId"] = request.client_id
    if request.min_msg_nums > 1:
        ext["minMsgNums"] = str(request.min_msg_nums)
        ext["maxWaitMillis"] = str(request.max_wait_millis)
    if request.watch:
        ext["watch"] = _TRUE
        ext["channelId"] = request.channel_id
    return RemotingCommand(code=RequestCode.PULL_MESSAGE, language="PYTHON", ext_fields=ext)


def pull_request(f: Fields) -> broker_pb2.PullMessageRequest:
    """The broker's reading of PULL_MESSAGE (11, and 361), ours ext fields included."""
    sys_flag = f.integer("sysFlag", 0)
    return broker_pb2.PullMessageRequest(
        consumer_group=f.string("consumerGroup"),
        topic=f.string("topic"),
        queue_id=f.integer("queueId"),
        queue_offset=f.integer("queueOffset"),
        max_msg_nums=f.integer("maxMsgNums"),
        max_msg_bytes=max(f.integer("maxMsgBytes", 0), 0),
        commit_offset_enabled=bool(sys_flag & _PULL_COMMIT_OFFSET),
        commit_offset=f.integer("commitOffset", 0),
        suspend=bool(sys_flag & _PULL_SUSPEND),
        suspend_timeout_millis=f.integer("suspendTimeoutMillis", 0),
        has_subscription=bool(sys_flag & _PULL_SUBSCRIPTION),
        sub_expression=f.string("subscription", "*"),
        expression_type=f.string("expressionType", "TAG"),
        sub_version=f.integer("subVersion", 0),
        epoch=f.integer("epoch", 0),
        client_id=f.string("clientId", ""),
        raw_records=True,
        min_msg_nums=f.integer("minMsgNums", 0),
        max_wait_millis=f.integer("maxWaitMillis", 0),
        watch=f.boolean("watch", False),
        channel_id=f.string("channelId", ""),
    )


def pull_answer(
    cmd: RemotingCommand,
    answer: broker_pb2.PullMessageResponse,
    store_host: tuple[bytes, int],
) -> RemotingCommand:
    """The broker's response to a pull: the records as stored when the client asked for them
    (``rawRecords``), else as version 1 with ``store_host`` (Apache's clients)."""
    code = PULL_RESPONSE_CODES[answer.status]
    body = b""
    if code == ResponseCode.SUCCESS:
        raw = Fields(cmd.ext_fields).boolean("rawRecords", False)
        body = answer.records if raw else to_v1_records(answer.records, store_host)
    ext = {
        "suggestWhichBrokerId": str(answer.suggest_which_broker_id),
        "nextBeginOffset": str(answer.next_begin_offset),
        "minOffset": str(answer.min_offset),
        "maxOffset": str(answer.max_offset),
    }
    if answer.watching:
        ext["watching"] = _TRUE
    return cmd.response(code, ext_fields=ext, body=body)


def pull_response(cmd: RemotingCommand, broker_name: str) -> broker_pb2.PullMessageResponse:
    """A client's reading of the answer to ``pull_command``; an error response raises its
    typed ``MQError``."""
    status = _PULL_STATUS.get(cmd.code)
    if status is None:
        raise _error(cmd)
    f = Fields(cmd.ext_fields)
    return broker_pb2.PullMessageResponse(
        status=status,
        next_begin_offset=f.integer("nextBeginOffset"),
        min_offset=f.integer("minOffset", 0),
        max_offset=f.integer("maxOffset", 0),
        suggest_which_broker_id=f.integer("suggestWhichBrokerId", 0),
        records=cmd.body,
        broker_name=broker_name,
        watching=f.boolean("watching", False),
    )
