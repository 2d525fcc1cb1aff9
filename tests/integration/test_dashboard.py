"""The dashboard over a real cluster, through HTTP: pages, JSON, the event stream of a group
while consumers join and leave, a broker and a name server that are down, trace replay."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from aiorocketmq.consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.dashboard import Dashboard
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import free_port, wait_until

TOPIC = "DashTopic"
GROUP = "dash_group"
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=2)


async def _ok(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def consumer(cluster: LocalCluster, name: str) -> PushConsumer:
    c = PushConsumer(GROUP, cluster.namesrv_addr, instance_name=name)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(_ok)
    return c


@pytest.fixture
async def dashboard(cluster: LocalCluster) -> AsyncIterator[Dashboard]:
    dead = f"127.0.0.1:{free_port()}"  # a second name server that is down
    async with Dashboard(f"{cluster.namesrv_addr};{dead}", "127.0.0.1:0", refresh=0.2) as d:
        yield d


async def get(dashboard: Dashboard, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(dashboard.url + path) as r:
        return r.status, await r.text()


async def test_pages_show_the_cluster_topics_and_groups(
    cluster: LocalCluster, dashboard: Dashboard
) -> None:
    async with Producer("dash_pg", cluster.namesrv_addr) as producer:
        for i in range(5):
            await producer.send(Message(TOPIC, b"m%d" % i))
    status, page = await get(dashboard, "")
    assert status == 200
    for broker in cluster.broker_list:
        assert broker.address in page
    assert "DOWN" in page  # the dead name server, shown as down; the page still answers
    data = json.loads((await get(dashboard, "api/cluster"))[1])
    assert [n["up"] for n in data["namesrvs"]] == [True, False]
    assert {b["name"] for b in data["brokers"]} == {"broker-a", "broker-b"}
    assert all(b["up"] and b["status"]["brokerVersionDesc"] for b in data["brokers"])

    status, page = await get(dashboard, "topics")
    assert status == 200 and TOPIC in page and "%RETRY%" not in page
    topics = json.loads((await get(dashboard, "api/topics"))[1])
    [row] = [t for t in topics if t["topic"] == TOPIC]
    assert row["messages"] == 5 and len(row["queues"]) == 4

    c = consumer(cluster, "dash-a")
    await c.start()
    try:
        await wait_until(lambda: len(c.assigned_queues) == 4, timeout=10)
        status, page = await get(dashboard, "groups")
        assert status == 200 and f"/groups/{GROUP}" in page
        view = json.loads((await get(dashboard, f"api/groups/{GROUP}"))[1])
        assert [m["language"] for m in view["members"]] == ["PYTHON"]
        assert view["members"][0]["protocol"] == "grpc"
        mine = [q for q in view["queues"] if q["topic"] == TOPIC]
        assert {q["holder"] for q in mine} == {c.client_id}, mine
        assert sum(q["brokerOffset"] for q in mine) == 5
    finally:
        await c.shutdown()
    # a group name that cannot be one is a clear 400, not an error page
    status, text = await get(dashboard, "api/groups/bad%20name")
    assert status == 400 and "illegal characters" in text


async def events(dashboard: Dashboard, group: str) -> AsyncIterator[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"{dashboard.url}groups/{group}/events") as r,
    ):
        assert r.headers["Content-Type"].startswith("text/event-stream")
        async for line in r.content:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])


async def test_the_event_stream_follows_joins_and_leaves(
    cluster: LocalCluster, dashboard: Dashboard
) -> None:
    a, b = consumer(cluster, "dash-a"), consumer(cluster, "dash-b")
    await a.start()
    await wait_until(lambda: len(a.assigned_queues) == 4, timeout=10)
    seen_holders: list[set[str]] = []
    joined = left = False
    stream = events(dashboard, GROUP)
    timeline: dict[str, Any] = {}
    try:
        async with asyncio.timeout(40):
            async for payload in stream:
                holders = {q["holder"] for q in payload["view"]["queues"]} - {""}
                if not seen_holders or holders != seen_holders[-1]:
                    seen_holders.append(holders)
                if holders == {a.client_id} and not joined:
                    joined = True
                    await b.start()
                elif holders == {a.client_id, b.client_id} and not left:
                    left = True
                    await b.shutdown()
                elif left and holders == {a.client_id}:
                    timeline = payload["timeline"]
                    break
    finally:
        await stream.aclose()
        await b.shutdown()
        await a.shutdown()
    assert timeline, seen_holders
    assert seen_holders[-3:] == [{a.client_id}, {a.client_id, b.client_id}, {a.client_id}]
    texts = [e["text"] for e in timeline["events"]]
    assert any(f"{b.client_id} joined" in t for t in texts)
    assert any(f"{b.client_id} left" in t for t in texts)
    assert any(t.startswith(f"allocation result of {b.client_id}: took") for t in texts)
    bars_of_b = [
        bar for row in timeline["rows"] for bar in row["bars"] if bar["holder"] == b.client_id
    ]
    # b held its share (AVG: 2 of the 4 queues) and gave every one back
    assert (
        len(
            {
                row["queue"]
                for row in timeline["rows"]
                for bar in row["bars"]
                if bar["holder"] == b.client_id
            }
        )
        >= 2
    )
    assert bars_of_b and all(bar["end"] for bar in bars_of_b)


async def test_a_broker_that_is_down_is_shown_down(
    cluster: LocalCluster, dashboard: Dashboard
) -> None:
    victim = cluster.broker("broker-b")
    assert victim.server is not None
    await victim.server.stop(0)  # as a crash: the name server still lists it for a while
    data = json.loads((await get(dashboard, "api/cluster"))[1])
    state = {b["name"]: (b["up"], b["error"]) for b in data["brokers"]}
    assert state["broker-a"] == (True, "")
    assert state["broker-b"][0] is False and victim.address in state["broker-b"][1]
    status, page = await get(dashboard, "")
    assert status == 200 and "DOWN" in page


async def test_a_trace_is_replayed_and_a_bad_one_refused_by_line(dashboard: Dashboard) -> None:
    q = "MessageQueue [topic=T, brokerName=broker-a, queueId=0]"
    now = int(time.time() * 1000)
    trace = "".join(
        json.dumps(r) + "\n"
        for r in (
            {"ts": now, "event": "heartbeat", "group": "g", "client_id": "A", "broker": "b"},
            {"ts": now + 10, "event": "queue_added", "group": "g", "client_id": "A", "mq": q},
        )
    )
    async with aiohttp.ClientSession() as s:
        form = aiohttp.FormData()
        form.add_field("trace", trace.encode(), filename="run.jsonl")
        async with s.post(dashboard.url + "replay", data=form) as r:
            page = await r.text()
            assert r.status == 200 and 'id="trace-data"' in page and "broker-a" in page
        form = aiohttp.FormData()
        form.add_field("trace", (trace + "garbage\n" + trace).encode(), filename="bad.jsonl")
        async with s.post(dashboard.url + "replay", data=form) as r:
            assert r.status == 400 and "bad.jsonl: line 3: not JSON" in await r.text()
        # reading pages only: nothing else takes a POST
        async with s.post(dashboard.url + "groups/g") as r:
            assert r.status == 405
