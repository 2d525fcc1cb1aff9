"""The custom headers (``extFields``) of remoting requests, read as RocketMQ names them.

``Fields`` wraps one request's ext fields and reads a value as the type the header class
declares, with the error RocketMQ's ``decodeCommandCustomHeader`` would give: a missing
required field or a value that does not parse is an ``InvalidArgument`` naming the field.
Booleans accept Java's ``"true"``/``"false"`` and C++'s ``"1"``/``"0"``.

SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) carry SEND_MESSAGE's fields under one-letter
names; ``send_fields`` gives them back their long names, so one reader serves all three.
"""

from __future__ import annotations

from aiorocketmq.protocol.errors import InvalidArgument

__all__ = ["SEND_V2_NAMES", "Fields", "send_fields"]

# SendMessageRequestHeaderV2's letters -> SendMessageRequestHeader's names.
SEND_V2_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}

_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0", ""})


class Fields:
    """Typed, named access to a request's ext fields."""

    __slots__ = ("code", "ext")

    def __init__(self, ext: dict[str, str], code: int = 0) -> None:
        self.ext = ext
        self.code = code

    def _raw(self, name: str, required: bool) -> str | None:
        value = self.ext.get(name)
        if value is None and required:
            raise InvalidArgument(f"the request header field {name!r} is missing")
        return value

    def string(self, name: str, default: str | None = None) -> str:
        """A string field; required unless ``default`` is given."""
        value = self._raw(name, default is None)
        return default if value is None else value  # type: ignore[return-value]

    def integer(self, name: str, default: int | None = None) -> int:
        """An integer field (int or long); required unless ``default`` is given."""
        value = self._raw(name, default is None)
        if value is None or (value == "" and default is not None):
            return default  # type: ignore[return-value]
        try:
            return int(value)
        except ValueError:
            raise InvalidArgument(
                f"the request header field {name!r} is not an integer: {value!r}"
            ) from None

    def boolean(self, name: str, default: bool | None = None) -> bool:
        """A boolean field: true/false or 1/0; required unless ``default`` is given."""
        value = self._raw(name, default is None)
        if value is None:
            return bool(default)
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise InvalidArgument(f"the request header field {name!r} is not a boolean: {value!r}")


def send_fields(ext: dict[str, str], code: int) -> Fields:
    """SEND_MESSAGE's header from 10, 310 or 320 (whose fields are one letter each)."""
    if code == 10:
        return Fields(ext, code)
    return Fields({SEND_V2_NAMES.get(k, k): v for k, v in ext.items()}, code)
