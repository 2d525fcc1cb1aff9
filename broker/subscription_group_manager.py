"""``SubscriptionGroupManager``: the broker's consumer groups and their settings, kept on disk.

RocketMQ's ``SubscriptionGroupConfig``: whether a group may consume at all, may consume in
broadcasting mode, is told when its members change, how many retry queues it gets and how many
times a message is retried. A group gets the defaults the first time it heartbeats or pulls
(``auto_create_subscription_group``, true by default); with that off, only groups created by an
administrator (``mqadmin updateSubGroup``) may consume. Every change bumps ``data_version`` and is
written atomically to ``<store>/config/subscriptionGroup.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from aiorocketmq.broker.offset.consumer_offset_manager import write_atomically
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import InvalidArgument
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.protocol.validators import check_group

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager"]

log = get_logger("aiorocketmq.broker.subscription_group")

MAX_RETRY_QUEUE_NUMS = 1024


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings on this broker, RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def validate(self) -> None:
        """Raise ``InvalidArgument`` naming the first bad field."""
        check_group(self.group_name)
        if not 0 < self.retry_queue_nums <= MAX_RETRY_QUEUE_NUMS:
            raise InvalidArgument(
                f"group {self.group_name}: retry_queue_nums must be in 1..{MAX_RETRY_QUEUE_NUMS}, "
                f"got {self.retry_queue_nums}"
            )
        if self.retry_max_times < 0:
            raise InvalidArgument(
                f"group {self.group_name}: retry_max_times must be >= 0, got {self.retry_max_times}"
            )
        if self.broker_id < 0 or self.which_broker_when_consume_slowly < 0:
            raise InvalidArgument(
                f"group {self.group_name}: broker ids must be >= 0, got {self.broker_id} and "
                f"{self.which_broker_when_consume_slowly}"
            )

    def to_proto(self) -> broker_pb2.SubscriptionGroupConfig:
        return broker_pb2.SubscriptionGroupConfig(**asdict(self))

    @classmethod
    def from_proto(cls, pb: broker_pb2.SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        return cls(**{f.name: getattr(pb, f.name) for f in fields(cls)})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubscriptionGroupConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class SubscriptionGroupManager:
    """The ``subscription_group_table`` and its file."""

    def __init__(
        self,
        store_root: Path,
        *,
        auto_create: bool = True,
        retry_queue_nums: int = 1,
        retry_max_times: int = 16,
    ) -> None:
        self.path = Path(store_root) / "config" / "subscriptionGroup.json"
        self.auto_create = auto_create
        # What a group created on first use gets (the broker's retry_queue_nums and
        # max_reconsume_times settings).
        self.retry_queue_nums = retry_queue_nums
        self.retry_max_times = retry_max_times
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = 0

    def load(self) -> None:
        """Read the table from disk (nothing there is an empty table)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.data_version = int(data.get("dataVersion", 0))
        self.table = {
            name: SubscriptionGroupConfig.from_json(cfg)
            for name, cfg in data.get("subscriptionGroupTable", {}).items()
        }

    def persist(self) -> None:
        payload = {
            "dataVersion": self.data_version,
            "subscriptionGroupTable": {n: asdict(c) for n, c in sorted(self.table.items())},
        }
        write_atomically(self.path, json.dumps(payload, indent=1))

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings; created with the defaults when auto-creation is on."""
        config = self.table.get(group)
        if config is None and self.auto_create:
            config = self.default(group)
            config.validate()
            self._put(config)
            log.info("auto create a subscription group", group=group)
        return config

    def default(self, group: str) -> SubscriptionGroupConfig:
        """The settings a new group gets."""
        return SubscriptionGroupConfig(
            group, retry_queue_nums=self.retry_queue_nums, retry_max_times=self.retry_max_times
        )

    def update(self, config: SubscriptionGroupConfig) -> bool:
        """Create or replace a group's settings; True when something changed."""
        config.validate()
        if self.table.get(config.group_name) == config:
            return False
        self._put(config)
        log.info("create or update subscription group", **asdict(config))
        return True

    def delete(self, group: str) -> bool:
        """Forget a group's settings; False when there were none."""
        check_group(group)
        if self.table.pop(group, None) is None:
            return False
        self.data_version += 1
        self.persist()
        log.info("delete subscription group", group=group)
        return True

    def _put(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.group_name] = config
        self.data_version += 1
        self.persist()
