"""``QueueWatches``: idle queues a client waits on without holding a pull (ours).

RocketMQ's long poll holds an empty pull up to 15 s, then answers NO_NEW_MSG, and the client
pulls again at once: an idle queue costs a pull every 15 s for as long as it stays idle. At
1,000 consumers on 4,096 queues that is 270 pulls a second of nothing; and a rebalance that
moves 3,600 queues starts 3,600 pulls within a second, which come back together 15 s later,
and every 15 s after that, on top of whatever the group does then.

A client of ours may instead ask the broker to *watch* a queue: a pull with ``watch`` whose
long poll ends with nothing is answered ``watching``, and an acquire with ``watch`` says
``watching`` of each granted queue that has nothing after its committed offset. The client
then sends no pull for that queue until the broker pushes ``MessagesArrived`` on its channel
(or its own timer runs out, in case a push was lost: a full outbox drops events). A watch
fires once, at the first message stored past its offset; it ends silently when the channel
closes or its client releases the queue's grant. Tag filters are not applied: the pull that
follows does the filtering (and may hold, and watch, again).

Nothing here does I/O: the client processor pushes the events this table names.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["QueueWatches"]

# (topic, queue id) -> {(group, channel id): the offset watched from}
_Table = dict[tuple[str, int], dict[tuple[str, str], int]]


class QueueWatches:
    """The watched queues of one broker, by queue and by channel."""

    def __init__(self) -> None:
        self._by_queue: _Table = {}
        self._by_channel: dict[str, set[tuple[str, int, str]]] = defaultdict(set)

    def __len__(self) -> int:
        return sum(len(w) for w in self._by_queue.values())

    def watch(self, topic: str, queue_id: int, group: str, channel_id: str, offset: int) -> None:
        """Wake ``channel_id`` (for ``group``) at the first message stored at ``offset`` or
        after; a watch of the same channel and group replaces its earlier one."""
        self._by_queue.setdefault((topic, queue_id), {})[(group, channel_id)] = offset
        self._by_channel[channel_id].add((topic, queue_id, group))

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> list[tuple[str, str]]:
        """Messages were stored up to ``max_offset`` (exclusive): the (group, channel id) to
        wake, their watches ended."""
        watchers = self._by_queue.get((topic, queue_id))
        if not watchers:
            return []
        woken = [key for key, offset in watchers.items() if offset < max_offset]
        for group, channel_id in woken:
            self.forget(topic, queue_id, group, channel_id)
        return woken

    def forget(self, topic: str, queue_id: int, group: str, channel_id: str) -> None:
        """End one watch (its client released the queue)."""
        if self._unwatch_queue(topic, queue_id, group, channel_id):
            self._discard_channel_entry(channel_id, (topic, queue_id, group))

    def forget_group(self, channel_id: str, group: str) -> int:
        """End the watches of ``group`` on ``channel_id`` (its consumer left); how many."""
        entries = [e for e in self._by_channel.get(channel_id, ()) if e[2] == group]
        for topic, queue_id, _ in entries:
            self.forget(topic, queue_id, group, channel_id)
        return len(entries)

    def take(self, topic: str, queue_id: int, group: str) -> list[str]:
        """End every watch of ``group`` on the queue (its offset was reset); their channels."""
        watchers = self._by_queue.get((topic, queue_id), {})
        channels = [channel_id for g, channel_id in watchers if g == group]
        for channel_id in channels:
            self.forget(topic, queue_id, group, channel_id)
        return channels

    def forget_channel(self, channel_id: str) -> int:
        """End every watch of a closed channel; how many there were."""
        entries = self._by_channel.pop(channel_id, set())
        for topic, queue_id, group in entries:
            self._unwatch_queue(topic, queue_id, group, channel_id)
        return len(entries)

    def _unwatch_queue(self, topic: str, queue_id: int, group: str, channel_id: str) -> bool:
        """Take the watch out of its queue's table (the queue's out once empty); whether it
        was there."""
        watchers = self._by_queue.get((topic, queue_id))
        if watchers is None or watchers.pop((group, channel_id), None) is None:
            return False
        if not watchers:
            del self._by_queue[(topic, queue_id)]
        return True

    def _discard_channel_entry(self, channel_id: str, entry: tuple[str, int, str]) -> None:
        entries = self._by_channel.get(channel_id)
        if entries is not None:
            entries.discard(entry)
            if not entries:
                del self._by_channel[channel_id]
