"""A classic pass that gives queues away and takes others sends the dropped queues' commits and
the new queues' offset queries at once: one round trip to the brokers, not two. A queue that is
dropped and taken again in one pass (pull expired) is asked after its commit."""

from __future__ import annotations

import asyncio

from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.protocol.message_queue import MessageQueue
from tests.unit.test_rebalance_members import QUEUES, Members, Mode, rebalance


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
