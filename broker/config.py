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

__all__ = [
    "DEFAULT_DELAY_LEVELS",
    "LIVE_SETTINGS",
    "BrokerConfig",
    "camel_case",
    "config_properties",
    "load_settings",
    "update_properties",
]

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
    # Ours: host:port for RocketMQ's remoting protocol (Apache's clients); empty = none.
    remoting_listen: str = ""
    # Remoting: the largest frame accepted, and the silence after which a connection is closed
    # (RocketMQ's com.rocketmq.remoting.frameMaxLength and serverChannelMaxIdleTimeSeconds).
    remoting_max_frame_length: int = 16 * 1024 * 1024
    remoting_idle_timeout_ms: int = 120_000
    # Ours: host:port serving Prometheus metrics at /metrics; empty = none.
    metrics_listen: str = ""
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
    # Ours: at most one NOTIFY_CONSUMER_IDS_CHANGED per group in this time. A lone change is
    # notified at once, as RocketMQ does; the changes of a burst (1,000 consumers starting) are
    # sent as one, with the membership at the end of the window. 0: every change, as RocketMQ.
    notify_consumer_ids_changed_min_interval_ms: int = 100
    # Ours: and at least this much per channel of the group (1,000 members: 1 s, the clients'
    # own minimum between two rebalances), so a large group's burst costs few rounds. 0: off.
    notify_consumer_ids_changed_ms_per_channel: float = 1.0
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
    # Ours: a fenced grant restored at start is released if its client has not opened a channel
    # within this time (a live client reconnects within its reconnect backoff, 5 s at most).
    restored_grant_expiry_ms: int = 15_000
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


#: Settings UPDATE_BROKER_CONFIG may change on a running broker: each is read where it is used,
#: so the change applies at once. The others take effect at the next start (set them in the
#: settings file); RocketMQ's broker likewise applies only some of its keys live.
LIVE_SETTINGS = frozenset(
    {
        "notify_consumer_ids_changed_enable",
        "notify_consumer_ids_changed_on_channel_expiry",
        "auto_create_topic_enable",
        "long_polling_enable",
        "short_polling_time_mills",
        "max_pull_msg_nums",
        "max_reconsume_times",
    }
)


def camel_case(name: str) -> str:
    """``notify_consumer_ids_changed_enable`` -> ``notifyConsumerIdsChangedEnable``."""
    first, *rest = name.split("_")
    return first + "".join(word[:1].upper() + word[1:] for word in rest)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def config_properties(broker: BrokerConfig, store: MessageStoreConfig) -> dict[str, str]:
    """Every setting by RocketMQ's camelCase name, as text (GET_BROKER_CONFIG)."""
    out: dict[str, str] = {}
    for target in (broker, store):
        for f in dataclasses.fields(target):
            out[camel_case(f.name)] = _text(getattr(target, f.name))
    return dict(sorted(out.items()))


def _parse(key: str, text: str, current: Any) -> Any:
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, got {text!r}")
        return text.lower() == "true"
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {text!r}") from None
    return text


def update_properties(broker: BrokerConfig, updates: dict[str, str]) -> dict[str, str]:
    """Apply UPDATE_BROKER_CONFIG: every key checked first (name, liveness, value), then set.

    Keys are RocketMQ's camelCase names (snake_case accepted). A key that is unknown, or that
    applies only at the next start, or a value of the wrong type is a ``ValueError`` naming it,
    and nothing is changed. Returns what changed, camelCase, as text.
    """
    by_camel = {camel_case(f.name): f.name for f in dataclasses.fields(broker)}
    parsed: dict[str, Any] = {}
    for key, text in updates.items():
        name = by_camel.get(key, key)
        if not hasattr(broker, name) or name not in {f.name for f in dataclasses.fields(broker)}:
            raise ValueError(f"unknown broker setting {key!r}")
        if name not in LIVE_SETTINGS:
            live = ", ".join(sorted(camel_case(n) for n in LIVE_SETTINGS))
            raise ValueError(
                f"{key} takes effect at the next start only: set it in the settings file "
                f"(changeable while running: {live})"
            )
        parsed[name] = _parse(key, text, getattr(broker, name))
    for name, value in parsed.items():
        setattr(broker, name, value)
    return {camel_case(n): _text(v) for n, v in parsed.items()}
