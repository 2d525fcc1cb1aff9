"""The broker's watched idle queues: one-shot wake-ups past the offset, ended by release or
by the channel's close."""

from __future__ import annotations

from aiorocketmq.broker.queue_watch import QueueWatches


def test_a_watch_wakes_once_at_the_first_message_past_its_offset() -> None:
    w = QueueWatches()
    w.watch("T", 0, "g", "ch1", 5)
    assert w.arrived("T", 0, 5) == []  # nothing at offset 5 yet (max offset is exclusive)
    assert w.arrived("T", 1, 9) == []  # another queue
    assert w.arrived("T", 0, 6) == [("g", "ch1")]
    assert w.arrived("T", 0, 7) == []  # fired: ended
    assert len(w) == 0


def test_each_channel_and_group_is_woken_and_a_new_watch_replaces_its_old_one() -> None:
    w = QueueWatches()
    w.watch("T", 0, "g", "ch1", 3)
    w.watch("T", 0, "g", "ch1", 8)  # the same watcher again, further on
    w.watch("T", 0, "g", "ch2", 3)
    w.watch("T", 0, "h", "ch1", 3)
    assert len(w) == 3
    assert sorted(w.arrived("T", 0, 4)) == [("g", "ch2"), ("h", "ch1")]
    assert w.arrived("T", 0, 9) == [("g", "ch1")]


def test_forget_and_a_closed_channel_end_watches_silently() -> None:
    w = QueueWatches()
    w.watch("T", 0, "g", "ch1", 0)
    w.watch("T", 1, "g", "ch1", 0)
    w.watch("T", 1, "g", "ch2", 0)
    w.forget("T", 0, "g", "ch1")
    w.forget("T", 0, "g", "nobody")  # unknown: nothing happens
    assert w.forget_channel("ch1") == 1
    assert w.forget_channel("ch1") == 0
    assert w.arrived("T", 0, 1) == []
    assert w.arrived("T", 1, 1) == [("g", "ch2")]
    assert len(w) == 0


def test_a_leaving_group_and_a_reset_end_only_their_own_watches() -> None:
    w = QueueWatches()
    w.watch("T", 0, "g", "ch1", 0)
    w.watch("T", 1, "g", "ch1", 0)
    w.watch("T", 0, "h", "ch1", 0)
    w.watch("T", 0, "g", "ch2", 0)
    assert w.forget_group("ch1", "g") == 2
    assert sorted(w.take("T", 0, "g")) == ["ch2"]
    assert w.arrived("T", 0, 1) == [("h", "ch1")]
    assert len(w) == 0
