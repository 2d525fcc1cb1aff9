"""The client side of the fenced handoff: a release the broker did not get is sent again."""

from __future__ import annotations

from typing import Any

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

    async def channel_id_for(self, broker_name: str) -> str | None:
        return "ch1"

    async def invoke_broker(
        self, broker_name: str, method: str, request: Any, timeout: float | None = None
    ) -> Any:
        if self.failures:
            self.failures -= 1
            raise ServiceNotAvailable("broker down")
        if method == "AcquireQueues":
            return broker_pb2.AcquireQueuesResponse(
                granted=[
                    broker_pb2.QueueGrant(message_queue=m, epoch=7, committed_offset=3)
                    for m in request.mq_set
                ]
            )
        self.releases.append(
            [(r.message_queue.queue_id, r.epoch, r.final_offset) for r in request.releases]
        )
        return broker_pb2.ReleaseQueuesResponse(released=[r.message_queue for r in request.releases])


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
