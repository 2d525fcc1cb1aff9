"""The channel stream's reconnect delay: doubling, capped, jittered into the upper half."""

from __future__ import annotations

import pytest

from aiorocketmq.consumer.broker_channel import reconnect_backoff_ms
from aiorocketmq.consumer.client_config import ClientConfig


@pytest.mark.parametrize(
    ("failures", "step"),
    [(0, 200), (1, 200), (2, 400), (3, 800), (4, 1_600), (5, 3_200), (6, 5_000), (60, 5_000)],
)
def test_the_step_doubles_per_failure_up_to_the_cap(failures: int, step: int) -> None:
    assert reconnect_backoff_ms(failures, 200, 5_000, 0.0) == step / 2
    assert reconnect_backoff_ms(failures, 200, 5_000, 0.5) == step * 0.75
    assert reconnect_backoff_ms(failures, 200, 5_000, 1.0) == step


def test_jitter_spreads_a_step_over_its_upper_half_and_never_past_the_cap() -> None:
    delays = [reconnect_backoff_ms(10, 100, 1_000, j / 100) for j in range(100)]
    assert min(delays) == 500 and max(delays) < 1_000
    assert len(set(delays)) == 100


def test_the_reconnect_settings_are_checked() -> None:
    assert ClientConfig().channel_reconnect_max_delay_ms == 5_000
    with pytest.raises(ValueError, match="channel_reconnect_delay_ms"):
        ClientConfig(channel_reconnect_delay_ms=0)
    with pytest.raises(ValueError, match="channel_reconnect_max_delay_ms"):
        ClientConfig(channel_reconnect_delay_ms=500, channel_reconnect_max_delay_ms=400)
