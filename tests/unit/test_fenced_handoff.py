"""The client side of the fenced handoff: a release the broker did not get is sent again, and
a grant whose answer was lost is found and released when the pass no longer wants it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiorocketmq.broker.client.queue_grants import QueueGrantManager
from aiorocketmq.consumer import fenced as fenced_module
from aiorocketmq.consumer.fenced import FencedHandoff
from aiorocketmq.protocol.errors import ServiceNotAvailable
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2

Q0, Q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


class Broker:
    """A broker that fails the next ``failures`` calls, then grants and releases everything."""

    client_id = "c1"

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.releases: list[list[tuple[int, int, int]]] = []
        self.waits: list[int] = []  # each acquire's wait_millis

    async def channel_id_for(self, broker_name: str) -> str | None:
        return "ch1"

    def open_channel_id(self, broker_name: str) -> str:
        return "ch"

    async def acquire_queues(self, broker_name: str, request: Any) -> Any:
        return await self.invoke_broker(broker_name, "AcquireQueues", request)

    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        if self.failures:
            self.failures -= 1
            raise ServiceNotAvailable("broker down")
        if method == "AcquireQueues":
            self.waits.append(request.wait_millis)
            return broker_pb2.AcquireQueuesResponse(
                granted=[
                    broker_pb2.QueueGrant(message_queue=m, epoch=7, committed_offset=3)
                    for m in request.mq_set
                ]
            )
        self.releases.append(
            [(r.message_queue.queue_id, r.epoch, r.final_offset) for r in request.releases]
        )
        return broker_pb2.ReleaseQueuesResponse(
            released=[r.message_queue for r in request.releases]
        )


async def test_a_failed_release_is_sent_again_before_the_next_rebalance() -> None:
    broker = Broker()
    fenced = FencedHandoff(broker, "G")
    assert await fenced.acquire([Q0, Q1]) == {Q0: (7, 3), Q1: (7, 3)}
    broker.failures = 1
    assert await fenced.release([(Q0, 10), (Q1, 11)]) == set()
    assert fenced.pending == {Q0: (7, 10), Q1: (7, 11)}  # the broker still counts us as holder
    assert fenced.epochs == {}  # not ours to pull any more
    assert await fenced.retry_pending() == {Q0, Q1}
    assert broker.releases == [[(0, 7, 10), (1, 7, 11)]]
    assert fenced.pending == {}
    assert await fenced.retry_pending() == set()  # nothing owed: no call
    assert len(broker.releases) == 1


async def test_a_queue_granted_again_voids_the_release_still_owed() -> None:
    broker = Broker()
    fenced = FencedHandoff(broker, "G")
    await fenced.acquire([Q0])
    broker.failures = 1
    await fenced.release([(Q0, 10)])
    assert Q0 in fenced.pending
    await fenced.acquire([Q0])  # the rebalance gave it back to us
    assert fenced.pending == {}
    assert await fenced.retry_pending() == set()
    assert broker.releases == []


class GrantingBroker:
    """One broker's real grant table; ``lose`` answers are lost after the broker acted."""

    def __init__(self) -> None:
        self.grants = QueueGrantManager()
        self.lose = 0
        self.calls: list[str] = []  # each request: its method, and "+release" when one rode

    def client(self, client_id: str) -> Client:
        return Client(self, client_id)


class Client:
    def __init__(self, broker: GrantingBroker, client_id: str) -> None:
        self.broker = broker
        self.client_id = client_id

    async def channel_id_for(self, broker_name: str) -> str | None:
        return f"ch-{self.client_id}"

    def open_channel_id(self, broker_name: str) -> str:
        return "ch"

    async def acquire_queues(self, broker_name: str, request: Any) -> Any:
        return await self.invoke_broker(broker_name, "AcquireQueues", request)

    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        grants = self.broker.grants
        rode = method == "AcquireQueues" and request.releases
        self.broker.calls.append(method + ("+release" if rode else ""))
        releases = [(MessageQueue.from_proto(r.message_queue), r.epoch) for r in request.releases]
        released = grants.release(request.consumer_group, self.client_id, releases)
        if method == "AcquireQueues":
            mqs = [MessageQueue.from_proto(m) for m in request.mq_set]
            result = grants.acquire(request.consumer_group, self.client_id, request.channel_id, mqs)
            response: Any = broker_pb2.AcquireQueuesResponse(
                granted=[
                    broker_pb2.QueueGrant(message_queue=g.mq.to_proto(), epoch=g.epoch)
                    for g in result.granted
                ],
                released=[mq.to_proto() for mq in released],
            )
        else:
            response = broker_pb2.ReleaseQueuesResponse(released=[mq.to_proto() for mq in released])
        if self.broker.lose:
            self.broker.lose -= 1
            raise ServiceNotAvailable("deadline exceeded")  # the broker acted; the answer is lost
        return response


