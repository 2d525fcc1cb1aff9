"""The join/leave suite: 1 name server, 3 brokers, 8 queues each, consumers coming and going.

Every case asserts that no acknowledged message is lost and that the group converges to each
queue held exactly once (as AVG computes it), and records the duplicates and settle times it
saw. Timings are RocketMQ's defaults (20 s periodic rebalance, 30 s heartbeat), so convergence
comes from the notification path, except where a case switches notifications off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiorocketmq.broker.client_processor import ClientManageProcessor
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.errors import MQError
from tests.helpers import wait_until
from tests.integration.join_leave import Scenario

TOPIC = "JoinLeave"
pytestmark = pytest.mark.cluster(brokers=3, topic=TOPIC, queues=8)


def scenario(cluster: LocalCluster, tmp_path: Path, handoff: str, **kw: object) -> Scenario:
    (tmp_path / "traces").mkdir(exist_ok=True)
    return Scenario(cluster, tmp_path / "traces", TOPIC, handoff=handoff, **kw)  # type: ignore[arg-type]


HANDOFF = pytest.mark.parametrize("handoff", ["classic", "fenced"])


@HANDOFF
@pytest.mark.parametrize("n", [2, 4])
async def test_static_balance(cluster: LocalCluster, tmp_path: Path, n: int, handoff: str) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        for i in range(n):
            await s.join(f"c{i}")
        await s.settle()
        report = await s.all_consumed()
        s.record(f"static balance, {n} consumers", report)


@HANDOFF
@pytest.mark.parametrize("joiners", [1, 2])
async def test_consumers_join_mid_stream(
    cluster: LocalCluster, tmp_path: Path, joiners: int, handoff: str
) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        await s.join("c0")
        await s.join("c1")
        await s.settle()
        await asyncio.sleep(0.3)
        for i in range(joiners):
            await s.join(f"j{i}")
        await s.settle()
        report = await s.all_consumed()
        s.record(f"{joiners} joining mid-stream", report)


@HANDOFF
async def test_graceful_leave(cluster: LocalCluster, tmp_path: Path, handoff: str) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        await s.flowing_group(3)
        await s.leave("c1")
        await s.settle()
        report = await s.all_consumed()
        s.record("graceful leave", report)


@HANDOFF
async def test_crash_of_a_consumer_process(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    """kill -9: the stream closes, the broker notifies the group at once, survivors take over."""
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        await s.join("c0")
        await s.join_process("victim")
        await s.settle()
        await asyncio.sleep(0.5)
        victim = s.processes["victim"].client_id
        await s.crash_process("victim")
        await s.settle()
        report = await s.all_consumed()
        assert report.crashed_clients, "the checker sees the crash"
        assert set(report.duplicate_causes) <= {"crash"}
        if handoff == "fenced":
            assert report.duplicate_count <= s.uncommitted_by(victim)
        s.record("crash (kill -9 of a consumer process)", report)


@HANDOFF
async def test_join_then_leave(cluster: LocalCluster, tmp_path: Path, handoff: str) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        await s.join("c0")
        await s.join("c1")
        await s.settle()
        await s.join("c2")
        await s.settle()
        await asyncio.sleep(0.3)
        await s.leave("c2")
        await s.settle()
        report = await s.all_consumed()
        s.record("join then leave", report)


@HANDOFF
async def test_more_consumers_than_queues(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    await cluster.create_topic("FewQueues", 1)  # 3 queues over 3 brokers
    s = Scenario(cluster, tmp_path, "FewQueues", group="few", handoff=handoff)
    async with s:
        s.start_producing()
        for i in range(5):
            await s.join(f"c{i}")
        await s.settle()
        idle = [c for c in s.consumers.values() if not c.assigned_queues]
        assert len(idle) == 2
        report = await s.all_consumed()
        s.record("more consumers (5) than queues (3)", report)


@HANDOFF
async def test_two_instances_with_the_same_client_id_are_detected(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    """Both compute the same share, so some queues go unconsumed: detect it and warn loudly."""
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        first = await s.join_process("first", instance_name="twin")
        second = await s.join_process("second", instance_name="twin")
        assert first.client_id == second.client_id  # same ip, same instance name
        dup: dict[str, list[str]] = {}
        for b in cluster.broker_list:
            dup.update(b.client.consumer_manager.duplicate_client_ids(s.group))
        assert first.client_id in dup and len(dup[first.client_id]) == 2
        await wait_until(
            lambda: "duplicate client id" in first.stderr() + second.stderr(),
            timeout=30,
            message="a consumer warns about its duplicate client id",
        )
        # Once the twin is gone, the group converges and nothing was lost.
        await s.processes.pop("second").stop()
        await s.settle()
        report = await s.all_consumed()
        s.record("two instances with the same client id", report)


@HANDOFF
async def test_broker_restarted_mid_consumption(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        await s.join("c0")
        await s.join("c1")
        await s.settle()
        await asyncio.sleep(0.3)
        await cluster.restart_broker("broker-b")
        await s.settle()
        report = await s.all_consumed(timeout=40)
        s.record("broker restarted mid-consumption", report)


async def test_fenced_grants_survive_a_broker_restart(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A consumer joins right after a broker restarted: the queues it is given are still held
    by their owner (the grants were restored), so it waits for their release rather than
    pulling them at the same time (without the restored grants it is granted them at once)."""
    async with scenario(cluster, tmp_path, "fenced") as s:
        s.start_producing()
        await s.join("c0")
        await s.settle()
        await cluster.restart_broker("broker-b")
        await s.join("c1")
        await s.settle()
        report = await s.all_consumed(timeout=40)
        s.record("fenced grants across a broker restarted", report)
        assert report.total_double_ownership_ms == 0, report.double_ownership_ms


