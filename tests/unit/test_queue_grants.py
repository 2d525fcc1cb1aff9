"""QueueGrantManager, the fenced handoff: epochs, idempotent acquire, fencing, release, and a
stateful property test (no double ownership, epochs never decrease)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aiorocketmq.broker.client import QueueGrantManager
from aiorocketmq.broker.client.queue_grants import ORPHAN, QueueGrant
from aiorocketmq.protocol import MessageQueue, ResponseCode
from aiorocketmq.protocol.errors import QueueFenced

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_free_queue_gets_epoch_one_and_reacquire_is_idempotent() -> None:
    grants = QueueGrantManager()
    granted, denied = grants.acquire("G", "c1", "ch1", [Q0, Q1])
    assert granted == [(Q0, 1), (Q1, 1)]
    assert denied == []
    again = grants.acquire("G", "c1", "ch1", [Q1, Q0])
    assert again.granted == [(Q1, 1), (Q0, 1)]
    assert grants.current_epoch("G", Q0) == 1


def test_queue_held_by_another_is_denied_naming_holder_and_epoch() -> None:
    grants = QueueGrantManager()
    grants.acquire("G", "c1", "ch1", [Q0])
    granted, denied = grants.acquire("G", "c2", "ch2", [Q0, Q1])
    assert granted == [(Q1, 1)]
    assert denied == [(Q0, "c1", 1)]
    assert denied[0].holder == "c1"


def test_epochs_grow_on_every_grant_and_survive_release() -> None:
    grants = QueueGrantManager()
    epochs = []
    for i in range(4):
        client = f"c{i % 2}"
        ((mq, epoch),) = grants.acquire("G", client, f"ch-{client}", [Q0]).granted
        epochs.append(epoch)
        assert grants.release("G", client, [(mq, epoch)]) == [Q0]
        assert grants.holder("G", Q0) is None
    assert epochs == [1, 2, 3, 4]
    assert grants.current_epoch("G", Q0) == 4


def test_epoch_base_keeps_epochs_growing_across_restarts() -> None:
    grants = QueueGrantManager(epoch_base=1_700_000_000_000)
    ((_, epoch),) = grants.acquire("G", "c1", "ch1", [Q0]).granted
    assert epoch == 1_700_000_000_001
    assert grants.current_epoch("G", Q1) == 1_700_000_000_000


def test_stale_epoch_is_refused_naming_queue_and_epochs() -> None:
    grants = QueueGrantManager()
    ((_, old_epoch),) = grants.acquire("G", "c1", "ch1", [Q0]).granted
    grants.release("G", "c1", [(Q0, old_epoch)])
    ((_, new_epoch),) = grants.acquire("G", "c2", "ch2", [Q0]).granted
    grants.check_epoch("G", Q0, new_epoch)  # the owner passes

    with pytest.raises(QueueFenced) as err:
        grants.check_epoch("G", Q0, old_epoch)
    message = str(err.value)
    assert str(Q0) in message
    assert f"epoch {old_epoch} is stale" in message
    assert f"current epoch {new_epoch}" in message
    assert "c2" in message
    assert err.value.response_code is ResponseCode.QUEUE_FENCED


def test_epoch_of_a_queue_nobody_holds_is_refused() -> None:
    grants = QueueGrantManager()
    ((_, epoch),) = grants.acquire("G", "c1", "ch1", [Q0]).granted
    grants.release("G", "c1", [(Q0, epoch)])
    with pytest.raises(QueueFenced) as err:
        grants.check_epoch("G", Q0, epoch)
    assert str(Q0) in str(err.value)
    assert "not granted" in str(err.value)
    with pytest.raises(QueueFenced):
        grants.check_epoch("G", Q2, 1)  # never granted at all


def test_release_requires_the_current_epoch_and_the_holder() -> None:
    grants = QueueGrantManager()
    ((_, epoch),) = grants.acquire("G", "c1", "ch1", [Q0]).granted
    committed: list[MessageQueue] = []
    assert grants.release("G", "c1", [(Q0, epoch + 1)], commit=committed.append) == []
    assert grants.release("G", "c2", [(Q0, epoch)], commit=committed.append) == []
    assert grants.release("G", "c1", [(Q1, 1)], commit=committed.append) == []
    assert committed == []
    assert grants.holder("G", Q0) is not None

    assert grants.release("G", "c1", [(Q0, epoch)], commit=committed.append) == [Q0]
    assert committed == [Q0]
    assert grants.release("G", "c1", [(Q0, epoch)], commit=committed.append) == []  # twice
    assert committed == [Q0]


def test_commit_runs_while_the_grant_is_still_held() -> None:
    grants = QueueGrantManager()
    ((_, epoch),) = grants.acquire("G", "c1", "ch1", [Q0]).granted
    seen = []

    def commit(mq: MessageQueue) -> None:
        grant = grants.holder("G", mq)
        seen.append(grant.epoch if grant else None)

    grants.release("G", "c1", [(Q0, epoch)], commit=commit)
    assert seen == [epoch]


def test_release_channel_drops_every_grant_of_the_channel() -> None:
    grants = QueueGrantManager()
    grants.acquire("G1", "c1", "ch1", [Q0, Q1])
    grants.acquire("G2", "c1", "ch1", [Q0])
    grants.acquire("G1", "c2", "ch2", [Q2])
    assert [g.mq for g in grants.grants_of_channel("ch1")] == [Q0, Q1, Q0]
    assert grants.release_channel("ch1") == [("G1", Q0), ("G1", Q1), ("G2", Q0)]
    assert grants.holder("G1", Q0) is None
    assert grants.holder("G1", Q2) is not None
    assert grants.release_channel("ch1") == []
    granted, _ = grants.acquire("G1", "c2", "ch2", [Q0])
    assert granted == [(Q0, 2)]


def test_the_channels_denied_a_queue_are_its_waiters_until_told_or_closed() -> None:
    grants = QueueGrantManager()
    grants.acquire("G", "c1", "ch1", [Q0, Q1])
    grants.acquire("G", "c3", "ch3", [Q0, Q1])
    grants.acquire("G", "c2", "ch2", [Q0])
    grants.acquire("G", "c2", "ch2", [Q0])  # asked twice: told once
    assert grants.take_waiters("G", Q2) == []  # nobody was denied Q2
    assert grants.take_waiters("G", Q0) == ["ch2", "ch3"]  # the holder ch1 is not among them
    assert grants.take_waiters("G", Q0) == []  # told: forgotten
    grants.release_channel("ch3")  # a closed channel waits no more
    assert grants.take_waiters("G", Q1) == []
    assert grants.waiter_table == {} and grants.channel_wait_table == {}


def test_same_client_id_on_another_channel_is_denied() -> None:
    grants = QueueGrantManager()
    grants.acquire("G", "c1", "ch1", [Q0])
    granted, denied = grants.acquire("G", "c1", "ch-other-process", [Q0])
    assert granted == []
    assert denied == [(Q0, "c1", 1)]
    grants.release_channel("ch1")
    assert grants.acquire("G", "c1", "ch-other-process", [Q0]).granted == [(Q0, 2)]


def test_groups_have_their_own_owners_and_epochs() -> None:
    grants = QueueGrantManager()
    grants.acquire("G1", "c1", "ch1", [Q0])
    grants.acquire("G1", "c1", "ch1", [Q1])
    assert grants.acquire("G2", "c2", "ch2", [Q0]).granted == [(Q0, 1)]
    assert grants.is_current("G1", Q0, "c1", 1)
    assert not grants.is_current("G1", Q0, "c2", 1)


def test_duplicate_queues_in_one_request_are_granted_once() -> None:
    grants = QueueGrantManager()
    assert grants.acquire("G", "c1", "ch1", [Q0, Q0]).granted == [(Q0, 1)]


# ---- property: under any interleaving, one holder per queue and epochs never go back ----


CLIENTS = ["c0", "c1", "c2"]


def restarted(before: QueueGrantManager, now: int = 1_000) -> QueueGrantManager:
    """A broker restarted: a new manager (a later epoch base) restored from the old one's file."""
    after = QueueGrantManager(epoch_base=10)
    after.restore(json.loads(json.dumps(before.to_json())), now)
    return after


