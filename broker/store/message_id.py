"""Host addresses as the commit log stores them, and RocketMQ's offset message id.

Rules:
- A host is stored as its packed IP (4 bytes for IPv4, 16 for IPv6, flagged in the record's
  sysflag as RocketMQ does) plus a 4-byte port. ``parse_host`` reads ``"a.b.c.d:port"``,
  ``"[v6]:port"`` and gRPC peer strings (``"ipv4:a.b.c.d:port"``, ``"ipv6:[v6]:port"``, also
  percent-encoded); ``format_host`` writes the first two forms back.
- The offset message id (``MessageDecoder.createMessageId``) is the upper-case hex of store host
  IP + port (int32) + commit log offset (int64): 32 characters for IPv4, 56 for IPv6. It names
  where the message lives, so ``decode_message_id`` is all a broker needs to look it up.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from urllib.parse import unquote

__all__ = [
    "create_message_id",
    "decode_message_id",
    "format_host",
    "parse_host",
]

_PORT_OFFSET = struct.Struct(">iq")


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


def decode_message_id(msg_id: str) -> tuple[str, int, int]:
    """``(host, port, commit log offset)`` of an offset message id; ``ValueError`` if bad."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"message id {msg_id!r} must be 32 or 56 hex characters")
    raw = bytes.fromhex(msg_id)
    ip_length = len(raw) - _PORT_OFFSET.size
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_length)
    return str(ipaddress.ip_address(raw[:ip_length])), port, offset
