"""``Channel``: the broker's view of one client connection (one ``OpenChannel`` stream).

Theory of operation. In RocketMQ a channel is a Netty TCP connection: the key of
``channel_info_table``, the thing the broker writes ``NOTIFY_CONSUMER_IDS_CHANGED`` to, and the
thing whose close event makes the broker drop the client from its groups. Here the connection is
the long-lived ``OpenChannel`` server stream a client instance opens to each broker. This class
is that stream as the pure core sees it: an id, who is at the other end, and an outbox.

Rules:

- Identity is the object: two ``Channel`` objects are never equal, like two Netty channels. The
  tables of ``ConsumerManager`` and ``ProducerManager`` are keyed by the object; requests name
  it by ``channel_id`` and the service layer maps the id to the object.
- Notifications are oneway (RocketMQ sends ``NOTIFY_CONSUMER_IDS_CHANGED`` with a 10 ms oneway
  timeout): ``offer`` never blocks. When the bounded outbox is full, or the channel is closed,
  the event is dropped and ``offer`` answers False. A client that missed a notification still
  rebalances at its next periodic tick (20 s), exactly as with a lost oneway in RocketMQ.
- A notification supersedes the notifications of its group still queued (``offer(event,
  group=...)``): ``events()`` skips them, so a client that fell behind reads the group's latest
  membership, not every membership it had on the way. At the start of 1,000 consumers each
  channel was sent a few hundred notifications; a member that read them one by one
  rebalanced on each stale list in turn, and its process, busy with those, read the next ones
  late: minutes after the group had settled, its members were still dealing queues by old lists.
- The channel notes the membership version of each group's notification it hands to the
  stream (``notified_versions``): the broker sends the next one as a change from it
  (``protocol.membership``). A notification superseded or dropped was never sent, so it
  does not count.
- A client connected to several brokers may ask to be told of its groups' changes by one of
  them only (``notified_elsewhere``, set by each of its heartbeats here): the channel stays a
  member, but is sent no notification.
- ``close()`` is idempotent and wakes the reader of ``events()``; events still queued at close
  are discarded (nobody is left to read them).
- No task is started here: the stream handler of the gRPC service iterates ``events()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.v1 import broker_pb2

__all__ = ["DEFAULT_OUTBOX_SIZE", "Channel"]

log = get_logger("aiorocketmq.broker.client.channel")

# Enough for every notification a burst of joins and leaves can cause; a slow reader that
# falls this far behind loses notifications rather than blocking the broker.
DEFAULT_OUTBOX_SIZE = 1024

# Put in the outbox by close() to wake a reader blocked on an empty outbox. Compared by identity.
_CLOSED = broker_pb2.ChannelEvent()


class Channel:
    """One client connection: who is at the other end, and its outbox of pushed events."""

    __slots__ = (
        "_closed",
        "_latest",
        "_stale",
        "channel_id",
        "client_id",
        "dropped",
        "language",
        "notified_elsewhere",
        "notified_versions",
        "opened_at",
        "outbox",
        "protocol",
        "remote_addr",
        "replaced_by",
        "superseded",
        "version",
    )

    def __init__(
        self,
        channel_id: str,
        client_id: str,
        remote_addr: str,
        *,
        language: str = "PYTHON",
        version: int = 0,
        opened_at: int = 0,
        outbox_size: int = DEFAULT_OUTBOX_SIZE,
        protocol: str = "grpc",
    ) -> None:
        self.channel_id = channel_id
        self.client_id = client_id
        self.remote_addr = remote_addr
        self.language = language
        self.version = version
        # "grpc" (an OpenChannel stream) or "remoting" (a TCP connection of RocketMQ's protocol).
        self.protocol = protocol
        # ms since the epoch, from the caller's clock.
        self.opened_at = opened_at
        self.outbox: asyncio.Queue[broker_pb2.ChannelEvent] = asyncio.Queue(maxsize=outbox_size)
        # Events that could not be queued (outbox full or channel closed).
        self.dropped = 0
        # Notifications skipped because a later one of the same group was queued after them.
        self.superseded = 0
        # group -> its latest queued notification; the ids of queued events superseded since.
        self._latest: dict[str, broker_pb2.ChannelEvent] = {}
        self._stale: set[int] = set()
        self._closed = False
        # group -> the membership version of the last notification handed to the stream.
        self.notified_versions: dict[str, int] = {}
        # The client learns of its groups' changes from another broker: no notification here.
        self.notified_elsewhere = False
        # The channel id its client opened in place of this one (it named this one as its
        # previous): this channel's grants went there. Empty while it is the client's current.
        self.replaced_by = ""

    @property
    def closed(self) -> bool:
        return self._closed

    def offer(self, event: broker_pb2.ChannelEvent, *, group: str | None = None) -> bool:
        """Queue ``event`` without blocking; False (and the event dropped) when full or closed.

        ``group``: ``event`` is a notification of that group, and supersedes the group's
        notifications still queued (they are skipped when read).
        """
        if self._closed:
            self.dropped += 1
            return False
        try:
            self.outbox.put_nowait(event)
            if group is not None:
                older = self._latest.get(group)
                if older is not None:
                    self._stale.add(id(older))  # alive while queued: its id stays its own
                self._latest[group] = event
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "channel outbox full, event dropped",
                channel_id=self.channel_id,
                client_id=self.client_id,
                remote_addr=self.remote_addr,
                dropped=self.dropped,
            )
            return False
        return True

    def close(self) -> None:
        """Mark the channel closed and wake the reader of ``events()``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.outbox.put_nowait(_CLOSED)
        except asyncio.QueueFull:
            # The reader is not blocked (the outbox is not empty): it sees ``closed`` before
            # its next get.
            pass

    async def events(self) -> AsyncIterator[broker_pb2.ChannelEvent]:
        """The events to push to the client, in order, until the channel is closed."""
        while not self._closed:
            event = await self.outbox.get()
            if event is _CLOSED or self._closed:
                return
            if self._latest:  # a notification is queued: is this one stale, or the latest?
                if id(event) in self._stale:
                    self._stale.discard(id(event))
                    self.superseded += 1
                    continue
                for group, latest in self._latest.items():
                    if latest is event:
                        del self._latest[group]
                        version = event.notify_consumer_ids_changed.version
                        if version:
                            self.notified_versions[group] = version
                        break
            yield event

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"Channel(id={self.channel_id!r}, client_id={self.client_id!r}, "
            f"remote_addr={self.remote_addr!r}, {state})"
        )
