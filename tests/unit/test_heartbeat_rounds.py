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
    def __init__(self, channel_id: str | None) -> None:
        self.channel_id = channel_id


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
