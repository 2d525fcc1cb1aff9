"""The commit-log record: RocketMQ's stored message format, shared by the broker and clients.

A broker stores each message as one record of this format, and a pull may answer the stored
records themselves (``PullMessageResponse.records``), as RocketMQ's pull body does: the client
decodes them with ``decode_records``. Rules:

- One record (RocketMQ's message format, version 2: the topic length is two bytes), big-endian::

      0  TOTALSIZE        int32   the whole record
      4  MAGICCODE        int32   MESSAGE_MAGIC_CODE (0xDAA320AB)
      8  BODYCRC          int32   zlib CRC32 of the body & 0x7FFFFFFF
     12  QUEUEID          int32
     16  FLAG             int32
     20  QUEUEOFFSET      int64   offset in the consume queue
     28  PHYSICALOFFSET   int64   this record's commit log offset
     36  SYSFLAG          int32   bit 4: born host is IPv6, bit 5: store host is IPv6
     40  BORNTIMESTAMP    int64   ms
     48  BORNHOST         4|16 + int32 port
      .  STORETIMESTAMP   int64   ms
      .  STOREHOST        4|16 + int32 port
      .  RECONSUMETIMES   int32
      .  PREPARED TRANSACTION OFFSET int64 (always 0 here)
      .  BODY             int32 length + bytes
      .  TOPIC            int16 length + UTF-8
      .  PROPERTIES       int16 length + UTF-8 ``key\\x01value\\x02`` pairs (TAGS, KEYS, ...)

- Records follow each other with nothing in between: a buffer of records is walked by each
  record's TOTALSIZE.
- A host is stored as its packed IP (4 bytes for IPv4, 16 for IPv6, flagged in SYSFLAG) plus a
  4-byte port. ``parse_host`` reads ``"a.b.c.d:port"``, ``"[v6]:port"`` and gRPC peer strings
  (``"ipv4:a.b.c.d:port"``, ``"ipv6:[v6]:port"``, also percent-encoded); ``format_host`` writes
  the first two forms back.
- The offset message id (``MessageDecoder.createMessageId``) is the upper-case hex of store host
  IP + port (int32) + commit log offset (int64): 32 characters for IPv4, 56 for IPv6. It names
  where the message lives, so ``decode_message_id`` is all a broker needs to look it up, and a
  producer given the store host and the commit log offsets of a send computes the same ids.
- In a decoded ``MessageExt``, TAGS and KEYS move from the properties to their own fields;
  other properties stay.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import struct
import warnings
import zlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from aiorocketmq.protocol.message import MessageConst, MessageExt

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "END_FILE_MIN_BLANK_LENGTH",
    "HOST_FLAGS",
    "MESSAGE_MAGIC_CODE",
    "MIN_RECORD_SIZE",
    "NAME_VALUE_SEPARATOR",
    "PHYSICAL_OFFSET_POS",
    "PROPERTY_SEPARATOR",
    "STOREHOSTADDRESS_V6_FLAG",
    "SYSFLAG_POS",
    "RecordBatchEncoder",
    "batch_header",
    "create_message_id",
    "create_message_ids",
    "decode_message",
    "decode_message_id",
    "decode_properties",
    "decode_records",
    "decode_records_py",
    "encode_properties",
    "find_property",
    "format_host",
    "header_struct",
    "host_sysflag",
    "iter_records",
    "parse_host",
    "record_size",
    "record_tags",
    "store_timestamp_pos",
]

MESSAGE_MAGIC_CODE = -626843477  # RocketMQ's MESSAGE_MAGIC_CODE_V2 (0xDAA320AB)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, the end-of-file blank of a commit-log segment
END_FILE_MIN_BLANK_LENGTH = 8  # TOTALSIZE + MAGICCODE of the end-of-file blank
BORNHOST_V6_FLAG = 1 << 4
STOREHOSTADDRESS_V6_FLAG = 1 << 5
HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

PHYSICAL_OFFSET_POS = 28
SYSFLAG_POS = 36
# The host flags live in SYSFLAG's lowest byte (big-endian: the int32's last byte).
_SYSFLAG_LOW_BYTE = SYSFLAG_POS + 3

_I16 = struct.Struct(">h")
_PORT_OFFSET = struct.Struct(">iq")


def header_struct(sysflag: int) -> struct.Struct:
    """The fixed part of a record, TOTALSIZE through the body length, for these host flags."""
    born = 16 if sysflag & BORNHOST_V6_FLAG else 4
    store = 16 if sysflag & STOREHOSTADDRESS_V6_FLAG else 4
    # size magic crc qid flag qoff phys sysflag born_ts born_host born_port store_ts
    # store_host store_port reconsume prepared_tx body_len
    return struct.Struct(f">iiiiiqqiq{born}siq{store}siiqi")


# The fixed part of a record up to and including the body length, per host-flag combination.
_HEADERS = {flags: header_struct(flags) for flags in (0, 0x10, 0x20, 0x30)}
MIN_RECORD_SIZE = _HEADERS[0].size + 2 + 1 + 2
"""The smallest record: an IPv4 header, an empty body, a one-byte topic, no properties."""


def store_timestamp_pos(sysflag: int) -> int:
    """Where STORETIMESTAMP lies in a record with these host flags."""
    return 48 + (20 if sysflag & BORNHOST_V6_FLAG else 8)


def host_sysflag(born_ip: bytes, store_ip: bytes) -> int:
    """The SYSFLAG bits saying which hosts are IPv6 (16-byte addresses)."""
    return (BORNHOST_V6_FLAG if len(born_ip) == 16 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(store_ip) == 16 else 0
    )


def record_size(sysflag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    """The TOTALSIZE of a record with these lengths."""
    header = _HEADERS[sysflag & HOST_FLAGS]
    return header.size + body_length + 2 + topic_length + 2 + properties_length


# ---- properties ---------------------------------------------------------------------------------
def encode_properties(properties: dict[str, str]) -> str:
    """RocketMQ's ``messageProperties2String``: ``key\\x01value\\x02`` for each pair."""
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items()
    )


