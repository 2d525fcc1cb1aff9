"""``PullMessageService``'s parked requests: woken by the broker, by a new channel, or by
their renewal (one request for a group's parked queues on a broker, else a pull each); a
wake-up that came first is kept for the park that follows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.consumer.pull_message_service import PullMessageService, PullRequest
from aiorocketmq.protocol.message_queue import MessageQueue

MQ_A = MessageQueue("T", "broker-a", 0)
MQ_B = MessageQueue("T", "broker-b", 0)


@asynccontextmanager
async def _running() -> AsyncIterator[tuple[PullMessageService, list[MessageQueue]]]:
    """A started service whose pulls only record their queue, shut down after."""
    pulled: list[MessageQueue] = []

    async def handler(request: PullRequest) -> None:
        pulled.append(request.message_queue)

    service = PullMessageService(lambda group: handler)
    service.start()
    try:
        yield service, pulled
    finally:
        await service.shutdown()


def _request(mq: MessageQueue) -> PullRequest:
    return PullRequest("g", mq, ProcessQueue(), 0)


async def _turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_parked_request_is_pulled_when_its_queue_is_woken() -> None:
    async with _running() as (service, pulled):
        service.park(_request(MQ_A), 60_000)
        await _turns()
        assert pulled == [] and service.is_parked("g", MQ_A)
        assert service.wake("g", MQ_A)
        await _turns()
        assert pulled == [MQ_A] and not service.is_parked("g", MQ_A)


async def test_a_wake_up_before_the_park_is_kept_for_it() -> None:
    async with _running() as (service, pulled):
        assert not service.wake("g", MQ_A)  # the push outran the acquire's answer
        service.park(_request(MQ_A), 60_000)
        await _turns()
        assert pulled == [MQ_A] and not service.is_parked("g", MQ_A)
        service.park(_request(MQ_A), 60_000)  # used up: the next park waits
        await _turns()
        assert pulled == [MQ_A] and service.is_parked("g", MQ_A)


async def test_a_new_channel_wakes_the_parked_queues_of_its_broker_only() -> None:
    async with _running() as (service, pulled):
        service.park(_request(MQ_A), 60_000)
        service.park(_request(MQ_B), 60_000)
        assert service.wake_broker("broker-a") == 1
        await _turns()
        assert pulled == [MQ_A] and service.is_parked("g", MQ_B)


async def test_a_parked_request_is_pulled_anyway_when_its_renewal_comes() -> None:
    async with _running() as (service, pulled):
        service.park(_request(MQ_A), 40)  # 30 to 40 ms
        await asyncio.sleep(0.02)
        assert pulled == []
        await asyncio.sleep(0.05)
        assert pulled == [MQ_A] and not service.is_parked("g", MQ_A)


async def test_a_dropped_queues_parked_request_does_not_take_the_wake_up_of_its_successor() -> None:
    """A queue dropped and taken again: the old request still parked must not use up the
    wake-up that the new request, parked after it, is waiting for."""
    async with _running() as (service, pulled):
        old = _request(MQ_A)
        service.park(old, 60_000)
        old.process_queue.dropped = True
        assert not service.wake("g", MQ_A, 5)  # kept for the park that follows
        service.park(_request(MQ_A), 60_000)
        await _turns()
        assert pulled == [MQ_A]
        dropped = _request(MQ_B)
        service.park(dropped, 60_000)
        dropped.process_queue.dropped = True
        assert service.wake_broker("broker-b") == 0


async def test_an_early_wake_up_below_the_parked_offset_is_spent_on_nothing() -> None:
    async with _running() as (service, pulled):
        service.wake("g", MQ_A, 3)  # messages up to offset 3, which the request is past
        request = _request(MQ_A)
        request.next_offset = 3
        service.park(request, 60_000)
        await _turns()
        assert pulled == [] and service.is_parked("g", MQ_A)


async def test_the_parked_queues_of_a_group_on_a_broker_are_renewed_in_one_request() -> None:
    """The renewer keeps watching what it can (one WatchQueues per broker); the rest is
    pulled; the watched stay parked, to be renewed again."""
    pulled: list[MessageQueue] = []
    batches: list[tuple[str, list[MessageQueue]]] = []
    mq_a1 = MessageQueue("T", "broker-a", 1)

    async def handler(request: PullRequest) -> None:
        pulled.append(request.message_queue)

    async def renewer(broker_name: str, requests: list[PullRequest]) -> set[MessageQueue]:
        batches.append((broker_name, sorted(r.message_queue for r in requests)))
        return {MQ_A, MQ_B}  # mq_a1 has something after its offset

    service = PullMessageService(lambda group: handler, lambda group: renewer)
    service.start()
    try:
        for mq in (MQ_A, mq_a1, MQ_B):
            service.park(_request(mq), 20)
        await asyncio.sleep(0.1)
        assert sorted(batches[:2]) == [("broker-a", [MQ_A, mq_a1]), ("broker-b", [MQ_B])]
        assert pulled == [mq_a1]
        assert service.is_parked("g", MQ_A) and service.is_parked("g", MQ_B)
        assert len(batches) > 2  # renewed again, the watched ones only
        assert all(mq != mq_a1 for _, mqs in batches[2:] for mq in mqs)
    finally:
        await service.shutdown()


async def test_a_failed_renewal_pulls_its_queues_but_not_one_woken_meanwhile() -> None:
    pulled: list[MessageQueue] = []
    mq_a1 = MessageQueue("T", "broker-a", 1)
    service: PullMessageService

    async def handler(request: PullRequest) -> None:
        pulled.append(request.message_queue)

    async def renewer(broker_name: str, requests: list[PullRequest]) -> set[MessageQueue]:
        service.wake("g", MQ_A)  # its push came while the renewal was on its way
        await asyncio.sleep(0)
        raise RuntimeError("a bug")

    service = PullMessageService(lambda group: handler, lambda group: renewer)
    service.start()
    try:
        service.park(_request(MQ_A), 20)
        service.park(_request(mq_a1), 20)
        await asyncio.sleep(0.05)
        assert sorted(pulled) == [MQ_A, mq_a1]  # once each
        assert not service.is_parked("g", MQ_A) and not service.is_parked("g", mq_a1)
    finally:
        await service.shutdown()


async def test_a_renewal_forgets_the_parked_request_of_a_dropped_queue() -> None:
    """It is not ours any more: not watched again (the broker ended its watch), not pulled."""
    pulled: list[MessageQueue] = []
    renewed: list[list[MessageQueue]] = []
    mq_a1 = MessageQueue("T", "broker-a", 1)

    async def handler(request: PullRequest) -> None:
        pulled.append(request.message_queue)

    async def renewer(broker_name: str, requests: list[PullRequest]) -> set[MessageQueue]:
        renewed.append([r.message_queue for r in requests])
        return {r.message_queue for r in requests}

    service = PullMessageService(lambda group: handler, lambda group: renewer)
    service.start()
    try:
        dropped = _request(MQ_A)
        service.park(dropped, 20)
        service.park(_request(mq_a1), 20)
        dropped.process_queue.dropped = True
        await asyncio.sleep(0.05)
        assert renewed and all(batch == [mq_a1] for batch in renewed)
        assert pulled == [] and not service.is_parked("g", MQ_A)
    finally:
        await service.shutdown()
