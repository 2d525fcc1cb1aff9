"""A group's membership sent as changes: the broker's versions and the client's copy.

Theory of operation. A NOTIFY_CONSUMER_IDS_CHANGED of ours carries the group's members, so the
thousand rebalances it triggers need not each ask for them. Sent whole, that is the whole list
to every member at every change: at 1,000 consumers with RocketMQ's default instance names
(``ip@pid#nanotime``) 33 KB a notification, 33 MB a change per broker to serialize, write and
parse, for one id that came or went (a change of one id is under 100 bytes). So each
notification also has a version, and a channel that holds the previous one is sent only what
changed:

- The broker numbers each notification round (``MembershipHistory.record``; one counter for the
  broker's life, so a number is never reused) and keeps the last few memberships. For a channel
  that was last sent version *b* (the channel notes what it actually sent: a notification
  superseded in its outbox or dropped was never seen), it sends the ids added and removed since
  *b* (``changes_since``); when *b* is unknown (a new channel, or too old) or the members repeat
  an id, the whole list.
- The client keeps, per broker channel, the version and members it was last sent
  (``NotifiedMembers``): a whole list replaces them, a change is applied when its base is the
  version held and refused otherwise (then the rebalance asks the broker, as RocketMQ does). A
  new channel starts empty, as the broker's side of it does.
- The periodic rebalance still asks a broker (GET_CONSUMER_LIST_BY_GROUP), with the version it
  holds of that broker's: while the members are those of the broker's latest round
  (``MembershipHistory.latest``), the answer is "unchanged" and the client uses its copy
  (``NotifiedMembers.members``); else the answer is the list, held with its version.

Versions are per broker: two brokers number the same change differently, and a client holds
each broker's copy on its own channel to it. Pure code: no I/O, no clock (the broker passes the
start of its versions).
"""

from __future__ import annotations

import bisect
import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_HISTORY", "MembershipChange", "MembershipHistory", "NotifiedMembers"]

# Memberships a broker keeps per group to send changes from. A channel that missed more rounds
# than this (a reader far behind) is sent the whole list, which is always right.
DEFAULT_HISTORY = 8


@dataclass(frozen=True, slots=True)
class MembershipChange:
    """What changed from ``base_version`` to ``version``: ids added and ids removed."""

    version: int
    base_version: int
    added: tuple[str, ...]
    removed: tuple[str, ...]


class MembershipHistory:
    """The broker's side: a version per notification round of each group, and the last few
    memberships to compute changes from."""

    def __init__(self, keep: int = DEFAULT_HISTORY, *, start: int = 0) -> None:
        """``start``: the versions count on from it. The broker passes its start time (ms), so
        that no version of one run is a version of the next: a client that held one across a
        restart (its channel not reopened yet) would otherwise be told its members are current.
        """
        self.keep = max(1, keep)
        self._next = start
        # group -> version -> the members then (None: they repeated an id, no changes from it)
        self._kept: dict[str, OrderedDict[int, frozenset[str] | None]] = {}

    def record(self, group: str, members: Sequence[str]) -> int:
        """A new notification round of ``group`` with these members: its version."""
        self._next += 1
        distinct = frozenset(members)
        kept = self._kept.setdefault(group, OrderedDict())
        kept[self._next] = distinct if len(distinct) == len(members) else None
        while len(kept) > self.keep:
            kept.popitem(last=False)
        return self._next

    def current(self, group: str, members: Sequence[str]) -> int:
        """The version of ``group``'s latest round if it had exactly these members, else a new
        round's: a notification that repeats the membership (to one channel) then costs no
        version, which would push out of ``keep`` a base the other channels hold."""
        return self.latest(group, members) or self.record(group, members)

    def latest(self, group: str, members: Sequence[str]) -> int:
        """The version of ``group``'s latest round if it had exactly these members (distinct),
        else 0. Records nothing: a GET_CONSUMER_LIST_BY_GROUP answer carries it, and a
        thousand members asking while a change waits for its round must not fill ``keep``
        with rounds no channel was sent."""
        kept = self._kept.get(group)
        if kept:
            version, latest = next(reversed(kept.items()))
            if latest is not None and len(latest) == len(members) and latest == set(members):
                return version
        return 0

    def changes_since(self, group: str, base: int, version: int) -> MembershipChange | None:
        """The change from ``base`` to ``version`` (both recorded for ``group``), or None when
        only the whole list will do: ``base`` unknown or forgotten, or an id repeated."""
        kept = self._kept.get(group)
        if kept is None or base == 0:
            return None
        old, new = kept.get(base), kept.get(version)
        if old is None or new is None:
            return None
        return MembershipChange(version, base, tuple(sorted(new - old)), tuple(sorted(old - new)))

    def forget(self, group: str) -> None:
        """The group is gone (its last channel left)."""
        self._kept.pop(group, None)


class NotifiedMembers:
    """The client's side, for one broker channel: the version and members it was last sent.

    The members are kept sorted: the rebalance pass sorts them, which for a sorted list is one
    pass, and a change is applied by bisection.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, list[str]]] = {}

    def whole(self, group: str, version: int, members: Sequence[str]) -> list[str]:
        """A notification with every member: held (when versioned) and returned, sorted.

        The ids are interned (``sys.intern``), as are those a change adds: the copies held
        for each broker then share one string per id, so comparing two members lists (each
        broker sends the same change; the rebalance asks whether it already allocated by
        it) is a pass of identity checks, not of string comparisons: at 1,000 members and
        four brokers that comparison was a tenth of a consumer process's CPU."""
        ordered = sorted(map(sys.intern, members))
        if version:
            self._held[group] = (version, ordered)
        else:
            self._held.pop(group, None)
        return list(ordered)

    def apply(self, change: MembershipChange, group: str) -> list[str] | None:
        """The members after ``change``, or None when its base is not the version held (the
        held copy is then forgotten: the next whole list starts again)."""
        held = self._held.get(group)
        if held is not None and held[0] == change.version:
            return list(held[1])  # an answer to a query brought this version first
        if held is None or held[0] != change.base_version:
            self._held.pop(group, None)
            return None
        members = list(held[1])
        for cid in change.removed:
            i = bisect.bisect_left(members, cid)
            if i < len(members) and members[i] == cid:
                del members[i]
        for cid in map(sys.intern, change.added):
            i = bisect.bisect_left(members, cid)
            if i == len(members) or members[i] != cid:
                members.insert(i, cid)
        self._held[group] = (change.version, members)
        return list(members)

    def version(self, group: str) -> int:
        """The version held for ``group`` (0: none)."""
        held = self._held.get(group)
        return held[0] if held is not None else 0

    def members(self, group: str, version: int) -> list[str] | None:
        """The members held for ``group`` if they are ``version``'s (a broker answered that
        they are still the group's), sorted; else None."""
        held = self._held.get(group)
        return list(held[1]) if held is not None and held[0] == version else None

    def clear(self) -> None:
        """A new channel: the broker starts it with whole lists."""
        self._held.clear()
