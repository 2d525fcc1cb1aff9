"""``PullRequest`` and ``PullMessageService``: one reusable request per assigned queue, and
the queue of requests that drives the pulls.

Theory of operation (spec 4.2): rebalance creates one ``PullRequest`` per (group, queue) and
dispatches it; the service takes it, starts that consumer's ``pull_message`` as a task, and the
pull's outcome re-enqueues the same request (at once, or later after flow control or an
error). A request dies when its process queue is dropped. One dispatcher task; each pull is its
own short task, because a pull may be held by the broker for up to 15 s (long polling).

Ours: a request whose queue the broker watches (``broker/queue_watch.py``) is *parked*: no
pull until the broker's MessagesArrived wakes it (``wake``), its channel reopens
(``wake_broker``: a new channel has no watches), or its renewal comes (a push can be lost).
The parked queues of one group on one broker are renewed together: one WatchQueues request
(the consumer's ``renew_watches``) keeps watching those with nothing after their offset, and
the others are pulled; without a renewer, or when it fails, each is pulled, which renews its
watch too. A wake-up that comes before the park (an acquire's answer and the push race on two
streams) is kept, with the queue's max offset it names, and wakes a park from below it at once.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiorocketmq.consumer.process_queue import ProcessQueue
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["PullMessageService", "PullRequest"]

log = get_logger("aiorocketmq.consumer.pull")


@dataclass(eq=False, slots=True)
class PullRequest:
    """The next pull of one queue for one group (equal by group and queue, as in RocketMQ)."""

    consumer_group: str
    message_queue: MessageQueue
    process_queue: ProcessQueue
    next_offset: int
    previously_locked: bool = False

    @property
    def epoch(self) -> int:
        """Fenced handoff: the epoch of the grant its process queue is consumed under (0 =
        classic); the process queue is its one keeper."""
        return self.process_queue.epoch

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PullRequest)
            and other.consumer_group == self.consumer_group
            and other.message_queue == self.message_queue
        )

    def __hash__(self) -> int:
        return hash((self.consumer_group, self.message_queue))


PullHandler = Callable[[PullRequest], Coroutine[Any, Any, None]]
# (broker name, the group's parked requests there) -> the queues still watched
RenewHandler = Callable[[str, list[PullRequest]], Coroutine[Any, Any, set[MessageQueue]]]
_Key = tuple[str, MessageQueue]  # (group, queue)
_Batch = tuple[str, str]  # (group, broker name): the parked queues renewed together

# Wake-ups with nothing parked kept for the parks they may precede (the oldest go first).
EARLY_WAKES_KEPT = 4096


class PullMessageService:
    """Dispatches pull requests to their consumer's ``pull_message``."""

    def __init__(
        self,
        find_handler: Callable[[str], PullHandler | None],
        find_renewer: Callable[[str], RenewHandler | None] | None = None,
    ) -> None:
        self._find_handler = find_handler
        self._find_renewer = find_renewer
        self._queue: asyncio.Queue[PullRequest] = asyncio.Queue()
        self._later: set[asyncio.TimerHandle] = set()
        self._pulls: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        # Requests of watched queues, the renewal timer of each group and broker they are on,
        # and the renewals running; wake-ups that came first.
        self._parked: dict[_Key, PullRequest] = {}
        self._renewals: dict[_Batch, asyncio.TimerHandle] = {}
        self._renewing: set[asyncio.Task[None]] = set()
        self._early: OrderedDict[_Key, int] = OrderedDict()  # -> the max offset woken at

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="pull-message-service")

    async def shutdown(self) -> None:
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        for handle in self._renewals.values():
            handle.cancel()
        self._renewals.clear()
        self._parked.clear()
        self._early.clear()
        tasks = [t for t in (self._task, *self._pulls, *self._renewing) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self._pulls.clear()

    def execute_pull_request_immediately(self, request: PullRequest) -> None:
        self._queue.put_nowait(request)

    def execute_pull_request_later(self, request: PullRequest, delay_ms: int) -> None:
        """Re-enqueue after ``delay_ms`` (flow control 50 ms, errors 1 s, rebalance 500 ms)."""
        if delay_ms <= 0:
            self.execute_pull_request_immediately(request)
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            assert handle is not None
            self._later.discard(handle)
            self._queue.put_nowait(request)

        handle = loop.call_later(delay_ms / 1000, fire)
        self._later.add(handle)

    def park(self, request: PullRequest, renew_ms: int) -> None:
        """Hold ``request`` until its queue is woken, or until its group's parked queues on its
        broker are renewed: at most ``renew_ms`` after the first of them was parked (three
        quarters to all of it, at random: the groups and brokers of a process are not renewed
        together); at once if a wake-up for it came first, at an offset past the request's."""
        key = (request.consumer_group, request.message_queue)
        self._unpark(key)
        early = self._early.pop(key, None)
        if early is not None and (early < 0 or early > request.next_offset):
            self.execute_pull_request_immediately(request)
            return
        self._parked[key] = request
        self._renew_later((request.consumer_group, request.message_queue.broker_name), renew_ms)

    def _renew_later(self, batch: _Batch, renew_ms: int) -> None:
        if batch not in self._renewals:
            delay_s = renew_ms / 1000 * random.uniform(0.75, 1.0)
            loop = asyncio.get_running_loop()
            self._renewals[batch] = loop.call_later(delay_s, self._renew, batch, renew_ms)

    def is_parked(self, group: str, mq: MessageQueue) -> bool:
        """Whether ``mq``'s request waits for the queue to be woken."""
        return (group, mq) in self._parked

    def wake(self, group: str, mq: MessageQueue, max_offset: int = -1) -> bool:
        """The broker says ``mq`` has messages up to ``max_offset`` (-1: unknown): pull it now;
        False if it was not parked (a request of a dropped queue is not), and the wake-up is
        then kept for a park that may follow."""
        key = (group, mq)
        request = self._unpark(key)
        if request is not None and not request.process_queue.dropped:
            self.execute_pull_request_immediately(request)
            return True
        self._early[key] = max_offset
        self._early.move_to_end(key)
        while len(self._early) > EARLY_WAKES_KEPT:
            self._early.popitem(last=False)
        return False

    def wake_broker(self, broker_name: str) -> int:
        """Pull every parked queue of ``broker_name`` now (a new channel has no watches)."""
        keys = [key for key in self._parked if key[1].broker_name == broker_name]
        woken = 0
        for key in keys:
            request = self._unpark(key)
            if request is not None and not request.process_queue.dropped:
                self.execute_pull_request_immediately(request)
                woken += 1
        return woken

    def _unpark(self, key: _Key) -> PullRequest | None:
        return self._parked.pop(key, None)

    def _renew(self, batch: _Batch, renew_ms: int) -> None:
        """The renewal of ``batch``'s parked queues is due (a timer with none left ends)."""
        del self._renewals[batch]
        group, broker_name = batch
        requests = []
        for (g, mq), r in list(self._parked.items()):
            if g == group and mq.broker_name == broker_name:
                if r.process_queue.dropped:  # not ours any more: forgotten, not watched again
                    self._unpark((g, mq))
                else:
                    requests.append(r)
        if not requests:
            return
        renewer = self._find_renewer(group) if self._find_renewer is not None else None
        if renewer is None:  # each pulled, as a renewal of its own
            for request in requests:
                self._pull_parked(request)
            return
        task = asyncio.create_task(self._renew_batch(batch, renew_ms, requests, renewer))
        self._renewing.add(task)
        task.add_done_callback(self._renewing.discard)

    async def _renew_batch(
        self, batch: _Batch, renew_ms: int, requests: list[PullRequest], renewer: RenewHandler
    ) -> None:
        try:
            watched = await renewer(batch[1], requests)
        except Exception:  # a bug in the renewer: the queues are pulled, the service goes on
            log.exception("renewing watched queues failed", group=batch[0], broker=batch[1])
            watched = set()
        kept = False
        for request in requests:
            # Woken meanwhile (pulled, or parked again by its own pull: then kept): its state.
            if self._parked.get((request.consumer_group, request.message_queue)) is not request:
                continue
            if request.message_queue in watched and not request.process_queue.dropped:
                kept = True
            else:
                self._pull_parked(request)
        if kept:
            self._renew_later(batch, renew_ms)

    def _pull_parked(self, request: PullRequest) -> None:
        self._unpark((request.consumer_group, request.message_queue))
        if not request.process_queue.dropped:
            self._queue.put_nowait(request)

    async def _run(self) -> None:
        while True:
            request = await self._queue.get()
            handler = self._find_handler(request.consumer_group)
            if handler is None:
                log.debug("no consumer for pull request, dropped", group=request.consumer_group)
                continue
            task = asyncio.create_task(handler(request))
            self._pulls.add(task)
            task.add_done_callback(self._pulls.discard)