def test_grants_survive_a_restart_and_their_holder_goes_on_with_its_epoch() -> None:
    m = QueueGrantManager()
    m.acquire("G", "c1", "ch1", [Q0, Q1])
    m.acquire("G", "c2", "ch2", [Q2])
    after = restarted(m)
    # Nobody else is granted a restored queue, and the holder's epoch is still current.
    assert after.acquire("G", "c2", "ch-new2", [Q0]).denied == [(Q0, "c1", 1)]
    after.check_epoch("G", Q0, 1)
    after.check_epoch("G", Q2, 1)
    # The holder's new channel takes its grants over (acquire again or just reconnect).
    assert after.rebind("c1", "ch-new1") == 2
    assert [g.mq for g in after.grants_of_channel("ch-new1")] == [Q0, Q1]
    assert after.acquire("G", "c2", "ch-new2", [Q2]).granted == [(Q2, 1)]  # c2 re-acquires
    # Its next channel close releases them, as before the restart.
    assert after.release_channel("ch-new1") == [("G", Q0), ("G", Q1)]
    # Epochs never repeat across the restart.
    assert after.acquire("G", "c2", "ch-new2", [Q0]).granted == [(Q0, 2)]


def test_a_new_channel_takes_over_the_grants_of_the_one_it_replaces() -> None:
    """A client whose connection went silent opens a new channel naming the old one, which the
    broker has not seen end: the old channel's grants move with their epochs, and its close,
    when it comes, frees nothing. Another client's grants on it (none in practice) stay."""
    m = QueueGrantManager()
    m.acquire("G", "c1", "ch1", [Q0, Q1])
    m.acquire("H", "c1", "ch1", [Q2])
    assert m.supersede("c2", "ch1", "ch2") == 0  # not c2's grants
    assert m.supersede("c1", "ch1", "ch1-new") == 3
    assert [(g.group, g.mq, g.epoch) for g in m.grants_of_channel("ch1-new")] == [
        ("G", Q0, 1),
        ("G", Q1, 1),
        ("H", Q2, 1),
    ]
    assert m.release_channel("ch1") == []
    m.check_epoch("G", Q0, 1)
    assert m.acquire("G", "c1", "ch1-new", [Q0]).granted == [(Q0, 1)]  # still the holder
    assert m.acquire("G", "c2", "ch2", [Q1]).denied == [(Q1, "c1", 1)]
    assert m.release_channel("ch1-new") == [("G", Q0), ("G", Q1), ("H", Q2)]


