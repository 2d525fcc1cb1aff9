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
