"""RouteInfoManager: registration, merging, expiry, unregistration, validation (no network)."""

from __future__ import annotations

from typing import Any

import pytest

from aiorocketmq.nameserver.route_info_manager import RegisterBrokerResult, RouteInfoManager
from aiorocketmq.protocol.errors import InvalidArgument, TopicNotFound
from aiorocketmq.protocol.perm import PermName
from aiorocketmq.protocol.route import route_to_publish_queues, route_to_subscribe_queues
from aiorocketmq.protocol.v1 import common_pb2

RW = int(PermName.READ | PermName.WRITE)


def tc(topic: str, read: int = 4, write: int = 4, perm: int = RW) -> common_pb2.TopicConfig:
    return common_pb2.TopicConfig(
        topic_name=topic, read_queue_nums=read, write_queue_nums=write, perm=perm
    )


def register(
    rim: RouteInfoManager,
    broker_name: str = "broker-a",
    broker_id: int = 0,
    addr: str = "10.0.0.1:10911",
    topics: list[common_pb2.TopicConfig] | None = None,
    *,
    now: int = 1_000,
    cluster: str = "DefaultCluster",
    **kwargs: Any,
) -> RegisterBrokerResult:
    return rim.register_broker(
        cluster_name=cluster,
        broker_addr=addr,
        broker_name=broker_name,
        broker_id=broker_id,
        now=now,
        topic_configs=[tc("TopicA")] if topics is None else topics,
        **kwargs,
    )


