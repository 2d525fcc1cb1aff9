"""ProcessQueue: low-water mark, orderly take/commit/rollback, expiry, flow control, and the
fenced hold-back of a suspended queue."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aiorocketmq.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from aiorocketmq.consumer.process_queue import (
    CONSUME_CONCURRENTLY_MAX_SPAN,
    PULL_MAX_IDLE_TIME,
    PULL_THRESHOLD_FOR_QUEUE,
    PULL_THRESHOLD_SIZE_FOR_QUEUE,
    REBALANCE_LOCK_INTERVAL,
    REBALANCE_LOCK_MAX_LIVE_TIME,
    FlowControlReason,
    ProcessQueue,
    flow_control_reason,
)
from aiorocketmq.consumer.types import ConsumeConcurrentlyStatus, MessageModel
from aiorocketmq.protocol import MessageExt, MessageQueue
from aiorocketmq.protocol.message import MessageConst

CONSUME_START = MessageConst.PROPERTY_CONSUME_START_TIMESTAMP


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def msg(offset: int, body: bytes = b"x", **properties: str) -> MessageExt:
    return MessageExt(
        topic="TopicTest",
        body=body,
        broker_name="broker-a",
        queue_id=0,
        queue_offset=offset,
        commit_log_offset=offset * 100,
        msg_id=f"id-{offset}",
        properties=dict(properties),
    )


def msgs(*offsets: int) -> list[MessageExt]:
    return [msg(o) for o in offsets]


def test_rocketmq_defaults() -> None:
    assert PULL_MAX_IDLE_TIME == 120_000
    assert REBALANCE_LOCK_MAX_LIVE_TIME == 30_000
    assert REBALANCE_LOCK_INTERVAL == 20_000
    assert PULL_THRESHOLD_FOR_QUEUE == 1000
    assert PULL_THRESHOLD_SIZE_FOR_QUEUE == 100
    assert CONSUME_CONCURRENTLY_MAX_SPAN == 2000


def test_new_process_queue() -> None:
    clock = FakeClock()
    pq = ProcessQueue(now_ms=clock)
    assert (
        pq.last_pull_timestamp == pq.last_consume_timestamp == pq.last_lock_timestamp == clock.now
    )
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max, pq.try_unlock_times) == (0, 0, 0, 0)
    assert not (pq.dropped or pq.locked or pq.consuming)
    assert pq.min_offset == -1
    assert pq.get_max_span() == 0
    assert not pq.has_temp_message()
    assert pq.head_message() is None
    assert isinstance(pq.consume_lock, asyncio.Lock)
    assert "msg_count=0" in repr(pq)


def test_default_clock_is_epoch_millis() -> None:
    import time

    before = time.time_ns() // 1_000_000
    pq = ProcessQueue()
    assert before <= pq.last_pull_timestamp <= time.time_ns() // 1_000_000


def test_put_message_counts_new_messages_once() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    assert pq.put_message([msg(10, b"abc"), msg(11, b"de")]) is True  # dispatch to consume
    assert pq.consuming
    assert pq.put_message([msg(11, b"de"), msg(12, b"f")]) is False  # already consuming
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (3, 6, 12)
    assert pq.min_offset == 10
    assert pq.get_max_span() == 2
    assert pq.head_message() is not None and pq.head_message().queue_offset == 10  # type: ignore[union-attr]


def test_put_message_out_of_order_and_empty() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    assert pq.put_message([]) is False
    pq.put_message(msgs(5, 3, 9, 4))
    assert pq.min_offset == 3
    assert pq.queue_offset_max == 9
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4, 5, 9]


def test_put_message_sets_msg_acc_cnt_from_max_offset_property() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message([msg(1), msg(2, MAX_OFFSET="50")])
    assert pq.msg_acc_cnt == 48
    pq.put_message([msg(3, MAX_OFFSET="3")])  # not positive: kept
    assert pq.msg_acc_cnt == 48


def test_remove_message_returns_the_low_water_mark() -> None:
    clock = FakeClock()
    pq = ProcessQueue(now_ms=clock)
    assert pq.remove_message(msgs(1)) == -1  # nothing held: nothing to commit
    pq.put_message([msg(o, b"12345") for o in (100, 101, 102, 103)])
    clock.now += 7
    # 101 and 103 are done, 100 is still being consumed: commit 100, not 104.
    assert pq.remove_message(msgs(101, 103)) == 100
    assert pq.last_consume_timestamp == clock.now
    assert (pq.msg_count, pq.msg_size) == (2, 10)
    assert pq.remove_message(msgs(100)) == 102
    assert pq.remove_message(msgs(100)) == 102  # already removed: nothing changes
    assert pq.remove_message(msgs(102)) == 104  # emptied: queue_offset_max + 1
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert pq.remove_message(msgs(102)) == -1


def test_remove_many_at_once_and_one_by_one() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message(msgs(*range(5000)))
    assert pq.remove_message(msgs(*range(1, 5000, 2))) == 0  # half at once
    rnd = random.Random(1)
    evens = list(range(0, 5000, 2))
    rnd.shuffle(evens)
    for offset in evens[:-1]:
        pq.remove_message(msgs(offset))
    assert pq.msg_count == 1
    assert pq.min_offset == evens[-1]
    assert pq.remove_message(msgs(evens[-1])) == 5000


def test_orderly_take_commit() -> None:
    clock = FakeClock()
    pq = ProcessQueue(now_ms=clock)
    pq.put_message([msg(o, b"ab") for o in range(5)])
    clock.now += 3
    taken = pq.take_messages(3)
    assert [m.queue_offset for m in taken] == [0, 1, 2]
    assert pq.last_consume_timestamp == clock.now
    assert pq.msg_count == 5  # in flight still counts
    assert pq.min_offset == 3
    assert pq.has_temp_message()
    assert pq.commit() == 3
    assert (pq.msg_count, pq.msg_size) == (2, 4)
    assert pq.commit() == -1  # nothing in flight
    assert [m.queue_offset for m in pq.take_messages(3)] == [3, 4]
    assert pq.consuming
    assert not pq.has_temp_message()
    assert pq.take_messages(3) == []
    assert not pq.consuming  # the consume request ends
    assert pq.commit() == 5
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_orderly_rollback_puts_everything_back_in_order() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message(msgs(0, 1, 2, 3))
    pq.take_messages(2)
    pq.put_message(msgs(4))
    pq.rollback()
    assert pq.msg_count == 5
    assert [m.queue_offset for m in pq.take_messages(10)] == [0, 1, 2, 3, 4]
    pq.rollback()
    pq.rollback()  # nothing in flight: no-op
    assert pq.msg_count == 5


def test_orderly_make_message_to_consume_again() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message(msgs(0, 1, 2))
    taken = pq.take_messages(3)
    pq.make_message_to_consume_again(taken[1:])
    assert pq.commit() == 1  # only offset 0 is done
    assert pq.msg_count == 2
    assert [m.queue_offset for m in pq.take_messages(5)] == [1, 2]


def test_a_message_in_flight_is_not_put_twice() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message(msgs(0, 1))
    pq.take_messages(1)
    pq.put_message(msgs(0, 2))
    assert pq.msg_count == 3
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(5)] == [0, 1, 2]


def test_expiry_with_a_fake_clock() -> None:
    clock = FakeClock()
    pq = ProcessQueue(now_ms=clock)
    clock.now += PULL_MAX_IDLE_TIME
    assert not pq.is_pull_expired()  # strictly greater
    assert pq.is_lock_expired()
    clock.now += 1
    assert pq.is_pull_expired()
    pq.last_pull_timestamp = pq.now_ms()
    assert not pq.is_pull_expired()
    assert pq.is_pull_expired(pull_max_idle_ms=-1)

    pq.last_lock_timestamp = clock.now
    clock.now += REBALANCE_LOCK_MAX_LIVE_TIME
    assert not pq.is_lock_expired()
    clock.now += 1
    assert pq.is_lock_expired()
    assert not pq.is_lock_expired(lock_max_live_ms=60_000)


def test_try_unlock_times_and_clear() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.inc_try_unlock_times()
    pq.inc_try_unlock_times()
    assert pq.try_unlock_times == 2
    pq.put_message(msgs(7, 8))
    pq.take_messages(1)
    pq.clear()
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max, pq.min_offset) == (0, 0, 0, -1)
    assert pq.commit() == -1


def test_flow_control_reasons_in_rocketmq_order() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    assert flow_control_reason(pq) is None
    pq.put_message([msg(0, b"x" * 1024 * 1024), msg(2001)])
    assert flow_control_reason(pq) is FlowControlReason.MAX_SPAN  # 2001 > 2000
    assert flow_control_reason(pq, consume_orderly=True) is None  # orderly ignores the span
    assert flow_control_reason(pq, consume_concurrently_max_span=2001) is None
    # Size counts whole MiB: 1 MiB + 1 byte is 1 MiB, above a threshold of 0.
    assert (
        flow_control_reason(pq, pull_threshold_size_for_queue=0)
        is FlowControlReason.CACHED_MESSAGE_SIZE
    )
    assert flow_control_reason(pq, pull_threshold_size_for_queue=1) is FlowControlReason.MAX_SPAN
    # Count comes first: 2 > 1.
    assert (
        flow_control_reason(pq, pull_threshold_for_queue=1, pull_threshold_size_for_queue=0)
        is FlowControlReason.CACHED_MESSAGE_COUNT
    )


def test_flow_control_count_default_threshold() -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    pq.put_message(msgs(*range(1000)))
    assert flow_control_reason(pq) is None  # 1000 is not above 1000
    pq.put_message(msgs(1000))
    assert flow_control_reason(pq) is FlowControlReason.CACHED_MESSAGE_COUNT


# -- a model: a ProcessQueue is a map of waiting messages plus a map in flight ---------------


class ProcessQueueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pq = ProcessQueue(now_ms=FakeClock())
        self.waiting: dict[int, int] = {}  # offset -> body length
        self.in_flight: dict[int, int] = {}
        self.offset_max = 0

    @rule(offsets=st.lists(st.integers(0, 60), max_size=8), size=st.integers(0, 4))
    def put(self, offsets: list[int], size: int) -> None:
        self.pq.put_message([msg(o, b"x" * size) for o in offsets])
        for o in offsets:
            if o not in self.waiting and o not in self.in_flight:
                self.waiting[o] = size
                self.offset_max = max(self.offset_max, o)

    @rule(offsets=st.lists(st.integers(0, 60), max_size=8))
    def remove(self, offsets: list[int]) -> None:
        was_empty = not self.waiting
        result = self.pq.remove_message(msgs(*offsets))
        for o in offsets:
            self.waiting.pop(o, None)
        if was_empty:
            assert result == -1
        elif self.waiting:
            assert result == min(self.waiting)
        else:
            assert result == self.offset_max + 1

    @rule(n=st.integers(0, 5))
    def take(self, n: int) -> None:
        taken = self.pq.take_messages(n)
        expected = sorted(self.waiting)[:n]
        assert [m.queue_offset for m in taken] == expected
        for o in expected:
            self.in_flight[o] = self.waiting.pop(o)

    @rule()
    def commit(self) -> None:
        expected = max(self.in_flight) + 1 if self.in_flight else -1
        assert self.pq.commit() == expected
        self.in_flight.clear()

    @rule()
    def rollback(self) -> None:
        self.pq.rollback()
        self.waiting.update(self.in_flight)
        self.in_flight.clear()

    @rule(data=st.data())
    def consume_again(self, data: st.DataObject) -> None:
        again = (
            data.draw(st.lists(st.sampled_from(sorted(self.in_flight)), unique=True))
            if self.in_flight
            else []
        )
        self.pq.make_message_to_consume_again([msg(o, b"x" * self.in_flight[o]) for o in again])
        for o in again:
            self.waiting[o] = self.in_flight.pop(o)

    @invariant()
    def agrees_with_the_model(self) -> None:
        pq = self.pq
        assert pq.msg_count == len(self.waiting) + len(self.in_flight)
        if pq.msg_count:  # remove_message resets the size when the count reaches 0
            assert pq.msg_size == sum(self.waiting.values()) + sum(self.in_flight.values())
        assert pq.min_offset == (min(self.waiting) if self.waiting else -1)
        assert pq.get_max_span() == (max(self.waiting) - min(self.waiting) if self.waiting else 0)
        assert pq.has_temp_message() == bool(self.waiting)


TestProcessQueueModel = settings(max_examples=40, stateful_step_count=25, deadline=None)(
    ProcessQueueModel
).TestCase


@pytest.mark.parametrize("batch", [1, 32])
def test_thousands_of_messages_through_the_orderly_path(batch: int) -> None:
    pq = ProcessQueue(now_ms=FakeClock())
    for start in range(0, 5000, 32):
        pq.put_message(msgs(*range(start, start + 32)))
    committed = -1
    while taken := pq.take_messages(batch):
        assert taken[0].queue_offset == committed + 1 or committed == -1
        committed = pq.commit() - 1
    assert committed == 5023  # 157 batches of 32
    assert pq.msg_count == 0


async def test_a_suspended_queue_hands_no_batch_to_the_listener_until_resumed_or_dropped() -> None:
    """Fenced, a queue whose grant is unconfirmed (its broker's channel ended): its batches wait
    without taking a consume slot, go on when resumed, and end unconsumed when dropped."""
    seen: list[int] = []

    async def listener(batch: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        seen.extend(m.queue_offset for m in batch)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def send_back(m: MessageExt, level: int) -> bool:
        return True

    service = ConsumeMessageConcurrentlyService(
        "g",
        listener,
        MessageModel.CLUSTERING,
        update_offset=lambda mq, offset: None,
        send_message_back=send_back,
        consume_thread_max=1,
    )
    held, other, gone = ProcessQueue(), ProcessQueue(), ProcessQueue()
    mq = MessageQueue("T", "b", 0)
    for pq, offsets in ((held, (0, 1)), (other, (10,)), (gone, (20,))):
        pq.put_message(msgs(*offsets))
    held.suspend()
    gone.suspend()
    service.submit_consume_request(msgs(0, 1), held, mq)
    service.submit_consume_request(msgs(20), gone, mq)
    service.submit_consume_request(msgs(10), other, mq)
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == [10]  # the one slot was free for the queue not held back
    gone.dropped = True
    held.resume()
    for _ in range(10):
        await asyncio.sleep(0)
    assert seen == [10, 0, 1] and service.in_flight() == 0


def test_the_head_expires_once_its_listener_call_ran_longer_than_the_consume_timeout() -> None:
    clock = FakeClock()
    pq = ProcessQueue(now_ms=clock)
    assert pq.expired_head(1_000) is None  # nothing held
    batch = msgs(0, 1)
    pq.put_message(batch)
    clock.now += 5_000
    assert pq.expired_head(1_000) is None  # not handed to the listener yet
    batch[1].properties[CONSUME_START] = str(clock.now - 5_000)
    assert pq.expired_head(1_000) is None  # only the head holds the offset back
    batch[0].properties[CONSUME_START] = str(clock.now)
    clock.now += 1_000
    assert pq.expired_head(1_000) is None  # the timeout itself is not over it
    clock.now += 1
    assert pq.expired_head(1_000) is batch[0]
    batch[0].properties[CONSUME_START] = "not a time"
    assert pq.expired_head(1_000) is None


@pytest.mark.parametrize(
    ("model", "sends_back", "let_go"),
    [
        (MessageModel.CLUSTERING, True, True),
        (MessageModel.CLUSTERING, False, False),  # the send back failed: it stays
        (MessageModel.BROADCASTING, None, True),  # only let go, as a failed one is
    ],
)
async def test_a_hung_listener_call_is_sent_back_and_no_longer_holds_the_offset(
    model: MessageModel, sends_back: bool | None, let_go: bool
) -> None:
    """RocketMQ's cleanExpiredMsg: the head message whose call has run past the consume
    timeout goes back to the broker for a retry (delay level 3), and the committed offset moves
    past it; the call that hung may still end, and then commits nothing older."""
    release = asyncio.Event()

    async def listener(batch: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        if batch[0].queue_offset == 0:
            await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    sent_back: list[tuple[int, int]] = []

    async def send_back(m: MessageExt, level: int) -> bool:
        sent_back.append((m.queue_offset, level))
        return bool(sends_back)

    committed: list[int] = []
    service = ConsumeMessageConcurrentlyService(
        "g",
        listener,
        model,
        update_offset=lambda mq, offset: committed.append(offset),
        send_message_back=send_back,
    )
    clock = FakeClock(int(time.time() * 1000))  # the listener's start is stamped in wall time
    pq, mq = ProcessQueue(now_ms=clock), MessageQueue("T", "b", 0)
    batch = msgs(0, 1, 2)
    pq.put_message(batch)
    service.submit_consume_request(batch, pq, mq)
    for _ in range(10):
        await asyncio.sleep(0)
    assert committed == [0, 0]  # 1 and 2 done; 0 holds the low-water mark
    assert await service.clean_expired(pq, mq, 60_000) == 0  # not past the timeout yet
    clock.now += 61_000
    assert await service.clean_expired(pq, mq, 60_000) == (1 if let_go else 0)
    expected = [] if sends_back is None else [(0, 3)]
    assert sent_back == expected
    assert committed[-1] == (3 if let_go else 0) and pq.msg_count == (0 if let_go else 1)
    release.set()  # the hung call ends at last
    for _ in range(10):
        await asyncio.sleep(0)
    assert service.in_flight() == 0
    assert committed[-1] == 3  # either way the queue is consumed to its end