async def test_a_grant_whose_answer_was_lost_is_released_when_the_pass_no_longer_wants_it() -> None:
    broker = GrantingBroker()
    first = FencedHandoff(broker.client("c1"), "G")
    second = FencedHandoff(broker.client("c2"), "G")
    broker.lose = 1
    assert await first.acquire([Q0]) == {}  # granted at the broker, but we never heard
    assert first.unsure == {Q0}
    assert await second.acquire([Q0]) == {}  # held by c1, which does not know it
    await first.retry_pending()  # before c1's next pass: asked again, and released
    assert first.unsure == set()
    assert first.epochs == {}
    assert await second.acquire([Q0]) == {Q0: (2, 0)}  # the rightful owner gets it


async def test_a_grant_whose_answer_was_lost_is_kept_when_the_pass_still_wants_it() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    broker.lose = 1
    assert await fenced.acquire([Q0, Q1]) == {}
    assert await fenced.acquire([Q1]) == {Q1: (1, 0)}  # Q1 again: the same grant, same epoch
    assert fenced.unsure == set()  # Q0, no longer wanted, was asked for and released
    assert broker.grants.holder("G", Q0) is None
    assert fenced.epochs == {Q1: 1}
    broker.lose = 1
    assert await fenced.acquire([Q0]) == {}
    broker.lose = 1
    assert await fenced.retry_pending() == set()  # the answer lost again: still unsure
    assert fenced.unsure == {Q0}
    assert await fenced.acquire([Q0]) == {Q0: (2, 0)}  # wanted after all: the grant it had
    assert fenced.unsure == set()


async def test_settling_spares_what_the_next_pass_wants() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    broker.lose = 1
    assert await fenced.acquire([Q0, Q1]) == {}
    await fenced.retry_pending(wanted={Q0, Q1})  # the pass asks for both itself
    assert fenced.unsure == {Q0, Q1}
    assert broker.grants.holder("G", Q0) is not None
    assert await fenced.acquire([Q0, Q1]) == {Q0: (1, 0), Q1: (1, 0)}
    assert fenced.unsure == set()


async def test_a_stray_grant_is_released_with_the_final_offset_still_owed() -> None:
    broker = GrantingBroker()
    client = broker.client("c1")
    fenced = FencedHandoff(client, "G")
    await fenced.acquire([Q1])
    # Q1's release never reached the broker (7 still owed), and an acquire of it since lost
    # its answer: settling finds it granted and releases it with 7, not with nothing.
    fenced.epochs.pop(Q1)
    fenced.pending[Q1] = (1, 7)
    fenced.unsure.add(Q1)
    sent: list[tuple[int, int]] = []
    invoke = client.invoke_broker

    async def spy(name: str, method: str, request: Any, timeout: float | None = None) -> Any:
        if method == "ReleaseQueues":
            sent.extend((r.message_queue.queue_id, r.final_offset) for r in request.releases)
        return await invoke(name, method, request, timeout)

    client.invoke_broker = spy  # type: ignore[method-assign]
    await fenced.retry_pending()
    assert sent == [(1, 7)]
    assert broker.grants.holder("G", Q1) is None
    assert fenced.pending == {} and fenced.unsure == set()


async def test_a_refusal_is_an_answer_not_an_unsure_grant() -> None:
    from aiorocketmq.protocol.errors import ChannelNotFound

    class Refusing(Broker):
        async def invoke_broker(
            self, broker_name: str, method: str, request: Any, timeout: float | None = None
        ) -> Any:
            raise ChannelNotFound("channel unknown")

    fenced = FencedHandoff(Refusing(), "G")
    assert await fenced.acquire([Q0]) == {}
    assert fenced.unsure == set()


