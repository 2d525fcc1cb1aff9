"""``PullRequestHoldService``: long polling, answering a held pull the moment a message arrives.

Theory of operation: a pull that finds nothing new is parked under (topic, queue id) with the
offset it wants and its tag filter. When the store appends to that queue it calls
``notify_message_arriving`` with the new max offset and the message's tag hash; every parked
pull that wants an offset below it and whose filter matches is woken and re-executed. A pull
not woken by its suspend timeout (15 s by default) is answered NO_NEW_MSG.

A parked pull may name its ``holder`` (the remoting layer: the connection and the group);
``release`` answers that holder's parked pulls on a queue at once, as their timeout would.

Where we differ from RocketMQ: its hold service also re-checks every 5 s (so an idle hold lasts
15-20 s); asyncio gives each parked pull its own timer, so the timeout is exact.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from enum import Enum

from aiorocketmq.protocol.tags import SubscriptionExpression

__all__ = ["PullRequestHoldService", "Wake"]


class Wake(Enum):
    """Why a parked pull was answered."""

    TIMEOUT = "timeout"
    ARRIVED = "arrived"  # a matching message was stored
    RELEASED = "released"  # ``release`` or ``wake_all``: answer now, as at the timeout


@dataclass(slots=True)
class _HeldPull:
    offset: int
    expression: SubscriptionExpression | None
    waiter: asyncio.Future[Wake]
    holder: Hashable | None = None


class PullRequestHoldService:
    """Parked pulls per (topic, queue id)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[_HeldPull]] = defaultdict(list)

    def held_count(self) -> int:
        return sum(len(v) for v in self._held.values())

    async def suspend(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        expression: SubscriptionExpression | None,
        timeout_s: float,
        holder: Hashable | None = None,
    ) -> Wake:
        """Park until a matching message arrives, the pull is released, or the timeout passes.

        The pull is registered before this coroutine first yields, so a message stored right
        after the caller's empty read still wakes it.
        """
        key = (topic, queue_id)
        entry = _HeldPull(offset, expression, asyncio.get_running_loop().create_future(), holder)
        self._held[key].append(entry)
        try:
            async with asyncio.timeout(timeout_s):
                return await entry.waiter
        except TimeoutError:
            return Wake.TIMEOUT
        finally:
            pulls = self._held.get(key)
            if pulls is not None:
                try:
                    pulls.remove(entry)
                except ValueError:
                    pass
                if not pulls:
                    del self._held[key]

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None
    ) -> None:
        """A message was stored: wake the parked pulls it satisfies."""
        for entry in self._held.get((topic, queue_id), ()):
            if entry.waiter.done() or max_offset <= entry.offset:
                continue
            if (
                tags_code is None
                or entry.expression is None
                or entry.expression.matches_code(tags_code)
            ):
                entry.waiter.set_result(Wake.ARRIVED)

    def release(self, topic: str, queue_id: int, holder: Hashable | None = None) -> int:
        """Answer now the pulls ``holder`` (None: anyone) parked on the queue (they re-read
        and find nothing new, as at their timeout); how many."""
        released = 0
        for entry in self._held.get((topic, queue_id), ()):
            if (holder is None or entry.holder == holder) and not entry.waiter.done():
                entry.waiter.set_result(Wake.RELEASED)
                released += 1
        return released

    def wake_all(self) -> None:
        """Answer every parked pull now (at shutdown)."""
        for pulls in self._held.values():
            for entry in pulls:
                if not entry.waiter.done():
                    entry.waiter.set_result(Wake.RELEASED)