@HANDOFF
async def test_name_server_down_for_a_while(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    async with scenario(cluster, tmp_path, handoff) as s:
        s.start_producing()
        await s.join("c0")
        await s.join("c1")
        await s.settle()
        await cluster.stop_namesrv()
        sent, consumed = s.sent, s.report().consumed
        await wait_until(
            lambda: s.sent > sent + 50 and s.report().consumed > consumed + 50,
            timeout=10,
            message="producing and consuming go on with cached routes",
        )
        await cluster.start_namesrv()
        from aiorocketmq.nameserver.client import NameServerClient

        async with NameServerClient(cluster.namesrv_addr) as ns:

            async def reregistered() -> bool:
                try:
                    info = await ns.get_broker_cluster_info()
                except MQError:
                    return False  # not answering yet
                return len(info.broker_addr_table) == 3

            await wait_until(reregistered, timeout=10, message="brokers re-register")
        await s.join("c2")  # a newcomer needs the name server for its routes
        await s.settle()
        report = await s.all_consumed()
        s.record("name server down for a while", report)


@HANDOFF
@pytest.mark.cluster(
    brokers=3, topic=TOPIC, queues=8, overrides={"notify_consumer_ids_changed_enable": False}
)
async def test_notifications_switched_off_still_converge(
    cluster: LocalCluster, tmp_path: Path, handoff: str
) -> None:
    s = scenario(
        cluster, tmp_path, handoff, client_config=ClientConfig(rebalance_wait_interval_ms=1_000)
    )
    async with s:
        s.start_producing()
        await s.join("c0")
        await s.join("c1")
        await s.settle()
        await s.join("c2")
        await s.settle()
        await s.leave("c0")
        await s.settle()
        report = await s.all_consumed()
        for b in cluster.broker_list:
            assert b.client.listener.notifications_sent == 0
        s.record("notifications switched off (periodic rebalance 1 s)", report)


@pytest.mark.cluster(brokers=2, topic=TOPIC, queues=16)
async def test_fenced_consumers_sharing_connections_batch_acquires_across_a_restart(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consumers of one process sharing their connections, every acquire batched: after a
    broker restarted under them, the group growing fast sends its acquires to that broker in
    AcquireQueuesBatch calls over the reopened connection, and the handoff stays fenced through
    it all and the oldest leaving: no double ownership, nothing lost."""
    batches: list[tuple[str, int]] = []  # (broker, acquires) of each batch a broker served
    original = ClientManageProcessor.acquire_queues_batch

    def counting(
        self: ClientManageProcessor, request: object, *args: object, **kw: object
    ) -> object:
        batches.append((self.config.broker_name, len(request.acquires)))  # type: ignore[attr-defined]
        return original(self, request, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ClientManageProcessor, "acquire_queues_batch", counting)
    # Every acquire waits for others (threshold 0); 250 ms, as this process's passes, run by
    # one loop beside the brokers, come tens of ms apart (more under load).
    config = ClientConfig(share_connections=True, acquire_batch_threshold=0, acquire_batch_ms=250)
    async with scenario(cluster, tmp_path, "fenced", client_config=config) as s:
        await s.flowing_group(2)
        await cluster.restart_broker("broker-b")
        await s.settle()
        restarted = len(batches)
        for i in range(2, 10):  # one after another: their passes overlap, a burst
            await s.join(f"c{i}")
        await s.settle()
        await s.leave("c0")
        await s.settle()
        report = await s.all_consumed(timeout=40)
        s.record("shared connections, acquires batched, broker restarted", report)
        assert report.total_double_ownership_ms == 0, report.double_ownership_ms
    after = batches[restarted:]
    assert any(broker == "broker-b" and n >= 4 for broker, n in after), batches