async def test_an_acquire_leaves_alone_the_unsure_grants_the_allocation_still_wants() -> None:
    """An unsure grant that the allocation still wants (another topic's pass was abandoned) is
    not asked along with another acquire of its broker, and so not released as a stray: its
    own pass asks for it. One no longer wanted still is."""
    broker = GrantingBroker()
    other = MessageQueue("U", "broker-a", 0)
    wanted = {Q0, other}
    fenced = FencedHandoff(broker.client("c1"), "G", lambda: wanted)
    broker.lose = 1
    assert await fenced.acquire([other]) == {}  # granted, the answer lost: unsure
    assert await fenced.acquire([Q0]) == {Q0: (1, 0)}
    assert fenced.unsure == {other}  # not asked: still granted, not released
    assert broker.grants.holder("G", other) is not None
    assert await fenced.acquire([other]) == {other: (1, 0)}  # its own pass: the same grant
    wanted.discard(other)
    broker.lose = 1
    assert await fenced.acquire([other]) == {}
    assert await fenced.acquire([Q1]) == {Q1: (1, 0)}  # ``other`` rides along, and goes
    assert fenced.unsure == set()
    assert broker.grants.holder("G", other) is None


async def test_what_only_a_pass_settles_wakes_the_rebalance() -> None:
    """A release that failed (the broker still counts us as holder, and another consumer
    waits for the queue) or an acquire whose answer was lost wakes a pass at once, not at
    the periodic one 20 s later."""
    broker = Broker()
    woken: list[int] = []
    fenced = FencedHandoff(broker, "G", owed=lambda: woken.append(1))
    await fenced.acquire([Q0])
    assert not fenced.owes() and woken == []
    broker.failures = 1
    await fenced.release([(Q0, 10)])
    await asyncio.sleep(0)
    assert fenced.owes() and woken == [1]
    await fenced.retry_pending()
    assert not fenced.owes()
    broker.failures = 1
    assert await fenced.acquire([Q1]) == {}  # no answer: perhaps granted
    await asyncio.sleep(0)
    assert fenced.unsure == {Q1} and fenced.owes() and woken == [1, 1]  # at once again
    fenced.close()


