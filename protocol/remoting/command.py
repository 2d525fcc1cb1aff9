"""``RemotingCommand``: one frame of RocketMQ's remoting protocol, and its encoding.

A frame, big-endian::

    int32  length                  bytes that follow (4 + header + body)
    int32  type << 24 | headerLen  type 0 = JSON header, 1 = ROCKETMQ binary header
    ...    header
    ...    body                    the rest

The JSON header holds ``code``, ``language``, ``version``, ``opaque``, ``flag`` (bit 0: a
response, bit 1: one-way), ``remark`` and ``extFields`` (the request's or response's custom
header, name -> string). A response carries its request's ``opaque``. We always write JSON
(Apache's C++ client cannot read the binary header) and read both.

``FrameDecoder`` is fed bytes as they arrive and yields whole commands; it raises
``FrameError`` for anything that makes the rest of the stream unreadable (a length over the
limit, a header that is not a header), after which the connection must be closed.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "SERVER_VERSION",
    "FrameDecoder",
    "FrameError",
    "LanguageCode",
    "RemotingCommand",
    "decode_frame",
    "encode_command",
    "encode_command_parts",
    "ext_value",
    "not_supported",
]

# Netty's LengthFieldBasedFrameDecoder limit in RocketMQ (com.rocketmq.remoting.frameMaxLength).
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2
# MQVersion.Version.V4_9_8: the version our servers write in their headers (clients only
# compare it with old thresholds, such as 232 for SQL92 filtering).
SERVER_VERSION = 409
REQUEST_CODE_NOT_SUPPORTED = 3  # RemotingSysResponseCode
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

_INT = struct.Struct(">i")
_LENGTHS = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hbhii")  # code language version opaque flag


class FrameError(ValueError):
    """The stream cannot be read on: the connection must be closed."""


class LanguageCode(IntEnum):
    """RocketMQ's ``LanguageCode``: the byte of the binary header, the name of the JSON one."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


def ext_value(value: Any) -> str:
    """An ext field as Java writes it: a string. Numbers and booleans sent by C++ coerced."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ``ext_fields`` values are always strings."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "JAVA"
    version: int = SERVER_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self,
        code: int = 0,
        *,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, the response bit set."""
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
        )


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """RocketMQ's answer to a request code the server has no processor for (3)."""
    return cmd.response(
        REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
    )


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd`` with a JSON header (keys sorted, as fastjson writes them)."""
    head, body = encode_command_parts(cmd)
    return head + body


def encode_command_parts(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """The frame of ``cmd`` as its head (the length words and the header) and its body, for a
    transport's ``writelines``: a large body is not copied into one buffer first."""
    header: dict[str, Any] = {
        "code": cmd.code,
        "extFields": cmd.ext_fields,
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    raw = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return _LENGTHS.pack(4 + len(raw) + len(cmd.body), len(raw)) + raw, cmd.body


def _int_field(header: dict[str, Any], key: str, default: int = 0) -> int:
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FrameError(f"header field {key!r} is not a number: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise FrameError(f"header field {key!r} is not a number: {value!r}") from None


def _decode_json_header(raw: bytes) -> RemotingCommand:
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise FrameError("the header is not a JSON object")
    if "code" not in header:
        raise FrameError("the header has no code")
    ext = header.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("extFields is not a JSON object")
    language = header.get("language", "JAVA")
    if isinstance(language, int):
        language = _language_name(language)
    remark = header.get("remark")
    return RemotingCommand(
        code=_int_field(header, "code"),
        opaque=_int_field(header, "opaque"),
        flag=_int_field(header, "flag"),
        language=str(language),
        version=_int_field(header, "version"),
        remark=None if remark is None else str(remark),
        ext_fields={str(k): ext_value(v) for k, v in ext.items()},
    )


def _language_name(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


def _decode_binary_header(raw: bytes) -> RemotingCommand:
    """RocketMQ's ``RocketMQSerializable`` header (serialize type 1)."""
    try:
        code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(raw, 0)
        pos = _BINARY_FIXED.size
        (remark_len,) = _INT.unpack_from(raw, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > len(raw):
            raise FrameError("binary header: bad remark length")
        remark = raw[pos : pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(raw, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > len(raw):
            raise FrameError("binary header: bad ext fields length")
        ext: dict[str, str] = {}
        while pos < end:
            (key_len,) = struct.unpack_from(">h", raw, pos)
            pos += 2
            key = raw[pos : pos + key_len].decode()
            pos += key_len
            (value_len,) = _INT.unpack_from(raw, pos)
            pos += 4
            if key_len < 0 or value_len < 0 or pos + value_len > end:
                raise FrameError("binary header: bad ext field length")
            ext[key] = raw[pos : pos + value_len].decode()
            pos += value_len
    except (struct.error, UnicodeDecodeError) as e:
        raise FrameError(f"binary header: {e}") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_language_name(language),
        version=version,
        remark=remark,
        ext_fields=ext,
    )


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """A ROCKETMQ-type header for ``cmd`` (for tests and clients that ask for it)."""
    remark = (cmd.remark or "").encode()
    ext = b"".join(
        struct.pack(">h", len(k.encode())) + k.encode() + _INT.pack(len(v.encode())) + v.encode()
        for k, v in cmd.ext_fields.items()
    )
    language = LanguageCode[cmd.language].value if cmd.language in LanguageCode.__members__ else 7
    return (
        _BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag)
        + _INT.pack(len(remark))
        + remark
        + _INT.pack(len(ext))
        + ext
    )


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """A command from one frame *without* its leading length word (the body copied once)."""
    if len(frame) < 4:
        raise FrameError(f"a frame of {len(frame)} bytes has no header length")
    (word,) = _INT.unpack_from(frame, 0)
    kind = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    if header_len > len(frame) - 4:
        raise FrameError(f"header length {header_len} exceeds the frame ({len(frame) - 4} bytes)")
    raw = bytes(frame[4 : 4 + header_len])
    if kind == SERIALIZE_JSON:
        cmd = _decode_json_header(raw)
    elif kind == SERIALIZE_ROCKETMQ:
        cmd = _decode_binary_header(raw)
    else:
        raise FrameError(f"unknown serialize type {kind}")
    cmd.body = bytes(frame[4 + header_len :])
    return cmd


class FrameDecoder:
    """Incremental: ``feed`` bytes, get the commands completed so far.

    Read each ``feed``'s commands to the end before the next ``feed`` (the frames are read in
    place from the bytes given; a ``feed`` paused halfway still holds them).
    """

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that do not make a whole frame yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[RemotingCommand]:
        # Whole frames are read where they lie (``data`` itself when nothing waits before
        # it), each body copied out once; only a partial frame's bytes are kept for later.
        if self._buffer:
            self._buffer += data
            buf: bytes | bytearray = self._buffer
        else:
            buf = data
        pos = 0
        try:
            with memoryview(buf) as view:
                while len(buf) - pos >= 4:
                    (length,) = _INT.unpack_from(buf, pos)
                    if length < 4 or length > self.max_frame_length:
                        raise FrameError(
                            f"frame length {length} is outside [4, {self.max_frame_length}]"
                        )
                    if len(buf) - pos - 4 < length:
                        break
                    cmd = decode_frame(view[pos + 4 : pos + 4 + length])
                    pos += 4 + length
                    yield cmd
        finally:
            try:
                if buf is self._buffer:
                    del self._buffer[:pos]
                elif pos < len(buf):
                    self._buffer = bytearray(buf[pos:])
            except BufferError:  # a view of it still alive (an error's traceback holds one)
                self._buffer = bytearray(buf[pos:])
