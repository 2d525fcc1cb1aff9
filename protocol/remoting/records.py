"""Pull bodies for remoting clients: the stored records rewritten as version-1 records.

Our store writes version-2 records (a two-byte topic length). Apache's C++ client and Java 4.x
read a one-byte topic length whatever the magic says, and C++ reads both hosts as IPv4, so a
pull answered over remoting carries version-1 records (magic 0xDAA320A7), as a Java 5.x broker
writes for any topic of at most 127 bytes, with IPv4 hosts and the broker's remoting address
as STOREHOST (C++ sends CONSUMER_SEND_MSG_BACK there). A topic longer than 127 bytes keeps its
version-2 record (no 4.x client could read it either way). TOTALSIZE is always the exact sum of
the fields: C++ walks a record field by field.
"""

from __future__ import annotations

import ipaddress
import struct

from aiorocketmq.protocol.record import (
    HOST_FLAGS,
    header_struct,
    iter_records,
)

__all__ = ["MESSAGE_MAGIC_CODE_V1", "to_v1_records", "v1_record"]

MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
_V1_HEADER = header_struct(0)  # IPv4 hosts
_SYSFLAG_POS = 36
_ZERO_IP = bytes(4)

def _ipv4(ip: bytes) -> bytes:
    """A 4-byte address: IPv4 as is, an IPv4-mapped IPv6 unwrapped, other IPv6 as 0.0.0.0."""
    if len(ip) == 4:
        return ip
    mapped = ipaddress.IPv6Address(ip).ipv4_mapped
    return mapped.packed if mapped is not None else _ZERO_IP

def v1_record(data: bytes | memoryview, pos: int, store_host: tuple[bytes, int] | None) -> bytes:
    """The record at ``pos`` as version 1 (or unchanged for a topic over 127 bytes)."""
    (sysflag,) = struct.unpack_from(">i", data, pos + _SYSFLAG_POS)
    header = header_struct(sysflag & HOST_FLAGS)
    (total, _magic, crc, queue_id, flag, queue_offset, physical, sysflag, born_ts, born_ip,
     born_port, store_ts, store_ip, store_port, reconsume, prepared,
     body_length) = header.unpack_from(data, pos)
    body_start = pos + header.size
    topic_pos = body_start + body_length
    (topic_length,) = struct.unpack_from(">h", data, topic_pos)
    topic = bytes(data[topic_pos + 2 : topic_pos + 2 + topic_length])
    properties_pos = topic_pos + 2 + topic_length
    (properties_length,) = struct.unpack_from(">h", data, properties_pos)
    properties = bytes(data[properties_pos + 2 : properties_pos + 2 + properties_length])
    if store_host is not None:
        store_ip, store_port = store_host
    if topic_length > 127:
        return bytes(data[pos : pos + total])
    body = bytes(data[body_start:topic_pos])
    size = _V1_HEADER.size + body_length + 1 + topic_length + 2 + properties_length
    return b"".join(
        (
            _V1_HEADER.pack(
                size, MESSAGE_MAGIC_CODE_V1, crc, queue_id, flag, queue_offset, physical,
                sysflag & ~HOST_FLAGS, born_ts, _ipv4(born_ip), born_port, store_ts,
                _ipv4(store_ip), store_port, reconsume, prepared, body_length,
            ),
            body,
            bytes((topic_length,)),
            topic,
            struct.pack(">h", properties_length),
            properties,
        )
    )

def to_v1_records(data: bytes | memoryview, store_host: tuple[bytes, int] | None = None) -> bytes:
    """Every record of a pull (version 2, back to back) as version 1, in order."""
    return b"".join(v1_record(data, pos, store_host) for pos, _ in iter_records(data))
