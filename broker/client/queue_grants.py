"""``QueueGrantManager``: the fenced handoff (ours, opt-in), generalising LOCK_BATCH_MQ.

Classic RocketMQ lets two consumers pull one queue during a rebalance and then repeat messages
(the new owner starts before the old one has stopped and committed). In the fenced
mode the broker grants each (group, queue) to one owner at a time, with an epoch:

- **acquire** a batch of queues: a free queue is granted with ``epoch = last epoch + 1``; a
  queue the caller already holds (same client id *and* same channel) is granted again with the
  **same** epoch (acquire is idempotent, so a retried or periodic acquire changes nothing); a
  queue held by anyone else is denied, naming the holder and its epoch.
- **release** with the epoch of the grant: only the current grant's epoch releases; a stale
  release changes nothing.
- A client's grants **vanish when its channel closes or expires** (``release_channel``): a
  crashed consumer cannot hold queues forever, and no lock timer is needed.
- A denied channel is a **waiter** of the queue: when the queue is released, the broker pushes
  QueueReleased to its waiters only (``take_waiters``), the consumers that asked for it. Pushed
  to the whole group, each release cost the broker one write per member and every member a
  wake-up: at 1,000 consumers the start of a group was a storm of millions of pushes. A
  consumer that wants a queue but has not asked yet is granted it when it asks; one whose ask
  failed retries on its own.
- Pulls and offset commits carry the epoch; ``check_epoch`` raises ``QueueFenced`` (its own
  response code, QUEUE_FENCED 1001) naming the queue, the stale epoch and the current one, so
  a consumer that lost a queue stops touching it.
- Epochs per (group, queue) **strictly increase forever**: the last epoch is kept after a
  release, so every grant of a queue has an epoch no earlier grant had, and an old owner's
  epoch can never become current again.

Holder identity is (client id, channel id), not the client id alone: two processes sharing a
client id (a container pitfall, see ``ConsumerManager.duplicate_client_ids``) have different
channels, so the second is denied rather than handed the same epoch. A client that reconnects
on a new channel names its old one (``OpenChannelRequest.previous_channel_id``, which only it
and the broker know): when that channel is still open here (its connection went silent, and the
broker has not seen it end), its grants move to the new one (``supersede``), so its close, when
the keepalive finds it, gives nothing away. The new channel's ``ChannelOpened`` lists the grants
it holds: a client whose old channel the broker did close (its grants released, maybe granted
again) learns at once which queues it lost, before it consumes more of what it had pulled.

Epochs start above ``epoch_base`` (default 0; epoch 0 on the wire means "not fenced"); a
broker passes its start time in ms, so epochs keep growing across restarts even without the
table.

**Restarts.** The broker persists both tables (``GrantStore``: every change a journal line,
``take_changes``; the whole table, ``to_json``, now and then) and restores them at start
(``restore``). A restored grant has no channel
yet (channels do not survive the process): it is an *orphan*, still held, so nobody else is
granted the queue, and its holder keeps pulling and committing with the same epoch as if the
broker had never gone. When the holder's client opens a channel again, ``rebind`` attaches its
orphans to that channel (so its next close releases them, as before). Orphans whose client
never comes back (it died while the broker was down) are released by ``expire_orphans``
(``restored_grant_expiry_ms``, 15 s: a live client reconnects well within it). So a
broker restart opens no window of double ownership, not even nominal in the trace.

The offsets travel with the grants but live in ``ConsumerOffsetManager``; the service combines
the two, with no ``await`` in between so each step is atomic on the event loop::

    # AcquireQueues
    result = grants.acquire(group, client_id, channel_id, mqs)
    for mq, epoch in result.granted:
        committed = offsets.query_offset(group, mq.topic, mq.queue_id)   # -1 = none
        ...  # QueueGrant(mq, epoch, committed)

    # ReleaseQueues: each final offset is committed only if its release is valid
    finals = {mq: final_offset, ...}                 # from the request; -1 = commit nothing

    def commit_final(mq):
        if finals[mq] >= 0:
            offsets.commit_offset(client_host, group, mq.topic, mq.queue_id, finals[mq])

    released = grants.release(group, client_id, [(mq, epoch), ...], commit=commit_final)
    ...  # push QueueReleased(group, mq) to grants.take_waiters(group, mq), each released mq

    # PullMessage / UpdateConsumerOffset with epoch != 0
    grants.check_epoch(group, mq, epoch)        # raises QueueFenced

    # the channel closed, or the expiry scan dropped it
    for group, mq in grants.release_channel(channel.channel_id): ...  # push to its waiters
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import QueueFenced
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = ["ORPHAN", "AcquireResult", "Denied", "Granted", "QueueGrant", "QueueGrantManager"]

log = get_logger("aiorocketmq.broker.client.queue_grants")


@dataclass(frozen=True, slots=True)
class QueueGrant:
    """The current grant of one (group, queue)."""

    group: str
    mq: MessageQueue
    client_id: str
    channel_id: str
    epoch: int


class Granted(NamedTuple):
    """A queue granted to the caller: pull and commit with this epoch."""

    mq: MessageQueue
    epoch: int


class Denied(NamedTuple):
    """A queue not granted: who holds it, with which epoch."""

    mq: MessageQueue
    holder: str
    epoch: int


class AcquireResult(NamedTuple):
    granted: list[Granted]
    denied: list[Denied]


ORPHAN = ""  # the channel id of a grant restored from disk, until its client is back


def _discard(table: dict[Any, set[Any]], key: Any, item: Any) -> None:
    """Take ``item`` out of ``table[key]``, and the set out of the table once it is empty."""
    members = table.get(key)
    if members is not None:
        members.discard(item)
        if not members:
            del table[key]


class QueueGrantManager:
    """Per (group, queue): one owner and an epoch that grows on every grant."""

    def __init__(self, *, epoch_base: int = 0) -> None:
        self.epoch_base = epoch_base
        # Bumped on every change of the tables: the broker persists when it moved.
        self.version = 0
        # When the orphans were restored (ms): they expire a channel expiry later.
        self.restored_at = 0
        # group -> queue -> current grant.
        self.grant_table: dict[str, dict[MessageQueue, QueueGrant]] = {}
        # group -> queue -> the last epoch ever issued (kept after release).
        self.epoch_table: dict[str, dict[MessageQueue, int]] = {}
        # channel id -> the (group, queue) it holds.
        self.channel_grant_table: dict[str, set[tuple[str, MessageQueue]]] = {}
        # (group, queue) -> the channels denied it since its last release; and the reverse.
        self.waiter_table: dict[tuple[str, MessageQueue], set[str]] = {}
        self.channel_wait_table: dict[str, set[tuple[str, MessageQueue]]] = {}
        # The durable changes (grants given, grants dropped) not yet taken by the broker's
        # writer, each stamped with the version after it: the journal's next lines.
        self.changes: list[dict[str, Any]] = []

    # ---- queries ---------------------------------------------------------------------------

    def holder(self, group: str, mq: MessageQueue) -> QueueGrant | None:
        """The current grant of ``mq``, or None when it is free."""
        return self.grant_table.get(group, {}).get(mq)

    def current_epoch(self, group: str, mq: MessageQueue) -> int:
        """The last epoch issued for ``mq`` (``epoch_base`` when never granted)."""
        return self.epoch_table.get(group, {}).get(mq, self.epoch_base)

    def is_current(self, group: str, mq: MessageQueue, client_id: str, epoch: int) -> bool:
        """Whether ``client_id`` holds ``mq`` with exactly ``epoch``."""
        grant = self.holder(group, mq)
        return grant is not None and grant.client_id == client_id and grant.epoch == epoch

    def grants_of_channel(self, channel_id: str) -> list[QueueGrant]:
        """The grants held through ``channel_id``, sorted by group then queue."""
        keys = sorted(self.channel_grant_table.get(channel_id, ()))
        return [self.grant_table[group][mq] for group, mq in keys]

    def check_epoch(self, group: str, mq: MessageQueue, epoch: int) -> None:
        """Raise ``QueueFenced`` unless ``epoch`` is the current grant's epoch of ``mq``."""
        grant = self.holder(group, mq)
        if grant is not None and grant.epoch == epoch:
            return
        if grant is None:
            raise QueueFenced(
                f"{mq} of group {group} is fenced: epoch {epoch} is stale, the queue is not "
                f"granted now (current epoch {self.current_epoch(group, mq)}); acquire it again"
            )
        raise QueueFenced(
            f"{mq} of group {group} is fenced: epoch {epoch} is stale, current epoch "
            f"{grant.epoch} is held by {grant.client_id}; stop pulling this queue"
        )

    # ---- changes ---------------------------------------------------------------------------

    def acquire(
        self, group: str, client_id: str, channel_id: str, mqs: Iterable[MessageQueue]
    ) -> AcquireResult:
        """Grant what is free or already the caller's; deny the rest, naming the holder."""
        grants = self.grant_table.setdefault(group, {})
        epochs = self.epoch_table.setdefault(group, {})
        granted: list[Granted] = []
        denied: list[Denied] = []
        for mq in dict.fromkeys(mqs):
            grant = grants.get(mq)
            if grant is None:
                epoch = epochs.get(mq, self.epoch_base) + 1
                epochs[mq] = epoch
                grants[mq] = QueueGrant(group, mq, client_id, channel_id, epoch)
                self.channel_grant_table.setdefault(channel_id, set()).add((group, mq))
                self.version += 1
                self.changes.append(
                    {
                        "seq": self.version,
                        "op": "grant",
                        **_queue_json(group, mq),
                        "clientId": client_id,
                        "epoch": epoch,
                    }
                )
                granted.append(Granted(mq, epoch))
                # A waiter granted the queue waits no more (nor is told it was released).
                _discard(self.waiter_table, (group, mq), channel_id)
                _discard(self.channel_wait_table, channel_id, (group, mq))
                log.info(
                    "queue granted",
                    group=group,
                    client_id=client_id,
                    channel_id=channel_id,
                    mq=str(mq),
                    epoch=epoch,
                )
            elif grant.client_id == client_id and grant.channel_id == channel_id:
                granted.append(Granted(mq, grant.epoch))
            elif grant.client_id == client_id and grant.channel_id == ORPHAN:
                self._move(grant, channel_id)  # its holder is back: same grant, same epoch
                granted.append(Granted(mq, grant.epoch))
            else:
                denied.append(Denied(mq, grant.client_id, grant.epoch))
                self.waiter_table.setdefault((group, mq), set()).add(channel_id)
                self.channel_wait_table.setdefault(channel_id, set()).add((group, mq))
                if grant.client_id == client_id:
                    log.warning(
                        "queue held by the same client id on another channel",
                        group=group,
                        client_id=client_id,
                        channel_id=channel_id,
                        holder_channel_id=grant.channel_id,
                        mq=str(mq),
                        epoch=grant.epoch,
                    )
        if not grants:
            del self.grant_table[group]
        if not epochs:
            del self.epoch_table[group]
        return AcquireResult(granted, denied)

    def release(
        self,
        group: str,
        client_id: str,
        releases: Iterable[tuple[MessageQueue, int]],
        *,
        commit: Callable[[MessageQueue], object] | None = None,
    ) -> list[MessageQueue]:
        """Release the caller's grants whose epoch is current; the queues released.

        ``commit(mq)``, when given, runs for each valid release just before its grant is
        dropped: the place to commit the final offset, so that it is committed if and only if
        the release happens.
        """
        released: list[MessageQueue] = []
        for mq, epoch in releases:
            grant = self.holder(group, mq)
            if grant is None or grant.client_id != client_id or grant.epoch != epoch:
                log.warning(
                    "queue release refused, not the current grant",
                    group=group,
                    client_id=client_id,
                    mq=str(mq),
                    epoch=epoch,
                    holder=grant.client_id if grant else None,
                    current_epoch=grant.epoch if grant else self.current_epoch(group, mq),
                )
                continue
            if commit is not None:
                commit(mq)
            self._drop(grant)
            released.append(mq)
            log.info("queue released", group=group, client_id=client_id, mq=str(mq), epoch=epoch)
        return released

    def take_waiters(self, group: str, mq: MessageQueue) -> list[str]:
        """The channels denied ``mq`` since its last release, sorted; forgotten as told."""
        waiters = sorted(self.waiter_table.pop((group, mq), ()))
        for channel_id in waiters:
            _discard(self.channel_wait_table, channel_id, (group, mq))
        return waiters

    def release_channel(
        self, channel_id: str, group: str | None = None
    ) -> list[tuple[str, MessageQueue]]:
        """The channel closed or expired (or, with ``group``, left that group): drop its grants
        and waits (of that group); the (group, queue) freed."""
        waits = self.channel_wait_table.get(channel_id, set())
        for key in [k for k in waits if group is None or k[0] == group]:
            _discard(self.waiter_table, key, channel_id)
            _discard(self.channel_wait_table, channel_id, key)
        held = self.channel_grant_table.get(channel_id, ())
        freed = sorted(k for k in held if group is None or k[0] == group)
        for group, mq in freed:
            grant = self.grant_table[group][mq]
            self._drop(grant)
            log.info(
                "queue grant vanished with its channel",
                group=group,
                client_id=grant.client_id,
                channel_id=channel_id,
                mq=str(mq),
                epoch=grant.epoch,
            )
        return freed

    def rebind(self, client_id: str, channel_id: str) -> int:
        """A client opened a channel: its orphaned (restored) grants move to it; how many."""
        return self.supersede(client_id, ORPHAN, channel_id)

    def supersede(self, client_id: str, old_channel_id: str, channel_id: str) -> int:
        """``client_id`` opened ``channel_id`` in place of ``old_channel_id`` (an orphan's, or
        one whose connection went silent): that channel's grants of this client move to the
        new one with their epochs, so its close, when seen, gives nothing away; how many."""
        mine = [g for g in self.grants_of_channel(old_channel_id) if g.client_id == client_id]
        for grant in mine:
            self._move(grant, channel_id)
        return len(mine)

    def expire_orphans(self, now: int, expiry_ms: int) -> list[QueueGrant]:
        """Orphans whose client did not come back within ``expiry_ms`` of the restore: freed
        (the grants they were, naming their clients)."""
        if ORPHAN not in self.channel_grant_table or now < self.restored_at + expiry_ms:
            return []
        grants = [self.grant_table[g][mq] for g, mq in sorted(self.channel_grant_table[ORPHAN])]
        self.release_channel(ORPHAN)
        return grants

    def _move(self, grant: QueueGrant, channel_id: str) -> None:
        key = (grant.group, grant.mq)
        _discard(self.channel_grant_table, grant.channel_id, key)
        self.grant_table[grant.group][grant.mq] = QueueGrant(
            grant.group, grant.mq, grant.client_id, channel_id, grant.epoch
        )
        self.channel_grant_table.setdefault(channel_id, set()).add(key)
        self.version += 1
        log.info(
            "queue grant moved to its client's new channel",
            group=grant.group,
            client_id=grant.client_id,
            old_channel_id=grant.channel_id or "(restored)",
            channel_id=channel_id,
            mq=str(grant.mq),
            epoch=grant.epoch,
        )

    # ---- persistence (the broker writes and reads the file) ---------------------------------

    def take_changes(self) -> list[dict[str, Any]]:
        """The changes since the last call, oldest first (the journal's next lines)."""
        changes, self.changes = self.changes, []
        return changes

    def size(self) -> int:
        """How many entries ``to_json`` writes (each queue's last epoch, each grant)."""
        return sum(map(len, self.epoch_table.values())) + sum(map(len, self.grant_table.values()))

    def to_json(self) -> dict[str, Any]:
        """Both tables as JSON: the grants (without channels), the last epoch of each queue,
        and the version they are at (a journal's changes up to it are in them)."""
        return {
            "version": self.version,
            "grantTable": [
                {**_queue_json(group, mq), "clientId": g.client_id, "epoch": g.epoch}
                for group in sorted(self.grant_table)
                for mq, g in sorted(self.grant_table[group].items())
            ],
            "epochTable": [
                {**_queue_json(group, mq), "epoch": epoch}
                for group in sorted(self.epoch_table)
                for mq, epoch in sorted(self.epoch_table[group].items())
            ],
        }

    def restore(
        self, data: dict[str, Any], now: int, changes: Iterable[dict[str, Any]] = ()
    ) -> int:
        """Load what ``to_json`` wrote, then replay the ``changes`` (``take_changes``) made
        after its version: every grant an orphan until its client is back.

        Epochs never go back: a restored epoch below ``epoch_base`` leaves the base in charge.
        The version goes on from the last one restored, so later changes number above it.
        Returns how many grants were restored. A malformed entry raises ``ValueError``.
        """
        try:
            for e in data.get("epochTable", []):
                mq = _queue(e)
                epochs = self.epoch_table.setdefault(str(e["group"]), {})
                epochs[mq] = max(int(e["epoch"]), epochs.get(mq, 0))
            for e in data.get("grantTable", []):
                self._restore_grant(str(e["group"]), _queue(e), str(e["clientId"]), int(e["epoch"]))
            version = int(data.get("version", 0))
            for e in changes:
                seq = int(e["seq"])
                if seq <= version:
                    continue  # already in the table (a crash before the journal was emptied)
                group, mq = str(e["group"]), _queue(e)
                if e["op"] == "grant":
                    self._restore_grant(group, mq, str(e["clientId"]), int(e["epoch"]))
                elif e["op"] == "drop":
                    grant = self.holder(group, mq)
                    if grant is not None:
                        self._unlink(grant)
                else:
                    raise ValueError(f"unknown change {e['op']!r}")
                version = seq
        except (KeyError, TypeError, ValueError) as e:
            self.reset()  # nothing half restored: no orphan without its expiry
            raise ValueError(f"malformed queue grant table: {e!r}") from None
        self.version = max(self.version, version)
        self.restored_at = now
        return len(self.channel_grant_table.get(ORPHAN, ()))

    def reset(self, version: int = 0) -> None:
        """Forget every grant, epoch and waiter (the epoch base stays); numbering goes on from
        ``version`` at least."""
        self.grant_table.clear()
        self.epoch_table.clear()
        self.channel_grant_table.clear()
        self.waiter_table.clear()
        self.channel_wait_table.clear()
        self.changes.clear()
        self.version = max(self.version, version)

    def _restore_grant(self, group: str, mq: MessageQueue, client_id: str, epoch: int) -> None:
        """A grant read from disk: held, by no channel yet (an orphan)."""
        old = self.holder(group, mq)
        if old is not None:
            self._unlink(old)
        self.grant_table.setdefault(group, {})[mq] = QueueGrant(group, mq, client_id, ORPHAN, epoch)
        self.channel_grant_table.setdefault(ORPHAN, set()).add((group, mq))
        epochs = self.epoch_table.setdefault(group, {})
        epochs[mq] = max(epoch, epochs.get(mq, 0))

    def _drop(self, grant: QueueGrant) -> None:
        self._unlink(grant)
        self.version += 1
        self.changes.append(
            {"seq": self.version, "op": "drop", **_queue_json(grant.group, grant.mq)}
        )

    def _unlink(self, grant: QueueGrant) -> None:
        grants = self.grant_table[grant.group]
        del grants[grant.mq]
        if not grants:
            del self.grant_table[grant.group]
        _discard(self.channel_grant_table, grant.channel_id, (grant.group, grant.mq))


def _queue_json(group: str, mq: MessageQueue) -> dict[str, Any]:
    return {"group": group, "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def _queue(entry: dict[str, Any]) -> MessageQueue:
    return MessageQueue(str(entry["topic"]), str(entry["brokerName"]), int(entry["queueId"]))
