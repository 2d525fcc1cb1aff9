"""Every subcommand mqadmin gained for the operator's daily work, run as the console script
(a process) against a cluster, its ``--json`` parsed. The in-process tests
(``tests/integration/test_mqadmin.py``) cover their cases and bad input in detail."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from aiorocketmq.consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import mqadmin, wait_until

TOPIC = "ProcAdminTopic"
GROUP = "proc_admin_group"
pytestmark = pytest.mark.cluster(brokers=1, topic=TOPIC, queues=2)


async def admin_json(cluster: LocalCluster, *argv: str) -> Any:
    code, out, err = await mqadmin(*argv, "-n", cluster.namesrv_addr, "--json")
    assert code == 0, err
    return json.loads(out)


async def test_the_operators_subcommands_as_processes(cluster: LocalCluster) -> None:
    before = int(time.time() * 1000)
    async with Producer("proc_admin_pg", cluster.namesrv_addr) as producer:
        sent = [await producer.send(Message(TOPIC, b"m%d" % i, keys=f"k{i}")) for i in range(6)]
    broker = cluster.broker_list[0].address

    by_id = await admin_json(cluster, "queryMsgById", "-i", sent[2].msg_id)
    assert [m["body"] for m in by_id["messages"]] == ["m2"]
    by_key = await admin_json(cluster, "queryMsgByKey", "-t", TOPIC, "-k", "k4")
    assert [m["body"] for m in by_key["messages"]] == ["m4"]
    q = sent[3].message_queue
    by_offset = await admin_json(
        cluster, "queryMsgByOffset", "-t", TOPIC, "-b", q.broker_name,
        "-i", str(q.queue_id), "-o", str(sent[3].queue_offset),
    )  # fmt: skip
    assert by_offset["body"] == "m3"
    printed = await admin_json(cluster, "printMsg", "-t", TOPIC, "-b", str(before))
    assert sorted(m["body"] for m in printed["messages"]) == [f"m{i}" for i in range(6)]
    status = await admin_json(cluster, "brokerStatus", "-b", broker)
    assert status[broker]["brokerName"] == "broker-a"

    settings = await admin_json(cluster, "updateSubGroup", "-b", broker, "-g", GROUP, "-r", "5")
    assert settings[broker]["retryMaxTimes"] == 5

    consumed: list[bytes] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, cluster.namesrv_addr)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        reset = await admin_json(cluster, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
        assert [q["offset"] for q in reset["offsetTable"]] == [0, 0]
        assert reset["clientsTold"] == [consumer.client_id]
        await wait_until(
            lambda: sorted(set(consumed)) == [b"m%d" % i for i in range(6)], timeout=20
        )
    finally:
        await consumer.shutdown()

    deleted = await admin_json(cluster, "deleteSubGroup", "-b", broker, "-g", GROUP)
    assert deleted["deletedFrom"] == [broker]
    cleaned = await admin_json(cluster, "cleanExpiredCQ", "-b", broker)
    assert cleaned[broker]["topicsRemoved"] == []
    gone = await admin_json(cluster, "deleteTopic", "-t", TOPIC)
    assert gone["deletedFrom"] == [broker]
