"""The broker's queue grant table on disk: an acquire is answered only once its grant is
written, and a burst of acquires shares the writes (group commit), off the event loop, as
journal lines (the table is not written whole for each)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.client import grant_store
from aiorocketmq.broker.client.grant_store import GrantStore
from aiorocketmq.broker.client.queue_grants import QueueGrantManager
from aiorocketmq.local_cluster import LocalCluster
from tests.integration.protocol_client import ProtocolClient, mq

TOPIC = "GrantTopic"
QUEUES = 16


async def test_a_burst_of_acquires_shares_writes_and_each_answer_follows_its_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[float] = []
    on_loop: list[bool] = []
    real = grant_store.append_durably

    def slow_write(path: Path, text: str) -> None:
        on_loop.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.05)  # a slow disk: the acquires of the burst pile up behind one write
        real(path, text)
        writes.append(time.monotonic())

    def on_disk(path: Path) -> dict[str, Any]:
        """The table a broker restarted now would read."""
        grants = QueueGrantManager()
        GrantStore(path).load(grants, now=0)
        return grants.to_json()

    monkeypatch.setattr(grant_store, "append_durably", slow_write)
    async with LocalCluster(tmp_path, brokers=1) as cluster:
        await cluster.create_topic(TOPIC, QUEUES)
        broker = cluster.broker("broker-a")
        grants_file: Path = broker.client.grants_file
        clients: list[ProtocolClient] = []
        try:
            for i in range(QUEUES):
                c = ProtocolClient(broker.address, f"127.0.0.1@g{i}")
                await c.open()
                await c.heartbeat("g", [TOPIC])
                clients.append(c)
            writes.clear()

            async def acquire(i: int) -> tuple[int, Any]:
                answer = await clients[i].acquire("g", [mq(TOPIC, i)])
                assert len(answer.granted) == 1
                # Read at once, before anything else runs: what was on disk at the answer.
                return i, on_disk(grants_file)

            results = await asyncio.gather(*(acquire(i) for i in range(QUEUES)))
            writes_for_the_burst = len(writes)  # the closes and the shutdown write again
        finally:
            for c in clients:
                await c.close()
    assert not any(on_loop), "the grant table was written on the event loop"
    assert 1 <= writes_for_the_burst < QUEUES  # shared: fewer writes than acquires
    for i, on_disk in results:
        # When the answer came, the file already held the grant it answered.
        held = {(g["queueId"], g["clientId"]) for g in on_disk["grantTable"] if g["topic"] == TOPIC}
        assert (i, f"127.0.0.1@g{i}") in held
