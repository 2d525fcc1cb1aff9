"""A send's batch body: RocketMQ's MessageBatch encoding, and the broker's pass over it.

RocketMQ's producer sends a batch as one body, its messages encoded back to back, and the
broker turns that body into commit-log records in one pass (``CommitLog.MessageExtEncoder``).
``SendMessageRequest.batch_body`` is that body. Rules:

- One item per message (RocketMQ's ``MessageDecoder.encodeMessage``), big-endian::

      0  TOTALSIZE   int32   the item
      4  MAGICCODE   int32   0
      8  BODYCRC     int32   0 (the broker computes the CRC)
     12  FLAG        int32
     16  BODY        int32 length + bytes
      .  PROPERTIES  int16 length + UTF-8 ``key\\x01value\\x02`` pairs: the message's own, TAGS,
                     KEYS and DELAY (``encode_batch`` writes them in that order)

- ``build_records`` (broker): the records and consume-queue units of a batch, when every item
  is well formed, its body 1..``max_body`` bytes, and its properties well formed with no delay
  level (``property_code``); otherwise None, and the broker decodes the batch into messages
  (``decode_batch``, whose errors name the item) and takes its general path, which also delays
  and checks everything else. The records are exactly those of ``aiorocketmq.protocol.record``'s
  ``RecordBatchEncoder``, with the properties stored as the producer encoded them.
- ``aiorocketmq.protocol._speedups.build_records`` is the same function in C, used when it was built
  (set ``AIOROCKETMQ_NO_EXTENSIONS=1`` to use this module's); the tests compare the two.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from aiorocketmq.protocol.errors import MessageIllegal
from aiorocketmq.protocol.message import Message, MessageConst
from aiorocketmq.protocol.record import (
    MESSAGE_MAGIC_CODE,
    batch_header,
    decode_properties,
    encode_properties,
)
from aiorocketmq.protocol.tags import java_string_hash

__all__ = [
    "ITEM_FIXED_SIZE",
    "MAX_PROPERTIES_LENGTH",
    "batch_item",
    "build_records",
    "build_records_py",
    "decode_batch",
    "encode_batch",
    "message_properties",
    "property_code",
]

ITEM_FIXED_SIZE = 22
"""An item's size less its body and properties."""
MAX_PROPERTIES_LENGTH = 32767  # an int16 length
_ITEM_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLEN
_I16 = struct.Struct(">h")
_CQ_UNIT = struct.Struct(">qiq")  # the consume queue's entry: offset, size, tags code

BuildResult = tuple[int, bytes, bytes, list[int], list[int], bool]
"""(end position, records, consume-queue units, record positions, distinct tags codes, whether
a record has a KEYS or UNIQ_KEY property: what the key index reads)."""

_KEY_NAMES = (b"KEYS", b"UNIQ_KEY")


def _names_a_key(properties: bytes) -> bool:
    """Whether ``name\x01value\x02`` properties name KEYS or UNIQ_KEY (read as the C module
    reads them: a name runs to the next ``\x01``, its value to the next ``\x02``)."""
    at = 0
    while (sep := properties.find(b"\x01", at)) >= 0:
        if properties[at:sep] in _KEY_NAMES:
            return True
        at = properties.find(b"\x02", sep) + 1
        if at == 0:
            break
    return False


