"""``MessageStoreConfig``: the message store's settings, with RocketMQ's names in snake_case.

Rules: every timing and size the store uses is a field here, with RocketMQ's default
(``MessageStoreConfig.java``); tests shrink them through the same fields a user would set. The
config is validated when built and again when a store opens it (settings may be assigned in
between), so a bad setting fails at start, not on the first write.

Where we differ from RocketMQ: segment files are not preallocated, so the 1 GiB default costs
only what is written; there is no ``deleteWhen`` hour, the retention pass simply runs every
``clean_resource_interval_ms``; index files are a tenth of RocketMQ's size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["CQ_STORE_UNIT_SIZE", "FlushDiskType", "MessageStoreConfig"]

# One consume-queue entry: commit log offset (int64), size (int32), tag hash (int64).
CQ_STORE_UNIT_SIZE = 20

# A record's size field and the end-of-file blank marker are int32s: a segment must fit.
_MAX_SEGMENT_SIZE = 2**31 - 1


class FlushDiskType(StrEnum):
    """When a put is durable: after an fsync of its own (group commit), or within 500 ms."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass(slots=True)
class MessageStoreConfig:
    """Settings of one ``MessageStore``."""

    store_path_root_dir: str = field(default_factory=_default_root)
    # Size of one commit-log segment (files grow up to it; they are never preallocated).
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    # Size of one consume-queue segment: 300 000 entries of 20 bytes.
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    flush_disk_type: str = FlushDiskType.ASYNC_FLUSH.value
    flush_interval_commit_log_ms: int = 500
    flush_interval_consume_queue_ms: int = 1000
    file_reserved_time_hours: int = 72
    clean_resource_interval_ms: int = 10_000
    max_message_size: int = 4 * 1024 * 1024
    sync_flush_timeout_ms: int = 5000
    # The key index (queryMsgByKey): on by default, as RocketMQ's messageIndexEnable. Smaller
    # files than RocketMQ's 5 000 000 slots and 20 000 000 entries (420 MB each): 42 MB,
    # sparse, so a store costs what it indexes.
    message_index_enable: bool = True
    max_hash_slot_num: int = 500_000
    max_index_num: int = 2_000_000

    def __post_init__(self) -> None:
        self.store_path_root_dir = os.fspath(self.store_path_root_dir)
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad setting (also run by ``MessageStore``)."""
        if self.flush_disk_type not in FlushDiskType.__members__:
            raise ValueError(
                f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, got {self.flush_disk_type!r}"
            )
        if not 0 < self.mapped_file_size_commit_log <= _MAX_SEGMENT_SIZE:
            raise ValueError(
                "mapped_file_size_commit_log must be in 1.."
                f"{_MAX_SEGMENT_SIZE}, got {self.mapped_file_size_commit_log}"
            )
        cq = self.mapped_file_size_consume_queue
        if cq < CQ_STORE_UNIT_SIZE or cq % CQ_STORE_UNIT_SIZE:
            raise ValueError(
                f"mapped_file_size_consume_queue must be a positive multiple of "
                f"{CQ_STORE_UNIT_SIZE}, got {cq}"
            )
        for name in (
            "flush_interval_commit_log_ms",
            "flush_interval_consume_queue_ms",
            "clean_resource_interval_ms",
            "max_message_size",
            "sync_flush_timeout_ms",
            "max_hash_slot_num",
            "max_index_num",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.file_reserved_time_hours < 0:
            raise ValueError(
                f"file_reserved_time_hours must be >= 0, got {self.file_reserved_time_hours}"
            )

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == FlushDiskType.SYNC_FLUSH

    @property
    def store_path_index(self) -> str:
        """``<root>/index``: the key index files."""
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def store_path_commit_log(self) -> str:
        """``<root>/commitlog``: the commit-log segments."""
        return os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def store_path_consume_queue(self) -> str:
        """``<root>/consumequeue``: ``<topic>/<queueId>/`` segment directories."""
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def store_checkpoint(self) -> str:
        """``<root>/checkpoint``: how far every consume queue is durable (see message_store)."""
        return os.path.join(self.store_path_root_dir, "checkpoint")
