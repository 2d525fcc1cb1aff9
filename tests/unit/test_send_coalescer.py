"""SendCoalescer: batches sent while a broker's request slots are taken share the next request,
each with its own slice of the answer; a bad batch fails only its own caller."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.producer.coalescer import SendCoalescer, Slice
from aiorocketmq.protocol.errors import MessageIllegal, ServiceNotAvailable, TopicNotFound
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2

A0, A1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
B0 = MessageQueue("T", "broker-b", 0)
U0 = MessageQueue("U", "broker-a", 0)


class FakeBroker:
    """Answers each request when told to (``answer``), as a broker storing its batches would:
    one message per byte of the body (so a batch ``b"xyz"`` is three messages)."""

    def __init__(self) -> None:
        self.requests: list[tuple[MessageQueue, bytes]] = []
        self.gates: list[asyncio.Future[None]] = []
        self.offset = 0
        self.refuse: bytes | None = None  # a body holding this is refused as illegal
        self.fail: Exception | None = None

    async def send(
        self, mq: MessageQueue, body: bytes, timeout: float
    ) -> broker_pb2.SendMessageResponse:
        self.requests.append((mq, body))
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        await gate
        if self.fail is not None:
            raise self.fail
        if self.refuse is not None and self.refuse in body:
            raise MessageIllegal(f"illegal message in {body!r}")
        first, self.offset = self.offset, self.offset + len(body)
        return broker_pb2.SendMessageResponse(
            message_queue=mq.to_proto(),
            first_queue_offset=first,
            commit_log_offsets=range(first, self.offset),
        )

    async def answer(self, n: int = 1) -> None:
        """Answer the next ``n`` requests (each out once everything ready has run)."""
        for _ in range(n):
            await idle()
            next(g for g in self.gates if not g.done()).set_result(None)
        await idle()


async def idle() -> None:
    """Let every task that can run, run (a handful of loop turns)."""
    for _ in range(20):
        await asyncio.sleep(0)


def coalescer(
    broker: FakeBroker, max_in_flight: int = 1, max_bytes: int = 1 << 20
) -> SendCoalescer:
    return SendCoalescer(broker.send, max_in_flight=max_in_flight, max_bytes=max_bytes)


def go(c: SendCoalescer, body: bytes, mq: MessageQueue = A0) -> asyncio.Future[Slice]:
    """A movable batch of one message per byte, sent to ``mq`` in a task of its own."""
    return asyncio.ensure_future(c.send(mq, body, len(body), 5, movable=True))


async def one_out(
    *, movable: bool = True, refuse: bytes | None = None
) -> tuple[FakeBroker, SendCoalescer, asyncio.Future[Slice]]:
    """A broker, a coalescer, and a first batch (``b"a"`` to A0) out and unanswered."""
    broker = FakeBroker()
    broker.refuse = refuse
    c = coalescer(broker)
    first = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=movable))
    await idle()
    return broker, c, first


def offsets(piece: Slice) -> list[int]:
    return list(piece.response.commit_log_offsets[piece.start : piece.start + piece.count])


async def test_a_lone_batch_goes_at_once_and_later_ones_share_the_next_request() -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    first = asyncio.ensure_future(c.send(A0, b"aa", 2, 5, movable=True))
    await idle()
    assert broker.requests == [(A0, b"aa")]  # nothing out: sent at once
    waiting = [
        asyncio.ensure_future(c.send(mq, body, len(body), 5, movable=True))
        for mq, body in ((A1, b"bbb"), (A0, b"c"), (A1, b"dd"))
    ]
    await idle()
    assert len(broker.requests) == 1  # the slot is taken: they wait
    await broker.answer()
    assert broker.requests[1] == (A1, b"bbbcdd")  # together, to the first one's queue, in order
    await broker.answer()
    pieces = [await first, *[await w for w in waiting]]
    assert [offsets(p) for p in pieces] == [[0, 1], [2, 3, 4], [5], [6, 7]]
    assert (c.requests, c.batches) == (2, 4)


async def test_named_queues_take_only_their_own_riders_and_topics_never_mix() -> None:
    broker, c, out = await one_out(movable=False)
    sends = [
        asyncio.ensure_future(c.send(mq, body, 1, 5, movable=movable))
        for mq, body, movable in (
            (A1, b"n", False),  # named A1: never moved to A0
            (A0, b"m", True),
            (U0, b"u", True),  # another topic
            (A1, b"o", False),
        )
    ]
    await idle()
    for _ in range(4):
        await broker.answer()
    await asyncio.gather(out, *sends)
    assert [(mq, body) for mq, body in broker.requests] == [
        (A0, b"a"),
        (A1, b"no"),  # the movable A0 batch does not ride to a named queue
        (A0, b"m"),
        (U0, b"u"),
    ]


async def test_brokers_have_their_own_slots() -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    a = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=True))
    b = asyncio.ensure_future(c.send(B0, b"b", 1, 5, movable=True))
    await idle()
    assert [mq for mq, _ in broker.requests] == [A0, B0]
    await broker.answer(2)
    await asyncio.gather(a, b)


async def test_a_request_stops_growing_at_max_bytes() -> None:
    broker = FakeBroker()
    c = coalescer(broker, max_bytes=4)
    sends = [asyncio.ensure_future(c.send(A0, b"xx", 2, 5, movable=True)) for _ in range(4)]
    for _ in range(3):
        await broker.answer()
    await asyncio.gather(*sends)
    assert [len(body) for _, body in broker.requests] == [2, 4, 2]


async def test_a_bad_batch_fails_only_its_caller() -> None:
    broker, c, first = await one_out(refuse=b"!")
    good, bad, also = go(c, b"good"), go(c, b"!"), go(c, b"ok")
    await idle()
    for _ in range(5):  # the first; the three together, refused; each of them again alone
        await broker.answer()
    await first
    assert offsets(await good) == [1, 2, 3, 4]
    with pytest.raises(MessageIllegal):
        await bad
    assert offsets(await also) == [5, 6]
    assert [body for _, body in broker.requests] == [b"a", b"good!ok", b"good", b"!", b"ok"]


@pytest.mark.parametrize("error", [ServiceNotAvailable("down"), TopicNotFound("gone")])
async def test_a_refusal_of_every_batch_alike_fails_them_all_at_once(error: Exception) -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    first = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=True))
    await idle()
    rest = [asyncio.ensure_future(c.send(A0, b"b", 1, 5, movable=True)) for _ in range(3)]
    await idle()
    broker.fail = error
    await broker.answer(2)
    for f in [first, *rest]:
        with pytest.raises(type(error)):
            await f
    assert len(broker.requests) == 2  # not sent again one by one


async def test_a_caller_that_gives_up_while_waiting_sends_nothing() -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    first = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=True))
    await idle()
    with pytest.raises(ServiceNotAvailable, match="timed out"):
        await c.send(A0, b"late", 4, 0.01, movable=True)
    cancelled = asyncio.ensure_future(c.send(A0, b"gone", 4, 5, movable=True))
    await idle()
    cancelled.cancel()
    await idle()
    kept = asyncio.ensure_future(c.send(A0, b"kept", 4, 5, movable=True))
    await broker.answer(2)
    await asyncio.gather(first, kept)
    assert [body for _, body in broker.requests] == [b"a", b"kept"]


async def test_close_cancels_the_requests_out_and_their_callers_hear_of_it() -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    sent = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=True))
    await idle()
    waiting = asyncio.ensure_future(c.send(A0, b"b", 1, 5, movable=True))
    await idle()
    await c.close()
    with pytest.raises(ServiceNotAvailable, match="abandoned"):
        await sent
    with pytest.raises(ServiceNotAvailable, match="shut down"):
        await waiting
    assert len(broker.requests) == 1


async def test_movable_batches_share_requests_and_a_delayed_one_goes_alone() -> None:
    broker, c, first = await one_out()
    sends = [
        asyncio.ensure_future(c.send(mq, body, 1, 5, movable=True, alone=alone))
        for mq, body, alone in ((A1, b"b", False), (A0, b"d", True), (A0, b"c", False))
    ]
    for _ in range(3):
        await broker.answer()
    await asyncio.gather(first, *sends)
    assert broker.requests == [(A0, b"a"), (A1, b"bc"), (A0, b"d")]


async def test_a_batch_given_up_is_not_sent_again_alone() -> None:
    """A refused request's batches go again one by one, but not the one whose caller gave up
    meanwhile (it may be retrying elsewhere: sending it too would store it twice)."""
    broker, c, first = await one_out(refuse=b"!")
    good, gone, bad = go(c, b"g"), go(c, b"x"), go(c, b"!")
    await broker.answer()  # the first; the three go together
    await idle()
    gone.cancel()
    await broker.answer()  # refused: each again alone, but not the one given up
    await broker.answer(2)
    await first
    assert offsets(await good) == [1]
    with pytest.raises(MessageIllegal):
        await bad
    assert [body for _, body in broker.requests] == [b"a", b"gx!", b"g", b"!"]


async def test_a_request_cancelled_before_it_began_frees_its_slot_and_fails_its_batches() -> None:
    broker = FakeBroker()
    c = coalescer(broker)
    sent = asyncio.ensure_future(c.send(A0, b"a", 1, 5, movable=True))
    await asyncio.sleep(0)  # queued and its request task created, not yet begun
    await c.close()
    with pytest.raises(ServiceNotAvailable, match="abandoned"):
        await sent
    later = asyncio.ensure_future(c.send(A0, b"b", 1, 5, movable=True))
    await broker.answer()
    assert offsets(await later) == [0]  # the slot was freed: the next batch went at once
