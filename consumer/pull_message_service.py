"""``PullRequest`` and ``PullMessageService``: one reusable request per assigned queue, and
the queue of requests that drives the pulls.

Theory of operation (spec 4.2): rebalance creates one ``PullRequest`` per (group, queue) and
dispatches it; the service takes it, starts that consumer's ``pull_message`` as a task, and the
pull's outcome re-enqueues the same request (at once, or later after flow control or an
error). A request dies when its process queue is dropped. One dispatcher task; each pull is its
own short task, because a pull may be held by the broker for up to 15 s (long polling).

Ours: a request whose queue the broker watches (``broker/queue_watch.py``) is *parked*: no
pull until the broker's MessagesArrived wakes it (``wake``), its channel reopens
(``wake_broker``: a new channel has no watches), or its renewal timer fires (a push can be
lost). A wake-up that comes before the park (an acquire's answer and the push race on two
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
    epoch: int = 0  # fenced handoff: the grant's epoch (0 = classic)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PullRequest)
            and other.consumer_group == self.consumer_group
            and other.message_queue == self.message_queue
        )

    def __hash__(self) -> int:
        return hash((self.consumer_group, self.message_queue))


PullHandler = Callable[[PullRequest], Coroutine[Any, Any, None]]
_Key = tuple[str, MessageQueue]  # (group, queue)

# Wake-ups with nothing parked kept for the parks they may precede (the oldest go first).
EARLY_WAKES_KEPT = 4096


class PullMessageService:
    """Dispatches pull requests to their consumer's ``pull_message``."""

    def __init__(self, find_handler: Callable[[str], PullHandler | None]) -> None:
        self._find_handler = find_handler
        self._queue: asyncio.Queue[PullRequest] = asyncio.Queue()
        self._later: set[asyncio.TimerHandle] = set()
        self._pulls: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        # Requests of watched queues, with their renewal timers; wake-ups that came first.
        self._parked: dict[_Key, tuple[PullRequest, asyncio.TimerHandle]] = {}
        self._early: OrderedDict[_Key, int] = OrderedDict()  # -> the max offset woken at

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="pull-message-service")

    async def shutdown(self) -> None:
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        for _, handle in self._parked.values():
            handle.cancel()
        self._parked.clear()
        self._early.clear()
        tasks = [t for t in (self._task, *self._pulls) if t is not None]
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
        """Hold ``request`` until its queue is woken, or for ``renew_ms`` (three quarters to all
        of it, at random: queues watched together are not renewed together); at once if a
        wake-up for it came first, at an offset past the request's."""
        loop = asyncio.get_running_loop()
        key = (request.consumer_group, request.message_queue)
        self._unpark(key)
        early = self._early.pop(key, None)
        if early is not None and (early < 0 or early > request.next_offset):
            self.execute_pull_request_immediately(request)
            return
        delay_s = renew_ms / 1000 * random.uniform(0.75, 1.0)
        self._parked[key] = (request, loop.call_later(delay_s, self._renew, key))

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
        parked = self._parked.pop(key, None)
        if parked is None:
            return None
        parked[1].cancel()
        return parked[0]

    def _renew(self, key: _Key) -> None:
        parked = self._parked.pop(key, None)
        if parked is not None:
            self._queue.put_nowait(parked[0])

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
