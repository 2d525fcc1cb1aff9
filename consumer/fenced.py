"""The fenced handoff, client side (ours, opt-in with ``handoff="fenced"``).

Classic RocketMQ lets a new owner pull a queue before the old owner has stopped and committed,
so messages repeat (seed 001). Fenced, a consumer holds a queue only under a broker grant with
an epoch (the generalisation of RocketMQ's LOCK_BATCH_MQ):

- **acquire** before the first pull: the grant gives the epoch and the committed offset, where
  the pull starts; a queue still held by its previous owner is not granted, so the group is
  "unbalanced" and retries (every second, and at once when the broker pushes QueueReleased);
- **release** on a rebalance that takes the queue away: stop pulling, let the consumption in
  flight finish (bounded by ``handoff_drain_timeout_ms``), then release with the final offset,
  which the broker commits atomically with the release;
- pulls and commits carry the epoch; a refused one (QUEUE_FENCED) drops the queue at once,
  unless it was made under an earlier grant than the one held now (it arrived late);
- **leave** (``shutdown()``): the grants are released with their final offsets in the
  UNREGISTER_CLIENT to their broker (``leaving``, ``left``), so that the group is notified
  without a ReleaseQueues round trip (and its durable write) before it.

A crash releases the grants when the broker sees the channel close; the next owner starts at
the last committed offset, so only the crashed consumer's uncommitted messages repeat.

An acquire whose answer is lost (a deadline under load) may still have been granted: the broker
then counts us as the holder of queues we know nothing of, and denies them to their rightful
owner until our channel closes. Such queues are kept as ``unsure`` (only when no answer came:
a refusal is an answer) and asked for again, the broker granting a holder the same epoch
again: by the acquire that wants them (the allocation still gives them to us), else with the
next acquire of their broker, or before the next pass. Those no longer wanted are then released
at once, with the final offset of a release still owed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping, Set
from typing import Any, Protocol, TypeVar

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import MQError, ServiceNotAvailable
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.trace import tracer

__all__ = ["FencedHandoff"]

log = get_logger("aiorocketmq.consumer.fenced")

T = TypeVar("T")

# While what is owed keeps failing (a broker down), its wake-ups back off: 1 s doubling to the
# periodic pass's 20 s, so that every consumer does not rebalance each second meanwhile.
OWED_WAKE_MIN_S = 1.0
OWED_WAKE_MAX_S = 20.0


class _Client(Protocol):
    client_id: str

    async def channel_id_for(self, broker_name: str) -> str | None: ...
    def open_channel_id(self, broker_name: str) -> str: ...
    async def acquire_queues(
        self, broker_name: str, request: broker_pb2.AcquireQueuesRequest
    ) -> broker_pb2.AcquireQueuesResponse: ...
    async def invoke_broker(
        self, broker_name: str, method: str, request: object, timeout: float | None = None
    ) -> object: ...


class FencedHandoff:
    """Acquire and release grants for one group, one request per broker.

    The one owner of the epochs: ``epochs`` holds the epoch of every grant we hold. The
    rebalance (pull requests) and the offset store (commits) read this same dict.
    """

    def __init__(
        self,
        client: _Client,
        group: str,
        wanted: Callable[[], Set[MessageQueue]] | None = None,
        owed: Callable[[], None] | None = None,
        *,
        watch: bool = False,
    ) -> None:
        self.client = client
        self.group = group
        # Ask the broker to watch each granted queue with nothing to pull (its grant then says
        # ``watching``, and the queue is parked, not pulled: ``PullMessageService.park``).
        self.watch = watch
        self.watching: dict[MessageQueue, str] = {}  # queue -> the channel it is watched for
        # Called when a release or an acquire's answer is lost: what is owed then is settled
        # only by a rebalance pass (``retry_pending``), which the consumer wakes. Left to the
        # 20 s periodic pass, a holder whose release timed out under load (its own queues all
        # held, so nothing else woke it) kept another consumer waiting for the queue 20 s.
        self.owed = owed
        self._wake: asyncio.Handle | None = None  # a wake-up scheduled
        self._wake_at = 0.0  # the loop time before which no wake-up runs
        self._backoff = OWED_WAKE_MIN_S
        # The queues the last allocation gives us (every topic): an acquire for some of them
        # leaves the others' unsure grants to the acquire that asks for them.
        self.wanted = wanted
        self.epochs: dict[MessageQueue, int] = {}
        # Releases the broker did not get (it was down, or the call failed): queue -> (epoch,
        # final offset). Retried before every rebalance until the broker answers; meanwhile
        # the broker still counts us as the holder and denies the queue to everyone else.
        self.pending: dict[MessageQueue, tuple[int, int]] = {}
        # Queues asked for whose answer never came: perhaps granted to us, unknown to us.
        self.unsure: set[MessageQueue] = set()
        # One acquire at a time: an unsure queue's answer must not race a pass wanting it.
        self._acquiring = asyncio.Lock()
        # Brokers whose next release rides with the acquire sent there (``pair``): the release
        # puts its items here, the acquire sends both in one request and answers the release.
        self._riders: dict[str, asyncio.Future[_Ride | None]] = {}

    async def acquire(
        self, mqs: list[MessageQueue], *, settle: Iterable[MessageQueue] = (), wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        """Grants for ``mqs``: queue -> (epoch, committed offset or -1). Denied queues absent.

        The unsure queues of ``mqs``'s brokers ride along, but those the allocation still
        wants (their own pass asks for them), and those of ``settle``; those granted but not in
        ``mqs`` are released at once (with the final offset of a release still owed, else
        committing nothing). ``wait_ms``: a broker may hold the request that long for queues
        their holders are about to let go (granted to us in the same step: a denial costs a
        push and a second acquire); not one asked for unsure queues too (it would take them
        from whoever waits for them).
        """
        async with self._acquiring:
            brokers = {mq.broker_name for mq in mqs}
            settling = set(settle)
            spare = self.wanted() if self.wanted is not None and self.unsure else set()
            extra = sorted(
                mq
                for mq in self.unsure.difference(mqs)
                if mq in settling or (mq.broker_name in brokers and mq not in spare)
            )
            extra_set = set(extra)
            owed = {mq: self.pending[mq][1] for mq in extra if mq in self.pending}
            by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
            for mq in [*mqs, *extra]:
                by_broker[mq.broker_name].append(mq)
            try:
                results = await _each(
                    [
                        self._acquire_one(b, q, wait_ms if extra_set.isdisjoint(q) else 0)
                        for b, q in by_broker.items()
                    ]
                )
            except asyncio.CancelledError:
                # Abandoned with its pass: any of them may have been granted (the answers
                # that came are dropped with it). Asked again, released if not wanted.
                self.unsure.update(mqs)
                self.unsure.update(extra)
                raise
            granted: dict[MessageQueue, tuple[int, int]] = {}
            for part in results:
                granted.update(part)
            strays = [(mq, owed.get(mq, -1)) for mq in extra if granted.pop(mq, None) is not None]
            if strays:
                log.info(
                    "releasing queues granted by an acquire whose answer was lost",
                    group=self.group,
                    mqs=[str(mq) for mq, _ in strays],
                )
                await self.release(strays, ride=False)
            return granted

    def pair(self, brokers: Iterable[str]) -> None:
        """A pass that gives queues away and takes others on these brokers: the next release
        to each rides with the acquire sent there, one request rather than two (at 1,000
        consumers under AVG, 900 requests fewer per join). Only when the release comes at once
        (no batch in flight to drain): the acquire waits for it. ``unpair`` ends it."""
        loop = asyncio.get_running_loop()
        for broker_name in brokers:
            self._riders.setdefault(broker_name, loop.create_future())

    def unpair(self) -> None:
        """The pass's releases are done: an acquire still waiting for one goes alone, and a
        release no acquire took goes alone."""
        for broker_name in list(self._riders):
            self._decline_rider(broker_name)
        self._riders.clear()

    def _decline_rider(self, broker_name: str) -> None:
        """No acquire to ``broker_name`` takes a release along (any more): it goes alone."""
        rider = self._riders.get(broker_name)
        if rider is None or rider.cancelled():
            return
        if not rider.done():
            rider.set_result(None)
            return
        ride = rider.result()
        if ride is not None and not ride.taken:
            ride.taken = True
            ride.decline()

    async def _take_ride(self, broker_name: str) -> _Ride | None:
        """The release paired with this acquire, once the pass hands it over (or None)."""
        rider = self._riders.get(broker_name)
        if rider is None:
            return None
        ride = await rider  # cancelled with us, the rider is too: the release goes alone
        if ride is None or ride.taken:
            return None
        ride.taken = True
        return ride

    async def _acquire_one(
        self, broker_name: str, mqs: list[MessageQueue], wait_ms: int = 0
    ) -> dict[MessageQueue, tuple[int, int]]:
        try:
            if broker_name in self._riders and not self.client.open_channel_id(broker_name):
                self._decline_rider(broker_name)  # a release needs no channel: it goes at once
            channel_id = await self.client.channel_id_for(broker_name)
            if channel_id is None:
                self._decline_rider(broker_name)
                return {}
            ride = await self._take_ride(broker_name)
        except BaseException:
            self._decline_rider(broker_name)  # a release handed over must not wait for us
            raise
        try:
            request = broker_pb2.AcquireQueuesRequest(
                consumer_group=self.group,
                client_id=self.client.client_id,
                channel_id=channel_id,
                mq_set=[mq.to_proto() for mq in mqs],
                watch=self.watch,
                wait_millis=wait_ms,
            )
            if ride is not None:
                request.releases.extend(self._releases(ride.items))
            response = await self.client.acquire_queues(broker_name, request)
        except BaseException as e:
            if ride is not None:  # perhaps done by the broker: owed, sent again before a pass
                error = e if isinstance(e, MQError) else None
                ride.answer(self._release_failed(broker_name, ride.items, error))
            if not isinstance(e, MQError):
                raise  # cancelled with its pass (then unsure: ``acquire``), or a bug
            log.warning("acquire queues failed", group=self.group, broker=broker_name, error=str(e))
            if isinstance(e, ServiceNotAvailable):  # no answer: the broker may have granted them
                self.unsure.update(mqs)
                self._owe()
            return {}
        if ride is not None:
            ride.answer(self._release_answered(ride.items, response.released))
        self.unsure.difference_update(mqs)  # answered: granted or denied, we know which
        self._answered()
        granted = {}
        for g in response.granted:
            mq = MessageQueue.from_proto(g.message_queue)
            granted[mq] = (g.epoch, g.committed_offset)
            self.epochs[mq] = g.epoch
            if g.watching:
                self.watching[mq] = channel_id
            else:
                self.watching.pop(mq, None)
            self.pending.pop(mq, None)  # ours again: a release still owed is void
            tracer.record(
                "queue_acquired",
                group=self.group,
                client_id=self.client.client_id,
                mq=str(mq),
                epoch=g.epoch,
                offset=g.committed_offset,
            )
        for d in response.denied:
            log.debug(
                "queue still held by its previous owner",
                group=self.group,
                mq=str(MessageQueue.from_proto(d.message_queue)),
                holder=d.holder_client_id,
                epoch=d.epoch,
            )
        return granted

    def owes(self) -> bool:
        """Whether a release is still owed or a grant unsure: a pass must follow."""
        return bool(self.pending or self.unsure)

    def _owe(self) -> None:
        """Wake a pass: at once the first time, then backing off while it keeps failing."""
        if self.owed is None or self._wake is not None:
            return  # a wake-up is due already
        loop = asyncio.get_running_loop()
        delay = self._wake_at - loop.time()
        self._wake = (
            loop.call_later(delay, self._wake_up) if delay > 0 else loop.call_soon(self._wake_up)
        )

    def _wake_up(self) -> None:
        self._wake = None
        self._wake_at = asyncio.get_running_loop().time() + self._backoff
        self._backoff = min(2 * self._backoff, OWED_WAKE_MAX_S)
        if self.owed is not None and self.owes():
            self.owed()

    def _answered(self) -> None:
        """A broker answered: once nothing is owed, the next failure wakes a pass at once."""
        if not self.owes():
            self._wake_at, self._backoff = 0.0, OWED_WAKE_MIN_S

    def abandon(self, mqs: Iterable[MessageQueue]) -> None:
        """Grants a pass got but did not take (it failed first): unsure, settled by a pass."""
        self.unsure.update(mqs)
        self._owe()

    def close(self) -> None:
        """The consumer left: no more wake-ups."""
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    async def retry_pending(self, wanted: Iterable[MessageQueue] = ()) -> set[MessageQueue]:
        """Send again the releases a broker did not get; the queues it released now.

        First the unsure queues not ``wanted`` (the last allocation: the pass about to run
        asks for those itself) are settled: asked for, and released if granted.
        """
        settle = self.unsure.difference(wanted)
        if settle:
            await self.acquire([], settle=settle)
        if not self.pending:
            return set()
        by_broker: dict[str, list[tuple[MessageQueue, int, int]]] = defaultdict(list)
        for mq, (epoch, final_offset) in sorted(self.pending.items()):
            by_broker[mq.broker_name].append((mq, epoch, final_offset))
        return await self.release_each(by_broker)

    async def release(
        self,
        finals: list[tuple[MessageQueue, int]],
        *,
        ride: bool = True,
        epochs: Mapping[MessageQueue, int] | None = None,
    ) -> set[MessageQueue]:
        """Release the grants of (queue, final offset); the queues the brokers released.

        Each release presents the grant's epoch (``epochs``: the one each dropped process
        queue was consumed under; else the one held now); a queue with no grant is skipped.
        The epochs are forgotten: the queues are no longer ours, unless acquired again under
        a newer grant meanwhile. ``ride``: may go with an acquire to its broker (``pair``); not
        a release made inside an acquire.
        """
        return await self.release_each(self._by_broker(finals, epochs), ride=ride)

    async def release_each(
        self, by_broker: dict[str, list[tuple[MessageQueue, int, int]]], *, ride: bool = False
    ) -> set[MessageQueue]:
        """Release (queue, epoch, final offset) by broker, the brokers at once (``ride``: each
        may go with an acquire to its broker); the queues released. Also for the releases an
        unregister did not carry through (``left``): one already done is refused as no longer
        ours, which changes nothing."""
        results = await _each([self._release_one(b, i, ride) for b, i in by_broker.items()])
        return set().union(*results)

    def _by_broker(
        self,
        finals: Iterable[tuple[MessageQueue, int]],
        epochs: Mapping[MessageQueue, int] | None = None,
    ) -> dict[str, list[tuple[MessageQueue, int, int]]]:
        """(queue, epoch, final offset) of each grant among ``finals`` (``epochs``: the grants
        they were consumed under, else those held now), by broker; each epoch is forgotten if
        it is still the one held (the queue is no longer ours)."""
        by_broker: dict[str, list[tuple[MessageQueue, int, int]]] = defaultdict(list)
        for mq, final_offset in finals:
            held = self.epochs.get(mq, 0)
            epoch = held if epochs is None else epochs.get(mq, 0)
            if epoch == held:
                self.epochs.pop(mq, None)
            if epoch:
                by_broker[mq.broker_name].append((mq, epoch, final_offset))
        return by_broker

    async def leaving(
        self, finals: list[tuple[MessageQueue, int]]
    ) -> dict[str, list[tuple[MessageQueue, int, int]]]:
        """A leave's releases (queue, final offset): those whose broker has an open channel are
        returned by broker, to ride with its UNREGISTER_CLIENT (``riders``, then ``left``); the
        others are released now, alone, before the unregister lets their grants go."""
        riding: dict[str, list[tuple[MessageQueue, int, int]]] = {}
        alone: dict[str, list[tuple[MessageQueue, int, int]]] = {}
        for broker_name, items in self._by_broker(finals).items():
            (riding if self.client.open_channel_id(broker_name) else alone)[broker_name] = items
        await self.release_each(alone)
        return riding

    def riders(
        self, riding: dict[str, list[tuple[MessageQueue, int, int]]]
    ) -> dict[str, list[broker_pb2.QueueRelease]]:
        """The ``QueueRelease`` messages of ``leaving``'s releases, by broker (each recorded
        as releasing: our holding ends when they are sent)."""
        return {broker_name: self._releases(items) for broker_name, items in riding.items()}

    def left(
        self,
        riding: dict[str, list[tuple[MessageQueue, int, int]]],
        answers: dict[str, list[common_pb2.MessageQueue] | None],
    ) -> dict[str, list[tuple[MessageQueue, int, int]]]:
        """The unregisters' answers to the releases that rode with them; the releases of the
        brokers that gave none (refused or lost: a broker restarted knows our channel no more),
        for ``release_each``."""
        unanswered: dict[str, list[tuple[MessageQueue, int, int]]] = {}
        for broker_name, items in riding.items():
            released = answers.get(broker_name)
            if released is None:
                log.warning(
                    "releases riding with the unregister got no answer; sent alone",
                    group=self.group,
                    broker=broker_name,
                    queues=len(items),
                )
                unanswered[broker_name] = items
            else:
                self._release_answered(items, released)
        return unanswered

    async def _release_one(
        self, broker_name: str, items: list[tuple[MessageQueue, int, int]], ride: bool = False
    ) -> set[MessageQueue]:
        rider = self._riders.get(broker_name) if ride else None
        if rider is not None and not rider.done():  # an acquire there takes it along
            handed = _Ride(items)
            rider.set_result(handed)
            released = await handed.answered
            if released is not None:
                return released
        request = broker_pb2.ReleaseQueuesRequest(
            consumer_group=self.group, client_id=self.client.client_id
        )
        request.releases.extend(self._releases(items))
        try:
            response = await self.client.invoke_broker(broker_name, "ReleaseQueues", request)
        except MQError as e:
            return self._release_failed(broker_name, items, e)
        assert isinstance(response, broker_pb2.ReleaseQueuesResponse)
        return self._release_answered(items, response.released)

    def _releases(
        self, items: list[tuple[MessageQueue, int, int]]
    ) -> list[broker_pb2.QueueRelease]:
        """The ``QueueRelease`` of each (queue, epoch, final offset), for any request."""
        releases: list[broker_pb2.QueueRelease] = []
        for mq, epoch, final_offset in items:
            releases.append(
                broker_pb2.QueueRelease(
                    message_queue=mq.to_proto(), epoch=epoch, final_offset=final_offset
                )
            )
            # Our holding ends here: nothing is pulled or consumed any more. Recorded before the
            # call because the broker may hand the queue on before its answer reaches us.
            tracer.record(
                "queue_releasing",
                group=self.group,
                client_id=self.client.client_id,
                mq=str(mq),
                epoch=epoch,
                offset=final_offset,
            )
        return releases

    def _release_failed(
        self, broker_name: str, items: list[tuple[MessageQueue, int, int]], error: MQError | None
    ) -> set[MessageQueue]:
        """No answer to a release (``error`` None: abandoned): owed, sent again before the next
        pass; meanwhile the broker still counts us as the holder."""
        log.warning(
            "release queues failed, retried before the next rebalance",
            group=self.group,
            broker=broker_name,
            error=str(error) if error is not None else "abandoned",
        )
        for mq, epoch, final_offset in items:
            self.pending[mq] = (epoch, final_offset)
        self._owe()
        return set()

    def _release_answered(
        self,
        items: list[tuple[MessageQueue, int, int]],
        answer: Iterable[common_pb2.MessageQueue],
    ) -> set[MessageQueue]:
        for mq, _, _ in items:
            self.pending.pop(mq, None)  # answered: released, or refused as no longer ours
        self._answered()
        released = {MessageQueue.from_proto(m) for m in answer}
        for mq, epoch, final_offset in items:
            if mq in released:
                tracer.record(
                    "queue_released",
                    group=self.group,
                    client_id=self.client.client_id,
                    mq=str(mq),
                    epoch=epoch,
                    offset=final_offset,
                )
        return released


class _Ride:
    """A release handed to the acquire going to its broker (``FencedHandoff.pair``)."""

    def __init__(self, items: list[tuple[MessageQueue, int, int]]) -> None:
        self.items = items
        self.taken = False  # by one acquire: another to the same broker goes without it
        # The queues released; None: declined (no channel), the release goes alone.
        self.answered: asyncio.Future[set[MessageQueue] | None] = (
            asyncio.get_running_loop().create_future()
        )

    def answer(self, released: set[MessageQueue]) -> None:
        if not self.answered.done():  # the releasing pass may have been cancelled meanwhile
            self.answered.set_result(released)

    def decline(self) -> None:
        if not self.answered.done():
            self.answered.set_result(None)


async def _each(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """``asyncio.gather``, but a single call (one broker, the common case) is awaited as it is:
    gather makes it a task, and each task costs the pass a turn of the event loop, behind every
    callback ready then (at a thousand consumers per process, milliseconds a turn)."""
    if len(calls) == 1:
        return [await calls[0]]
    return list(await asyncio.gather(*calls))