def decode_properties(text: str) -> dict[str, str]:
    """RocketMQ's ``string2messageProperties``."""
    properties: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if item:
            key, _, value = item.partition(NAME_VALUE_SEPARATOR)
            properties[key] = value
    return properties


def find_property(text: str, key: str) -> str | None:
    """One property's value without building the dict."""
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name == key:
            return value
    return None


# ---- hosts and message ids ----------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def parse_host(address: str) -> tuple[bytes, int]:
    """``(packed ip, port)`` of an address; ``ValueError`` if it is not an IP address."""
    text = unquote(address.strip())
    for prefix in ("ipv4:", "ipv6:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.lstrip("/")  # Java's InetSocketAddress.toString() form "/1.2.3.4:5"
    port = 0
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise ValueError(f"bad host address {address!r}")
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"bad host address {address!r}")
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = int(port_text)
    else:  # a bare IPv4, or a bare IPv6 without a port
        host = text
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"bad port in host address {address!r}")
    return ipaddress.ip_address(host).packed, port


@functools.lru_cache(maxsize=4096)
def format_host(ip: bytes, port: int) -> str:
    """``"a.b.c.d:port"`` or ``"[v6]:port"``."""
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{ipaddress.IPv6Address(ip)}]:{port}"


def create_message_id(ip: bytes, port: int, commit_log_offset: int) -> str:
    """RocketMQ's offset message id: hex(ip + port + commit log offset), upper case."""
    return (ip + _PORT_OFFSET.pack(port, commit_log_offset)).hex().upper()


def create_message_ids(ip: bytes, port: int, commit_log_offsets: Sequence[int]) -> list[str]:
    """``create_message_id`` of each offset (one store host, as in a send's answer); in C
    when built (a producer makes one per message it sends)."""
    prefix = (ip + _PORT_OFFSET.pack(port, 0)[:4]).hex().upper()
    if _speedups is not None:
        ids: list[str] = _speedups.message_ids(prefix, commit_log_offsets)
        return ids
    return [f"{prefix}{offset:016X}" for offset in commit_log_offsets]


