"""The consumers' settings: typed fields, old keyword names, clear errors, one unit spelling."""

from __future__ import annotations

import dataclasses

import pytest

from aiorocketmq import (
    ConsumeFromWhere,
    Handoff,
    LitePullConsumer,
    LitePullConsumerSettings,
    MessageModel,
    ProducerSettings,
    PushConsumer,
    PushConsumerSettings,
)
from aiorocketmq.consumer.settings import LEGACY_NAMES


def test_keywords_and_a_settings_object_combine_keywords_winning() -> None:
    base = PushConsumerSettings(pull_batch_size=64, consume_thread_max=4)
    c = PushConsumer("G", "127.0.0.1:9876", base, pull_batch_size=16)
    assert (c.settings.pull_batch_size, c.settings.consume_thread_max) == (16, 4)
    assert base.pull_batch_size == 64  # the caller's object is not changed


def test_the_old_keyword_names_still_work() -> None:
    c = PushConsumer(
        "G",
        "127.0.0.1:9876",
        broker_suspend_max_time_millis=7_000,
        pull_time_delay_mills_when_exception=300,
        consumer_timeout_millis_when_suspend=9_000,
        suspend_current_queue_time_millis=50,
    )
    s = c.settings
    assert (s.broker_suspend_max_time_ms, s.pull_time_delay_ms_when_exception) == (7_000, 300)
    assert (s.consumer_pull_timeout_ms, s.suspend_current_queue_time_ms) == (9_000, 50)
    lite = LitePullConsumer("G", "127.0.0.1:9876", poll_timeout_millis=10, auto_commit_interval_millis=2_000)
    assert (lite.settings.poll_timeout_ms, lite.settings.auto_commit_interval_ms) == (10, 2_000)


def test_every_time_option_is_spelt_ms() -> None:
    for cls in (PushConsumerSettings, LitePullConsumerSettings):
        for f in dataclasses.fields(cls):
            assert not f.name.endswith(("_millis", "_mills")), f.name
    assert all("ms" in new.split("_") for new in LEGACY_NAMES.values())


def test_an_unknown_option_is_named_with_the_closest_names() -> None:
    with pytest.raises(TypeError, match=r"no option 'pull_batch_sise'.*pull_batch_size"):
        PushConsumer("G", "127.0.0.1:9876", pull_batch_sise=3)
    with pytest.raises(TypeError, match="no option 'consume_thread_max'"):
        LitePullConsumer("G", "127.0.0.1:9876", consume_thread_max=3)  # push only


def test_handoff_is_an_enum_and_its_strings_are_accepted() -> None:
    assert PushConsumer("G", "127.0.0.1:9876", handoff="fenced").settings.handoff is Handoff.FENCED
    assert PushConsumer("G", "127.0.0.1:9876").settings.handoff is Handoff.CLASSIC
    with pytest.raises(ValueError, match="handoff must be one of 'classic', 'fenced', got 'fast'"):
        PushConsumer("G", "127.0.0.1:9876", handoff="fast")


def test_every_closed_set_takes_its_names_and_refuses_others_at_construction() -> None:
    # A string where an enum belongs used to pass construction and fail at start().
    s = PushConsumer(
        "G",
        "127.0.0.1:9876",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        message_model="BROADCASTING",
    ).settings
    assert s.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert s.message_model is MessageModel.BROADCASTING
    lite = LitePullConsumer("G", "127.0.0.1:9876", consume_from_where="CONSUME_FROM_TIMESTAMP")
    assert lite.settings.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    with pytest.raises(ValueError, match=r"consume_from_where must be one of .*, got 'FIRST'"):
        PushConsumer("G", "127.0.0.1:9876", consume_from_where="FIRST")
    with pytest.raises(ValueError, match=r"message_model must be one of .*, got 3"):
        LitePullConsumer("G", "127.0.0.1:9876", message_model=3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pull_batch_size": 0}, r"pull_batch_size out of range \[1, 1024\]: 0"),
        ({"pull_min_batch_size": 0}, r"pull_min_batch_size out of range \[1, 1024\]: 0"),
        ({"pull_max_wait_ms": -1}, r"pull_max_wait_ms out of range \[0, 2147483647\]: -1"),
        ({"consume_thread_max": 1001}, r"consume_thread_max out of range \[1, 1000\]: 1001"),
        (
            {"consumer_pull_timeout_ms": 1_000},
            "consumer_pull_timeout_ms .* must be greater than broker_suspend_max_time_ms",
        ),
    ],
)
def test_out_of_range_options_say_which_and_why(options: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PushConsumer("G", "127.0.0.1:9876", **options)


def test_the_group_is_checked_first() -> None:
    with pytest.raises(ValueError, match="DEFAULT_CONSUMER"):
        PushConsumer("DEFAULT_CONSUMER", "127.0.0.1:9876")


def test_every_option_is_documented() -> None:
    """Each field has a ``#:`` comment in consumer/settings.py (what, unit, RocketMQ's name)."""
    import inspect

    from aiorocketmq.consumer import settings as module

    source = inspect.getsource(module)
    from aiorocketmq.producer import settings as producer_module

    source += inspect.getsource(producer_module)
    for cls in (PushConsumerSettings, LitePullConsumerSettings, ProducerSettings):
        for f in dataclasses.fields(cls):
            head = source.split(f"    {f.name}:")[0]
            assert head.rstrip().splitlines()[-1].lstrip().startswith("#:"), f.name


def test_defaults_are_rocketmqs() -> None:
    push, lite = PushConsumerSettings(), LitePullConsumerSettings()
    assert push.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert (push.pull_batch_size, push.broker_suspend_max_time_ms) == (32, 15_000)
    assert (lite.pull_batch_size, lite.broker_suspend_max_time_ms) == (10, 20_000)
    assert (lite.auto_commit, lite.auto_commit_interval_ms, lite.poll_timeout_ms) == (
        True,
        5_000,
        5_000,
    )


def test_the_producer_takes_settings_and_its_old_keywords_in_seconds() -> None:
    from aiorocketmq import Producer, ProducerSettings

    p = Producer("pg", "127.0.0.1:9876", ProducerSettings(retry_times_when_send_failed=5))
    assert (p.settings.retry_times_when_send_failed, p.settings.send_msg_timeout_ms) == (5, 3_000)
    old = Producer("pg", "127.0.0.1:9876", send_msg_timeout=5, poll_name_server_interval=0.5)
    assert (old.settings.send_msg_timeout_ms, old.settings.poll_name_server_interval_ms) == (
        5_000,
        500,
    )
    assert old.send_msg_timeout == 5.0  # the deadline its calls use, in seconds
    with pytest.raises(TypeError, match=r"no option 'send_msg_timout'.*send_msg_timeout_ms"):
        Producer("pg", "127.0.0.1:9876", send_msg_timout=1)
    with pytest.raises(ValueError, match="retry_times_when_send_failed must be >= 0"):
        Producer("pg", "127.0.0.1:9876", retry_times_when_send_failed=-1)
