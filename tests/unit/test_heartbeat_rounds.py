"""HEART_BEAT rounds of a client instance: one at a time, none lost, and a caller is not held
for as long as other calls keep coming (a starting consumer in a group that keeps changing)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiorocketmq.consumer.client_instance import MQClientInstance
from aiorocketmq.protocol.v1 import common_pb2


class _Consumer:
    group_name = "g"

    def consumer_data(self) -> common_pb2.ConsumerData:
        return common_pb2.ConsumerData(group_name="g")

    def subscribed_topics(self) -> set[str]:
        return set()


async def test_a_caller_waits_for_two_rounds_at_most_and_later_calls_still_get_theirs() -> None:
    client = MQClientInstance("127.0.0.1@hb", "127.0.0.1:1")
    client.running = True
    client.broker_addr_table = {"broker-a": {0: "127.0.0.1:2"}}
    client.consumer_table["g"] = _Consumer()  # type: ignore[assignment]
    rounds: list[float] = []
    keep_asking = True

    async def heartbeat_one(addr: str, data: Any) -> bool:
        rounds.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.02)
        if keep_asking:  # every round, something (a rebalance that moved a queue) asks again
            await client.send_heartbeat_to_all_broker()
        return True

    client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
    try:
        assert await asyncio.wait_for(client.send_heartbeat_to_all_broker(), 1.0)
        # Its own round and one for what came in during it (the background round that follows
        # may have begun by the time the caller runs again).
        assert 2 <= len(rounds) <= 3
        await asyncio.sleep(0.2)
        assert len(rounds) > 4  # the calls that kept coming got rounds in the background
        keep_asking = False
        await asyncio.sleep(0.1)
        settled = len(rounds)
        await asyncio.sleep(0.1)
        assert len(rounds) == settled  # and stop once nobody asks
    finally:
        await client.shutdown()


class _Channel:
    def __init__(self, channel_id: str | None, addr: str = "") -> None:
        self.channel_id = channel_id
        self.addr = addr
        self.broker_name = ""

    async def close(self) -> None:
        self.channel_id = None


def test_a_broker_without_a_heartbeat_on_its_current_channel_is_found() -> None:
    """A rebalance that changed the queues heartbeats only when one of their brokers has had
    none on its channel (a broker new in the routes): this is how it tells."""
    client = MQClientInstance("127.0.0.1@hb", "127.0.0.1:1")
    client.broker_addr_table = {"broker-a": {0: "127.0.0.1:2"}, "broker-b": {0: "127.0.0.1:3"}}
    assert client.heartbeat_missing(["broker-a"])  # no channel yet
    client.channels["127.0.0.1:2"] = _Channel("ch-1")  # type: ignore[assignment]
    assert client.heartbeat_missing(["broker-a"])  # a channel, opened for a pull: no heartbeat
    client._heartbeat_landed["127.0.0.1:2"] = "ch-1"
    assert not client.heartbeat_missing(["broker-a"])
    assert client.heartbeat_missing(["broker-a", "broker-b"])
    client.channels["127.0.0.1:2"] = _Channel("ch-2")  # type: ignore[assignment]
    assert client.heartbeat_missing(["broker-a"])  # reopened: the old channel's does not count
    assert not client.heartbeat_missing(["broker-unknown"])  # no address: nothing to send to


# ---- the one broker that notifies (ClientConfig.notified_by_one_broker) -----------------------
ADDRS = [f"127.0.0.1:{p}" for p in (2, 3, 4, 5)]


def notified_client(client_id: str = "127.0.0.1@hb") -> MQClientInstance:
    """A client of four brokers, each with an open channel, whose heartbeats are recorded."""
    client = MQClientInstance(client_id, "127.0.0.1:1")
    client.running = True
    client.broker_addr_table = {f"broker-{i}": {0: a} for i, a in enumerate(ADDRS)}
    client.consumer_table["g"] = _Consumer()  # type: ignore[assignment]
    for i, addr in enumerate(ADDRS):
        client.channels[addr] = _Channel(f"ch-{i}", addr)  # type: ignore[assignment]
    return client


async def test_the_notifying_broker_is_one_and_spread_by_client_id() -> None:
    picked = []
    for i in range(40):
        client = notified_client(f"127.0.0.1@c{i}")
        sent: dict[str, bool] = {}

        async def heartbeat_one(
            addr: str, data: Any, c: MQClientInstance = client, sent: dict[str, bool] = sent
        ) -> bool:
            sent[addr] = c._notified_elsewhere(addr)
            return True

        client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
        await client.send_heartbeat_to_all_broker()
        assert sorted(a for a, elsewhere in sent.items() if not elsewhere) == [client._notifier]
        picked.append(client._notifier)
    assert set(picked) == set(ADDRS)  # the members of a group spread over the brokers


async def test_a_failed_notifier_heartbeat_asks_the_next_open_broker() -> None:
    client = notified_client()
    first = client._notifier_order(ADDRS)[0]
    client.channels[client._notifier_order(ADDRS)[1]].channel_id = None  # reconnecting
    calls: list[tuple[str, bool]] = []

    async def heartbeat_one(addr: str, data: Any) -> bool:
        calls.append((addr, client._notified_elsewhere(addr)))
        return addr != first

    client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
    await client.send_heartbeat_to_all_broker()
    expected = client._notifier_order(ADDRS)[2]  # the next one with an open channel
    assert client._notifier == expected
    assert calls[-1] == (expected, False)  # asked after the round, in which it was told not to
    assert (expected, True) in calls[: len(ADDRS)]


async def test_a_lost_notifier_channel_asks_another_at_once() -> None:
    client = notified_client()
    asked: list[str] = []

    async def heartbeat_one(addr: str, data: Any) -> bool:
        if not client._notified_elsewhere(addr):
            asked.append(addr)
        return True

    client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
    try:
        await client.send_heartbeat_to_all_broker()
        lost = client._notifier
        assert lost is not None and asked == [lost]
        client.channels[lost].channel_id = None
        client._on_channel_lost(client.channels[lost])
        for _ in range(10):
            await asyncio.sleep(0)
        assert client._notifier not in (None, lost)
        assert asked == [lost, client._notifier]
    finally:
        await client.shutdown()


async def test_with_the_option_off_every_broker_notifies() -> None:
    client = notified_client()
    client.config.notified_by_one_broker = False
    sent: dict[str, bool] = {}

    async def heartbeat_one(addr: str, data: Any) -> bool:
        sent[addr] = client._notified_elsewhere(addr)
        return True

    client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
    await client.send_heartbeat_to_all_broker()
    assert sent == dict.fromkeys(ADDRS, False)


async def test_a_broker_that_does_not_notify_a_group_of_ours_is_never_the_notifier() -> None:
    """HeartbeatResponse.silent_groups: the notifier found silent is replaced by the next open
    broker that notifies, in a round that tells the silent one to stay quiet too; with every
    broker silent, none is picked (each notifies what it does)."""
    client = notified_client()
    order = client._notifier_order(ADDRS)
    silent = {order[0]}
    calls: list[tuple[str, bool]] = []

    async def heartbeat_one(addr: str, data: Any) -> bool:
        calls.append((addr, client._notified_elsewhere(addr)))
        client._note_silence(addr, addr in silent)  # as the real one does with the answer
        return True

    async def rounds_done() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    client._heartbeat_one = heartbeat_one  # type: ignore[method-assign]
    try:
        await client.send_heartbeat_to_all_broker()
        await rounds_done()
        assert client._notifier == order[1]
        last_round = calls[-len(ADDRS) :]
        assert sorted(last_round) == sorted((a, a != order[1]) for a in ADDRS)

        silent.update(ADDRS)  # switched off on every broker
        calls.clear()
        await client.send_heartbeat_to_all_broker()
        await rounds_done()
        assert client._notifier is None
        assert calls[-len(ADDRS) :] and all(not elsewhere for _, elsewhere in calls[-len(ADDRS) :])

        silent.clear()  # switched on again: picked at the next round
        await client.send_heartbeat_to_all_broker()
        await client.send_heartbeat_to_all_broker()
        assert client._notifier == order[0]
    finally:
        await client.shutdown()


def test_when_only_silent_brokers_are_reachable_every_broker_notifies() -> None:
    """The brokers that notify us are reconnecting: picking one of them would leave the
    reachable, silent ones quiet for our other groups meanwhile."""
    client = notified_client()
    order = client._notifier_order(ADDRS)
    client._silent = {order[0]}
    for addr in order[1:]:
        client.channels[addr].channel_id = None
    client._pick_notifier(ADDRS)
    assert client._notifier is None
    client._silent = set()  # no silent broker: the first in our order, as ever
    client._pick_notifier(ADDRS)
    assert client._notifier == order[0]
    client._silent = {"127.0.0.1:99"}  # gone from the routes: forgotten
    client._pick_notifier(ADDRS)
    assert client._silent == set()