def decode_message_id(msg_id: str) -> tuple[str, int, int]:
    """``(host, port, commit log offset)`` of an offset message id; ``ValueError`` if bad."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"message id {msg_id!r} must be 32 or 56 hex characters")
    raw = bytes.fromhex(msg_id)
    ip_length = len(raw) - _PORT_OFFSET.size
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_length)
    return str(ipaddress.ip_address(raw[:ip_length])), port, offset


# ---- encoding -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def batch_header(middle_size: int) -> struct.Struct:
    """A batch's record header, TOTALSIZE through the body length, for a ``middle`` of this size."""
    return struct.Struct(f">iiiiiqq{middle_size}si")


class RecordBatchEncoder:
    """Builds the records of one batch: one topic and queue, one born and store host and time.

    What is the same for every record of the batch (the hosts, the timestamps, the topic) is
    packed once here, so a record is three parts: ``header.pack(size, MESSAGE_MAGIC_CODE,
    body_crc, queue_id, flag, queue_offset, physical_offset, middle, len(body))``, the body,
    and ``tail(properties)``. ``encode`` does that for a list of messages.
    """

    __slots__ = ("_tails", "fixed_size", "header", "middle", "queue_id", "sysflag", "topic_part")

    def __init__(
        self,
        *,
        topic: bytes,
        queue_id: int,
        born_timestamp: int,
        born_host: tuple[bytes, int],
        store_timestamp: int,
        store_host: tuple[bytes, int],
        reconsume_times: int,
    ) -> None:
        born_ip, born_port = born_host
        store_ip, store_port = store_host
        self.sysflag = host_sysflag(born_ip, store_ip)
        self.queue_id = queue_id
        # Everything from SYSFLAG up to the body's length is the same for the batch.
        self.middle = struct.pack(
            f">iq{len(born_ip)}siq{len(store_ip)}siiq",
            self.sysflag, born_timestamp, born_ip, born_port, store_timestamp, store_ip,
            store_port, reconsume_times, 0,
        )
        # size magic crc qid flag qoff phys <middle> body_len
        self.header = batch_header(len(self.middle))
        self.topic_part = _I16.pack(len(topic)) + topic
        self._tails: dict[bytes, bytes] = {}
        self.fixed_size = self.header.size + len(self.topic_part) + 2
        """A record's size less its body and properties."""

    def tail(self, properties: bytes) -> bytes:
        """What follows the body: the topic and the properties, with their lengths."""
        tail = self._tails.get(properties)
        if tail is None:
            tail = self.topic_part + _I16.pack(len(properties)) + properties
            if len(self._tails) < 64:
                self._tails[properties] = tail
        return tail

    def encode(
        self,
        items: Sequence[tuple[bytes, bytes, int]],
        queue_offset: int,
        position: int,
        out: list[bytes],
        placed: list[int],
    ) -> int:
        """Append the records of ``(body, properties, flag)`` items to ``out``; the next position.

        The first gets queue offset ``queue_offset`` and lies at commit-log ``position``; the
        others follow. Each record's position is appended to ``placed``.
        """
        pack = self.header.pack
        queue_id = self.queue_id
        middle = self.middle
        head_size = self.header.size
        tail_of = self.tail
        crc32 = zlib.crc32
        magic = MESSAGE_MAGIC_CODE
        add = out.append
        add_placed = placed.append
        for body, properties, flag in items:
            tail = tail_of(properties)
            body_length = len(body)
            size = head_size + body_length + len(tail)
            add(
                pack(
                    size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset, position,
                    middle, body_length,
                )
            )
            add(body)
            add(tail)
            add_placed(position)
            queue_offset += 1
            position += size
        return position


