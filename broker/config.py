"""``BrokerConfig``: every broker timing and switch is a setting, with RocketMQ's defaults.

Names are RocketMQ's ``BrokerConfig`` fields in snake_case. A TOML file (``mqbroker -c FILE``)
may set any field of ``BrokerConfig`` or of the store's ``MessageStoreConfig`` at top level,
as RocketMQ's ``aiorocketmq.broker.conf`` mixes both; an unknown key is an error naming it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.broker.store.config import MessageStoreConfig

__all__ = ["DEFAULT_DELAY_LEVELS", "BrokerConfig", "load_settings"]

# messageDelayLevel: level 1 is 1 s ... level 18 is 2 h.
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


@dataclass
class BrokerConfig:
    """Broker settings; tests shrink the timings through these same fields."""

    broker_name: str = "broker-a"
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    listen: str = "127.0.0.1:10911"
    # The address clients dial (defaults to the bound listen address).
    broker_ip1: str = ""
    namesrv_addr: str = ""
    broker_permission: int = 6
    # Topics
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    # Name server registration (REGISTER_BROKER every 30 s)
    register_name_server_period_ms: int = 30_000
    register_broker_timeout_ms: int = 24_000
    # Consumer groups
    auto_create_subscription_group: bool = True
    notify_consumer_ids_changed_enable: bool = True
    channel_expired_timeout_ms: int = 120_000
    client_channel_scan_interval_ms: int = 10_000
    # Ours: RocketMQ does not notify the group when a silent channel expires; this does.
    notify_consumer_ids_changed_on_channel_expiry: bool = False
    # Groups (by name) whose group-level notifyConsumerIdsChangedEnable is off.
    groups_with_notify_disabled: list[str] = field(default_factory=list)
    # Offsets
    flush_consumer_offset_interval_ms: int = 5_000
    # Pull and long polling
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1_000
    max_pull_msg_nums: int = 1024
    # Locks (LOCK_BATCH_MQ) and the fenced handoff
    rebalance_lock_max_live_time_ms: int = 60_000
    # Retries and delayed delivery
    max_reconsume_times: int = 16
    retry_queue_nums: int = 1
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    schedule_check_interval_ms: int = 100

    def delay_levels_ms(self) -> list[int]:
        """``message_delay_level`` as milliseconds; index 0 is level 1."""
        units = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        levels = []
        for item in self.message_delay_level.split():
            number, unit = item[:-1], item[-1]
            if unit not in units or not number.replace(".", "", 1).isdigit():
                raise ValueError(f"message_delay_level: bad level {item!r}")
            levels.append(int(float(number) * units[unit]))
        return levels


def _apply(target: Any, values: dict[str, Any], source: str) -> None:
    """Set each value on ``target``, refusing one whose type differs from the default's."""
    for key, value in values.items():
        current = getattr(target, key)
        expected = type(current)
        if expected is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(
                f"{source}: setting {key!r} must be {expected.__name__}, got {value!r}"
            )
        setattr(target, key, value)


def load_settings(
    path: Path | None = None, **overrides: Any
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Read a TOML settings file (if any), then apply ``overrides`` (None values ignored)."""
    raw: dict[str, Any] = {}
    if path is not None:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    raw.update({k: v for k, v in overrides.items() if v is not None})
    broker, store = BrokerConfig(), MessageStoreConfig()
    broker_fields = {f.name for f in dataclasses.fields(broker)}
    store_fields = {f.name for f in dataclasses.fields(store)}
    for key in raw:
        if key not in broker_fields and key not in store_fields:
            raise ValueError(f"{path or 'settings'}: unknown setting {key!r}")
    _apply(broker, {k: v for k, v in raw.items() if k in broker_fields}, str(path))
    _apply(store, {k: v for k, v in raw.items() if k in store_fields}, str(path))
    return broker, store