# ---- the producer's side ------------------------------------------------------------------------
def message_properties(message: Message) -> bytes:
    """A message's properties as stored: its own, then TAGS, KEYS and DELAY."""
    if not (message.properties or message.tags or message.keys or message.delay_time_level > 0):
        return b""
    merged = dict(message.properties)
    if message.tags:
        merged[MessageConst.PROPERTY_TAGS] = message.tags
    if message.keys:
        merged[MessageConst.PROPERTY_KEYS] = message.keys
    if message.delay_time_level > 0:
        merged[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(message.delay_time_level)
    return encode_properties(merged).encode() if merged else b""


def _item_parts(body: bytes, properties: bytes, flag: int) -> tuple[bytes, bytes, bytes, bytes]:
    """One item's pieces, to be joined (a whole batch body is joined once, not item by item)."""
    return (
        _ITEM_HEAD.pack(ITEM_FIXED_SIZE + len(body) + len(properties), 0, 0, flag, len(body)),
        body,
        _I16.pack(len(properties)),
        properties,
    )


def batch_item(body: bytes, properties: bytes, flag: int) -> bytes:
    """One message's item of a batch body, its properties already encoded."""
    return b"".join(_item_parts(body, properties, flag))


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The batch body of ``messages`` (their topic travels in the request); in C when built.

    ``MessageIllegal`` when a message's properties do not fit the int16 length.
    """
    if _c_encode_batch is not None:
        if not isinstance(messages, list | tuple):
            messages = list(messages)
        body: bytes | None = _c_encode_batch(messages, message_properties, MAX_PROPERTIES_LENGTH)
        if body is not None:
            return body
    return encode_batch_py(messages)


def encode_batch_py(messages: Iterable[Message]) -> bytes:
    """``encode_batch`` in Python (and where the C one declines: it names the fault)."""
    parts: list[bytes] = []
    for index, message in enumerate(messages):
        properties = message_properties(message)
        if len(properties) > MAX_PROPERTIES_LENGTH:
            raise MessageIllegal(
                f"messages[{index}]: message properties are {len(properties)} bytes, over the "
                f"limit {MAX_PROPERTIES_LENGTH}"
            )
        parts.extend(_item_parts(message.body, properties, message.flag))
    return b"".join(parts)


# ---- the broker's side ---------------------------------------------------------------------------
def _items(batch: bytes) -> Iterator[tuple[int, int, int, int]]:
    """``(position, TOTALSIZE, FLAG, body length)`` of each item; ``MessageIllegal`` names the
    first malformed one (sizes that do not add up)."""
    n, pos, index = len(batch), 0, 0
    while pos < n:
        if n - pos < ITEM_FIXED_SIZE:
            raise MessageIllegal(f"batch_body item {index}: truncated ({n - pos} bytes left)")
        total, _, _, flag, body_length = _ITEM_HEAD.unpack_from(batch, pos)
        if not (ITEM_FIXED_SIZE <= total <= n - pos) or not (
            0 <= body_length <= total - ITEM_FIXED_SIZE
        ):
            raise MessageIllegal(
                f"batch_body item {index}: bad sizes (total {total}, body {body_length}, "
                f"{n - pos} bytes left)"
            )
        properties_length = _I16.unpack_from(batch, pos + 20 + body_length)[0]
        if properties_length != total - ITEM_FIXED_SIZE - body_length:
            raise MessageIllegal(
                f"batch_body item {index}: properties length {properties_length} does not "
                f"match the item's size {total}"
            )
        yield pos, total, flag, body_length
        pos += total
        index += 1


def _properties(raw: bytes) -> dict[str, str]:
    """Properties that are UTF-8 ``key\\x01value\\x02`` pairs with distinct keys.

    ``ValueError`` says what they are not.
    """
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise ValueError("properties are not UTF-8") from e
    properties = decode_properties(text)
    if encode_properties(properties) != text:
        raise ValueError("properties are not key\\x01value\\x02 pairs with distinct keys")
    return properties


def property_code(raw: bytes) -> int | None:
    """The tags code (consume-queue tag hash) of well-formed properties with no delay level.

    None when the properties are not UTF-8, not ``key\\x01value\\x02`` pairs with distinct
    keys, or carry a delay level: the general path looks at those.
    """
    try:
        properties = _properties(raw)
    except ValueError:
        return None
    if MessageConst.PROPERTY_DELAY_TIME_LEVEL in properties:
        return None
    tags = properties.get(MessageConst.PROPERTY_TAGS)
    return java_string_hash(tags) if tags else 0


def build_records_py(
    batch: bytes,
    queue_id: int,
    queue_offset: int,
    position: int,
    middle: bytes,
    topic_part: bytes,
    max_body: int,
    code_of: Callable[[bytes], int | None],
    cache: dict[bytes, int | None],
) -> BuildResult | None:
    """The records of a batch from ``position`` on (``RecordBatchEncoder``'s layout), or None.

    ``middle`` is the record's part from SYSFLAG to the prepared transaction offset and
    ``topic_part`` the topic with its length, both the same for the whole batch.
    """
    items: list[tuple[int, bytes, bytes, int]] = []  # flag, body, properties, tags code
    keyed = False
    try:
        for pos, total, flag, body_length in _items(batch):
            if not 1 <= body_length <= max_body:
                return None
            properties = batch[pos + 22 + body_length : pos + total]
            code = 0
            if properties:
                keyed = keyed or _names_a_key(properties)
                if properties in cache:
                    answer = cache[properties]
                else:
                    answer = code_of(properties)
                    if len(cache) < 1024:
                        cache[properties] = answer
                if answer is None:
                    return None
                code = answer
            items.append((flag, batch[pos + 20 : pos + 20 + body_length], properties, code))
    except MessageIllegal:
        return None
    if not items:
        return None
    header = batch_header(len(middle))
    parts: list[bytes] = []
    units: list[bytes] = []
    placed: list[int] = []
    codes: dict[int, None] = {}
    for flag, body, properties, code in items:
        size = header.size + len(body) + len(topic_part) + 2 + len(properties)
        parts += (
            header.pack(
                size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag,
                queue_offset, position, middle, len(body),
            ),
            body,
            topic_part,
            _I16.pack(len(properties)),
            properties,
        )
        units.append(_CQ_UNIT.pack(position, size, code))
        placed.append(position)
        codes.setdefault(code)
        queue_offset += 1
        position += size
    return position, b"".join(parts), b"".join(units), placed, list(codes), keyed


def decode_batch(batch: bytes, topic: str) -> list[Message]:
    """The messages of a batch body; ``MessageIllegal`` names the first malformed item."""
    messages: list[Message] = []
    for pos, total, flag, body_length in _items(batch):
        index = len(messages)
        try:
            properties = _properties(batch[pos + 22 + body_length : pos + total])
        except ValueError as e:
            raise MessageIllegal(f"batch_body item {index}: {e}") from e
        tags = properties.pop(MessageConst.PROPERTY_TAGS, None) or None
        keys = properties.pop(MessageConst.PROPERTY_KEYS, None) or None
        delay = properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0")
        try:
            delay_time_level = int(delay)
        except ValueError as e:
            raise MessageIllegal(f"batch_body item {index}: DELAY {delay!r} is not a level") from e
        messages.append(
            Message(
                topic,
                batch[pos + 20 : pos + 20 + body_length],
                tags=tags,
                keys=keys,
                flag=flag,
                properties=properties,
                delay_time_level=delay_time_level,
            )
        )
    return messages


def _from_c(name: str) -> Any:
    """The C module's function ``name``, or None when it is not built or switched off."""
    from aiorocketmq.protocol.record import _speedups

    return None if _speedups is None else getattr(_speedups, name)


_Encoder = Callable[[Sequence[Message], Callable[[Message], bytes], int], bytes | None]

build_records: Callable[..., BuildResult | None] = _from_c("build_records") or build_records_py
"""``build_records_py``, in C when ``aiorocketmq.protocol._speedups`` was built."""

_c_encode_batch: _Encoder | None = _from_c("encode_batch")
"""``encode_batch`` in C, when ``aiorocketmq.protocol._speedups`` was built."""
