"""Allocation strategies: which message queues of a topic this consumer pulls.

Rules
-----
* **Allocation is a pure function of (mq_all, cid_all, current_cid): every consumer must
  compute the same answer.** Rebalancing is client-side and uncoordinated: each consumer of a
  group fetches the group's consumer ids from a broker, runs the strategy, and keeps only its
  own share. The shares fit together (every queue owned once) only because every consumer runs
  the same function on the same inputs. So a strategy reads no clock, no randomness, no
  environment that differs between consumers, and keeps no state between calls; a strategy with
  configuration (an allow-list, a machine-room resolver) must be configured alike on every
  consumer of the group.
* **Strategies do not sort.** The caller (``RebalanceImpl``) passes ``mq_all`` sorted by
  ``MessageQueue`` order and ``cid_all`` sorted as strings, as RocketMQ does; the index-based
  strategies (``AVG``, ``AVG_BY_CIRCLE``, ``MACHINE_ROOM``) depend on that order.
  (``CONSISTENT_HASH_BOUNDED`` happens not to: it orders by hash weight.)
* **This module does no I/O** and knows nothing of brokers or asyncio; it is tested with plain
  calls.

Theory of operation
-------------------
``allocate(consumer_group, current_cid, mq_all, cid_all)`` first runs the common validation of
RocketMQ's ``AbstractAllocateMessageQueueStrategy.check``, in its order:

1. ``current_cid`` empty: ``ValueError("currentCID is empty")``;
2. ``mq_all`` empty: ``ValueError("mqAll is null or mqAll empty")``;
3. ``cid_all`` empty: ``ValueError("cidAll is null or cidAll empty")``;
4. ``current_cid`` not in ``cid_all``: log ``"[BUG] ..."`` at info and return ``[]``. This is
   the normal state of a consumer whose heartbeat has not reached the broker yet: it drops its
   queues until the next rebalance.

RocketMQ throws ``IllegalArgumentException`` where we raise ``ValueError``, and
``NullPointerException`` where we raise ``TypeError`` (with RocketMQ's message when it has
one). Then each strategy splits the queues:

=========================== =================================================================
``AVG`` (default)           contiguous blocks; the first ``n % c`` consumers get one extra
``AVG_BY_CIRCLE``           round robin: queue ``i`` goes to consumer ``i % c``
``CONSISTENT_HASH``         a hash ring of ``virtual_node_cnt`` points per consumer; a queue
                            goes to the first point clockwise from the hash of ``str(mq)``
``CONSISTENT_HASH_BOUNDED`` ours: rendezvous hashing (a queue goes to the consumer of
                            highest ``hash(str(mq) + "|" + cid)``), but a consumer at
                            capacity ``ceil((1 + epsilon) * n / c)`` is skipped
``CONFIG``                  a fixed list of queues, whatever the inputs
``MACHINE_ROOM``            only queues of brokers named ``<idc>@<name>`` whose idc is
                            listed; block plus remainder
``MACHINE_ROOM_NEARBY-*``   an inner strategy applied per machine room; rooms without
                            consumers are shared by all
=========================== =================================================================

A strategy of your own is any object with a ``name`` and this ``allocate`` method (the
:class:`AllocateMessageQueueStrategy` protocol); it must keep the rules above.
:class:`AllocateMessageQueueByChosenConsumers` is a worked example: "consume only on chosen
machines", from a well-known article on RocketMQ load balancing. In a test environment several
consumers share a group, but only the machine running new code should get the messages; every
consumer runs the same strategy with the same allow-list, so the chosen ones split all the
queues among themselves (``AVG``) and the others get none.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message_queue import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByChosenConsumers",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueConsistentHashBounded",
    "AllocateMessageQueueStrategy",
    "HashFunction",
    "MachineRoomResolver",
    "md5_hash",
    "md5_hash64",
    "strategy_by_name",
]

log = get_logger("aiorocketmq.consumer.allocate")

HashFunction = Callable[[str], int]
"""Maps a key to an integer (RocketMQ's ``HashFunction``): a point on the ring of
``CONSISTENT_HASH``, or a pair's weight in ``CONSISTENT_HASH_BOUNDED``."""


@runtime_checkable
class AllocateMessageQueueStrategy(Protocol):
    """RocketMQ's ``AllocateMessageQueueStrategy``: a name and a pure ``allocate``."""

    @property
    def name(self) -> str:
        """The strategy's name, as RocketMQ reports it (``"AVG"``, ...)."""
        ...

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        """The queues of ``mq_all`` that ``current_cid`` owns among ``cid_all``."""
        ...


@runtime_checkable
class MachineRoomResolver(Protocol):
    """Says where brokers and consumers are deployed; neither answer may be empty."""

    def broker_deploy_in(self, mq: MessageQueue) -> str:
        """The machine room of the broker that holds ``mq``."""
        ...

    def consumer_deploy_in(self, client_id: str) -> str:
        """The machine room of the consumer ``client_id``."""
        ...


def _check(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> bool:
    """RocketMQ's ``AbstractAllocateMessageQueueStrategy.check``; False means "allocate none"."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        log.info(
            "[BUG] ConsumerGroup's consumerId not in cidAll",
            consumer_group=consumer_group,
            consumer_id=current_cid,
            cid_all=list(cid_all),
        )
        return False
    return True


class AllocateMessageQueueAveragely:
    """``AVG``, the default: contiguous blocks, the extra queues to the lowest indices.

    With ``n`` queues and ``c`` consumers, consumer ``i`` gets ``n // c`` queues, plus one when
    ``i < n % c``. With ``n < c`` the first ``n`` consumers get one queue each and the rest get
    none. Example: 5 queues, 2 consumers: ``[0, 1, 2]`` and ``[3, 4]``.
    """

    name = "AVG"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        n, c = len(mq_all), len(cid_all)
        mod = n % c
        extra = mod > 0 and index < mod
        if n <= c:
            average_size = 1
        else:
            average_size = n // c + 1 if extra else n // c
        start = index * average_size if extra else index * average_size + mod
        count = min(average_size, n - start)  # <= 0 when n < c and index >= n
        return list(mq_all[start : start + count]) if count > 0 else []


class AllocateMessageQueueAveragelyByCircle:
    """``AVG_BY_CIRCLE``: round robin, queue ``i`` to consumer ``i % c``.

    Example: 5 queues, 2 consumers: ``[0, 2, 4]`` and ``[1, 3]``.
    """

    name = "AVG_BY_CIRCLE"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str) -> int:
    """RocketMQ's default ``MD5Hash``: the first 4 bytes of MD5(UTF-8), big-endian unsigned."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


@functools.lru_cache(maxsize=256)
def _ring(
    cid_all: tuple[str, ...], virtual_node_cnt: int, hash_function: HashFunction
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """RocketMQ's ``ConsistentHashRouter`` ring: sorted points and the consumer at each.

    Consumers are placed in ``cid_all`` order, points ``0..virtual_node_cnt-1`` each; on a hash
    collision the later one wins (a ``SortedMap.put``). Cached: the ring is a pure function of
    its arguments, and a simulation or a test asks for the same ring once per consumer.
    """
    owner_by_point: dict[int, str] = {}
    for cid in cid_all:
        for i in range(virtual_node_cnt):
            owner_by_point[hash_function(f"{cid}-{i}")] = cid
    points = tuple(sorted(owner_by_point))
    return points, tuple(owner_by_point[p] for p in points)


class AllocateMessageQueueConsistentHash:
    """``CONSISTENT_HASH``: a hash ring with ``virtual_node_cnt`` points per consumer.

    Point ``i`` of consumer ``cid`` is at ``hash_function(cid + "-" + i)``; a queue goes to the
    owner of the first point at or after ``hash_function(str(mq))``, wrapping to the first
    point. When a consumer joins or leaves, only the queues on its arcs change owner; the price
    is balance: with RocketMQ's default of 10 points per consumer, loads are uneven.
    ``virtual_node_cnt == 0`` gives an empty ring and no queue to anyone, as in RocketMQ.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10, hash_function: HashFunction | None = None):
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function: HashFunction = hash_function if hash_function is not None else md5_hash

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        ring = _ring if isinstance(self.hash_function, Hashable) else _ring.__wrapped__
        points, owners = ring(tuple(cid_all), self.virtual_node_cnt, self.hash_function)
        if not points:
            return []
        result = []
        for mq in mq_all:
            # First point >= the queue's hash (Java's inclusive tailMap), else wrap around.
            i = bisect.bisect_left(points, self.hash_function(str(mq)))
            if owners[i % len(points)] == current_cid:
                result.append(mq)
        return result


def md5_hash64(key: str) -> int:
    """The first 8 bytes of MD5(UTF-8), big-endian unsigned: the weights of rendezvous hashing."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:8], "big")


class AllocateMessageQueueConsistentHashBounded:
    """``CONSISTENT_HASH_BOUNDED`` (ours): a hash ring with bounded loads.

    Not in RocketMQ. The ring is ``CONSISTENT_HASH``'s: ``virtual_node_cnt`` points per
    consumer at ``hash_function(cid + "-" + i)``; a queue sits at ``hash_function(str(mq))`` and
    prefers the consumers in the order its clockwise walk meets them, the nearest first. Bounded
    loads, after Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads"
    (2018): each consumer holds at most ``ceil((1 + epsilon) * n / c)`` queues. A full
    consumer keeps the queues nearest to it (ties: the smaller ``str(mq)``) and the others walk
    on. The result is the stable matching of queues and consumers (queue-proposing deferred
    acceptance): no queue and consumer would both rather have each other than what they hold,
    and it does not depend on the order of ``mq_all`` or ``cid_all``. With room for everyone
    (a large ``epsilon``) it is ``CONSISTENT_HASH`` on the same ring.

    What it gives: every consumer holds at most the capacity (no consumer gets the long arc of
    plain consistent hashing), and a join or a leave moves few queues: those on the arcs the
    joiner takes or the leaver frees, plus the few that overflow a full consumer.
    ``docs/allocation.md`` and ``bench.allocation`` have the figures.

    Cost: the ring is cached per membership and built from cached per-consumer points, so a
    change of one consumer among 1,000 hashes only its points; the matching is O(n log n) and
    computed once per process for all the consumers that ask (they all need the same whole
    assignment, of which each keeps its share). The default weight is :func:`md5_hash64`.
    """

    name = "CONSISTENT_HASH_BOUNDED"

    def __init__(
        self,
        virtual_node_cnt: int = 100,
        epsilon: float = 0.25,
        hash_function: HashFunction | None = None,
    ):
        if virtual_node_cnt < 1:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        if not epsilon >= 0:  # also refuses NaN
            raise ValueError(f"illegal epsilon :{epsilon}")
        self.virtual_node_cnt = virtual_node_cnt
        self.epsilon = epsilon
        self.hash_function: HashFunction = (
            hash_function if hash_function is not None else md5_hash64
        )

    def capacity(self, queue_count: int, consumer_count: int) -> int:
        """The most queues one consumer may hold: ``ceil((1 + epsilon) * n / c)``."""
        return _capacity(queue_count, consumer_count, self.epsilon)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        return list(self._shares(mq_all, cid_all).get(current_cid, ()))

    def assignment(
        self, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
    ) -> dict[MessageQueue, str]:
        """The owner of every queue: the whole answer, of which ``allocate`` keeps a share."""
        return {
            mq: cid for cid, mqs in self._shares(list(mq_all), list(cid_all)).items() for mq in mqs
        }

    def _shares(
        self, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> dict[str, tuple[MessageQueue, ...]]:
        ordered = sorted(cid_all)  # the pass sorted them already: one C pass over the list
        distinct = len(set(ordered)) == len(ordered)
        cids = tuple(ordered) if distinct else tuple(sorted(set(ordered)))
        args = (self.virtual_node_cnt, self.epsilon, self.hash_function)
        if not isinstance(self.hash_function, Hashable):
            return _bounded_shares(tuple(mq_all), cids, *args)
        # The topic is part of the key: a consumer's pass allocates its topic and its group's
        # retry topic with the same members, and one entry for both was replaced at every
        # pass, so each of a thousand consumers recomputed the whole assignment (20 ms at
        # 1,000 x 4,096) instead of finding it.
        key = (mq_all[0].topic if mq_all else "", cids, *args)
        hit = _SHARES_SEEN.get(key)
        # The queues compared as lists: element by element in C, by identity for the interned
        # queues of a route (a tuple of them as a cache key was hashed in Python, queue by
        # queue: 0.25 ms a call, times every consumer of a process at every pass).
        if hit is not None and hit[0] == mq_all:
            return hit[1]
        shares = _bounded_shares(tuple(mq_all), cids, *args)
        _SHARES_SEEN[key] = (list(mq_all), shares)
        while len(_SHARES_SEEN) > _SHARES_KEPT:
            del _SHARES_SEEN[next(iter(_SHARES_SEEN))]
        return shares


def _capacity(queue_count: int, consumer_count: int, epsilon: float) -> int:
    # Rounded before the ceiling so that, say, 1.1 * 10 / 11 is 1 and not 1.0000000000000002.
    return math.ceil(round((1 + epsilon) * queue_count / consumer_count, 9))


@functools.lru_cache(maxsize=65_536)
def _cid_points(cid: str, virtual_node_cnt: int, hash_function: HashFunction) -> tuple[int, ...]:
    """The ring points of one consumer (cached: a change of membership hashes only newcomers)."""
    return tuple(hash_function(f"{cid}-{i}") for i in range(virtual_node_cnt))


# The ring is a sorted list of integers, point << _SHIFT | slot, where a slot stands for a
# consumer id (numbered as this process first meets them): one integer per point sorts and
# bisects in C, and the points of a newcomer merge into the last ring in one pass.
_SHIFT = 24
_MASK = (1 << _SHIFT) - 1


class _Ring:
    """The process's consumer slots and the last ring built from them, kept so that the next
    membership (one consumer more or less, as a join or a leave gives) is an edit of it."""

    slots: dict[str, int] = {}
    slot_cids: list[str] = []
    cid_keys: dict[tuple[str, int, HashFunction], list[int]] = {}
    cids: frozenset[str] = frozenset()
    keys: list[int] = []
    args: tuple[int, HashFunction] | None = None

    @classmethod
    def keys_of(cls, cid: str, virtual_node_cnt: int, hash_function: HashFunction) -> list[int]:
        found = cls.cid_keys.get((cid, virtual_node_cnt, hash_function))
        if found is None:
            if len(cls.slot_cids) > _MASK:  # a long-lived process met 16 M ids: start over
                cls.slots, cls.slot_cids, cls.cid_keys = {}, [], {}
                cls.cids, cls.keys, cls.args = frozenset(), [], None
            slot = cls.slots.get(cid)
            if slot is None:
                slot = cls.slots[cid] = len(cls.slot_cids)
                cls.slot_cids.append(cid)
            points = _cid_points(cid, virtual_node_cnt, hash_function)
            found = cls.cid_keys[(cid, virtual_node_cnt, hash_function)] = sorted(
                p << _SHIFT | slot for p in points
            )
        return found


def _tied(keys: list[int], i: int) -> bool:
    """The point of ``keys[i]`` is also its neighbour's."""
    point = keys[i] >> _SHIFT
    return (i > 0 and keys[i - 1] >> _SHIFT == point) or (
        i + 1 < len(keys) and keys[i + 1] >> _SHIFT == point
    )


def _bounded_ring(
    cids: tuple[str, ...], virtual_node_cnt: int, hash_function: HashFunction
) -> tuple[list[int], Sequence[str]]:
    """The ring as sorted ``point << _SHIFT | slot`` keys, and the consumer of each slot.

    Points are ordered by (point, consumer id): equal points are all kept and met in id order.
    A hash function that cannot be cached, or equal points (astronomically rare with the
    default 64-bit hash), get a ring of their own with slots numbered in id order.
    """
    new, last = frozenset(cids), _Ring
    if isinstance(hash_function, Hashable):
        args = (virtual_node_cnt, hash_function)
        gone, added = last.cids - new, new - last.cids
        if last.args == args and (len(gone) + len(added)) * 4 <= len(new):
            keys = list(last.keys)
            if len(gone) <= 8:  # a few cuts (C memmoves) beat a pass over every point
                for cid in gone:
                    for k in _Ring.keys_of(cid, *args):
                        del keys[bisect.bisect_left(keys, k)]
            else:
                slots = {last.slots[cid] for cid in gone}
                keys = [k for k in keys if k & _MASK not in slots]
            fresh = [k for cid in added for k in _Ring.keys_of(cid, *args)]
            keys += fresh
            keys.sort()  # sorted runs: merged in one pass
            tied = any(_tied(keys, bisect.bisect_left(keys, k)) for k in fresh)
        else:
            keys = sorted(k for cid in new for k in _Ring.keys_of(cid, *args))
            tied = len(set(map(_SHIFT.__rrshift__, keys))) != len(keys)
        if not tied:
            last.cids, last.keys, last.args = new, keys, args
            return keys, last.slot_cids
    ordered = sorted(new)
    keys = sorted(
        hash_function(f"{cid}-{i}") << _SHIFT | rank
        for rank, cid in enumerate(ordered)
        for i in range(virtual_node_cnt)
    )
    return keys, ordered


@functools.lru_cache(maxsize=65_536)
def _queue_home(mq: MessageQueue, hash_function: HashFunction) -> tuple[int, _neg]:
    """Where a queue sits on the ring, and its key as the heap orders it (cached: queues
    outlive memberships, and a key built at every proposal cost a quarter of a pass)."""
    key = str(mq)
    return hash_function(key), _neg(key)


# The last answers of this process, by membership: every consumer of a process asks for the
# same whole assignment (each keeps its share), so it is computed once per membership.
_SHARES_KEPT = 64
_SHARES_SEEN: dict[
    tuple[str, tuple[str, ...], int, float, HashFunction],
    tuple[list[MessageQueue], dict[str, tuple[MessageQueue, ...]]],
] = {}


def _bounded_shares(
    mqs: tuple[MessageQueue, ...],
    cids: tuple[str, ...],
    virtual_node_cnt: int,
    epsilon: float,
    hash_function: HashFunction,
) -> dict[str, tuple[MessageQueue, ...]]:
    """Queue-proposing deferred acceptance on the ring; each consumer's share in queue order.

    A queue proposes to the next consumer its clockwise walk meets (skipping those it already
    asked); a consumer over capacity rejects its farthest queue, which walks on. The result does
    not depend on the order of ``mqs``; shares keep that order. (Kept per membership by
    ``AllocateMessageQueueConsistentHashBounded._shares``.)
    """
    if not mqs or not cids:
        return {}
    capacity = _capacity(len(mqs), len(cids), epsilon)
    ring, slot_cids = _bounded_ring(cids, virtual_node_cnt, hash_function)
    size = len(ring)
    span = 1 << 64
    if isinstance(hash_function, Hashable):
        placed = [_queue_home(mq, hash_function) for mq in mqs]
    else:
        placed = [(hash_function(str(mq)), _neg(str(mq))) for mq in mqs]
    homes = [h for h, _ in placed]
    keys = [k for _, k in placed]
    position = [bisect.bisect_left(ring, h << _SHIFT) for h in homes]  # next point to visit
    asked: dict[int, set[str]] = {}  # only queues once rejected ask again
    held: dict[str, list[tuple[int, str, int]]] = {}  # cid -> heap of (-distance, -key, queue)
    free = list(range(len(mqs)))
    while free:
        q = free.pop()
        i = position[q]
        seen = asked.get(q)
        key = ring[i % size]
        cid = slot_cids[key & _MASK]
        while seen is not None and cid in seen:  # within one turn it meets every consumer
            i += 1
            key = ring[i % size]
            cid = slot_cids[key & _MASK]
        position[q] = i + 1
        distance = ((key >> _SHIFT) - homes[q]) % span  # within one turn
        heap = held.setdefault(cid, [])
        heapq.heappush(heap, (-distance, keys[q], q))
        if len(heap) > capacity:
            rejected = heapq.heappop(heap)[2]
            asked.setdefault(rejected, set()).add(cid)
            free.append(rejected)
    return {cid: tuple(mqs[q] for q in sorted(q for _, _, q in heap)) for cid, heap in held.items()}


class _neg(str):
    """A string that sorts in reverse: the heap pops the farthest queue, then the larger key."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)


class AllocateMessageQueueByConfig:
    """``CONFIG``: always the configured queues, whatever the inputs.

    As in RocketMQ, there is no validation at all: this strategy ignores the consumer ids, so
    two consumers configured with the same queue both pull it.
    """

    name = "CONFIG"

    def __init__(self, message_queue_list: Iterable[MessageQueue]):
        self.message_queue_list = list(message_queue_list)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` with a literal separator: trailing empty strings are dropped."""
    parts = text.split(sep)
    if len(parts) == 1:
        return parts  # no separator: Java returns the input itself, even when it is empty
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom:
    """``MACHINE_ROOM``: only queues of brokers named ``<idc>@<name>`` with a listed idc.

    The eligible queues are split in blocks of ``m // c``, and the remainder ``m % c`` goes one
    each to the first consumers, *after* their block (unlike ``AVG``). Example: 5 queues, 2
    consumers: ``[0, 1, 4]`` and ``[2, 3]``. Queues of brokers of other names are no one's.
    ``consumer_idcs`` of None is RocketMQ's unset field: ``allocate`` then raises ``TypeError``
    (after the common validation, where RocketMQ throws a ``NullPointerException``).
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str] | None = None):
        self.consumer_idcs = frozenset(consumer_idcs) if consumer_idcs is not None else None

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        if self.consumer_idcs is None:
            raise TypeError("consumeridcs is null")
        index = cid_all.index(current_cid)
        eligible = []
        for mq in mq_all:
            parts = _java_split(mq.broker_name, "@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                eligible.append(mq)
        c = len(cid_all)
        block, rem = divmod(len(eligible), c)
        result = eligible[block * index : block * index + block]
        if rem > index:
            result.append(eligible[index + block * c])
        return result


class AllocateMachineRoomNearby:
    """``MACHINE_ROOM_NEARBY-<inner>``: consume the queues of your own machine room first.

    The queues of each machine room are split by ``inner`` among that room's consumers; the
    queues of a room that has no consumer at all are split by ``inner`` among all consumers.
    A consumer gets its share of its own room plus its share of each such orphan room, in room
    order. Rooms are compared as Python strings (code points), where RocketMQ's ``TreeMap``
    compares UTF-16 units; the two differ only for characters outside the BMP.
    """

    def __init__(
        self,
        allocate_message_queue_strategy: AllocateMessageQueueStrategy,
        machine_room_resolver: MachineRoomResolver,
    ):
        if allocate_message_queue_strategy is None:
            raise TypeError("allocateMessageQueueStrategy is null")
        if machine_room_resolver is None:
            raise TypeError("machineRoomResolver is null")
        self.allocate_message_queue_strategy = allocate_message_queue_strategy
        self.machine_room_resolver = machine_room_resolver

    @property
    def name(self) -> str:
        return "MACHINE_ROOM_NEARBY-" + self.allocate_message_queue_strategy.name

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        resolver = self.machine_room_resolver
        inner = self.allocate_message_queue_strategy
        mr2mq: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {mq}")
            mr2mq.setdefault(room, []).append(mq)
        mr2c: dict[str, list[str]] = {}
        for cid in cid_all:
            room = resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            mr2c.setdefault(room, []).append(cid)

        result: list[MessageQueue] = []
        my_room = resolver.consumer_deploy_in(current_cid)
        mq_here = mr2mq.pop(my_room, [])
        if mq_here:
            result += inner.allocate(consumer_group, current_cid, mq_here, mr2c[my_room])
        for room in sorted(mr2mq):
            if room not in mr2c:  # no consumer in that room: everyone shares it
                result += inner.allocate(consumer_group, current_cid, mr2mq[room], cid_all)
        return result


def _client_ip(client_id: str) -> str:
    """The ``ip`` of a client id ``ip@instanceName[@unitName]``."""
    return client_id.split("@", 1)[0]


class AllocateMessageQueueByChosenConsumers:
    """``CHOSEN-<inner>``: only chosen consumers get queues; an example of a user strategy.

    "Consume only on chosen machines": in a test environment several consumers share a group,
    and only the one running the new code should receive the messages. A consumer is chosen
    when its client id, or the ``ip`` part of it (client ids are ``ip@instanceName``), is in
    ``chosen``. The queues are split by ``inner`` (``AVG`` by default) among the chosen
    consumers that are alive; the others get none. When no chosen consumer is alive, no one
    consumes and the messages wait on the broker: that is the point of the allow-list.

    Every consumer of the group must use this strategy with the same ``chosen``: the rule that
    allocation is a pure function of its inputs now includes the allow-list. (Returning ``[]``
    on the machines that are not chosen while the chosen ones still split by the whole
    ``cid_all`` would leave the others' shares unconsumed.)
    """

    def __init__(
        self,
        chosen: Iterable[str],
        inner: AllocateMessageQueueStrategy | None = None,
    ):
        self.chosen = frozenset(chosen)
        self.inner: AllocateMessageQueueStrategy = (
            inner if inner is not None else AllocateMessageQueueAveragely()
        )

    @property
    def name(self) -> str:
        return "CHOSEN-" + self.inner.name

    def is_chosen(self, client_id: str) -> bool:
        """Whether ``client_id`` (or its ip) is on the allow-list."""
        return client_id in self.chosen or _client_ip(client_id) in self.chosen

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: list[MessageQueue],
        cid_all: list[str],
    ) -> list[MessageQueue]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        if not self.is_chosen(current_cid):
            return []
        chosen_cids = [cid for cid in cid_all if self.is_chosen(cid)]
        return self.inner.allocate(consumer_group, current_cid, mq_all, chosen_cids)


_BY_NAME: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    AllocateMessageQueueAveragely.name: AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle.name: AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash.name: AllocateMessageQueueConsistentHash,
    AllocateMessageQueueConsistentHashBounded.name: AllocateMessageQueueConsistentHashBounded,
}

_NEED_ARGUMENTS = {
    AllocateMessageQueueByConfig.name: "AllocateMessageQueueByConfig(message_queue_list)",
    AllocateMessageQueueByMachineRoom.name: "AllocateMessageQueueByMachineRoom(consumer_idcs)",
    "MACHINE_ROOM_NEARBY": "AllocateMachineRoomNearby(inner, resolver)",
}


def strategy_by_name(name: str) -> AllocateMessageQueueStrategy:
    """A new built-in strategy that needs no arguments, by its name (``"AVG"``, ...).

    ``CONFIG``, ``MACHINE_ROOM`` and ``MACHINE_ROOM_NEARBY-*`` need arguments: build those
    with their classes.
    """
    factory = _BY_NAME.get(name)
    if factory is not None:
        return factory()
    base = name.split("-", 1)[0]
    if base in _NEED_ARGUMENTS:
        raise ValueError(
            f"allocate strategy {name!r} needs arguments: build it with {_NEED_ARGUMENTS[base]}"
        )
    raise ValueError(
        f"unknown allocate strategy {name!r}; the built-in ones without arguments are "
        + ", ".join(sorted(_BY_NAME))
    )
