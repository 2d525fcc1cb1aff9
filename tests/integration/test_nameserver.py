"""The name server over real gRPC on loopback: registration, merging, expiry, errors, client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from aiorocketmq.nameserver import NameServer, NameServerClient, NamesrvConfig
from aiorocketmq.protocol.errors import RESPONSE_CODE_KEY, ServiceNotAvailable, TopicNotFound
from aiorocketmq.protocol.rpc import insecure_channel
from aiorocketmq.protocol.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc
from tests.helpers import free_port, wait_until

EXPIRE_MS = 300


def tc(topic: str, queues: int = 4, perm: int = 6) -> common_pb2.TopicConfig:
    return common_pb2.TopicConfig(
        topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm
    )


def config() -> NamesrvConfig:
    return NamesrvConfig(
        listen="127.0.0.1:0",
        scan_not_active_broker_interval_ms=50,
        broker_channel_expired_time_ms=EXPIRE_MS,
        shutdown_grace_ms=100,
    )


@pytest.fixture
async def namesrv() -> AsyncIterator[NameServer]:
    async with NameServer(config()) as ns:
        yield ns


@pytest.fixture
async def client(namesrv: NameServer) -> AsyncIterator[NameServerClient]:
    async with NameServerClient(namesrv.address, timeout=2.0) as c:
        yield c


@pytest.fixture
async def stub(namesrv: NameServer) -> AsyncIterator[Any]:
    channel = insecure_channel(namesrv.address)
    try:
        yield nameserver_pb2_grpc.NameServerStub(channel)
    finally:
        await channel.close()


async def register(
    client: NameServerClient,
    broker_name: str,
    addr: str,
    topics: list[common_pb2.TopicConfig],
    **kwargs: Any,
) -> nameserver_pb2.RegisterBrokerResponse:
    return await client.register_broker(
        cluster_name="DefaultCluster",
        broker_name=broker_name,
        broker_id=kwargs.pop("broker_id", 0),
        broker_addr=addr,
        topic_configs=topics,
        **kwargs,
    )


async def route_brokers(client: NameServerClient, topic: str) -> list[str]:
    """Broker names in the topic's route; [] when the topic has none."""
    try:
        route = await client.get_route_info_by_topic(topic)
    except TopicNotFound:
        return []
    return [qd.broker_name for qd in route.queue_datas]


async def test_server_binds_an_ephemeral_port(namesrv: NameServer) -> None:
    assert namesrv.port > 0
    assert namesrv.address == f"127.0.0.1:{namesrv.port}"


async def test_two_brokers_of_one_topic_merge_in_the_route(client: NameServerClient) -> None:
    await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest", 4), tc("OnlyA")])
    await register(client, "broker-b", "127.0.0.1:10921", [tc("TopicTest", 2)])

    route = await client.get_route_info_by_topic("TopicTest")
    assert [(qd.broker_name, qd.read_queue_nums) for qd in route.queue_datas] == [
        ("broker-a", 4),
        ("broker-b", 2),
    ]
    assert [(bd.broker_name, dict(bd.broker_addrs)) for bd in route.broker_datas] == [
        ("broker-a", {0: "127.0.0.1:10911"}),
        ("broker-b", {0: "127.0.0.1:10921"}),
    ]
    assert await client.get_all_topic_list() == ["OnlyA", "TopicTest"]
    info = await client.get_broker_cluster_info()
    assert list(info.cluster_addr_table["DefaultCluster"].broker_names) == ["broker-a", "broker-b"]
    assert sorted(b.broker_addr for b in info.live_brokers) == [
        "127.0.0.1:10911",
        "127.0.0.1:10921",
    ]


async def test_slave_learns_its_master(client: NameServerClient) -> None:
    await register(client, "broker-a", "127.0.0.1:10911", [tc("T")], ha_server_addr="h:1")
    response = await register(client, "broker-a", "127.0.0.1:10912", [], broker_id=1)
    assert (response.master_addr, response.ha_server_addr) == ("127.0.0.1:10911", "h:1")


async def test_silent_broker_expires_and_leaves_the_route(
    namesrv: NameServer, client: NameServerClient
) -> None:
    # broker-a uses the name server's (shrunk) default timeout; broker-b sends its own, long one.
    await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest"), tc("OnlyA")])
    await register(
        client, "broker-b", "127.0.0.1:10921", [tc("TopicTest")], heartbeat_timeout_millis=60_000
    )
    assert await route_brokers(client, "TopicTest") == ["broker-a", "broker-b"]

    async def only_b_left() -> bool:
        return await route_brokers(client, "TopicTest") == ["broker-b"]

    await wait_until(only_b_left, timeout=5.0, message="broker-a to expire")
    with pytest.raises(TopicNotFound, match="OnlyA"):
        await client.get_route_info_by_topic("OnlyA")
    info = await client.get_broker_cluster_info()
    assert list(info.broker_addr_table) == ["broker-b"]
    assert "broker-a" not in namesrv.route_info_manager.broker_addr_table