def test_orphans_whose_client_never_comes_back_expire() -> None:
    m = QueueGrantManager()
    m.acquire("G", "c1", "ch1", [Q0])
    after = restarted(m, now=1_000)
    assert after.expire_orphans(now=100_000, expiry_ms=120_000) == []
    assert after.holder("G", Q0) is not None
    assert [(g.group, g.mq, g.client_id) for g in after.expire_orphans(121_000, 120_000)] == [
        ("G", Q0, "c1")
    ]
    assert after.holder("G", Q0) is None
    assert after.acquire("G", "c2", "ch2", [Q0]).granted == [(Q0, 2)]


def test_a_restart_replays_the_changes_after_the_snapshot_only() -> None:
    m = QueueGrantManager()
    m.acquire("G", "c1", "ch1", [Q0, Q1])
    early = m.take_changes()
    snapshot = m.to_json()  # c1 holds Q0 and Q1, at version 2
    m.release("G", "c1", [(Q0, 1)])
    m.acquire("G", "c2", "ch2", [Q0, Q2])
    late = m.take_changes()
    assert [(c["op"], c["queueId"]) for c in late] == [("drop", 0), ("grant", 0), ("grant", 2)]
    after = QueueGrantManager(epoch_base=0)
    # The lines the snapshot holds (a crash before the journal was emptied) change nothing.
    assert after.restore(snapshot, 1_000, early + late) == 3
    assert after.to_json() == m.to_json()
    assert after.holder("G", Q0) == QueueGrant("G", Q0, "c2", ORPHAN, 2)
    # Numbering goes on above the restored version: a later change is never skipped.
    after.rebind("c2", "ch2-new")
    after.release("G", "c2", [(Q2, 1)])
    (change,) = after.take_changes()
    assert change["op"] == "drop" and change["seq"] > m.version


def test_a_malformed_journal_line_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="malformed queue grant table"):
        QueueGrantManager().restore({}, 0, [{"seq": 1, "op": "move", **_q(Q0)}])