# ---- decoding -----------------------------------------------------------------------------------
def _load_speedups() -> Any:
    """``aiorocketmq.protocol._speedups`` when built and not switched off (``AIOROCKETMQ_NO_EXTENSIONS``)."""
    if os.environ.get("AIOROCKETMQ_NO_EXTENSIONS"):
        return None
    try:
        from aiorocketmq.protocol import _speedups
    except ImportError:
        return None
    if not hasattr(_speedups, "message_ids"):  # built from an older source: rebuild it
        warnings.warn(
            "aiorocketmq.protocol._speedups is older than its source; using the Python code "
            "(reinstall the package to rebuild it)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _speedups


_speedups = _load_speedups()
_SPLIT_CACHE: dict[bytes, tuple[str | None, str | None, dict[str, str]]] = {}
"""Raw properties → ``_split_properties`` of them, shared by the C decoder's calls."""


def _split_properties(raw: bytes) -> tuple[str | None, str | None, dict[str, str]]:
    """``(tags, keys, other properties)`` of a record's properties."""
    properties = decode_properties(str(raw, "utf-8"))
    return (
        properties.pop(MessageConst.PROPERTY_TAGS, None),
        properties.pop(MessageConst.PROPERTY_KEYS, None),
        properties,
    )


def decode_message(buf: bytes | memoryview, pos: int = 0, broker_name: str = "") -> MessageExt:
    """The ``MessageExt`` of the (already located, trusted) record at ``pos`` of ``buf``."""
    header = _HEADERS[buf[pos + _SYSFLAG_LOW_BYTE] & HOST_FLAGS]
    (total, _, body_crc, queue_id, flag, queue_offset, physical_offset, _, born_timestamp,
     born_ip, born_port, store_timestamp, store_ip, store_port, reconsume_times, _,
     body_length) = header.unpack_from(buf, pos)
    body_start = pos + header.size
    topic_pos = body_start + body_length
    topic_length = _I16.unpack_from(buf, topic_pos)[0]
    properties_pos = topic_pos + 2 + topic_length
    properties_length = _I16.unpack_from(buf, properties_pos)[0]
    if properties_length:
        tags, keys, properties = _split_properties(
            bytes(buf[properties_pos + 2 : properties_pos + 2 + properties_length])
        )
    else:
        tags, keys, properties = None, None, {}
    return MessageExt(
        str(buf[topic_pos + 2 : properties_pos], "utf-8"),
        bytes(buf[body_start:topic_pos]),
        broker_name,
        queue_id,
        queue_offset,
        physical_offset,
        create_message_id(store_ip, store_port, physical_offset),
        tags,
        keys,
        flag,
        properties,
        born_timestamp,
        format_host(born_ip, born_port),
        store_timestamp,
        format_host(store_ip, store_port),
        reconsume_times,
        total,
        body_crc,
    )


def _bad(what: str, pos: int) -> ValueError:
    return ValueError(f"not a commit-log record at byte {pos}: {what}")


def iter_records(data: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """``(position, TOTALSIZE)`` of each record of ``data`` (records back to back).

    Checks each record's magic and that it lies within ``data``; ``ValueError`` otherwise.
    """
    n = len(data)
    pos = 0
    size_magic = _SIZE_MAGIC.unpack_from
    while pos < n:
        if pos + MIN_RECORD_SIZE > n:
            raise _bad("truncated", pos)
        total, magic = size_magic(data, pos)
        if magic != MESSAGE_MAGIC_CODE:
            raise _bad("bad magic code", pos)
        if total < MIN_RECORD_SIZE or pos + total > n:
            raise _bad(f"bad total size {total}", pos)
        yield pos, total
        pos += total


_SIZE_MAGIC = struct.Struct(">ii")


def record_tags(buf: bytes | memoryview, pos: int) -> str | None:
    """The TAGS property of the record at ``pos`` (only its properties are decoded)."""
    header = _HEADERS[buf[pos + _SYSFLAG_LOW_BYTE] & HOST_FLAGS]
    total = _SIZE_MAGIC.unpack_from(buf, pos)[0]
    body_length = struct.unpack_from(">i", buf, pos + header.size - 4)[0]
    topic_pos = pos + header.size + body_length
    properties_pos = topic_pos + 2 + _I16.unpack_from(buf, topic_pos)[0]
    if properties_pos + 2 >= pos + total:
        return None
    text = str(buf[properties_pos + 2 : pos + total], "utf-8")
    return find_property(text, MessageConst.PROPERTY_TAGS)


def _lean_header(sysflag: int) -> struct.Struct:
    """``header_struct`` skipping SYSFLAG and the prepared transaction offset (pad bytes)."""
    born = 16 if sysflag & BORNHOST_V6_FLAG else 4
    store = 16 if sysflag & STOREHOSTADDRESS_V6_FLAG else 4
    return struct.Struct(f">iiiiiqq4xq{born}siq{store}sii8xi")


_LEAN_HEADERS = {flags: _lean_header(flags) for flags in _HEADERS}


def decode_records(
    data: bytes | memoryview, broker_name: str = "", *, check_crc: bool = False
) -> list[MessageExt]:
    """Every message of ``data``, records back to back (a pull's ``records``), in order.

    ``broker_name`` is the broker the records came from (they do not say). Each record's magic
    and lengths and, with ``check_crc``, its body CRC are checked; ``ValueError`` names the
    first bad one. In C when ``aiorocketmq.protocol._speedups`` was built: it answers None for anything
    but well-formed records, and then ``decode_records_py`` says what is wrong.
    """
    if _speedups is not None:
        decoded: list[MessageExt] | None = _speedups.decode_records(
            data, broker_name, MessageExt, _split_properties, _SPLIT_CACHE, format_host, check_crc
        )
        if decoded is not None:
            return decoded
    return decode_records_py(data, broker_name, check_crc=check_crc)


def decode_records_py(
    data: bytes | memoryview, broker_name: str = "", *, check_crc: bool = False
) -> list[MessageExt]:
    """``decode_records`` in Python: the reference, and the fallback.

    One ``struct`` unpack per record; the body, topic and properties are sliced out; what
    repeats from record to record (topic, hosts) is decoded once.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    out: list[MessageExt] = []
    add = out.append
    n = len(data)
    pos = 0
    headers = _LEAN_HEADERS
    magic_code = MESSAGE_MAGIC_CODE
    min_size = MIN_RECORD_SIZE
    port_offset = _PORT_OFFSET.pack
    raw_topic, topic = b"", ""
    born_ip, born_port, born_host = b"", -1, ""
    store_ip, store_port, store_host = b"", -1, ""
    split: dict[bytes, tuple[str | None, str | None, dict[str, str]]] = {}
    while pos < n:
        if pos + min_size > n:
            raise _bad("truncated", pos)
        header = headers[data[pos + _SYSFLAG_LOW_BYTE] & 0x30]
        if pos + header.size > n:  # IPv6 hosts make the header longer than the minimum
            raise _bad("truncated", pos)
        (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, born_timestamp,
         born, born_at, store_timestamp, store, store_at, reconsume_times,
         body_length) = header.unpack_from(data, pos)
        end = pos + total
        body_start = pos + header.size
        topic_pos = body_start + body_length
        if (
            magic != magic_code
            or total < min_size
            or end > n
            or body_length < 0
            or topic_pos + 2 > end
        ):
            raise _bad(f"bad magic code or sizes (total {total}, body {body_length})", pos)
        topic_length = (data[topic_pos] << 8) | data[topic_pos + 1]
        properties_pos = topic_pos + 2 + topic_length
        if (
            properties_pos + 2 > end
            or (data[properties_pos] << 8) | data[properties_pos + 1] != end - properties_pos - 2
        ):
            raise _bad("bad topic or properties length", pos)
        body = data[body_start:topic_pos]
        if check_crc and zlib.crc32(body) & 0x7FFFFFFF != body_crc:
            raise _bad("body CRC mismatch", pos)
        if topic_length != len(raw_topic) or not data.startswith(raw_topic, topic_pos + 2):
            raw_topic = data[topic_pos + 2 : properties_pos]
            topic = str(raw_topic, "utf-8")
        if properties_pos + 2 == end:
            tags = keys = None
            properties: dict[str, str] = {}
        else:
            raw_properties = data[properties_pos + 2 : end]
            cached = split.get(raw_properties)
            if cached is None:
                cached = _split_properties(raw_properties)
                if len(split) < 1024:
                    split[raw_properties] = cached
            tags, keys, properties = cached
            properties = dict(properties) if properties else {}
        if born_at != born_port or born != born_ip:
            born_ip, born_port, born_host = born, born_at, format_host(born, born_at)
        if store_at != store_port or store != store_ip:
            store_ip, store_port, store_host = store, store_at, format_host(store, store_at)
        add(
            MessageExt(
                topic,
                body,
                broker_name,
                queue_id,
                queue_offset,
                physical_offset,
                (store + port_offset(store_at, physical_offset)).hex().upper(),
                tags,
                keys,
                flag,
                properties,
                born_timestamp,
                born_host,
                store_timestamp,
                store_host,
                reconsume_times,
                total,
                body_crc,
            )
        )
        pos = end
    return out
