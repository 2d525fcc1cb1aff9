"""Random join/leave sequences: after every step the consumers' shares partition the queues.

Each consumer rebalances on its own, from the same sorted inputs, as RocketMQ's consumers do;
the machine checks that the shares they compute never overlap and leave no queue unowned, and
each strategy's own promise (AVG: balanced within one; CONSISTENT_HASH_BOUNDED: within the
capacity, and rendezvous hashing wherever the capacity does not bind).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from aiorocketmq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueConsistentHashBounded,
    AllocateMessageQueueStrategy,
    md5_hash64,
)
from aiorocketmq.protocol import MessageQueue

G = "GID_TEST"

consumer_ids = st.builds(
    lambda ip, pid, nano: f"10.0.0.{ip}@{pid}#{nano}",
    st.integers(0, 255),
    st.integers(1, 99999),
    st.integers(0, 10**12),
)


class JoinLeave(RuleBasedStateMachine):
    """A consumer group whose members come and go over a topic of fixed queues."""

    strategy: AllocateMessageQueueStrategy

    def __init__(self) -> None:
        super().__init__()
        self.mq_all: list[MessageQueue] = []
        self.members: set[str] = set()
        self.shares: dict[str, list[MessageQueue]] = {}

    @initialize(
        brokers=st.integers(1, 3),
        queues_per_broker=st.integers(1, 16),
        first=st.lists(consumer_ids, min_size=1, max_size=6, unique=True),
    )
    def create_topic(self, brokers: int, queues_per_broker: int, first: list[str]) -> None:
        self.mq_all = sorted(
            MessageQueue("TopicTest", f"broker-{b}", q)
            for b in range(brokers)
            for q in range(queues_per_broker)
        )
        self.members = set(first)
        self.rebalance()

    def rebalance(self) -> None:
        """Every member runs the strategy on the same sorted inputs, as RebalanceImpl does."""
        cid_all = sorted(self.members)
        self.shares = {
            cid: self.strategy.allocate(G, cid, list(self.mq_all), list(cid_all)) for cid in cid_all
        }

    @rule(cid=consumer_ids)
    def join(self, cid: str) -> None:
        self.members.add(cid)
        self.rebalance()

    @precondition(lambda self: len(self.members) > 1)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        self.members.discard(data.draw(st.sampled_from(sorted(self.members))))
        self.rebalance()

    @invariant()
    def shares_partition_the_queues(self) -> None:
        owned = [mq for share in self.shares.values() for mq in share]
        assert len(owned) == len(set(owned)), "a queue is owned twice"
        assert sorted(owned) == self.mq_all, "a queue is unowned"


class AvgJoinLeave(JoinLeave):
    strategy = AllocateMessageQueueAveragely()

    @invariant()
    def balanced(self) -> None:
        loads = [len(share) for share in self.shares.values()]
        assert max(loads) - min(loads) <= 1


class BoundedJoinLeave(JoinLeave):
    strategy = AllocateMessageQueueConsistentHashBounded()

    @invariant()
    def within_capacity(self) -> None:
        bounded = AllocateMessageQueueConsistentHashBounded()
        capacity = bounded.capacity(len(self.mq_all), len(self.members))
        assert max(len(share) for share in self.shares.values()) <= capacity

    @invariant()
    def nearest_consumer_with_room_wins(self) -> None:
        """Consistent hashing where the bound does not bind: if the first consumer on a
        queue's clockwise walk of the ring has room, the queue is its."""
        bounded = AllocateMessageQueueConsistentHashBounded()
        capacity = bounded.capacity(len(self.mq_all), len(self.members))
        owner = {mq: cid for cid, share in self.shares.items() for mq in share}
        for mq in self.mq_all:
            home = md5_hash64(str(mq))

            def distance(cid: str, home: int = home) -> tuple[int, str]:
                points = (md5_hash64(f"{cid}-{i}") for i in range(bounded.virtual_node_cnt))
                return min((p - home) % (1 << 64) for p in points), cid

            nearest = min(self.members, key=distance)
            if len(self.shares[nearest]) < capacity:
                assert owner[mq] == nearest


_settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
TestAvgJoinLeave = _settings(AvgJoinLeave).TestCase
TestBoundedJoinLeave = _settings(BoundedJoinLeave).TestCase