async def test_wake_ups_back_off_while_the_broker_stays_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each wake-up runs a pass whose retry fails again: the passes space out (here 10 ms
    doubling to 40 ms; 1 s to 20 s in use) instead of one per minimum interval for ever."""
    monkeypatch.setattr(fenced_module, "OWED_WAKE_MIN_S", 0.01)
    monkeypatch.setattr(fenced_module, "OWED_WAKE_MAX_S", 0.04)
    broker = Broker()
    spacing: list[float] = []  # at each pass: how long until the next may run
    retries: set[asyncio.Task[set[MessageQueue]]] = set()
    loop = asyncio.get_running_loop()
    fenced: FencedHandoff

    def wake() -> None:  # the rebalance service runs a pass: it retries, and fails again
        spacing.append(round(fenced._wake_at - loop.time(), 3))
        broker.failures = 1
        task = loop.create_task(fenced.retry_pending())
        retries.add(task)
        task.add_done_callback(retries.discard)

    fenced = FencedHandoff(broker, "G", owed=wake)
    await fenced.acquire([Q0])
    broker.failures = 1
    await fenced.release([(Q0, 10)])
    await asyncio.sleep(0.2)
    assert spacing[:4] == [0.01, 0.02, 0.04, 0.04]
    assert len(spacing) <= 8  # 0, 10, 30, 70, 110, 150, 190 ms at the earliest
    assert fenced.owes()
    broker.failures = 0  # the broker is back: the next retry clears it, and the backoff
    await fenced.retry_pending()
    assert not fenced.owes() and fenced._backoff == 0.01
    fenced.close()


async def test_an_acquire_waits_as_asked_but_never_with_unsure_queues_aboard() -> None:
    """An acquire may wait at the broker for queues about to be let go, but not one that also
    settles unsure queues (it would take them from whoever waits for them)."""
    broker = Broker()
    fenced = FencedHandoff(broker, "G")
    await fenced.acquire([Q0], wait_ms=800)
    await fenced.acquire([Q0])
    fenced.unsure.add(Q1)
    await fenced.acquire([Q0], wait_ms=800)
    assert broker.waits == [800, 0, 0]


async def _pass(fenced: FencedHandoff, drop: MessageQueue, take: MessageQueue) -> tuple[Any, Any]:
    """A pass's two halves as ``RebalanceImpl`` runs them: the acquire started ahead, then the
    release, then ``unpair``; both answers."""
    acquiring = asyncio.ensure_future(fenced.acquire([take]))
    released = await fenced.release([(drop, 10)])
    fenced.unpair()
    return released, await acquiring


async def test_a_leaves_releases_ride_with_the_unregister_where_a_channel_is_open() -> None:
    """``leaving`` gives the releases to carry in each broker's UNREGISTER_CLIENT (a broker
    with no open channel gets its release alone, first); ``left`` reads the answers; an
    unregister that got no answer is logged, not sent again."""
    from aiorocketmq.trace import tracer

    broker = GrantingBroker()
    client = broker.client("c1")
    fenced = FencedHandoff(client, "G")
    qb = MessageQueue("T", "broker-b", 0)
    await fenced.acquire([Q0, Q1, qb])
    epochs = dict(fenced.epochs)
    client.open_channel_id = lambda name: "ch" if name == "broker-a" else ""  # type: ignore[method-assign]
    broker.calls.clear()
    riding = await fenced.leaving([(Q0, 5), (Q1, 6), (qb, 7)])
    assert broker.calls == ["ReleaseQueues"]  # broker-b's, alone
    assert broker.grants.holder("G", qb) is None and fenced.epochs == {}
    assert riding == {"broker-a": [(Q0, epochs[Q0], 5), (Q1, epochs[Q1], 6)]}
    riders = fenced.riders(riding)
    assert [(r.message_queue.queue_id, r.epoch, r.final_offset) for r in riders["broker-a"]] == [
        (0, epochs[Q0], 5),
        (1, epochs[Q1], 6),
    ]
    seen: list[dict[str, Any]] = []
    tracer.subscribe(seen.append)
    try:
        assert fenced.left(riding, {"broker-a": [Q0.to_proto()]}) == {}  # Q1's was refused
        assert [(r["event"], r["mq"]) for r in seen] == [("queue_released", str(Q0))]
        # No answer (a broker restarted: our channel unknown there, the unregister refused):
        # the releases go alone, as ReleaseQueues, which matches the grants' epochs.
        unanswered = fenced.left(riding, {"broker-a": None})
        assert unanswered == riding
        seen.clear()
        await fenced.release_each(unanswered)
    finally:
        tracer.unsubscribe(seen.append)
    assert broker.calls == ["ReleaseQueues", "ReleaseQueues"]
    assert [r["mq"] for r in seen if r["event"] == "queue_released"] == [str(Q0), str(Q1)]
    assert broker.grants.holder("G", Q0) is None and fenced.pending == {}


async def test_a_paired_release_rides_with_the_acquire_to_its_broker() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    await fenced.acquire([Q0])
    fenced.pair({"broker-a"})
    released, grants = await _pass(fenced, Q0, Q1)
    assert released == {Q0} and set(grants) == {Q1}
    assert broker.calls == ["AcquireQueues", "AcquireQueues+release"]  # one request, not two
    assert broker.grants.holder("G", Q0) is None and fenced.pending == {}


async def test_unpaired_the_release_goes_alone() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    await fenced.acquire([Q0])
    released, grants = await _pass(fenced, Q0, Q1)
    assert released == {Q0} and set(grants) == {Q1}
    assert broker.calls == ["AcquireQueues", "ReleaseQueues", "AcquireQueues"]


async def test_an_acquire_waiting_for_a_release_that_never_comes_goes_alone_at_unpair() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    fenced.pair({"broker-a"})
    acquiring = asyncio.ensure_future(fenced.acquire([Q1]))
    await asyncio.sleep(0.01)
    assert not acquiring.done() and broker.calls == []  # waiting for the pass's release
    fenced.unpair()  # the pass had nothing to release there (no grant held)
    assert set(await acquiring) == {Q1}
    assert broker.calls == ["AcquireQueues"]


async def test_a_ride_without_a_channel_is_declined_and_the_release_goes_alone() -> None:
    broker = GrantingBroker()
    client = broker.client("c1")
    fenced = FencedHandoff(client, "G")
    await fenced.acquire([Q0])
    channel = client.channel_id_for

    async def no_channel(broker_name: str) -> str | None:
        return None

    client.channel_id_for = no_channel  # type: ignore[method-assign]
    fenced.pair({"broker-a"})
    released, grants = await _pass(fenced, Q0, Q1)
    assert grants == {} and released == {Q0}
    assert broker.calls == ["AcquireQueues", "ReleaseQueues"]
    client.channel_id_for = channel  # type: ignore[method-assign]


async def test_a_ride_whose_answer_is_lost_leaves_the_release_owed_and_the_acquire_unsure() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    await fenced.acquire([Q0])
    fenced.pair({"broker-a"})
    broker.lose = 1
    released, grants = await _pass(fenced, Q0, Q1)
    assert released == set() and grants == {}
    assert set(fenced.pending) == {Q0} and fenced.unsure == {Q1}
    await fenced.retry_pending()  # the broker did release Q0 (refused now); Q1 is settled
    assert fenced.pending == {} and fenced.unsure == set()
    assert broker.grants.holder("G", Q1) is None  # not wanted any more: released again
    fenced.close()


async def test_an_abandoned_ride_leaves_the_release_owed() -> None:
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    await fenced.acquire([Q0])
    gate = asyncio.Event()

    class Slow(Client):
        """Its requests never come back (the gate stays shut)."""

        async def invoke_broker(
            self, broker_name: str, method: str, request: Any, timeout: float | None = None
        ) -> Any:
            await gate.wait()
            return await super().invoke_broker(broker_name, method, request, timeout)

    fenced.client = Slow(broker, "c1")
    fenced.pair({"broker-a"})
    acquiring = asyncio.ensure_future(fenced.acquire([Q1]))
    releasing = asyncio.ensure_future(fenced.release([(Q0, 10)]))
    await asyncio.sleep(0.01)
    acquiring.cancel()  # the pass failed while the request was out
    assert await releasing == set()
    assert set(fenced.pending) == {Q0} and Q1 in fenced.unsure
    fenced.close()


async def test_a_release_handed_over_that_no_acquire_takes_goes_alone_at_unpair() -> None:
    """Paired, a release made while no acquire to its broker is coming (a stray released
    inside another acquire, say) is not left waiting: unpair sends it alone."""
    broker = GrantingBroker()
    fenced = FencedHandoff(broker.client("c1"), "G")
    await fenced.acquire([Q0])
    fenced.pair({"broker-a"})
    releasing = asyncio.ensure_future(fenced.release([(Q0, 10)]))
    await asyncio.sleep(0.01)
    assert not releasing.done() and broker.calls == ["AcquireQueues"]
    fenced.unpair()
    assert await releasing == {Q0}
    assert broker.calls == ["AcquireQueues", "ReleaseQueues"]


async def test_an_offset_a_grant_gave_is_not_committed_back_by_the_periodic_commit() -> None:
    """A grant's committed offset is one its broker holds (never a default): the periodic
    commit (only what the broker does not have) sends it only once consumption moved it. It
    sent each back, a commit per moved consumer per change."""
    from types import SimpleNamespace

    from aiorocketmq.consumer.consumer_core import ConsumerCore
    from aiorocketmq.consumer.offset_store import RemoteBrokerOffsetStore

    sent: list[dict[int, int]] = []

    async def invoke(broker_name: str, method: str, request: Any) -> Any:
        assert method == "UpdateConsumerOffset"
        sent.append({o.queue_id: o.offset for o in request.offsets})
        return broker_pb2.UpdateConsumerOffsetResponse()

    class Granting:
        async def acquire(
            self, mqs: list[MessageQueue], *, wait_ms: int = 0
        ) -> dict[MessageQueue, tuple[int, int]]:
            return {Q0: (3, 7), Q1: (3, -1)}  # Q1: nothing committed yet

    store = RemoteBrokerOffsetStore("G", invoke)
    core = SimpleNamespace(fenced=Granting(), offset_store=store)
    await ConsumerCore.acquire(core, [Q0, Q1])  # type: ignore[arg-type]
    store.update_offset(Q1, 4, increase_only=False)  # the start offset the consumer chose
    await store.persist_all({Q0, Q1})
    assert sent == [{1: 4}]
    store.update_offset(Q0, 9, increase_only=True)  # consumed
    await store.persist_all({Q0, Q1})
    assert sent[1:] == [{0: 9}]
