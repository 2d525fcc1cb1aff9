"""A pass that gives queues away and takes others sends the dropped queues' commits (fenced:
releases) and the new queues' offset queries (fenced: acquires) at once: one round trip to the
brokers, not two. A queue that is dropped and taken again in one pass (pull expired) is asked
after its commit."""

from __future__ import annotations

import asyncio

from aiorocketmq.consumer.allocate import AllocateMessageQueueAveragely
from aiorocketmq.consumer.fenced import FencedHandoff
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.rebalance_impl import RebalanceImpl
from aiorocketmq.consumer.types import MessageModel
from aiorocketmq.protocol.message_queue import MessageQueue
from tests.unit.test_rebalance_members import QUEUES, Members, Mode, T, rebalance


class Overlapping(Mode):
    """A mode whose commit of dropped queues waits until the offsets of new ones are asked
    (a pass that did one after the other would wait for ever), and which records the order."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.order: list[str] = []
        self.wait_for_query = True

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        self.order.append("commit started")
        if self.wait_for_query:
            await asyncio.wait_for(self.asked.wait(), 5)
        self.order.append("commit done")
        return await super().remove_unnecessary_message_queues(items)

    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        self.order.append("offsets asked")
        self.asked.set()
        return [0 for _ in mqs]


async def test_a_pass_that_drops_and_adds_asks_both_at_once() -> None:
    members = Members("b", answer=["b"])
    mode = Overlapping()
    impl = rebalance(members, mode)
    mode.wait_for_query = False
    assert await impl.do_rebalance(False)  # alone: all four queues
    members.notified["g"] = ["a", "b"]  # b sorts second: it gives 0, 1 away and keeps 2, 3
    assert await impl.do_rebalance(False)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {2, 3}
    mode.wait_for_query = True
    mode.order.clear()
    members.notified["g"] = ["b", "c"]  # b first: gives 2, 3 away and takes 0, 1
    assert await impl.do_rebalance(False)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}
    assert mode.order == ["commit started", "offsets asked", "commit done"]


async def test_a_pull_expired_queue_is_asked_for_after_its_commit() -> None:
    members = Members("a", answer=["a"])
    mode = Overlapping()
    mode.wait_for_query = False
    impl = rebalance(members, mode)
    assert await impl.do_rebalance(False)
    mq = min(QUEUES, key=lambda q: q.queue_id)
    impl.process_queue_table[mq].last_pull_timestamp -= 10 * 60 * 1000  # its pull was lost
    mode.order.clear()
    assert await impl.do_rebalance(False)
    assert mode.order == ["commit started", "commit done", "offsets asked"]
    assert impl.assigned_queues() == QUEUES


class FencedOverlapping(Overlapping):
    """Fenced: the release of dropped queues waits until the new ones are asked for."""

    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        self.order.append("acquire asked")
        self.asked.set()
        return {mq: (7, 0) for mq in mqs}


async def fenced_rebalance(members: Members, mode: FencedOverlapping) -> RebalanceImpl:
    """A fenced consumer "b" that has passed once with members a and b: it holds 2 and 3."""
    impl = RebalanceImpl(
        "g",
        MessageModel.CLUSTERING,
        AllocateMessageQueueAveragely(),
        members,
        mode,  # type: ignore[arg-type]
        fenced=True,
    )
    impl.subscription_inner[T] = ("*", 1)
    impl.topic_subscribe_info_table[T] = QUEUES
    mode.wait_for_query = False
    members.notified["g"] = ["a", "b"]
    assert await impl.do_rebalance(False)
    return impl


async def test_a_fenced_pass_that_drops_and_adds_releases_and_acquires_at_once() -> None:
    members = Members("b", answer=["b"])
    mode = FencedOverlapping()
    impl = await fenced_rebalance(members, mode)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {2, 3}
    mode.wait_for_query = True
    mode.order.clear()
    members.notified["g"] = ["b", "c"]  # b first: releases 2, 3 and acquires 0, 1
    assert await impl.do_rebalance(False)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}
    assert mode.order == ["commit started", "acquire asked", "commit done"]
    assert all(impl.epochs[mq] == 7 for mq in impl.assigned_queues())


async def test_a_fenced_pass_pairs_its_releases_with_its_acquires_unless_a_drain_waits() -> None:
    """Nothing in flight: the release rides with the acquire (``FencedHandoff.pair``), and
    the pairing ends with the releases. A batch in flight: the acquire does not wait for the
    drain, each goes alone."""
    members = Members("b", answer=["b"])
    mode = FencedOverlapping()
    impl = await fenced_rebalance(members, mode)
    mode.wait_for_query = False
    members.notified["g"] = ["b", "c"]  # b first: releases 2, 3 and acquires 0, 1
    assert await impl.do_rebalance(False)
    assert mode.paired == [{"b"}, set()]
    mode.paired.clear()
    impl.process_queue_table[min(impl.assigned_queues())].inflight = 1  # a batch consuming
    members.notified["g"] = ["a", "b"]  # b second again: releases 0, 1, acquires 2, 3
    assert await impl.do_rebalance(False)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {2, 3}
    assert mode.paired == []


class _NeverAnswers:
    client_id = "127.0.0.1@a"

    async def channel_id_for(self, broker_name: str) -> str | None:
        return "ch"

    def open_channel_id(self, broker_name: str) -> str:
        return "ch"

    async def invoke_broker(
        self, broker_name: str, method: str, request: object, timeout: float | None = None
    ) -> object:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def acquire_queues(self, broker_name: str, request: object) -> object:
        return await self.invoke_broker(broker_name, "AcquireQueues", request)


async def test_an_acquire_abandoned_with_its_pass_leaves_its_queues_unsure() -> None:
    handoff = FencedHandoff(_NeverAnswers(), "g")  # type: ignore[arg-type]
    mq = min(QUEUES, key=lambda q: q.queue_id)
    task = asyncio.ensure_future(handoff.acquire([mq]))
    await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    # The request may have reached the broker and been granted: asked again, released if
    # no longer wanted (the path of an acquire whose answer was lost).
    assert handoff.unsure == {mq}


class FailingRelease(FencedOverlapping):
    """The release fails after the acquire (sent at once with it) was granted."""

    def __init__(self) -> None:
        super().__init__()
        self.abandoned: set[MessageQueue] = set()

    async def remove_unnecessary_message_queues(
        self, items: list[tuple[MessageQueue, ProcessQueue]]
    ) -> list[bool]:
        if self.wait_for_query:
            await asyncio.wait_for(self.asked.wait(), 5)
            await asyncio.sleep(0)  # the acquire's answer is in
            raise RuntimeError("release failed")
        return await super().remove_unnecessary_message_queues(items)

    def abandon_grants(self, mqs: object) -> None:
        self.abandoned.update(mqs)  # type: ignore[call-overload]


async def test_grants_a_failed_pass_got_and_did_not_take_are_left_unsure() -> None:
    members = Members("b", answer=["b"])
    mode = FailingRelease()
    impl = await fenced_rebalance(members, mode)
    mode.wait_for_query = True
    members.notified["g"] = ["b", "c"]  # releases 2, 3 (fails) and acquires 0, 1 at once
    assert not await impl.do_rebalance(False)
    assert {mq.queue_id for mq in mode.abandoned} == {0, 1}
    assert {mq.queue_id for mq in impl.process_queue_table} == {2, 3}  # 0, 1 not taken


class GrantsThenNoOffsets(FailingRelease):
    """Grants with no committed offset, whose start-offset query then fails or finds none."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        return {mq: (7, -1) for mq in mqs}

    async def compute_pull_from_where_many(self, mqs: list[MessageQueue]) -> list[int]:
        if self.answer == "deadline":
            raise TimeoutError("offset query deadline")
        return [-1 if mq.queue_id == 0 else 0 for mq in mqs]


