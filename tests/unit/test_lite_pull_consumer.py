"""Lite pull consumer rules without a network: a fake broker answers the pull tasks.

Flow control (no pull while a buffer is over its threshold), OFFSET_ILLEGAL (move on to the
broker's next begin offset), retries after errors, poll batching across queues, paused queues,
tag filtering, and where a new queue starts (computePullFromWhere).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiorocketmq.consumer import ConsumeFromWhere, LitePullConsumer, MessageExt, MessageQueue
from aiorocketmq.consumer.offset_store import RemoteBrokerOffsetStore
from aiorocketmq.consumer.pull_api import PullAPIWrapper
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQError, QueryNotFound, ServiceNotAvailable
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import wait_until

Q1 = MessageQueue("T", "broker-a", 0)
Q2 = MessageQueue("T", "broker-a", 1)
Q3 = MessageQueue("T", "broker-b", 0)


class FlowControlled(MQError):
    response_code = ResponseCode.FLOW_CONTROL


class FakeBroker:
    """Stands in for the client instance: stores per queue, min offsets, committed offsets."""

    def __init__(self, queues: dict[MessageQueue, list[tuple[bytes, str | None]]]) -> None:
        self.queues = queues
        self.min_offsets: dict[MessageQueue, int] = {}
        self.committed: dict[MessageQueue, int] = {}
        self.pulls: list[tuple[MessageQueue, broker_pb2.PullMessageRequest]] = []
        self.fail_next: list[MQError] = []
        self.query_error: MQError | None = None
        self.on_pull: Callable[[MessageQueue], None] | None = None

    def find_broker_addr(self, broker_name: str) -> str:
        return f"{broker_name}:0"

    async def update_topic_route_info_from_name_server(self, topic: str | None = None) -> bool:
        return False

    async def pull(self, broker_name: str, request: Any, timeout: float) -> Any:
        return await self.invoke_broker(broker_name, "PullMessage", request, timeout)

    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        mq = None
        if method != "UpdateConsumerOffset":
            mq = MessageQueue(request.topic, broker_name, request.queue_id)
        if method == "PullMessage":
            assert mq is not None
            if self.on_pull is not None:
                self.on_pull(mq)  # at the moment the pull is sent
            await asyncio.sleep(0)
            return await self._pull(mq, request)
        await asyncio.sleep(0)
        if method == "QueryConsumerOffset":
            assert mq is not None
            if self.query_error is not None:
                raise self.query_error
            if mq not in self.committed:
                raise QueryNotFound(f"no offset for {mq}")
            return broker_pb2.QueryConsumerOffsetResponse(offset=self.committed[mq])
        if method == "UpdateConsumerOffset":
            for e in request.offsets:
                self.committed[MessageQueue(e.topic, broker_name, e.queue_id)] = e.offset
            return broker_pb2.UpdateConsumerOffsetResponse()
        if method == "GetMinOffset":
            assert mq is not None
            return broker_pb2.QueueOffsetResponse(offset=self.min_offsets.get(mq, 0))
        if method == "GetMaxOffset":
            assert mq is not None
            return broker_pb2.QueueOffsetResponse(offset=len(self.queues[mq]))
        raise AssertionError(f"unexpected {method}")

    async def _pull(
        self, mq: MessageQueue, request: broker_pb2.PullMessageRequest
    ) -> broker_pb2.PullMessageResponse:
        self.pulls.append((mq, request))
        if self.fail_next:
            raise self.fail_next.pop(0)
        stored = self.queues[mq]
        low, high, offset = self.min_offsets.get(mq, 0), len(stored), request.queue_offset
        if offset < low or offset > high:
            return broker_pb2.PullMessageResponse(
                status=broker_pb2.OFFSET_ILLEGAL,
                next_begin_offset=low if offset < low else high,
                min_offset=low,
                max_offset=high,
            )
        if offset == high:
            await asyncio.sleep(0.01)  # a long poll that found nothing
            return broker_pb2.PullMessageResponse(
                status=broker_pb2.NO_NEW_MSG, next_begin_offset=offset
            )
        end = min(high, offset + request.max_msg_nums)
        return broker_pb2.PullMessageResponse(
            status=broker_pb2.FOUND,
            next_begin_offset=end,
            min_offset=low,
            max_offset=high,
            messages=[
                common_pb2.MessageExt(
                    topic=mq.topic,
                    body=stored[i][0],
                    tags=stored[i][1] or "",
                    broker_name=mq.broker_name,
                    queue_id=mq.queue_id,
                    queue_offset=i,
                    msg_id=f"{mq.broker_name}-{mq.queue_id}-{i}",
                )
                for i in range(offset, end)
            ],
        )


def bodies(n: int, tag: str | None = None) -> list[tuple[bytes, str | None]]:
    return [(b"m%03d" % i, tag) for i in range(n)]


@asynccontextmanager
async def running(
    broker: FakeBroker, mqs: list[MessageQueue], expression: str = "*", **kw: Any
) -> AsyncIterator[LitePullConsumer]:
    """An assign-mode consumer wired to ``broker`` in place of a client instance."""
    kw.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c = LitePullConsumer("unit-g", "127.0.0.1:9", instance_name="unit", **kw)
    c.assign(mqs, expression)
    impl = c._impl
    impl.client = broker  # type: ignore[assignment]
    impl.offset_store = RemoteBrokerOffsetStore("unit-g", broker.invoke_broker)
    impl.pull_api = PullAPIWrapper(broker, "unit-g", "unit")
    impl.running = True
    for state in list(impl.states.values()):
        impl._start_pull_task(state)
    try:
        yield c
    finally:
        impl.running = False
        await impl._stop_tasks()


async def poll_all(c: LitePullConsumer, count: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with asyncio.timeout(5):
        while len(got) < count:
            got.extend(await c.poll(timeout=1))
    return got


def held(c: LitePullConsumer, mq: MessageQueue) -> int:
    return c._impl.states[mq].process_queue.msg_count


async def test_no_pull_while_the_queue_buffer_is_over_its_threshold() -> None:
    broker = FakeBroker({Q1: bodies(50)})
    seen: list[int] = []
    async with running(broker, [Q1], pull_batch_size=2, pull_threshold_for_queue=5) as c:
        broker.on_pull = lambda mq: seen.append(held(c, mq))
        await wait_until(lambda: held(c, Q1) > 5, message="the buffer fills past the threshold")
        assert max(seen) <= 5  # RocketMQ's rule: pull while count <= threshold
        got = await poll_all(c, 50)
    assert [m.queue_offset for m in got] == list(range(50))
    assert max(seen) <= 5


async def test_no_pull_while_all_buffers_together_are_over_the_total_threshold() -> None:
    broker = FakeBroker({Q1: bodies(20), Q2: bodies(20)})
    seen: list[int] = []
    async with running(broker, [Q1, Q2], pull_batch_size=2, pull_threshold_for_all=4) as c:
        broker.on_pull = lambda mq: seen.append(held(c, Q1) + held(c, Q2))
        await wait_until(lambda: held(c, Q1) + held(c, Q2) > 4, message="buffers fill")
        got = await poll_all(c, 40)
    assert len({(m.queue_id, m.queue_offset) for m in got}) == 40
    assert max(seen) <= 4


async def test_offset_illegal_moves_the_pull_offset_to_next_begin_offset() -> None:
    broker = FakeBroker({Q1: bodies(20)})
    broker.min_offsets[Q1] = 10  # the head was deleted
    broker.committed[Q1] = 3  # a committed offset that is now too small
    async with running(broker, [Q1]) as c:
        got = await poll_all(c, 10)
    assert [m.queue_offset for m in got] == list(range(10, 20))
    assert [r.queue_offset for _, r in broker.pulls[:2]] == [3, 10]


async def test_pull_errors_are_retried_after_the_exception_delay() -> None:
    broker = FakeBroker({Q1: bodies(5)})
    broker.fail_next = [ServiceNotAvailable("broker down"), FlowControlled("busy")]
    async with running(broker, [Q1], pull_time_delay_mills_when_exception=10) as c:
        got = await poll_all(c, 5)
    assert [m.queue_offset for m in got] == list(range(5))
    assert [r.queue_offset for _, r in broker.pulls[:3]] == [0, 0, 0]


async def test_poll_returns_up_to_a_batch_across_queues_in_queue_order() -> None:
    broker = FakeBroker({Q1: bodies(4), Q2: bodies(4), Q3: bodies(4)})
    async with running(broker, [Q1, Q2, Q3], pull_batch_size=5) as c:
        await wait_until(lambda: sum(held(c, mq) for mq in (Q1, Q2, Q3)) == 12, message="all")
        batches = [await c.poll(timeout=0) for _ in range(4)]
        assert [len(b) for b in batches] == [5, 5, 2, 0]
        polled = [m for b in batches for m in b]
        for mq in (Q1, Q2, Q3):
            mine = [m.queue_offset for m in polled if m.message_queue == mq]
            assert mine == [0, 1, 2, 3]
            assert c._impl.states[mq].consume_offset == 4


async def test_a_paused_queue_is_not_pulled_and_resume_wakes_a_waiting_poll() -> None:
    broker = FakeBroker({Q1: bodies(3), Q2: bodies(3)})
    async with running(broker, [Q1, Q2]) as c:
        c.pause([Q1])
        # The pull task may have started before pause: it sends at most that one pull.
        got = await poll_all(c, 3)
        assert {m.message_queue for m in got} == {Q2}
        assert await c.poll(timeout=0.05) == []
        pulls_of_q1 = sum(1 for mq, _ in broker.pulls if mq == Q1)
        assert pulls_of_q1 <= 1
        waiting = asyncio.create_task(c.poll(timeout=5))
        await asyncio.sleep(0)  # the poll starts waiting
        c.resume([Q1])
        async with asyncio.timeout(5):
            resumed = await waiting
        assert resumed, "resume woke the waiting poll with Q1's messages"
        if len(resumed) < 3:
            resumed += await poll_all(c, 3 - len(resumed))
        assert [m.queue_offset for m in resumed] == [0, 1, 2]
        assert {m.message_queue for m in resumed} == {Q1}


async def test_assigned_pulls_carry_their_expression_and_the_client_filters_tags() -> None:
    stored = [(b"a0", "A"), (b"b1", "B"), (b"a2", "A"), (b"n3", None)]
    broker = FakeBroker({Q1: stored})
    async with running(broker, [Q1], expression="A", broker_suspend_max_time_ms=7000) as c:
        got = await poll_all(c, 2)
        assert [m.body for m in got] == [b"a0", b"a2"]
        await wait_until(lambda: c._impl.states[Q1].consume_offset == 4, message="past the filtered")
    request = broker.pulls[0][1]
    assert request.has_subscription and request.sub_expression == "A"
    assert request.suspend and request.suspend_timeout_millis == 7000
    assert not request.commit_offset_enabled


@pytest.mark.parametrize(
    ("where", "committed", "query_error", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, None, None, 7),  # -1: the max offset
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, None, None, 0),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, 4, None, 4),  # stored wins
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, None, ServiceNotAvailable("x"), -1),
    ],
)
async def test_compute_pull_from_where_returns_minus_one_instead_of_raising(
    where: ConsumeFromWhere, committed: int | None, query_error: MQError | None, expected: int
) -> None:
    broker = FakeBroker({Q1: bodies(7)})
    if committed is not None:
        broker.committed[Q1] = committed
    broker.query_error = query_error
    c = LitePullConsumer("unit-g", "127.0.0.1:9", consume_from_where=where)
    c._impl.client = broker  # type: ignore[assignment]
    c._impl.offset_store = RemoteBrokerOffsetStore("unit-g", broker.invoke_broker)
    assert await c._impl.rebalance_mode.compute_pull_from_where(Q1) == expected