def _q(mq: MessageQueue) -> dict[str, Any]:
    return {"group": "G", "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def test_a_malformed_grant_table_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="malformed queue grant table"):
        QueueGrantManager().restore({"grantTable": [{"group": "G"}]}, 0)


def test_the_version_moves_on_every_change_only() -> None:
    m = QueueGrantManager()
    v0 = m.version
    m.acquire("G", "c1", "ch1", [Q0])
    v1 = m.version
    m.acquire("G", "c1", "ch1", [Q0])  # idempotent: nothing to persist
    assert v1 > v0 and m.version == v1
    m.release("G", "c1", [(Q0, 1)])
    assert m.version > v1


QUEUES = [MessageQueue("T", "b", i) for i in range(3)]
GROUPS = ["G", "H"]


class GrantMachine(RuleBasedStateMachine):
    """Clients acquire, release (sometimes with stale epochs), lose channels, reconnect; a
    rogue process shares c0's client id on its own channel."""

    def __init__(self) -> None:
        super().__init__()
        self.grants = QueueGrantManager()
        self.serial = 0
        # (client id, channel id) of each process.
        self.processes: dict[str, tuple[str, str]] = {}
        for name in [*CLIENTS, "rogue"]:
            self._reconnect(name)
        # What each process believes it holds: (group, mq) -> epoch, from acquire answers.
        self.beliefs: dict[str, dict[tuple[str, MessageQueue], int]] = {
            name: {} for name in self.processes
        }
        # Epochs a process held once and lost: a consumer that keeps pulling with one of
        # these must be fenced.
        self.lost: list[tuple[str, MessageQueue, int]] = []
        self.max_epoch_seen: dict[tuple[str, MessageQueue], int] = {}
        self.epochs_issued: dict[tuple[str, MessageQueue], set[int]] = {}
        # What a broker has on disk: the last snapshot, and every change ever journaled (a
        # crash may leave the lines a snapshot already holds: they must be skipped).
        self.snapshot = self.grants.to_json()
        self.journal: list[dict[str, Any]] = []

    def _reconnect(self, name: str) -> None:
        self.serial += 1
        client_id = "c0" if name == "rogue" else name
        self.processes[name] = (client_id, f"{name}-ch{self.serial}")

    @rule(
        name=st.sampled_from([*CLIENTS, "rogue"]),
        group=st.sampled_from(GROUPS),
        mqs=st.lists(st.sampled_from(QUEUES), max_size=3),
    )
    def acquire(self, name: str, group: str, mqs: list[MessageQueue]) -> None:
        client_id, channel_id = self.processes[name]
        granted, denied = self.grants.acquire(group, client_id, channel_id, mqs)
        for mq, epoch in granted:
            key = (group, mq)
            previous = self.beliefs[name].get(key)
            if previous is not None:
                assert epoch == previous, "re-acquire must keep the epoch"
            else:
                issued = self.epochs_issued.setdefault(key, set())
                assert epoch > max(issued, default=0), "a new grant needs a new, larger epoch"
                issued.add(epoch)
            self.beliefs[name][key] = epoch
        for mq, holder, epoch in denied:
            assert (holder, epoch) != (client_id, self.beliefs[name].get((group, mq)))

    @precondition(lambda self: any(self.beliefs.values()))
    @rule(data=st.data(), stale=st.booleans())
    def release(self, data: st.DataObject, stale: bool) -> None:
        name = data.draw(st.sampled_from([n for n, b in self.beliefs.items() if b]))
        key = data.draw(st.sampled_from(sorted(self.beliefs[name])))
        group, mq = key
        client_id, _ = self.processes[name]
        epoch = self.beliefs[name][key] - (1 if stale else 0)
        released = self.grants.release(group, client_id, [(mq, epoch)])
        if released:
            assert not stale
            self.lost.append((group, mq, self.beliefs[name].pop(key)))

    @rule(name=st.sampled_from([*CLIENTS, "rogue"]))
    def channel_closes(self, name: str) -> None:
        _, channel_id = self.processes[name]
        self.grants.release_channel(channel_id)
        self.lost.extend((group, mq, epoch) for (group, mq), epoch in self.beliefs[name].items())
        self.beliefs[name].clear()
        self._reconnect(name)

    @invariant()
    def one_holder_per_queue(self) -> None:
        for group in GROUPS:
            for mq in QUEUES:
                passing = []
                for name, beliefs in self.beliefs.items():
                    epoch = beliefs.get((group, mq))
                    if epoch is None:
                        continue
                    try:
                        self.grants.check_epoch(group, mq, epoch)
                    except QueueFenced:
                        continue
                    passing.append(name)
                assert len(passing) <= 1, f"{mq} of {group} has two holders: {passing}"
                grant = self.grants.holder(group, mq)
                if grant is not None:
                    owners = [
                        n
                        for n, (cid, ch) in self.processes.items()
                        if (cid, ch) == (grant.client_id, grant.channel_id)
                    ]
                    assert owners == passing

    @rule()
    def snapshot_taken(self) -> None:
        self.journal.extend(self.grants.take_changes())
        self.snapshot = json.loads(json.dumps(self.grants.to_json()))

    @invariant()
    def a_restart_restores_the_table(self) -> None:
        self.journal.extend(self.grants.take_changes())
        after = QueueGrantManager()
        after.restore(self.snapshot, 0, json.loads(json.dumps(self.journal)))
        assert after.to_json() == self.grants.to_json()
        assert after.version == self.grants.version
        assert {g.channel_id for g in after.grant_table.get("G", {}).values()} <= {ORPHAN}

    @invariant()
    def lost_epochs_are_fenced(self) -> None:
        for group, mq, epoch in self.lost:
            with pytest.raises(QueueFenced):
                self.grants.check_epoch(group, mq, epoch)

    @invariant()
    def epochs_never_decrease(self) -> None:
        for group in GROUPS:
            for mq in QUEUES:
                key = (group, mq)
                epoch = self.grants.current_epoch(group, mq)
                assert epoch >= self.max_epoch_seen.get(key, 0)
                self.max_epoch_seen[key] = epoch
                grant = self.grants.holder(group, mq)
                assert grant is None or grant.epoch == epoch


GrantMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_grant_manager_properties = GrantMachine.TestCase
