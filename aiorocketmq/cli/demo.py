"""``aiorocketmq demo``: watch a consumer group rebalance as consumers join and leave.

An embedded cluster (a name server, two brokers, a topic of 4 queues on each), a producer
sending all along, and consumers A, B, C joining and leaving on a schedule. Every protocol step
is narrated as it happens, from the trace: heartbeat -> consumer table change -> notification
-> each consumer's new allocation -> the first pull of each new queue. It ends with who held
which queue and how many messages were consumed more than once.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.consumer.types import ConsumeFromWhere
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from aiorocketmq.runtime import stop_on_signals
from aiorocketmq.trace import tracer

__all__ = ["run_demo"]

INTERRUPTED = 130
"""The exit status of a demo stopped before its story ended (a shell's for SIGINT)."""

TOPIC = "DemoTopic"
GROUP = "demo_group"


def _short(client_id: str) -> str:
    return client_id.rpartition("@")[2]


class Narrator:
    """Turns trace records into lines a newcomer can follow."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.t0 = time.monotonic()
        self.first_pull_seen: set[tuple[str, str]] = set()
        self.holders: dict[str, list[tuple[float, float | None, str]]] = defaultdict(list)
        self.consumed: dict[str, list[str]] = defaultdict(list)
        self.last_result: dict[str, list[str]] = {}
        self.progress = asyncio.Event()

    async def wait_consumed(self, count: int, *, timeout_s: float) -> None:
        """Until ``count`` distinct messages were consumed (or the timeout passes)."""
        try:
            async with asyncio.timeout(timeout_s):
                while len(self.consumed) < count:
                    self.progress.clear()
                    await self.progress.wait()
        except TimeoutError:
            pass

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.2f}s] {text}", file=self.out, flush=True)

    def __call__(self, rec: dict[str, Any]) -> None:
        event = rec["event"]
        now = time.monotonic() - self.t0
        if event == "heartbeat" and rec.get("joining"):
            self.say(
                f"  {rec['broker']}: HEART_BEAT from {_short(rec['client_id'])} registers it in {rec['group']}"
            )
        elif event == "consumer_table_changed" and rec["group"] == GROUP:
            names = ", ".join(_short(c) for c in rec["clients"]) or "nobody"
            self.say(f"  {rec['broker']}: consumerTable[{rec['group']}] is now [{names}] -> CHANGE")
        elif event == "notify_sent" and rec["group"] == GROUP:
            self.say(
                f"  {rec['broker']}: NOTIFY_CONSUMER_IDS_CHANGED -> {_short(rec['client_id'])}"
            )
        elif (
            event == "rebalance_result"
            and rec["topic"] == TOPIC
            and self.last_result.get(rec["client_id"]) != rec["result"]
        ):
            self.last_result[rec["client_id"]] = rec["result"]
            queues = ", ".join(
                q.split("brokerName=")[1].rstrip("]").replace(", queueId=", ":")
                for q in rec["result"]
            )
            self.say(
                f"    {_short(rec['client_id'])}: {rec['strategy']} over {rec['mq_all']} queues and "
                f"{len(rec['cid_all'])} consumers -> mine: [{queues}]"
            )
        elif event == "queue_added" and TOPIC in rec["mq"]:
            self.first_pull_seen.discard((rec["client_id"], rec["mq"]))
            self.holders[rec["mq"]].append((now, None, _short(rec["client_id"])))
        elif event == "queue_dropped" and TOPIC in rec["mq"]:
            spans = self.holders[rec["mq"]]
            who = _short(rec["client_id"])
            for i in range(len(spans) - 1, -1, -1):
                if spans[i][2] == who and spans[i][1] is None:
                    spans[i] = (spans[i][0], now, who)
                    break
        elif event == "pull" and TOPIC in rec["mq"]:
            key = (rec["client_id"], rec["mq"])
            if key not in self.first_pull_seen:
                self.first_pull_seen.add(key)
                q = rec["mq"].split("brokerName=")[1].rstrip("]").replace(", queueId=", ":")
                self.say(
                    f"      {_short(rec['client_id'])}: first PULL_MESSAGE of {q} from offset {rec['first']} "
                    f"-> {rec['count']} messages"
                )
        elif event == "consumed" and TOPIC in rec["mq"]:
            self.consumed[f"{rec['mq']}@{rec['offset']}"].append(_short(rec["client_id"]))
            self.progress.set()


async def _create_topic(cluster: LocalCluster) -> None:
    conns = BrokerConnections()
    try:
        for b in cluster.broker_list:
            await conns.stub(b.address).UpdateAndCreateTopic(
                broker_pb2.UpdateAndCreateTopicRequest(
                    topic_config=common_pb2.TopicConfig(
                        topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4, perm=6
                    )
                ),
                timeout=3,
            )
    finally:
        await conns.close()


def _consumer(cluster: LocalCluster, name: str) -> PushConsumer:
    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(
        GROUP,
        cluster.namesrv_addr,
        instance_name=name,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=ClientConfig(persist_consumer_offset_interval_ms=1_000),
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    return c


async def run_demo(out: TextIO, *, step_s: float = 4.0, dashboard: str | None = None) -> int:
    """Run the scripted join/leave story; 0 when every message was consumed. With
    ``dashboard`` (``host:port``), the web dashboard watches it, and stays up (with the
    cluster) after the story until Ctrl-C.

    Ctrl-C or SIGTERM at any point ends it (``INTERRUPTED``): the story is cancelled, its
    consumers leave, the cluster stops."""
    stop = stop_on_signals()
    body = asyncio.ensure_future(_run(out, step_s, dashboard, stop))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([body, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        interrupted = not body.done()
        if interrupted:
            body.cancel()
            await asyncio.gather(body, return_exceptions=True)
    return INTERRUPTED if interrupted else body.result()


async def _run(out: TextIO, step_s: float, dashboard: str | None, stop: asyncio.Event) -> int:
    """``run_demo``'s body: the cluster, the dashboard, the story, the dashboard staying up."""
    narrator = Narrator(out)
    with tempfile.TemporaryDirectory(prefix="aiorocketmq-demo-") as tmp:
        async with LocalCluster(
            Path(tmp), brokers=2, broker_overrides={"register_name_server_period_ms": 1000}
        ) as cluster:
            await _create_topic(cluster)
            await asyncio.sleep(1.2)  # the brokers re-register with the new topic
            narrator.say(
                f"cluster up: name server {cluster.namesrv_addr}, brokers "
                + ", ".join(f"{b.config.broker_name}@{b.address}" for b in cluster.broker_list)
                + f"; topic {TOPIC} has 4 queues on each broker"
            )
            board = None
            if dashboard is not None:
                from aiorocketmq.dashboard import Dashboard

                board = Dashboard(cluster.namesrv_addr, dashboard, refresh=0.5)
                url = await board.start()
                board.watch(GROUP)  # the timeline holds the whole story, page open or not
                narrator.say(f"watch it live: {url}groups/{GROUP} (the rebalance timeline)")
                await asyncio.sleep(step_s)  # time to open the page before the first join
            else:
                narrator.say(
                    "to watch this in a browser: make run DEMO_ARGS=--dashboard "
                    "(aiorocketmq demo --dashboard)"
                )
            try:
                code = await _story(cluster, narrator, out, step_s)
                if board is not None:
                    print(f"\nthe dashboard stays up at {board.url} (Ctrl-C to stop)", file=out)
                    out.flush()
                    await stop.wait()  # run_demo cancels this body then
            finally:
                if board is not None:
                    await board.stop()
    return code


async def _story(cluster: LocalCluster, narrator: Narrator, out: TextIO, step_s: float) -> int:
    """Consumers A, B and C join, B and A leave, while a producer sends; the summary."""
    tracer.subscribe(narrator)
    sent = 0
    stop = asyncio.Event()

    async def produce(producer: Producer) -> None:
        nonlocal sent
        while not stop.is_set():
            await producer.send(Message(TOPIC, b"order-%06d" % sent))
            sent += 1
            await asyncio.sleep(0.02)

    consumers: dict[str, PushConsumer] = {}
    try:
        async with Producer("demo_producer", cluster.namesrv_addr) as producer:
            task = asyncio.create_task(produce(producer))
            try:
                await _scenario(cluster, narrator, consumers, step_s)
            except BaseException:  # interrupted: the sender stops before its producer closes
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise
            stop.set()
            await task
            await narrator.wait_consumed(sent, timeout_s=10)
    finally:
        for c in consumers.values():
            await c.shutdown()
        tracer.unsubscribe(narrator)
    _summary(narrator, sent, out)
    return 0 if len(narrator.consumed) >= sent else 1


async def _scenario(
    cluster: LocalCluster, narrator: Narrator, consumers: dict[str, PushConsumer], step_s: float
) -> None:
    """A, B and C join, B and A leave, ``step_s`` apart."""
    for action, name in (
        ("join", "A"),
        ("join", "B"),
        ("join", "C"),
        ("leave", "B"),
        ("leave", "A"),
    ):
        narrator.say(f"== consumer {name} {'joins' if action == 'join' else 'leaves gracefully'} ==")
        if action == "join":
            consumers[name] = _consumer(cluster, name)
            await consumers[name].start()
        else:
            await consumers.pop(name).shutdown()
        await asyncio.sleep(step_s)


def _summary(narrator: Narrator, sent: int, out: TextIO) -> None:
    print("\nWho held which queue (seconds since start):", file=out)
    for mq in sorted(narrator.holders):
        q = mq.split("brokerName=")[1].rstrip("]").replace(", queueId=", ":")
        spans = "  ".join(
            f"{who} {a:5.1f}-{'end' if b is None else f'{b:5.1f}'}"
            for a, b, who in narrator.holders[mq]
        )
        print(f"  {q:12} {spans}", file=out)
    repeated = {k: v for k, v in narrator.consumed.items() if len(v) > 1}
    print(
        f"\nsent {sent}, consumed {len(narrator.consumed)} distinct, "
        f"{sum(len(v) - 1 for v in repeated.values())} repeated deliveries on {len(repeated)} messages",
        file=out,
    )
    print(
        "(RocketMQ's rebalance is at-least-once: during a handoff the new owner may start from an offset "
        "the old owner had not committed yet.)",
        file=out,
    )