def test_register_gives_route_and_cluster_info() -> None:
    rim = RouteInfoManager()
    result = register(rim, ha_server_addr="10.0.0.1:10912")
    assert result.first_registration
    assert result.master_addr == ""

    route = rim.pick_topic_route_data("TopicA")
    assert [
        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas
    ] == [("broker-a", 4, 4, RW)]
    assert [(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    ]

    info = rim.get_all_cluster_info()
    assert list(info.cluster_addr_table["DefaultCluster"].broker_names) == ["broker-a"]
    assert dict(info.broker_addr_table["broker-a"].broker_addrs) == {0: "10.0.0.1:10911"}
    [live] = info.live_brokers
    assert (live.broker_addr, live.last_update_timestamp) == ("10.0.0.1:10911", 1_000)
    assert list(rim.get_all_topic_list().topic_list) == ["TopicA"]
    assert not register(rim, now=2_000).first_registration


def test_two_brokers_of_one_topic_merge() -> None:
    rim = RouteInfoManager()
    register(rim, "broker-b", addr="10.0.0.2:10911", topics=[tc("TopicA", 2, 2)])
    register(rim, "broker-a", addr="10.0.0.1:10911", topics=[tc("TopicA", 4, 4), tc("TopicB")])

    route = rim.pick_topic_route_data("TopicA")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    assert len(route_to_subscribe_queues("TopicA", route)) == 6
    assert [q.broker_name for q in route_to_publish_queues("TopicA", route)] == ["broker-a"] * 4 + [
        "broker-b"
    ] * 2
    assert [q.broker_name for q in rim.pick_topic_route_data("TopicB").queue_datas] == ["broker-a"]
    assert list(rim.get_all_topic_list().topic_list) == ["TopicA", "TopicB"]
    assert sorted(rim.cluster_addr_table["DefaultCluster"]) == ["broker-a", "broker-b"]


def test_unknown_topic_is_not_found_naming_it() -> None:
    rim = RouteInfoManager()
    register(rim)
    with pytest.raises(TopicNotFound, match="NoSuchTopic"):
        rim.pick_topic_route_data("NoSuchTopic")


def test_scan_expires_silent_brokers_with_their_timeout() -> None:
    rim = RouteInfoManager(default_heartbeat_timeout_ms=120_000)
    register(rim, "broker-a", addr="10.0.0.1:10911", now=0)
    register(rim, "broker-b", addr="10.0.0.2:10911", now=0, heartbeat_timeout_millis=10_000)

    assert rim.scan_not_active_broker(10_000) == []  # not yet *more* than the timeout
    [gone] = rim.scan_not_active_broker(10_001)
    assert (gone.broker_name, gone.broker_addr, gone.heartbeat_timeout_millis) == (
        "broker-b",
        "10.0.0.2:10911",
        10_000,
    )
    assert [q.broker_name for q in rim.pick_topic_route_data("TopicA").queue_datas] == ["broker-a"]

    register(rim, "broker-a", addr="10.0.0.1:10911", now=100_000)  # refreshes liveness
    assert rim.scan_not_active_broker(200_000) == []
    [gone] = rim.scan_not_active_broker(220_001)
    assert gone.broker_name == "broker-a"
    with pytest.raises(TopicNotFound):
        rim.pick_topic_route_data("TopicA")
    assert rim.topic_queue_table == {}
    assert rim.broker_addr_table == {}
    assert rim.cluster_addr_table == {}
    assert rim.broker_live_table == {}


def test_unregister_removes_broker_and_orphan_topics() -> None:
    rim = RouteInfoManager()
    register(rim, "broker-a", addr="10.0.0.1:10911", topics=[tc("TopicA"), tc("OnlyA")])
    register(rim, "broker-b", addr="10.0.0.2:10911", topics=[tc("TopicA")], cluster="Other")

    assert rim.unregister_broker(
        cluster_name="DefaultCluster",
        broker_addr="10.0.0.1:10911",
        broker_name="broker-a",
        broker_id=0,
    )
    assert [q.broker_name for q in rim.pick_topic_route_data("TopicA").queue_datas] == ["broker-b"]
    with pytest.raises(TopicNotFound, match="OnlyA"):
        rim.pick_topic_route_data("OnlyA")
    assert "OnlyA" not in rim.topic_queue_table
    assert "DefaultCluster" not in rim.cluster_addr_table
    assert list(rim.get_all_topic_list().topic_list) == ["TopicA"]
    # Unknown brokers: nothing to do.
    assert not rim.unregister_broker(
        cluster_name="DefaultCluster",
        broker_addr="10.0.0.1:10911",
        broker_name="broker-a",
        broker_id=0,
    )


def test_master_and_slave() -> None:
    rim = RouteInfoManager()
    register(rim, broker_id=0, addr="m:1", ha_server_addr="m:2", topics=[tc("TopicA", 4, 4)])
    # A slave's topic configs do not overwrite the master's queue data.
    slave = register(rim, broker_id=1, addr="s:1", topics=[tc("TopicA", 1, 1), tc("SlaveOnly")])
    assert (slave.master_addr, slave.ha_server_addr) == ("m:1", "m:2")
    route = rim.pick_topic_route_data("TopicA")
    assert route.queue_datas[0].read_queue_nums == 4
    assert dict(route.broker_datas[0].broker_addrs) == {0: "m:1", 1: "s:1"}
    with pytest.raises(TopicNotFound):
        rim.pick_topic_route_data("SlaveOnly")

    # The master leaves: the broker name stays with its slave; consumers can still read it,
    # producers cannot write (no master).
    rim.unregister_broker(
        cluster_name="DefaultCluster", broker_addr="m:1", broker_name="broker-a", broker_id=0
    )
    route = rim.pick_topic_route_data("TopicA")
    assert dict(route.broker_datas[0].broker_addrs) == {1: "s:1"}
    assert len(route_to_subscribe_queues("TopicA", route)) == 4
    assert route_to_publish_queues("TopicA", route) == []


def test_prime_slave_writes_queue_data_when_there_is_no_master() -> None:
    rim = RouteInfoManager()
    register(rim, broker_id=2, addr="s2:1", topics=[tc("TopicA", 2, 2)])
    assert rim.pick_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 2
    # A higher id is not the prime slave: ignored.
    register(rim, broker_id=3, addr="s3:1", topics=[tc("TopicA", 3, 3), tc("Other")])
    assert rim.pick_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 2
    assert "Other" not in rim.topic_queue_table
    # The master arrives; its first registration wins.
    register(rim, broker_id=0, addr="m:1", topics=[tc("TopicA", 8, 8)])
    assert rim.pick_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 8
    # The prime slave is no longer prime: its (changed) configs are ignored.
    register(rim, broker_id=2, addr="s2:1", topics=[tc("TopicA", 1, 1)], data_version=9)
    assert rim.pick_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 8


def test_same_address_under_another_id_is_replaced() -> None:
    rim = RouteInfoManager()
    register(rim, broker_id=0, addr="m:1")
    register(rim, broker_id=1, addr="s:1")
    # The master goes away, then the slave is promoted and registers as id 0 at its address.
    rim.unregister_broker(
        cluster_name="DefaultCluster", broker_addr="m:1", broker_name="broker-a", broker_id=0
    )
    result = register(rim, broker_id=0, addr="s:1")
    assert result.master_addr == ""
    assert dict(rim.broker_addr_table["broker-a"].broker_addrs) == {0: "s:1"}
    assert len(rim.broker_live_table) == 1


def test_id_moving_to_a_new_address_drops_the_old_liveness() -> None:
    rim = RouteInfoManager()
    register(rim, broker_id=0, addr="old:1")
    register(rim, broker_id=0, addr="new:1")
    assert dict(rim.broker_addr_table["broker-a"].broker_addrs) == {0: "new:1"}
    assert [i.broker_addr for i in rim.broker_live_table.values()] == ["new:1"]


def test_data_version_decides_whether_queue_data_is_updated() -> None:
    rim = RouteInfoManager()
    register(rim, topics=[tc("TopicA", 4, 4)], data_version=1)
    # Same data version: the (different) configs are ignored, as RocketMQ does.
    register(rim, topics=[tc("TopicA", 8, 8)], data_version=1)
    assert rim.pick_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 4
    # A topic new to the table is added even with the same data version.
    register(rim, topics=[tc("TopicA", 8, 8), tc("TopicB")], data_version=1)
    assert "TopicB" in rim.topic_queue_table
    # A new data version: updated.
    register(rim, topics=[tc("TopicA", 8, 2, perm=int(PermName.READ))], data_version=2)
    qd = rim.pick_topic_route_data("TopicA").queue_datas[0]
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (8, 2, int(PermName.READ))
    assert rim.broker_live_table[next(iter(rim.broker_live_table))].data_version == 2


def test_registration_without_topics_keeps_the_broker_out_of_routes() -> None:
    rim = RouteInfoManager()
    register(rim, topics=[])
    assert "broker-a" in rim.broker_addr_table
    assert list(rim.get_all_topic_list().topic_list) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cluster": ""}, "cluster_name must not be blank"),
        ({"broker_name": "  "}, "broker_name must not be blank"),
        ({"addr": ""}, "broker_addr must not be blank"),
        ({"broker_id": -1}, "broker_id must be >= 0, got -1"),
        ({"heartbeat_timeout_millis": -5}, "heartbeat_timeout_millis must be >= 0, got -5"),
        ({"topics": [tc("ok"), tc("")]}, r"topic_configs\[1\].topic_name is invalid: .*blank"),
        ({"topics": [tc("bad topic")]}, r"topic_configs\[0\].topic_name is invalid: .*illegal"),
        ({"topics": [tc("x" * 128)]}, r"topic_configs\[0\].topic_name is invalid: .*max length"),
        ({"topics": [tc("T", perm=8)]}, r"topic_configs\[0\].perm must be in \[0, 8\), got 8"),
        ({"topics": [tc("T", perm=-1)]}, r"topic_configs\[0\].perm must be in \[0, 8\), got -1"),
        (
            {"topics": [tc("A"), tc("B"), tc("C", read=-1)]},
            r"topic_configs\[2\].read_queue_nums must be >= 0, got -1",
        ),
        (
            {"topics": [tc("A", write=-3)]},
            r"topic_configs\[0\].write_queue_nums must be >= 0, got -3",
        ),
        (
            {"topics": [tc("A"), tc("A")]},
            r"topic_configs\[1\].topic_name 'A' repeats topic_configs\[0\]",
        ),
    ],
)
def test_invalid_registration_names_the_field_and_changes_nothing(
    fields: dict[str, Any], message: str
) -> None:
    rim = RouteInfoManager()
    with pytest.raises(InvalidArgument, match=message):
        register(rim, **fields)
    assert rim.broker_addr_table == {}
    assert rim.cluster_addr_table == {}
    assert rim.topic_queue_table == {}
    assert rim.broker_live_table == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cluster_name": ""}, "cluster_name must not be blank"),
        ({"broker_name": ""}, "broker_name must not be blank"),
        ({"broker_addr": ""}, "broker_addr must not be blank"),
        ({"broker_id": -2}, "broker_id must be >= 0, got -2"),
    ],
)
def test_invalid_unregistration_names_the_field(fields: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "cluster_name": "DefaultCluster",
        "broker_addr": "a:1",
        "broker_name": "broker-a",
        "broker_id": 0,
    }
    with pytest.raises(InvalidArgument, match=message):
        RouteInfoManager().unregister_broker(**(args | fields))
