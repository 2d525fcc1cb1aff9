"""``TopicConfigManager``: the broker's topics (queue numbers, permission), kept on disk.

Rules: names are validated before anything is stored; read/write queue numbers are 1..1024 and
perm must be valid; every change bumps ``data_version`` (the name server re-reads the topic set
when it changes) and is written atomically to ``<store>/config/topics.json``. Auto-creation on
first send follows RocketMQ's defaults (``default_topic_queue_nums`` queues, perm RW).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import InvalidArgument
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.v1 import common_pb2
from aiorocketmq.protocol.validators import check_topic

__all__ = ["MAX_QUEUE_NUMS", "TopicConfig", "TopicConfigManager"]

log = get_logger("aiorocketmq.broker.topic")

MAX_QUEUE_NUMS = 1024


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic on this broker (RocketMQ's ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.READ | PermName.WRITE
    topic_sys_flag: int = 0
    order: bool = False

    def validate(self) -> None:
        """Raise ``InvalidArgument`` naming the first bad field."""
        check_topic(self.topic_name)
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not 0 < value <= MAX_QUEUE_NUMS:
                raise InvalidArgument(
                    f"topic {self.topic_name}: {name} must be in 1..{MAX_QUEUE_NUMS}, got {value}"
                )
        if not PermName.is_valid(self.perm):
            raise InvalidArgument(f"topic {self.topic_name}: perm must be in 0..7, got {self.perm}")

    def to_proto(self) -> common_pb2.TopicConfig:
        return common_pb2.TopicConfig(**asdict(self))

    @classmethod
    def from_proto(cls, tc: common_pb2.TopicConfig) -> TopicConfig:
        return cls(
            topic_name=tc.topic_name,
            read_queue_nums=tc.read_queue_nums,
            write_queue_nums=tc.write_queue_nums,
            perm=tc.perm,
            topic_sys_flag=tc.topic_sys_flag,
            order=tc.order,
        )


class TopicConfigManager:
    """The ``topic_config_table`` and its file."""

    def __init__(self, store_root: Path, *, default_topic_queue_nums: int = 8) -> None:
        self.path = store_root / "config" / "topics.json"
        self.default_topic_queue_nums = default_topic_queue_nums
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = 0
        # Called after every change (the broker re-registers with the name servers at once).
        self.on_change: Callable[[], None] | None = None

    def load(self) -> None:
        """Read the table from disk (nothing there is an empty table)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.data_version = int(data.get("dataVersion", 0))
        self.topic_config_table = {
            name: TopicConfig(**cfg) for name, cfg in data.get("topicConfigTable", {}).items()
        }

    def persist(self) -> None:
        """Write the table atomically (temp file, fsync, rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        payload = {
            "dataVersion": self.data_version,
            "topicConfigTable": {n: asdict(c) for n, c in sorted(self.topic_config_table.items())},
        }
        with tmp.open("w") as f:
            json.dump(payload, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def update_topic_config(self, config: TopicConfig) -> bool:
        """Create or replace a topic; True when something changed."""
        config.validate()
        if self.topic_config_table.get(config.topic_name) == config:
            return False
        self.topic_config_table[config.topic_name] = config
        self.data_version += 1
        self.persist()
        log.info("create or update topic", **asdict(config))
        if self.on_change is not None:
            self.on_change()
        return True

    def create_topic_in_send_message_method(
        self, topic: str, queue_nums: int | None = None
    ) -> TopicConfig:
        """Auto-create on first send: default queue numbers, perm RW."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        n = queue_nums or self.default_topic_queue_nums
        config = TopicConfig(topic, read_queue_nums=n, write_queue_nums=n)
        self.update_topic_config(config)
        return config

    def create_topic_if_absent(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        """For system topics (retry, DLQ, schedule): create once, never change."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(
            topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=int(perm)
        )
        self.update_topic_config(config)
        return config

    def delete_topic_config(self, topic: str) -> bool:
        if self.topic_config_table.pop(topic, None) is None:
            return False
        self.data_version += 1
        self.persist()
        if self.on_change is not None:
            self.on_change()
        return True
