"""bench.rebalance's convergence reading: the time a group settled, from the workers' lines."""

from __future__ import annotations

import asyncio
import time

from bench.rebalance import Holdings


async def test_a_move_settles_at_its_later_event_whatever_order_the_lines_arrive_in() -> None:
    h = Holdings(holders={"a:0": {"old"}, "a:1": {"x"}})
    h.expect({"a:0": "new", "a:1": "x"}, now=1.0)
    assert h.settled_at is None
    # The new owner's worker wrote its line at 2.5; the old owner's, written at 2.0, comes in
    # after it (another pipe, another batch): the queue was held by one only from 2.5 on.
    h.event(2.5, "new", "+", "a:0")
    assert h.settled_at is None  # held by two
    h.event(2.0, "old", "-", "a:0")
    assert h.settled_at == 2.5 and h.settled_by == ("new", "+", "a:0")  # the later event


async def test_a_change_already_settled_when_expected_counts_from_its_command() -> None:
    h = Holdings(holders={"a:0": {"c"}})
    h.event(1.0, "c", "+", "a:0")
    h.expect({"a:0": "c"}, now=3.0)
    assert h.settled_at == 3.0


async def test_the_quiet_wait_lasts_until_no_line_came_for_its_span() -> None:
    h = Holdings(holders={})
    h.heard_at = time.monotonic()
    waited = await h.quiet(0.05, 3600)
    assert waited >= 0.05 and time.monotonic() - h.heard_at >= 0.05
    h.heard_at = time.monotonic() - 10  # heard long ago: no wait
    assert await asyncio.wait_for(h.quiet(5, 3600), 30) < 5


def test_the_fan_out_names_the_last_member_told_and_the_broker_that_told_it() -> None:
    h = Holdings(holders={})
    h.issued(10.0)
    h.notified_at(9.9, "a", "b:1")  # before the command: the change before's, read late
    h.notified_at(10.01, "a", "b:1")
    h.notified_at(10.05, "b", "b:2")
    h.notified_at(10.06, "b", "b:3")  # a second one: the first counts
    assert h.fan_out(["a", "b", "c"], 10.0) == ("10.0", "", "")  # c has read none
    h.notified_at(10.03, "c", "")
    assert h.fan_out(["a", "b", "c"], 10.0) == ("10.0", "50.0", "b from b:2")
    assert h.fan_out(["c"], 10.0) == ("30.0", "30.0", "c from ?")
    assert h.fan_out(["d"], 10.0) == ("", "", "")