async def test_grants_a_pass_cannot_start_are_left_unsure_not_held_in_silence() -> None:
    """A granted queue the pass does not take is the broker's to everyone else's loss: the
    next pass must know of it (ask again, or release it)."""
    for answer, taken in (("deadline", set()), ("unknown", {1, 2, 3})):
        members = Members("a", answer=["a"])
        mode = GrantsThenNoOffsets(answer)
        impl = RebalanceImpl(
            "g",
            MessageModel.CLUSTERING,
            AllocateMessageQueueAveragely(),
            members,
            mode,  # type: ignore[arg-type]
            fenced=True,
        )
        impl.subscription_inner[T] = ("*", 1)
        impl.topic_subscribe_info_table[T] = QUEUES
        assert not await impl.do_rebalance(False)
        assert {mq.queue_id for mq in impl.process_queue_table} == taken
        assert {mq.queue_id for mq in mode.abandoned} == {0, 1, 2, 3} - taken


class GatedAcquire(FencedOverlapping):
    """Fenced: an acquire waits at the gate while ``gated`` (a broker holding it for a
    release); counts the acquires asked."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gated = False
        self.acquires = 0

    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        self.acquires += 1
        granted = await super().acquire(mqs, wait_ms=wait_ms)
        if self.gated:
            await self.gate.wait()
        return granted


async def test_leaving_waits_for_the_pass_changing_the_table_and_then_nothing_changes_it() -> None:
    """What a leave lets go is the whole table: a pass taking queues when the leave begins
    finishes first (its queues are released with the rest), and no pass, take-over or retry
    after it takes another (one would be let go by the unregister alone, without its final
    offset, while the leaver is still its holder in the trace)."""
    members = Members("b", answer=["b"])
    mode = GatedAcquire()
    impl = await fenced_rebalance(members, mode)
    mode.gated = True
    members.notified["g"] = ["b", "c"]  # b first: releases 2, 3 and acquires 0, 1
    passing = asyncio.ensure_future(impl.do_rebalance(False))
    await asyncio.wait_for(mode.asked.wait(), 5)
    leaving = asyncio.ensure_future(impl.stop_taking_queues())
    await asyncio.sleep(0.01)
    assert not leaving.done()  # the pass holds the table
    mode.gate.set()
    await passing
    await asyncio.wait_for(leaving, 5)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}
    asked = mode.acquires
    members.notified["g"] = ["a", "b"]  # b second: would give 0, 1 away and take 2, 3
    await impl.do_rebalance(False)
    two = next(mq for mq in QUEUES if mq.queue_id == 2)
    assert not await impl.try_acquire_released(two)
    assert {mq.queue_id for mq in impl.assigned_queues()} == {0, 1}
    assert mode.acquires == asked


async def test_a_leaving_consumer_stops_asking_for_queues_still_held_by_others() -> None:
    members = Members("b", answer=["b"])
    mode = GatedAcquire()
    impl = await fenced_rebalance(members, mode)
    impl.fenced_retry_ms = 5
    impl.allocation[T] = set(QUEUES)  # 0 and 1 still held by their previous owner
    mode.acquire = _denied  # type: ignore[method-assign]
    impl._keep_acquiring(T)
    await asyncio.sleep(0.03)
    retry = impl._acquire_tasks[T]
    assert not retry.done()
    await impl.stop_taking_queues()
    await asyncio.wait_for(retry, 1)  # it ends at its next turn, asking nothing more
    assert {mq.queue_id for mq in impl.assigned_queues()} == {2, 3}


async def _denied(
    mqs: list[MessageQueue], *, wait_ms: int = 0
) -> dict[MessageQueue, tuple[int, int]]:
    return {}