async def test_registering_again_keeps_a_broker_alive(client: NameServerClient) -> None:
    await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest")])
    await register(client, "broker-b", "127.0.0.1:10921", [tc("TopicTest")])

    async def b_expired_while_a_kept_registering() -> bool:
        await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest")])
        return await route_brokers(client, "TopicTest") == ["broker-a"]

    await wait_until(b_expired_while_a_kept_registering, timeout=5.0, interval=EXPIRE_MS / 6000)


async def test_unregister_removes_the_broker_at_once(client: NameServerClient) -> None:
    await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest")])
    await register(client, "broker-b", "127.0.0.1:10921", [tc("TopicTest")])
    await client.unregister_broker(
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=0,
        broker_addr="127.0.0.1:10911",
    )
    assert await route_brokers(client, "TopicTest") == ["broker-b"]
    await client.unregister_broker(
        cluster_name="DefaultCluster",
        broker_name="broker-b",
        broker_id=0,
        broker_addr="127.0.0.1:10921",
    )
    assert await route_brokers(client, "TopicTest") == []
    assert await client.get_all_topic_list() == []


async def test_unknown_topic_is_not_found_naming_it(stub: Any, client: NameServerClient) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.GetRouteInfoByTopic(
            nameserver_pb2.GetRouteInfoByTopicRequest(topic="NoSuchTopic"), timeout=2.0
        )
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND
    assert "NoSuchTopic" in (raised.value.details() or "")
    assert (RESPONSE_CODE_KEY, "17") in tuple(raised.value.trailing_metadata() or ())
    with pytest.raises(TopicNotFound, match="NoSuchTopic"):
        await client.get_route_info_by_topic("NoSuchTopic")


def _request(**overrides: Any) -> nameserver_pb2.RegisterBrokerRequest:
    fields: dict[str, Any] = {
        "cluster_name": "DefaultCluster",
        "broker_name": "broker-a",
        "broker_id": 0,
        "broker_addr": "127.0.0.1:10911",
        "topic_configs": [tc("TopicTest")],
    }
    return nameserver_pb2.RegisterBrokerRequest(**(fields | overrides))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"cluster_name": ""}, "cluster_name"),
        ({"broker_name": ""}, "broker_name"),
        ({"broker_addr": ""}, "broker_addr"),
        ({"broker_id": -1}, "broker_id"),
        ({"topic_configs": [tc("TopicTest"), tc("")]}, "topic_configs[1].topic_name"),
        ({"topic_configs": [tc("TopicTest", perm=9)]}, "topic_configs[0].perm"),
        (
            {"topic_configs": [tc("A"), tc("B"), tc("C", queues=-1)]},
            "topic_configs[2].read_queue_nums",
        ),
    ],
)
async def test_malformed_registration_is_invalid_argument_and_server_keeps_serving(
    stub: Any, client: NameServerClient, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterBroker(_request(**overrides), timeout=2.0)
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in (raised.value.details() or "")
    assert (RESPONSE_CODE_KEY, "29") in tuple(raised.value.trailing_metadata() or ())
    # Nothing was recorded, and a following valid call works.
    assert await client.get_all_topic_list() == []
    await stub.RegisterBroker(_request(), timeout=2.0)
    assert await route_brokers(client, "TopicTest") == ["broker-a"]


async def test_client_fails_over_to_the_next_name_server(namesrv: NameServer) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with NameServerClient(f"{dead};{namesrv.address}", timeout=1.0) as client:
        assert client.addrs == [dead, namesrv.address]
        await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest")])
        assert await route_brokers(client, "TopicTest") == ["broker-a"]
        assert client.addrs[client._last_good] == namesrv.address
        # An answer (even an error) is final: no failover for TopicNotFound.
        with pytest.raises(TopicNotFound):
            await client.get_route_info_by_topic("NoSuchTopic")
    async with NameServerClient([dead], timeout=1.0) as client:
        with pytest.raises(ServiceNotAvailable, match="no name server answered"):
            await client.get_all_topic_list()


async def test_broker_registers_with_every_name_server(namesrv: NameServer) -> None:
    async with NameServer(config()) as other:
        async with NameServerClient([namesrv.address, other.address], timeout=2.0) as client:
            await register(client, "broker-a", "127.0.0.1:10911", [tc("TopicTest")])
        for ns in (namesrv, other):
            assert list(ns.route_info_manager.topic_queue_table) == ["TopicTest"]


async def test_shutdown_stops_the_scan_task_and_the_server() -> None:
    ns = NameServer(config())
    await ns.start()
    task = ns._scan_task
    assert task is not None and not task.done()
    with pytest.raises(RuntimeError, match="already started"):
        await ns.start()
    await ns.shutdown()
    assert task.done()
    async with NameServerClient(ns.address, timeout=0.5) as client:
        with pytest.raises(ServiceNotAvailable):
            await client.get_all_topic_list()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("nameserver")] == []
