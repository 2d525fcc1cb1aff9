"""A fenced queue dropped and granted to us again: what arrives late about the earlier grant
(its release's answer, a refused pull, a refused commit) leaves the newer grant alone; a queue
added while its broker's channel is down waits for a new channel to confirm its grant; and the
trace checker reads grants a broker took back (a close, an expiry) the same way.

Found by a fault schedule with a broker paused: the broker closed the consumer's channel and
gave its grants away; the consumer reopened, dropped its queues of that broker and released
them; the first release answered woke a pass, which acquired another of those queues again
while that one's release was still out. When it came back, the drop forgot the queue's epoch,
now the new grant's: the queue was then neither committed under nor released when the next
rebalance moved it, and the broker kept it ours, unconsumed, until the consumer left.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiorocketmq.consumer import PushConsumer
from aiorocketmq.consumer.fenced import FencedHandoff
from aiorocketmq.consumer.offset_store import RemoteBrokerOffsetStore
from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.pull_message_service import PullRequest
from aiorocketmq.consumer.push_consumer import PushConsumerImpl
from aiorocketmq.protocol.errors import QueueFenced
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.trace_check import check
from tests.unit.test_fenced_handoff import Q0, Broker
from tests.unit.test_rebalance_members import Members
from tests.unit.test_rebalance_round_trips import FencedOverlapping, fenced_rebalance


class SlowRelease(FencedOverlapping):
    """Grants with ``epoch``; the release of a dropped queue waits for ``released``."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 7
        self.released = asyncio.Event()
        self.released.set()

    async def acquire(
        self, mqs: list[MessageQueue], *, wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        return {mq: (self.epoch, 0) for mq in mqs}

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        await asyncio.wait_for(self.released.wait(), 5)
        return True


async def test_a_drop_whose_release_is_out_leaves_the_queue_granted_again_meanwhile() -> None:
    members = Members("b", answer=["b"])
    mode = SlowRelease()
    impl = await fenced_rebalance(members, mode)  # holds 2 and 3 under epoch 7
    mq = max(impl.assigned_queues(), key=lambda q: q.queue_id)
    old = impl.process_queue_table[mq]
    assert old.epoch == impl.epochs[mq] == 7
    mode.released.clear()
    old.dropped = True  # its grant was lost with the channel
    dropping = asyncio.ensure_future(impl.remove_process_queue(mq, old))
    await asyncio.sleep(0)
    assert mq not in impl.process_queue_table  # the release is out
    mode.epoch = 8
    members.notified["g"] = ["a", "b"]
    assert await impl.do_rebalance(False)  # another drop's answer woke a pass: granted again
    new = impl.process_queue_table[mq]
    assert new is not old and new.epoch == impl.epochs[mq] == 8
    mode.released.set()
    await dropping
    assert impl.epochs[mq] == 8  # the new grant is still known: committed under, released
    assert impl.process_queue_table[mq] is new and not new.dropped
    await impl.remove_process_queue(mq, old)  # a second late drop of the old one: nothing
    assert impl.process_queue_table[mq] is new and impl.epochs[mq] == 8


async def test_a_release_of_an_earlier_grant_keeps_the_newer_epoch() -> None:
    broker = Broker()
    fenced = FencedHandoff(broker, "G")
    await fenced.acquire([Q0])
    fenced.epochs[Q0] = 8  # granted again while the old process queue drained
    await fenced.release([(Q0, 10)], epochs={Q0: 7})
    assert broker.releases == [[(0, 7, 10)]]  # the old grant's release, refused by a broker
    assert fenced.epochs == {Q0: 8}
    await fenced.release([(Q0, 12)])  # the newer one's, with the epoch held now
    assert broker.releases[-1] == [(0, 8, 12)]
    assert fenced.epochs == {}


class Client:
    client_id = "b"

    def __init__(self) -> None:
        self.asked = asyncio.Event()  # a pass asked for
        self.open: dict[str, str] = {}  # broker -> the id of our open channel to it

    def rebalance_immediately(self) -> None:
        self.asked.set()

    def open_channel_id(self, broker_name: str) -> str:
        return self.open.get(broker_name, "")


async def fenced_consumer() -> tuple[PushConsumerImpl, MessageQueue, ProcessQueue]:
    """A fenced push consumer (not started) whose rebalance holds a queue under epoch 8."""
    consumer = PushConsumer("g", "127.0.0.1:9876", handoff="fenced")._impl
    members = Members("b", answer=["b"])
    mode = SlowRelease()
    mode.epoch = 8
    impl = await fenced_rebalance(members, mode)
    consumer.rebalance_impl = impl
    consumer.client = Client()  # type: ignore[assignment]
    mq = max(impl.assigned_queues(), key=lambda q: q.queue_id)
    return consumer, mq, impl.process_queue_table[mq]


async def test_a_late_refusal_of_an_earlier_grants_commit_or_pull_drops_nothing() -> None:
    consumer, mq, pq = await fenced_consumer()
    consumer._on_commit_fenced(mq, 7)  # a commit sent under the earlier grant
    old = ProcessQueue()
    old.epoch = 7
    assert not await consumer.on_pull_fenced(mq, old, QueueFenced("stale"))
    await asyncio.sleep(0)
    assert consumer.rebalance_impl is not None
    assert consumer.rebalance_impl.process_queue_table[mq] is pq and not pq.dropped
    consumer._on_commit_fenced(mq, 8)  # the grant held now: dropped, and a pass asked for
    assert pq.dropped
    client = consumer.client
    assert isinstance(client, Client)
    await asyncio.wait_for(client.asked.wait(), 5)
    assert mq not in consumer.rebalance_impl.process_queue_table


async def test_a_refused_commit_names_the_epoch_it_presented() -> None:
    refused: list[tuple[MessageQueue, int]] = []

    async def invoke(broker: str, method: str, request: Any) -> Any:
        store.epochs[Q0] = 8  # granted again while the commit was out
        raise QueueFenced("stale")

    store = RemoteBrokerOffsetStore("G", invoke)
    store.fenced = True
    store.on_fenced = lambda mq, epoch: refused.append((mq, epoch))
    store.epochs[Q0] = 7
    store.update_offset(Q0, 5, increase_only=False)
    await store.persist(Q0)
    assert refused == [(Q0, 7)]


def record(ts: int, event: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, "group": "g", "client_id": "c", "pid": 1, **fields}


def test_the_checker_ends_a_holding_only_at_a_release_of_its_own_grant() -> None:
    q = str(Q0)
    records = [
        record(1, "queue_acquired", mq=q, epoch=7, offset=0),
        record(2, "queue_added", mq=q, epoch=7, offset=0),
        record(3, "queue_dropped", mq=q),
        record(4, "queue_acquired", mq=q, epoch=8, offset=0),
        record(5, "queue_added", mq=q, epoch=8, offset=0),
        record(6, "queue_releasing", mq=q, epoch=7, offset=0),  # the drop's, drained late
    ]
    report = check(records, group="g")
    assert [(h.start, h.end) for h in report.holdings[q]] == [(1, 3), (4, None)]


def test_the_checker_ends_a_holding_where_a_restarted_broker_let_its_grant_expire() -> None:
    """A consumer stopped while its broker restarted: the broker restored its grant and, the
    client not back in time, gave it to another; no channel of the new broker process closed."""
    q = str(Q0)
    other = {**record(0, "queue_acquired"), "client_id": "d", "pid": 2}
    records = [
        record(1, "queue_acquired", mq=q, epoch=7, offset=0),
        record(2, "queue_added", mq=q, epoch=7, offset=0),
        {
            "ts": 5,
            "event": "grants_expired",
            "broker": "broker-a",
            "client_id": "c",
            "group": "g",
            "queues": [q],
        },
        {**other, "ts": 6, "mq": q, "epoch": 8, "offset": 0},
        record(9, "queue_dropped", mq=q),  # c runs again and learns it
    ]
    report = check(records, group="g")
    assert [(h.client_id, h.start, h.end) for h in report.holdings[q]] == [
        ("c|1", 1, 5),
        ("d|2", 6, None),
    ]
    assert report.total_double_ownership_ms == 0


def test_a_queue_added_under_a_grant_the_broker_took_back_is_not_held() -> None:
    """A pass got the grant, then its process stopped before adding the queue; the broker
    closed the channel and granted the queue to another. The pass, run on, adds it under the
    taken-back epoch: each pull is refused, nothing is consumed, and it is dropped at the reopen."""
    q = str(Q0)
    other = {"group": "g", "client_id": "d", "pid": 2}
    records = [
        record(1, "queue_acquired", mq=q, epoch=7, offset=0),
        {
            "ts": 3,
            "event": "channel_closed",
            "broker": "broker-a",
            "client_id": "c",
            "channel_id": "x",
            "groups": ["g"],
            "replaced_by": "",
        },
        {**other, "ts": 4, "event": "queue_acquired", "mq": q, "epoch": 8, "offset": 0},
        record(6, "queue_added", mq=q, epoch=7, offset=0),  # c runs again
        record(7, "channel_opened", broker="broker-a", channel_id="y"),
        record(8, "queue_dropped", mq=q),
    ]
    report = check(records, group="g")
    assert [(h.client_id, h.start, h.end) for h in report.holdings[q]] == [
        ("c|1", 1, 3),
        ("d|2", 4, None),
    ]
    assert report.total_double_ownership_ms == 0


async def test_a_queue_added_while_its_brokers_channel_is_down_waits_for_the_reopen() -> None:
    """Its pass got the grant before the channel ended; the broker may give it away when it
    hears of that end. Held back like the queues held then, until a new channel lists it."""
    consumer, mq, _ = await fenced_consumer()
    consumer.fenced = FencedHandoff(Broker(), "g")
    client = consumer.client
    assert isinstance(client, Client) and consumer.rebalance_impl is not None
    added = ProcessQueue()
    added.epoch = consumer.fenced.epochs[mq] = 8
    consumer.rebalance_impl.process_queue_table[mq] = added
    consumer.hold_back_unconfirmed([PullRequest("g", mq, added, 0)])
    assert added.suspended
    consumer.broker_reconnected(mq.broker_name, {mq: 8})  # the new channel holds it
    assert not added.suspended and not added.dropped
    client.open[mq.broker_name] = "ch2"
    other = ProcessQueue()
    consumer.hold_back_unconfirmed([PullRequest("g", mq, other, 0)])
    assert not other.suspended  # the channel is open: nothing to confirm
