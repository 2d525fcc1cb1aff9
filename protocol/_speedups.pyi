# ruff: noqa: E501
"""Types of ``aiorocketmq.protocol._speedups`` (C, optional): see ``aiorocketmq.protocol.batch`` and ``aiorocketmq.protocol.record``."""

from collections.abc import Callable, Sequence
from typing import Any

def build_records(
    batch: bytes,
    queue_id: int,
    queue_offset: int,
    position: int,
    middle: bytes,
    topic_part: bytes,
    max_body: int,
    property_code: Callable[[bytes], int | None],
    cache: dict[bytes, int | None],
    /,
) -> tuple[int, bytes, bytes, list[int], list[int], bool] | None: ...
def decode_records(
    data: bytes | memoryview,
    broker_name: str,
    message_ext: type[Any],
    split: Callable[[bytes], tuple[str | None, str | None, dict[str, str]]],
    cache: dict[bytes, tuple[str | None, str | None, dict[str, str]]],
    format_host: Callable[[bytes, int], str],
    check_crc: bool,
    /,
) -> list[Any] | None: ...
def decode_columns(
    data: bytes | memoryview, end: int, /
) -> tuple[Any, ...] | None: ...
def select_units(
    units: bytes,
    max_nums: int,
    max_bytes: int,
    physical_min: int,
    code_set: frozenset[int] | None,
    /,
) -> tuple[int, list[tuple[int, int]], list[tuple[int, int, int]]]: ...
def crc32(data: bytes, /, table: bool = False) -> int: ...
def encode_batch(
    messages: Sequence[Any], properties_of: Callable[[Any], bytes], max_properties: int, /
) -> bytes | None: ...
def message_ids(prefix: str, offsets: Sequence[int], /) -> list[str]: ...
