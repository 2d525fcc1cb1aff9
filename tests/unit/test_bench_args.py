"""The benchmarks' flags refuse what the consumers would refuse, by name, before anything runs."""

from __future__ import annotations

import argparse

import pytest

from aiorocketmq.cli.common import non_negative_type
from bench import chaos, handoff


@pytest.mark.parametrize("main", [chaos.main, handoff.main])
def test_a_negative_consume_time_is_a_usage_error(
    main: object, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--consume-ms", "-1"])  # type: ignore[operator]
    assert exit_.value.code == 2
    assert "--consume-ms: must be 0 or more, got -1" in capsys.readouterr().err


def test_non_negative_takes_zero_and_fractions_and_refuses_the_rest() -> None:
    assert non_negative_type("0") == 0.0 and non_negative_type("2.5") == 2.5
    for text in ("-0.1", "nan", "ten"):
        with pytest.raises(argparse.ArgumentTypeError):
            non_negative_type(text)
