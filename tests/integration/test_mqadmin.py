"""``mqadmin``'s broker subcommands, in-process, against a name server and two brokers.

``mqadmin.main()`` runs its own event loop, so it cannot be called from a running one: the
cluster (and any producer or consumer a test needs) lives on a loop in a background thread, and
the tests are plain functions that call ``main([...])`` and read what it printed. One cluster
serves the whole module; each test uses its own topics and groups.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import threading
import time
from collections.abc import Coroutine, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from aiorocketmq.cli import mqadmin
from aiorocketmq.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
)
from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.producer import Message, Producer
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.message_queue import MessageQueue
from aiorocketmq.protocol.rpc import call
from aiorocketmq.protocol.v1 import broker_pb2
from tests.helpers import free_port, wait_until, wait_until_sync

T = TypeVar("T")

FAST = {"register_name_server_period_ms": 200, "flush_consumer_offset_interval_ms": 200}


class BackgroundCluster:
    """A ``LocalCluster`` of two brokers on an event loop in a daemon thread."""

    def __init__(self, root: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster", daemon=True)
        self.cluster = LocalCluster(root, brokers=2, broker_overrides=FAST)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the cluster's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()
        self.run(self.cluster.start())

    def stop(self) -> None:
        try:
            self.run(self.cluster.shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    @property
    def namesrv_addr(self) -> str:
        return self.cluster.namesrv_addr

    def addr(self, broker_name: str) -> str:
        return self.cluster.broker(broker_name).address


@pytest.fixture(scope="module")
def bg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    cluster = BackgroundCluster(tmp_path_factory.mktemp("mqadmin"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _restore_logging(bg: BackgroundCluster) -> Iterator[None]:
    """``mqadmin.main()`` configures logging for a CLI (bound to this test's stderr): undo it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def admin(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, *argv: str
) -> tuple[int, str, str]:
    """``mqadmin argv -n <the cluster>``: its exit code, stdout and stderr."""
    capsys.readouterr()
    code = mqadmin.main([*argv, "-n", bg.namesrv_addr])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def admin_json(capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, *argv: str) -> Any:
    code, out, err = admin(capsys, bg, *argv, "--json")
    assert code == 0, err
    assert err == ""
    return json.loads(out)


