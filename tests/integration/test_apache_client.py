"""Apache's own client against our cluster, over RocketMQ's remoting protocol.

The partner is PyPI ``rocketmq`` 0.4.4: Apache's C++ client (librocketmq 1.2.3) under ctypes,
each instance in its own process (``tests/integration/apache_client.py``). It produces to and
consumes from the cluster the in-process ``LocalCluster`` runs, beside our gRPC clients, and its
rebalance (client-side AVG, driven by NOTIFY_CONSUMER_IDS_CHANGED) shares a group with ours.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import platform
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.admin import AdminClient, AdminError
from aiorocketmq.consumer import (
    AllocateMessageQueueAveragely,
    ConsumeFromWhere,
    MessageQueue,
    PushConsumer,
)
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import mqadmin, wait_until
from tests.integration.support import Received, new_consumer

TOPIC = "ApacheTopic"
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4, remoting=True)

if importlib.util.find_spec("rocketmq") is None:
    if platform.system() == "Linux" and platform.machine() == "x86_64":
        raise RuntimeError("PyPI rocketmq (Apache's client) is missing: install the dev extra")
    pytest.skip("Apache's C++ client ships for Linux x86_64 only", allow_module_level=True)


class ApacheProcess:
    """One Apache client process; its JSON lines collected as they come."""

    def __init__(self, home: Path, *args: str) -> None:
        self.home = home
        self.args = args
        self.records: list[dict[str, Any]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> ApacheProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(self.home)}  # the C++ library logs under $HOME
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.apache_client",
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=Path(__file__).parents[2],
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            try:
                self.records.append(json.loads(line))
            except ValueError:
                pass

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def messages(self) -> list[dict[str, Any]]:
        return [r for r in self.records if "body" in r]

    async def wait(self, timeout: float = 60) -> int:
        assert self.proc is not None
        rc = await asyncio.wait_for(self.proc.wait(), timeout)
        if self._reader is not None:
            await self._reader
        return rc

    async def stop(self) -> None:
        """SIGTERM (the consumer shuts down gracefully), SIGKILL after 20 s."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await self.wait(20)
        except TimeoutError:
            self.kill()
            await self.wait(10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()


def members(cluster: LocalCluster, group: str) -> list[list[str]]:
    """The group's client ids on each broker."""
    out = []
    for broker in cluster.broker_list:
        info = broker.client.consumer_manager.get_consumer_group_info(group)
        out.append(sorted(info.get_all_client_id()) if info is not None else [])
    return out


async def wait_members(cluster: LocalCluster, group: str, n: int, timeout: float = 30) -> list[str]:
    await wait_until(
        lambda: all(len(m) == n for m in members(cluster, group)),
        timeout=timeout,
        message=f"{n} members of {group} on every broker",
    )
    return members(cluster, group)[0]


def topic_queues(cluster: LocalCluster) -> list[MessageQueue]:
    """Every queue of the topic, sorted as both clients sort them before allocating."""
    queues = []
    for broker in cluster.broker_list:
        config = broker.topics.select_topic_config(TOPIC)
        assert config is not None
        queues.extend(
            MessageQueue(TOPIC, broker.config.broker_name, q) for q in range(config.read_queue_nums)
        )
    return sorted(queues)


def expected_owners(queues: list[MessageQueue], client_ids: list[str]) -> dict[MessageQueue, str]:
    avg = AllocateMessageQueueAveragely()
    return {
        mq: cid for cid in client_ids for mq in avg.allocate("g", cid, queues, sorted(client_ids))
    }


async def test_apache_producer_to_our_consumer(cluster: LocalCluster, tmp_path: Path) -> None:
    producer = await ApacheProcess(
        tmp_path / "apache",
        "produce",
        "-n",
        cluster.namesrv_remoting_addr,
        "-t",
        TOPIC,
        "--count",
        "20",
        "--batch",
        "5",
    ).start()
    assert await producer.wait() == 0
    results = producer.records
    assert len(results) == 21 and all(r["status"] == 0 for r in results)  # SEND_OK

    got: dict[str, Any] = {}

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        from aiorocketmq.consumer import ConsumeConcurrentlyStatus

        for m in msgs:
            got[m.body.decode()] = m
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "ours", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        await wait_until(lambda: len(got) == 25, timeout=30, message="25 messages")
    finally:
        await consumer.shutdown()
    for i in range(20):
        m = got[f"apache-{i}"]
        assert (m.keys, m.tags, m.properties.get("color")) == (f"k{i}", "TagA", "red")
    for i in range(5):
        m = got[f"apache-batch-{i}"]
        assert (m.keys, m.tags) == (f"b{i}", "TagB")
    # Apache's message id is the UNIQ_KEY property it set
    assert {r["msg_id"] for r in results[:20]} == {
        got[f"apache-{i}"].properties["UNIQ_KEY"] for i in range(20)
    }
    # and the key index finds a message by it (queryMsgByKey takes a UNIQ_KEY too), or by key
    async with AdminClient(cluster.namesrv_addr) as admin:
        [by_id] = await admin.query_message_by_key(TOPIC, results[7]["msg_id"])
        [by_key] = await admin.query_message_by_key(TOPIC, "k7")
    assert by_id.body == by_key.body == b"apache-7"


async def test_our_producer_to_apache_push_consumer(cluster: LocalCluster, tmp_path: Path) -> None:
    consumer = await ApacheProcess(
        tmp_path / "apache",
        "consume",
        "-n",
        cluster.namesrv_remoting_addr,
        "-g",
        "apache-g",
        "-t",
        TOPIC,
    ).start()
    try:
        await wait_members(cluster, "apache-g", 1)
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for i in range(30):
                await producer.send(
                    Message(
                        TOPIC,
                        f"ours-{i}".encode(),
                        tags="TagO",
                        keys=f"o{i}",
                        properties={"color": "blue"},
                    )
                )
        await wait_until(
            lambda: len({m["body"] for m in consumer.messages()}) == 30,
            timeout=30,
            message="30 messages at Apache's consumer",
        )
    finally:
        await consumer.stop()
    for m in consumer.messages():
        i = int(m["body"].split("-")[1])
        assert (m["topic"], m["keys"], m["tags"], m["color"]) == (TOPIC, f"o{i}", "TagO", "blue")
    # a graceful stop unregisters: the group is empty again
    await wait_until(lambda: members(cluster, "apache-g") == [[], []], message="group left")


def waited_on_dropped_pulls(home: Path) -> list[str]:
    """The Apache consumers' logs that show 1.2.3's wait for a dropped queue's held pull."""
    return [
        str(log)
        for log in home.glob("a*/logs/rocketmq-cpp/*")
        if "has unfinished pullMsgEvent" in log.read_text(errors="replace")
    ]


class Probe:
    """Send one message to every queue per round, and see who consumed each."""

    def __init__(self, producer: Producer, queues: list[MessageQueue]) -> None:
        self.producer = producer
        self.queues = queues
        self.seq = 0
        self.sent_at: dict[int, float] = {}
        self.consumed: dict[str, list[str]] = defaultdict(list)  # body -> consumer ids

    async def round(self) -> int:
        self.seq += 1
        self.sent_at[self.seq] = time.monotonic()
        for mq in self.queues:
            body = f"{self.seq}|{mq.broker_name}|{mq.queue_id}".encode()
            await self.producer.send(Message(TOPIC, body), mq)
        return self.seq

    def record(self, body: str, consumer_id: str) -> None:
        self.consumed[body].append(consumer_id)

    def owners(self, seq: int) -> dict[MessageQueue, list[str]] | None:
        """Who consumed round ``seq``'s message of each queue; None until all are consumed."""
        out = {}
        for mq in self.queues:
            who = self.consumed.get(f"{seq}|{mq.broker_name}|{mq.queue_id}")
            if not who:
                return None
            out[mq] = who
        return out


async def converge(
    probe: Probe,
    expected: Callable[[], dict[MessageQueue, str]],
    since: float,
    *,
    steady_rounds: int = 6,
    timeout: float = 40,
) -> float:
    """Rounds every 250 ms until ``steady_rounds`` in a row land each on its expected owner,
    exactly once; the time from ``since`` to the first of them."""
    deadline = time.monotonic() + timeout
    good: list[int] = []
    last: object = None
    while time.monotonic() < deadline:
        seq = await probe.round()
        await asyncio.sleep(0.25)
        try:
            await wait_until(
                lambda s=seq: probe.owners(s) is not None, timeout=5, message=f"round {seq}"
            )
        except AssertionError:
            good.clear()
            last = (
                "incomplete round",
                seq,
                {b: w for b, w in probe.consumed.items() if b.startswith(f"{seq}|")},
            )
            continue
        owners = probe.owners(seq)
        assert owners is not None
        want = expected()
        if all(owners[mq] == [want.get(mq)] for mq in probe.queues):
            good.append(seq)
            if len(good) >= steady_rounds:
                return probe.sent_at[good[0]] - since
        else:
            good.clear()
            last = (
                "misplaced",
                {
                    str(mq): (owners[mq], want.get(mq))
                    for mq in probe.queues
                    if owners[mq] != [want.get(mq)]
                },
            )
    raise AssertionError(f"no steady allocation within {timeout}s; last round: {last}")


async def test_a_group_of_apache_and_our_consumers(cluster: LocalCluster, tmp_path: Path) -> None:
    """Two Apache consumers (processes) and one of ours share the queues, no duplicate at rest;
    a third Apache consumer joins and the notification rebalances everyone within seconds;
    kill -9 of one Apache consumer, and its queues are taken over within seconds."""
    group = "mixed"
    ns = cluster.namesrv_remoting_addr
    procs: list[ApacheProcess] = []

    def apache(name: str) -> ApacheProcess:
        proc = ApacheProcess(tmp_path / name, "consume", "-n", ns, "-g", group, "-t", TOPIC)
        procs.append(proc)
        return proc

    received = Received()
    ours = new_consumer(cluster, group, TOPIC, "ours", received)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        queues = topic_queues(cluster)
        probe = Probe(producer, queues)

        def expected() -> dict[MessageQueue, str]:
            return expected_owners(queues, members(cluster, group)[0])

        seen: dict[int, int] = defaultdict(int)  # per process: records already fed to the probe

        def client_of(proc: ApacheProcess, cids: list[str]) -> str:
            return next(c for c in cids if c.startswith(f"{proc.pid}-"))

        def feed() -> None:
            cids = members(cluster, group)[0]
            for proc in procs:
                if proc.proc is None:
                    continue
                new = proc.messages()[seen[proc.pid] :]
                seen[proc.pid] += len(new)
                for m in new:
                    matches = [c for c in cids if c.startswith(f"{proc.pid}-")]
                    probe.record(m["body"], matches[0] if matches else f"{proc.pid}-gone")
            for body, who in list(received.by_body.items()):
                for _ in who:
                    probe.record(body.decode(), ours.client_id)
                del received.by_body[body]

        async def feeder() -> None:
            while True:
                feed()
                await asyncio.sleep(0.02)

        feeding = asyncio.create_task(feeder())
        try:
            await apache("a1").start()
            await apache("a2").start()
            await ours.start()
            cids = await wait_members(cluster, group, 3)
            assert ours.client_id in cids
            assert client_of(procs[0], cids) and client_of(procs[1], cids)

            start = time.monotonic()
            await converge(probe, expected, start)
            # at rest: every message of the next rounds consumed once, by AVG's owner
            rest_from = probe.seq + 1
            for _ in range(5):
                await probe.round()
            await wait_until(lambda: probe.owners(probe.seq) is not None, timeout=10)
            want = expected()
            for seq in range(rest_from, probe.seq + 1):
                owners = probe.owners(seq)
                assert owners is not None
                assert all(owners[mq] == [want[mq]] for mq in queues), (seq, owners)

            # a third Apache consumer joins
            joined = time.monotonic()
            await apache("a3").start()
            await wait_members(cluster, group, 4)
            join_s = await converge(probe, expected, joined)

            # kill -9 of one Apache consumer: its socket closes, the broker notifies at once
            killed = time.monotonic()
            procs[0].kill()
            await wait_members(cluster, group, 3)
            kill_s = await converge(probe, expected, killed)
            print(f"join settled in {join_s:.2f}s, kill -9 in {kill_s:.2f}s")
            # RocketMQ's periodic rebalance (ours 20 s, the C++ client's 10 s) is not what
            # moved the queues: the notification did.
            assert join_s < 8 and kill_s < 8, (join_s, kill_s)

            code, out, err = await mqadmin(
                "consumerConnection", "-n", cluster.namesrv_addr, "-g", group
            )
            assert code == 0, err
            assert "CPP" in out and "PYTHON" in out, out
            # No C++ consumer waited on a pull it had dropped (its 1.2.3 deadlock: the broker
            # answers a held pull when the same connection commits that queue).
            assert not waited_on_dropped_pulls(tmp_path)
        finally:
            feeding.cancel()
            await ours.shutdown()
            for proc in procs:
                await proc.stop()


async def test_producer_connection_shows_apache_producers(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Apache's producer heartbeats its group to the brokers (ours does not: it has no
    transactions to be asked about); mqadmin producerConnection lists it until it leaves."""
    producer = await ApacheProcess(
        tmp_path / "apache",
        "produce",
        "-n",
        cluster.namesrv_remoting_addr,
        "-t",
        TOPIC,
        "-g",
        "ApacheLinger",
        "--count",
        "4",
        "--linger",
        "120",
    ).start()
    try:
        await wait_until(
            lambda: any("lingering" in r for r in producer.records), timeout=30, message="sent"
        )
        async with AdminClient(cluster.namesrv_addr) as admin:

            async def listed() -> bool:
                try:
                    return bool(await admin.producer_connection("ApacheLinger", TOPIC))
                except AdminError:
                    return False

            started = time.monotonic()
            await wait_until(listed, timeout=60, message="the producer's heartbeat")
            [conn] = await admin.producer_connection("ApacheLinger", TOPIC)
            assert conn.language == "CPP" and conn.client_addr.startswith("127.0.0.1:")
            print(f"listed {time.monotonic() - started:.1f} s after its sends")
            await producer.stop()

            async def gone() -> bool:
                return not await listed()

            await wait_until(gone, timeout=10, message="the producer gone after its shutdown")
    finally:
        producer.kill()