def usage_error(capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, *argv: str) -> str:
    """The one stderr line of a usage error (exit 2)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        mqadmin.main([*argv, "-n", bg.namesrv_addr])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def cells(line: str) -> list[str]:
    """The cells of a table line (columns are at least two spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def one_error_line(code: int, out: str, err: str) -> str:
    """The single stderr line of a failed run (exit 1, nothing on stdout)."""
    assert code == 1, (out, err)
    assert out == ""
    [line] = err.strip().splitlines()
    return line


def wait_routed(bg: BackgroundCluster, topic: str, brokers: set[str]) -> None:
    """Wait until the name server routes ``topic`` to exactly ``brokers``."""

    async def routed() -> bool:
        async with NameServerClient(bg.namesrv_addr) as ns:
            try:
                route = await ns.get_route_info_by_topic(topic)
            except MQError:
                return False
        return {qd.broker_name for qd in route.queue_datas} == brokers

    bg.run(wait_until(routed, timeout=10, message=f"route of {topic} on {sorted(brokers)}"))


def create_topic(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, topic: str, queues: int
) -> None:
    code, _, err = admin(
        capsys, bg, "updateTopic", "-c", "DefaultCluster", "-t", topic,
        "-r", str(queues), "-w", str(queues),
    )  # fmt: skip
    assert code == 0, err
    wait_routed(bg, topic, {"broker-a", "broker-b"})


def send(bg: BackgroundCluster, sends: list[tuple[MessageQueue, Message]]) -> None:
    """Send each message to its queue with a producer on the cluster's loop."""

    async def go() -> None:
        async with Producer("mqadmin_test_pg", bg.namesrv_addr) as producer:
            for mq, message in sends:
                await producer.send(message, mq)

    bg.run(go())


# -- updateTopic --------------------------------------------------------------------------------


def test_update_topic_on_every_master_of_a_cluster(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    code, out, err = admin(
        capsys, bg, "updateTopic", "-c", "DefaultCluster", "-t", "AdminTopic", "-r", "4", "-w", "4"
    )
    assert code == 0, err
    assert out.splitlines() == [
        f"create topic to {bg.addr('broker-a')} success.",
        f"create topic to {bg.addr('broker-b')} success.",
        "TopicConfig [topicName=AdminTopic, readQueueNums=4, writeQueueNums=4, perm=RW-, "
        "topicSysFlag=0, order=false]",
    ]
    wait_routed(bg, "AdminTopic", {"broker-a", "broker-b"})
    route = admin_json(capsys, bg, "topicRoute", "-t", "AdminTopic")
    assert sorted(
        (q["brokerName"], q["readQueueNums"], q["perm"]) for q in route["queueDatas"]
    ) == [
        ("broker-a", 4, 6),
        ("broker-b", 4, 6),
    ]


def test_update_topic_on_one_broker_with_defaults_then_update_it(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    document = admin_json(capsys, bg, "updateTopic", "-b", bg.addr("broker-a"), "-t", "OnlyA")
    assert document == {
        "topicConfig": {
            "topicName": "OnlyA",
            "readQueueNums": 8,
            "writeQueueNums": 8,
            "perm": 6,
            "topicSysFlag": 0,
            "order": False,
        },
        "brokerAddrs": [bg.addr("broker-a")],
    }
    wait_routed(bg, "OnlyA", {"broker-a"})

    admin_json(
        capsys, bg, "updateTopic", "--brokerAddr", bg.addr("broker-a"), "--topic", "OnlyA",
        "-r", "2", "-w", "3", "-p", "4",
    )  # fmt: skip

    async def updated() -> bool:
        async with NameServerClient(bg.namesrv_addr) as ns:
            route = await ns.get_route_info_by_topic("OnlyA")
        [qd] = route.queue_datas
        return (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (2, 3, 4)

    bg.run(wait_until(updated, timeout=10, message="OnlyA updated on the name server"))


def test_update_topic_failures_are_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    line = one_error_line(*admin(capsys, bg, "updateTopic", "-c", "NoSuchCluster", "-t", "X"))
    assert line.startswith("mqadmin updateTopic: ")
    assert "NoSuchCluster" in line and "DefaultCluster" in line

    line = one_error_line(
        *admin(capsys, bg, "updateTopic", "-c", "DefaultCluster", "-t", "X", "-p", "9")
    )
    assert "perm" in line and "9" in line

    line = one_error_line(*admin(capsys, bg, "updateTopic", "-c", "DefaultCluster", "-t", "a b"))
    assert "illegal characters" in line

    line = one_error_line(
        *admin(capsys, bg, "updateTopic", "-c", "DefaultCluster", "-t", "X", "-r", "0")
    )
    assert "-r" in line

    dead = f"127.0.0.1:{free_port()}"
    line = one_error_line(
        *admin(capsys, bg, "updateTopic", "-b", dead, "-t", "X", "--timeout", "1")
    )
    assert dead in line and "SERVICE_NOT_AVAILABLE" in line

    with pytest.raises(SystemExit) as exc:  # -b and -c exclude each other (argparse: exit 2)
        mqadmin.main(["updateTopic", "-b", dead, "-c", "DefaultCluster", "-t", "X"])
    assert exc.value.code == 2


# -- sendMessage and topicStatus ----------------------------------------------------------------


def test_send_message_to_a_queue_and_anywhere(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "SendTopic", queues=2)
    results = [
        admin_json(
            capsys, bg, "sendMessage", "-t", "SendTopic", "-p", f"m{i}", "-b", "broker-b", "-i", "1"
        )
        for i in range(3)
    ]
    assert [r["queueOffset"] for r in results] == [0, 1, 2]
    for r in results:
        assert r["sendStatus"] == "SEND_OK"
        assert r["messageQueue"] == {"topic": "SendTopic", "brokerName": "broker-b", "queueId": 1}
        assert len(r["msgId"]) == 32
    assert len({r["msgId"] for r in results}) == 3

    anywhere = admin_json(
        capsys, bg, "sendMessage", "-t", "SendTopic", "-p", "x", "-k", "K1 K2", "-c", "TagA"
    )
    assert anywhere["sendStatus"] == "SEND_OK"
    assert anywhere["messageQueue"]["brokerName"] in ("broker-a", "broker-b")

    code, out, err = admin(
        capsys, bg, "sendMessage", "-t", "SendTopic", "-p", "t", "-b", "broker-a", "-i", "0"
    )
    assert code == 0, err
    header, row = out.splitlines()
    assert cells(header) == ["#Broker Name", "#QID", "#Send Result", "#MsgId", "#Queue Offset"]
    assert cells(row)[:3] == ["broker-a", "0", "SEND_OK"]

    line = one_error_line(
        *admin(capsys, bg, "sendMessage", "-t", "SendTopic", "-p", "x", "-b", "broker-a")
    )
    assert "-b" in line and "-i" in line
    line = one_error_line(
        *admin(capsys, bg, "sendMessage", "-t", "SendTopic", "-p", "x", "-b", "broker-z", "-i", "0")
    )
    assert "broker-z" in line
    line = one_error_line(
        *admin(capsys, bg, "sendMessage", "-t", "SendTopic", "-p", "x", "-b", "broker-a", "-i", "7")
    )
    assert "mqadmin sendMessage: " in line


def test_topic_status_shows_each_queues_offsets(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "StatusTopic", queues=2)
    a1 = MessageQueue("StatusTopic", "broker-a", 1)
    b0 = MessageQueue("StatusTopic", "broker-b", 0)
    send(bg, [(a1, Message("StatusTopic", b"x"))] * 3 + [(b0, Message("StatusTopic", b"y"))])

    status = admin_json(capsys, bg, "topicStatus", "-t", "StatusTopic")
    assert status["topic"] == "StatusTopic"
    table = status["offsetTable"]
    assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in table] == [
        ("broker-a", 0, 0, 0),
        ("broker-a", 1, 0, 3),
        ("broker-b", 0, 0, 1),
        ("broker-b", 1, 0, 0),
    ]
    assert [q["lastUpdateTimestamp"] > 0 for q in table] == [False, True, True, False]

    code, out, err = admin(capsys, bg, "topicStatus", "-t", "StatusTopic")
    assert code == 0, err
    lines = out.splitlines()
    assert cells(lines[0]) == [
        "#Broker Name",
        "#QID",
        "#Min Offset",
        "#Max Offset",
        "#Last Updated",
    ]
    assert cells(lines[1]) == ["broker-a", "0", "0", "0", "-"]
    assert cells(lines[2])[:4] == ["broker-a", "1", "0", "3"]

    line = one_error_line(*admin(capsys, bg, "topicStatus", "-t", "NoSuchTopic"))
    assert "NoSuchTopic" in line and "TOPIC_NOT_EXIST" in line


# -- consumeMessage -----------------------------------------------------------------------------


def test_consume_message_reads_every_queue_filters_and_limits(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    topic = "ConsumeTopic"
    create_topic(capsys, bg, topic, queues=2)
    a0 = MessageQueue(topic, "broker-a", 0)
    b1 = MessageQueue(topic, "broker-b", 1)
    send(
        bg,
        [
            (a0, Message(topic, b"a-0", tags="TagA", keys="k0")),
            (a0, Message(topic, b"a-1", tags="TagB")),
            (a0, Message(topic, b"\xff\xfe binary", tags="TagC")),
            (b1, Message(topic, "b-0 \u00e9".encode(), tags="TagA", keys="k1 k2")),
            (b1, Message(topic, b"b-1\nline 2")),
        ],
    )

    document = admin_json(capsys, bg, "consumeMessage", "-t", topic)
    assert document["consumerGroup"] == "TOOLS_CONSUMER"
    messages = document["messages"]
    assert [(m["brokerName"], m["queueId"], m["queueOffset"]) for m in messages] == [
        ("broker-a", 0, 0), ("broker-a", 0, 1), ("broker-a", 0, 2),
        ("broker-b", 1, 0), ("broker-b", 1, 1),
    ]  # fmt: skip
    assert [(m["body"], m["bodyEncoding"]) for m in messages] == [
        ("a-0", "utf-8"),
        ("a-1", "utf-8"),
        (base64.b64encode(b"\xff\xfe binary").decode(), "base64"),
        ("b-0 \u00e9", "utf-8"),
        ("b-1\nline 2", "utf-8"),
    ]
    assert [m["tags"] for m in messages] == ["TagA", "TagB", "TagC", "TagA", None]
    assert [m["keys"] for m in messages] == ["k0", None, None, "k1 k2", None]
    assert all(len(m["msgId"]) == 32 and m["topic"] == topic for m in messages)
    assert len(document["queues"]) == 4
    by_queue = {(q["brokerName"], q["queueId"]): q for q in document["queues"]}
    assert by_queue[("broker-a", 0)]["nextOffset"] == 3
    assert by_queue[("broker-a", 1)]["status"] == "NO_NEW_MSG"

    tagged = admin_json(capsys, bg, "consumeMessage", "-t", topic, "-s", "TagA || TagC")
    assert [m["tags"] for m in tagged["messages"]] == ["TagA", "TagC", "TagA"]

    one_queue = admin_json(
        capsys, bg, "consumeMessage", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "1"
    )
    assert [m["queueOffset"] for m in one_queue["messages"]] == [1, 2]
    assert [(q["brokerName"], q["queueId"]) for q in one_queue["queues"]] == [("broker-a", 0)]

    limited = admin_json(capsys, bg, "consumeMessage", "-t", topic, "-c", "4")
    assert [m["body"] for m in limited["messages"]][:2] == ["a-0", "a-1"]
    assert len(limited["messages"]) == 4

    code, out, err = admin(capsys, bg, "consumeMessage", "-t", topic, "-b", "broker-b")
    assert code == 0, err
    lines = out.splitlines()
    assert cells(lines[0]) == [
        "#Broker Name",
        "#QID",
        "#Offset",
        "#MsgId",
        "#Tags",
        "#Keys",
        "#Body",
    ]
    assert lines[1].endswith("b-0 \u00e9")
    assert lines[2].endswith("b-1\\nline 2")
    assert lines[-1] == "2 message(s) from 2 queue(s)"

    line = one_error_line(*admin(capsys, bg, "consumeMessage", "-t", topic, "-b", "broker-z"))
    assert "broker-z" in line
    line = one_error_line(*admin(capsys, bg, "consumeMessage", "-t", topic, "-i", "5"))
    assert "queue id 5" in line

    # mqadmin pulls without committing: its group has no offsets anywhere.
    line = one_error_line(*admin(capsys, bg, "consumerProgress", "-g", "TOOLS_CONSUMER"))
    assert "SUBSCRIPTION_GROUP_NOT_EXIST" in line


# -- consumerConnection and consumerProgress ----------------------------------------------------


def test_consumer_connection_and_progress_of_a_live_consumer(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    topic, group = "GroupTopic", "mqadmin_live_group"
    create_topic(capsys, bg, topic, queues=2)
    consumed: list[bytes] = []

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def start() -> PushConsumer:
        consumer = PushConsumer(
            group,
            bg.namesrv_addr,
            instance_name="mqadmin-test",
            client_config=ClientConfig(
                persist_consumer_offset_interval_ms=200, rebalance_wait_interval_ms=2_000
            ),
        )
        consumer.subscribe(topic, "TagA || TagB")
        consumer.register_message_listener(listener)
        await consumer.start()
        return consumer

    consumer = bg.run(start())
    try:
        bodies = [b"g%d" % i for i in range(6)]
        sends = [
            (MessageQueue(topic, broker, i % 2), Message(topic, body, tags="TagA"))
            for i, (broker, body) in enumerate(
                zip(["broker-a", "broker-b"] * 3, bodies, strict=True)
            )
        ]
        wait_until_sync(
            lambda: len({mq for mq in consumer.assigned_queues if mq.topic == topic}) == 4,
            timeout=15,
            message="the consumer holds the topic's 4 queues",
        )
        send(bg, sends)
        wait_until_sync(
            lambda: sorted(consumed) == bodies, timeout=15, message="6 messages consumed"
        )

        conn = admin_json(capsys, bg, "consumerConnection", "-g", group)
        assert conn["consumerGroup"] == group
        assert conn["brokerName"] == "broker-a"
        [client] = conn["connectionSet"]
        assert client["clientId"] == consumer.client_id
        assert client["clientAddr"] and client["language"]
        assert conn["subscriptionTable"][topic]["subString"] == "TagA || TagB"
        assert sorted(conn["subscriptionTable"][topic]["tagsSet"]) == ["TagA", "TagB"]
        assert conn["consumeType"] == "CONSUME_PASSIVELY"
        assert conn["messageModel"] == "CLUSTERING"
        assert conn["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"

        code, out, err = admin(capsys, bg, "consumerConnection", "-g", group)
        assert code == 0, err
        assert consumer.client_id in out
        assert "Below is subscription:" in out
        assert "ConsumeType: CONSUME_PASSIVELY" in out.splitlines()

        def caught_up() -> bool:
            progress = admin_json(capsys, bg, "consumerProgress", "-g", group)
            committed = sum(max(q["consumerOffset"], 0) for q in progress["offsetTable"])
            return bool(progress["diffTotal"] == 0 and committed == 6)

        wait_until_sync(caught_up, timeout=15, message="the group's offsets committed")
        progress = admin_json(capsys, bg, "consumerProgress", "-g", group)
        rows = [
            (q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"])
            for q in progress["offsetTable"]
        ]
        # The group's retry topic is subscribed too (RocketMQ's %RETRY%<group>), and sorts first.
        retry = f"%RETRY%{group}"
        assert rows == [
            (retry, "broker-a", 0, 0, -1),
            (retry, "broker-b", 0, 0, -1),
            (topic, "broker-a", 0, 3, 3),
            (topic, "broker-a", 1, 0, -1),
            (topic, "broker-b", 0, 0, -1),
            (topic, "broker-b", 1, 3, 3),
        ]
    finally:
        bg.run(consumer.shutdown())

    line = one_error_line(*admin(capsys, bg, "consumerConnection", "-g", group))
    assert group in line and "SUBSCRIPTION_GROUP_NOT_EXIST" in line
    # The offsets outlive the consumer: its progress can still be read.
    assert admin_json(capsys, bg, "consumerProgress", "-g", group)["diffTotal"] == 0


def test_consumer_progress_counts_the_lag_and_skips_brokers_without_the_group(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    topic, group = "LagTopic", "mqadmin_lag_group"
    create_topic(capsys, bg, topic, queues=2)
    a0 = MessageQueue(topic, "broker-a", 0)
    b1 = MessageQueue(topic, "broker-b", 1)
    send(bg, [(a0, Message(topic, b"a"))] * 5 + [(b1, Message(topic, b"b"))] * 3)

    async def commit() -> None:
        conns = BrokerConnections()
        try:
            await call(
                conns.stub(bg.addr("broker-a")).UpdateConsumerOffset,
                broker_pb2.UpdateConsumerOffsetRequest(
                    consumer_group=group,
                    offsets=[broker_pb2.OffsetCommit(topic=topic, queue_id=0, offset=2)],
                ),
            )
        finally:
            await conns.close()

    bg.run(commit())

    # broker-b has never heard of the group: it is skipped.
    progress = admin_json(capsys, bg, "consumerProgress", "-g", group)
    assert progress["consumerGroup"] == group
    assert [
        (q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"])
        for q in progress["offsetTable"]
    ] == [("broker-a", 0, 5, 2, 3), ("broker-a", 1, 0, -1, 0)]
    assert progress["diffTotal"] == 3

    # Asked for the topic, broker-b answers too: nothing committed there, all of it is lag.
    progress = admin_json(capsys, bg, "consumerProgress", "-g", group, "-t", topic)
    assert [(q["brokerName"], q["queueId"], q["diff"]) for q in progress["offsetTable"]] == [
        ("broker-a", 0, 3), ("broker-a", 1, 0), ("broker-b", 0, 0), ("broker-b", 1, 3),
    ]  # fmt: skip
    assert progress["diffTotal"] == 6

    code, out, err = admin(capsys, bg, "consumerProgress", "-g", group)
    assert code == 0, err
    lines = out.splitlines()
    assert cells(lines[0]) == [
        "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP",
        "#Diff", "#LastTime",
    ]  # fmt: skip
    assert cells(lines[1])[:7] == [topic, "broker-a", "0", "5", "2", "N/A", "3"]
    assert lines[-2:] == ["Consume TPS: 0.00", "Consume Diff Total: 3"]

    line = one_error_line(*admin(capsys, bg, "consumerProgress", "-g", "nobody_group"))
    assert line.startswith("mqadmin consumerProgress: ")
    assert "nobody_group" in line and "SUBSCRIPTION_GROUP_NOT_EXIST" in line
    line = one_error_line(*admin(capsys, bg, "consumerConnection", "-g", "nobody_group"))
    assert "nobody_group" in line


def test_broker_config_is_read_and_a_live_setting_changed(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    addr = bg.addr("broker-a")
    config = admin_json(capsys, bg, "getBrokerConfig", "-b", addr)[addr]
    assert config["brokerName"] == "broker-a"
    assert config["notifyConsumerIdsChangedEnable"] == "true"
    assert config["maxPullMsgNums"] == "1024"
    changed = admin_json(
        capsys,
        bg,
        "updateBrokerConfig",
        "-b",
        addr,
        "-k",
        "notifyConsumerIdsChangedEnable",
        "-v",
        "false",
    )
    assert changed == {addr: {"notifyConsumerIdsChangedEnable": "false"}}
    broker = bg.cluster.broker("broker-a")
    try:
        assert broker.config.notify_consumer_ids_changed_enable is False
        assert broker.client.listener.notify_consumer_ids_changed_enable is False  # applied live
        config = admin_json(capsys, bg, "getBrokerConfig", "-b", addr)[addr]
        assert config["notifyConsumerIdsChangedEnable"] == "false"
    finally:
        admin_json(
            capsys,
            bg,
            "updateBrokerConfig",
            "-c",
            "DefaultCluster",
            "-k",
            "notify_consumer_ids_changed_enable",
            "-v",
            "true",
        )
    assert broker.client.listener.notify_consumer_ids_changed_enable is True


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("noSuchSetting", "1", "unknown broker setting 'noSuchSetting'"),
        ("listen", "127.0.0.1:1", "listen takes effect at the next start only"),
        ("maxPullMsgNums", "many", "maxPullMsgNums must be an integer, got 'many'"),
        ("longPollingEnable", "yes", "longPollingEnable must be true or false, got 'yes'"),
    ],
)
def test_update_broker_config_refuses_what_it_cannot_apply(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, key: str, value: str, message: str
) -> None:
    addr = bg.addr("broker-a")
    before = admin_json(capsys, bg, "getBrokerConfig", "-b", addr)
    line = one_error_line(
        *admin(capsys, bg, "updateBrokerConfig", "-b", addr, "-k", key, "-v", value)
    )
    assert message in line
    assert admin_json(capsys, bg, "getBrokerConfig", "-b", addr) == before  # nothing changed


# -- deleteTopic, queryMsgById, queryMsgByOffset, printMsg, brokerStatus ------------------------


def test_delete_topic_from_the_brokers_and_the_name_servers(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "DoomedTopic", queues=2)
    send(bg, [(MessageQueue("DoomedTopic", "broker-a", 0), Message("DoomedTopic", b"x"))])
    done = admin_json(capsys, bg, "deleteTopic", "-t", "DoomedTopic", "-c", "DefaultCluster")
    assert done["topic"] == "DoomedTopic"
    assert sorted(done["deletedFrom"]) == sorted([bg.addr("broker-a"), bg.addr("broker-b")])
    line = one_error_line(*admin(capsys, bg, "topicRoute", "-t", "DoomedTopic"))
    assert "DoomedTopic" in line
    # the brokers' next registrations do not bring it back, and its queues are gone
    wait_until_sync(
        lambda: "DoomedTopic" not in admin_json(capsys, bg, "topicList")["topicList"], timeout=5
    )
    for name in ("broker-a", "broker-b"):
        store = bg.cluster.broker(name).store
        assert store.queue_ids("DoomedTopic") == []
    time.sleep(0.5)  # a few registration periods
    assert "DoomedTopic" not in admin_json(capsys, bg, "topicList")["topicList"]

    code, out, err = admin(capsys, bg, "deleteTopic", "-t", "DoomedTopic")
    assert code == 0, err
    assert "no broker had topic DoomedTopic" in out
    line = one_error_line(*admin(capsys, bg, "deleteTopic", "-t", "TBW102"))
    assert "system topic" in line


def test_query_a_message_by_id_and_by_offset(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "QueryTopic", queues=2)
    sent = [
        admin_json(
            capsys,
            bg,
            "sendMessage",
            "-t",
            "QueryTopic",
            "-p",
            f"q{i}",
            "-k",
            f"K{i}",
            "-c",
            "TagQ",
            "-b",
            "broker-b",
            "-i",
            "1",
        )
        for i in range(3)
    ]
    ids = ",".join(r["msgId"] for r in sent)
    found = admin_json(capsys, bg, "queryMsgById", "-i", ids)["messages"]
    assert [(m["body"], m["keys"], m["tags"], m["queueOffset"]) for m in found] == [
        (f"q{i}", f"K{i}", "TagQ", i) for i in range(3)
    ]
    assert {m["brokerName"] for m in found} == {"broker-b"}

    code, out, err = admin(capsys, bg, "queryMsgById", "-i", sent[1]["msgId"])
    assert code == 0, err
    fields = dict(line.split(":", 1) for line in out.splitlines())
    assert fields["OffsetID"].strip() == sent[1]["msgId"]
    assert fields["Message Body"].strip() == "q1" and fields["Keys"].strip() == "[K1]"

    by_offset = admin_json(
        capsys, bg, "queryMsgByOffset", "-t", "QueryTopic", "-b", "broker-b", "-i", "1", "-o", "2"
    )
    assert (by_offset["body"], by_offset["msgId"]) == ("q2", sent[2]["msgId"])

    line = one_error_line(
        *admin(capsys, bg, "queryMsgByOffset", "-t", "QueryTopic", "-b", "broker-b",
               "-i", "1", "-o", "9")
    )  # fmt: skip
    assert "no message at offset 9" in line and "[0, 3)" in line
    line = one_error_line(*admin(capsys, bg, "queryMsgById", "-i", "not-an-id"))
    assert "not-an-id" in line and "offset message id" in line
    # a well-formed id of this broker at an offset past its commit log
    past = sent[0]["msgId"][:16] + "00000000FFFFFFFF"
    line = one_error_line(*admin(capsys, bg, "queryMsgById", "-i", past))
    assert "no message at commit log offset" in line
    # one that points inside a record, not at its start
    inside = sent[0]["msgId"][:16] + f"{int(sent[0]['msgId'][16:], 16) + 7:016X}"
    line = one_error_line(*admin(capsys, bg, "queryMsgById", "-i", inside))
    assert "no message at commit log offset" in line


def test_print_messages_stored_between_two_times(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "PrintTopic", queues=2)
    before = int(time.time() * 1000)
    early = [(MessageQueue("PrintTopic", b, q), Message("PrintTopic", f"early-{b}-{q}".encode()))
             for b in ("broker-a", "broker-b") for q in (0, 1)]  # fmt: skip
    send(bg, early)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    send(bg, [(MessageQueue("PrintTopic", "broker-a", 1), Message("PrintTopic", b"late"))])

    everything = admin_json(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", str(before))
    assert sorted(m["body"] for m in everything["messages"]) == sorted(
        [m.body.decode() for _, m in early] + ["late"]
    )
    window = admin_json(
        capsys, bg, "printMsg", "-t", "PrintTopic", "-b", str(before), "-e", str(middle)
    )
    assert sorted(m["body"] for m in window["messages"]) == sorted(
        m.body.decode() for _, m in early
    )
    late = admin_json(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", str(middle))
    assert [m["body"] for m in late["messages"]] == ["late"]
    # RocketMQ's own time format, local time
    stamp = datetime.fromtimestamp(middle / 1000).strftime("%Y-%m-%d#%H:%M:%S:%f")[:-3]
    late = admin_json(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", stamp)
    assert [m["body"] for m in late["messages"]] == ["late"]
    assert admin_json(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", "now")["messages"] == []

    code, out, err = admin(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", str(middle))
    assert code == 0, err
    assert "BODY: late" in out and "1 message(s)" in out
    line = one_error_line(
        *admin(capsys, bg, "printMsg", "-t", "PrintTopic", "-b", str(middle), "-e", str(before))
    )
    assert "end time must be after the begin time" in line


def test_print_msg_refuses_a_time_it_cannot_read(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        mqadmin.main(["printMsg", "-t", "T", "-b", "yesterday"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "'yesterday'" in err and "yyyy-MM-dd#HH:mm:ss:SSS" in err


def test_broker_status_of_one_broker_and_of_a_cluster(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    a = bg.addr("broker-a")
    one = admin_json(capsys, bg, "brokerStatus", "-b", a)
    table = one[a]
    assert table["brokerName"] == "broker-a" and table["address"] == a
    assert int(table["bootTimestamp"]) <= int(time.time() * 1000)
    assert table["runtime"].startswith("[ 0 days, ")
    assert int(table["commitLogMaxOffset"]) >= int(table["commitLogMinOffset"]) >= 0
    assert int(table["topicNumber"]) > 0
    everyone = admin_json(capsys, bg, "brokerStatus", "-c", "DefaultCluster")
    assert sorted(everyone) == sorted([a, bg.addr("broker-b")])

    code, out, err = admin(capsys, bg, "brokerStatus", "-b", a)
    assert code == 0, err
    assert any(line.split(":")[0].strip() == "msgPutTotalTodayNow" for line in out.splitlines())
    line = one_error_line(*admin(capsys, bg, "brokerStatus", "-c", "NoCluster"))
    assert "NoCluster" in line


# -- updateSubGroup, deleteSubGroup, resetOffsetByTime ------------------------------------------


def test_sub_group_settings_are_created_changed_obeyed_and_deleted(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "SubGroupTopic", queues=1)
    send(bg, [(MessageQueue("SubGroupTopic", "broker-a", 0), Message("SubGroupTopic", b"s"))])
    group = "mqadmin_settings_group"
    done = admin_json(
        capsys, bg, "updateSubGroup", "-c", "DefaultCluster", "-g", group, "-q", "2", "-r", "3"
    )
    assert sorted(done) == sorted([bg.addr("broker-a"), bg.addr("broker-b")])
    for config in done.values():
        assert config["groupName"] == group
        assert (config["retryQueueNums"], config["retryMaxTimes"]) == (2, 3)
        assert config["consumeEnable"] is True

    # a second update changes only what it names
    a = bg.addr("broker-a")
    changed = admin_json(capsys, bg, "updateSubGroup", "-b", a, "-g", group, "-s", "false")[a]
    assert (changed["consumeEnable"], changed["retryQueueNums"]) == (False, 2)
    # and the broker obeys it: the group may not pull there any more
    line = one_error_line(
        *admin(capsys, bg, "consumeMessage", "-t", "SubGroupTopic", "-b", "broker-a", "-g", group)
    )
    assert "subscription group no permission" in line and group in line
    admin_json(capsys, bg, "updateSubGroup", "-b", a, "-g", group, "-s", "true")
    pulled = admin_json(
        capsys, bg, "consumeMessage", "-t", "SubGroupTopic", "-b", "broker-a", "-g", group
    )
    assert [m["body"] for m in pulled["messages"]] == ["s"]

    deleted = admin_json(capsys, bg, "deleteSubGroup", "-c", "DefaultCluster", "-g", group)
    assert sorted(deleted["deletedFrom"]) == sorted(done)
    again = admin_json(capsys, bg, "deleteSubGroup", "-b", a, "-g", "mqadmin_never_seen")
    assert again["deletedFrom"] == []

    line = one_error_line(*admin(capsys, bg, "updateSubGroup", "-b", a, "-g", group, "-q", "0"))
    assert "retry_queue_nums" in line
    assert "'maybe'" in usage_error(
        capsys, bg, "updateSubGroup", "-b", a, "-g", group, "-s", "maybe"
    )


def committed(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, group: str, topic: str
) -> list[int]:
    progress = admin_json(capsys, bg, "consumerProgress", "-g", group)["offsetTable"]
    return [q["consumerOffset"] for q in progress if q["topic"] == topic]


@pytest.mark.parametrize("handoff", ["classic", "fenced"])
def test_reset_offset_by_time_makes_a_running_group_read_again(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster, handoff: str
) -> None:
    topic, group = f"ResetTopic_{handoff}", f"mqadmin_reset_group_{handoff}"
    create_topic(capsys, bg, topic, queues=2)
    queues = [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in (0, 1)]
    consumed: list[bytes] = []

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def start() -> PushConsumer:
        consumer = PushConsumer(
            group,
            bg.namesrv_addr,
            client_config=ClientConfig(persist_consumer_offset_interval_ms=200),
            handoff=handoff,
        )
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        return consumer

    consumer = bg.run(start())
    try:
        wait_until_sync(
            lambda: len({mq for mq in consumer.assigned_queues if mq.topic == topic}) == 4,
            timeout=15,
            message="the consumer holds the topic's 4 queues",
        )
        first = [b"first-%d" % i for i in range(8)]
        send(bg, [(queues[i % 4], Message(topic, body)) for i, body in enumerate(first)])
        wait_until_sync(lambda: len(consumed) == 8, timeout=15, message="the first 8")
        time.sleep(0.05)
        middle = int(time.time() * 1000)
        time.sleep(0.05)
        second = [b"second-%d" % i for i in range(8)]
        send(bg, [(queues[i % 4], Message(topic, body)) for i, body in enumerate(second)])
        wait_until_sync(lambda: len(consumed) == 16, timeout=15, message="the second 8")
        wait_until_sync(
            lambda: committed(capsys, bg, group, topic) == [4, 4, 4, 4],
            timeout=10,
            message="offsets committed at the end",
        )
        consumed.clear()

        # not forced: offsets only move back, and "now" is ahead of every offset
        unforced = admin_json(
            capsys, bg, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now", "-f", "false"
        )
        assert [q["offset"] for q in unforced["offsetTable"]] == [4, 4, 4, 4]

        reset = admin_json(
            capsys, bg, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(middle)
        )
        assert [(q["brokerName"], q["queueId"], q["offset"]) for q in reset["offsetTable"]] == [
            ("broker-a", 0, 2), ("broker-a", 1, 2), ("broker-b", 0, 2), ("broker-b", 1, 2),
        ]  # fmt: skip
        assert reset["clientsTold"] == [consumer.client_id]
        wait_until_sync(
            lambda: sorted(consumed) == sorted(second), timeout=15, message="the second 8 again"
        )
        time.sleep(0.5)
        assert sorted(consumed) == sorted(second)  # from the reset point: nothing older

        # the committed offsets end where the group got to, not where a stale commit was
        wait_until_sync(
            lambda: committed(capsys, bg, group, topic) == [4, 4, 4, 4],
            timeout=10,
            message="offsets committed at the end again",
        )
    finally:
        bg.run(consumer.shutdown())

    # a group with no one online: the offsets move, nobody is told
    before = admin_json(capsys, bg, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    assert [q["offset"] for q in before["offsetTable"]] == [0, 0, 0, 0]
    assert before["clientsTold"] == []
    assert committed(capsys, bg, group, topic) == [0, 0, 0, 0]

    line = one_error_line(
        *admin(capsys, bg, "resetOffsetByTime", "-g", group, "-t", "NoSuchTopic", "-s", "now")
    )
    assert "NoSuchTopic" in line
    assert "'soon'" in usage_error(
        capsys, bg, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "soon"
    )


# -- queryMsgByKey, cleanExpiredCQ --------------------------------------------------------------


def test_query_msg_by_key_finds_one_message_among_many(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "KeyTopic", queues=2)
    queues = [MessageQueue("KeyTopic", b, q) for b in ("broker-a", "broker-b") for q in (0, 1)]
    send(
        bg,
        [
            (queues[i % 4], Message("KeyTopic", b"order %d" % i, keys=f"order-{i} shop-{i % 5}"))
            for i in range(400)
        ],
    )
    found = admin_json(capsys, bg, "queryMsgByKey", "-t", "KeyTopic", "-k", "order-271")
    [message] = found["messages"]
    assert (message["body"], message["keys"]) == ("order 271", "order-271 shop-1")
    assert (message["brokerName"], message["queueId"]) == ("broker-b", 1)  # 271 % 4 == 3

    shop = admin_json(capsys, bg, "queryMsgByKey", "-t", "KeyTopic", "-k", "shop-2", "-c", "64")
    assert len(shop["messages"]) == 64  # 80 match; the cap is the broker's, per broker
    assert all(m["keys"].endswith("shop-2") for m in shop["messages"])
    stamps = [m["storeTimestamp"] for m in shop["messages"]]
    assert stamps == sorted(stamps, reverse=True)

    assert admin_json(capsys, bg, "queryMsgByKey", "-t", "KeyTopic", "-k", "nope")["messages"] == []
    later = admin_json(
        capsys, bg, "queryMsgByKey", "-t", "KeyTopic", "-k", "order-271", "-b", "now"
    )
    assert later["messages"] == []
    code, out, err = admin(capsys, bg, "queryMsgByKey", "-t", "KeyTopic", "-k", "order-3")
    assert code == 0, err
    header, row = out.splitlines()
    assert cells(header) == ["#Message ID", "#Broker Name", "#QID", "#Offset"]
    assert cells(row)[1:] == ["broker-b", "1", "0"]
    line = one_error_line(*admin(capsys, bg, "queryMsgByKey", "-t", "NoSuchTopic", "-k", "x"))
    assert "NoSuchTopic" in line


def test_clean_expired_cq_removes_the_queues_of_a_topic_the_broker_lost(
    capsys: pytest.CaptureFixture[str], bg: BackgroundCluster
) -> None:
    create_topic(capsys, bg, "LostTopic", queues=1)
    send(bg, [(MessageQueue("LostTopic", "broker-a", 0), Message("LostTopic", b"x"))])
    broker = bg.cluster.broker("broker-a")

    async def forget() -> None:  # as if its config were removed by hand
        broker.topics.delete_topic_config("LostTopic")

    bg.run(forget())
    assert broker.store.queue_ids("LostTopic") == [0]
    done = admin_json(capsys, bg, "cleanExpiredCQ", "-b", bg.addr("broker-a"))
    assert done[bg.addr("broker-a")]["topicsRemoved"] == ["LostTopic"]
    assert broker.store.queue_ids("LostTopic") == []
    everywhere = admin_json(capsys, bg, "cleanExpiredCQ")
    assert sorted(everywhere) == sorted([bg.addr("broker-a"), bg.addr("broker-b")])
    assert all(r["topicsRemoved"] == [] for r in everywhere.values())
