"""Prometheus metrics scraped over HTTP from the name server and the brokers, and parsed with
``prometheus_client.parser``: the counters move as messages flow."""

from __future__ import annotations

import asyncio
import urllib.request
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from tests.helpers import wait_until
from tests.integration.support import Received, new_consumer
from tests.integration.test_remoting_server import Client

TOPIC = "MetricsTopic"
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=4, metrics=True, remoting=True)

Samples = dict[str, list[tuple[dict[str, str], float]]]


async def scrape(address: str) -> Samples:
    def get() -> str:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
            body: bytes = response.read()
            return body.decode()

    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(await asyncio.to_thread(get)):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


async def brokers_total(cluster: LocalCluster, name: str, **labels: str) -> float:
    values = [total(await scrape(b.metrics.address), name, **labels)  # type: ignore[union-attr]
              for b in cluster.broker_list]
    return sum(values)


async def test_broker_and_name_server_metrics_move_with_the_messages(
    cluster: LocalCluster,
) -> None:
    before = await scrape(cluster.broker_list[0].metrics.address)  # type: ignore[union-attr]
    assert total(before, "rocketmq_messages_in_total", topic=TOPIC) == 0
    labels = next(lab for lab, _ in before["rocketmq_topic_number"])
    assert labels == {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}

    received = Received()
    consumer = new_consumer(cluster, "mg", TOPIC, "c1", received)
    await consumer.start()
    try:
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for i in range(20):
                await producer.send(Message(TOPIC, b"m%02d" % i))
        await wait_until(lambda: len(received.by_body) == 20, timeout=20, message="20 consumed")

        assert await brokers_total(cluster, "rocketmq_messages_in_total", topic=TOPIC) == 20
        # bytes of the send bodies: each message's 3 bytes plus its batch item's framing
        assert await brokers_total(cluster, "rocketmq_throughput_in_total", topic=TOPIC) >= 60
        assert await brokers_total(
            cluster, "rocketmq_messages_out_total", topic=TOPIC, consumer_group="mg") == 20
        assert await brokers_total(
            cluster, "rocketmq_consumer_connections", consumer_group="mg") == 2  # one per broker
        assert await brokers_total(cluster, "aiorocketmq_group_changes_total",
                                   consumer_group="mg") >= 2
        # One broker notifies the consumer (ClientConfig.notified_by_one_broker): the other
        # broker's channel of it is notified elsewhere, and counts no notification.
        assert await brokers_total(cluster, "aiorocketmq_notifications_sent_total") >= 1
        assert await brokers_total(cluster, "aiorocketmq_channels_open", language="PYTHON") >= 2

        async def lag_zero() -> bool:
            lag = await brokers_total(cluster, "rocketmq_consumer_lag_messages",
                                      topic=TOPIC, consumer_group="mg")
            return lag == 0

        await wait_until(lag_zero, timeout=10, message="lag 0 once committed")
        # sends are SEND_BATCH_MESSAGE (320), over remoting (data_transport "auto": the brokers
        # serve it); each observed in the histogram
        sends = await brokers_total(cluster, "rocketmq_rpc_latency_count",
                                    protocol_type="remoting", request_code="320",
                                    response_code="0")
        assert sends == 20
    finally:
        await consumer.shutdown()

    # a remoting request lands in the same histogram, by its own protocol
    client = await Client.connect(cluster.broker_list[0].remoting_address)
    try:
        assert (await client.request(30, {"topic": TOPIC, "queueId": 0})).code == 0
        assert (await client.request(30, {"topic": "NoSuchTopic", "queueId": 0})).code == 17
    finally:
        await client.close()
    after = await scrape(cluster.broker_list[0].metrics.address)  # type: ignore[union-attr]
    assert total(after, "rocketmq_rpc_latency_count", protocol_type="remoting",
                 request_code="30", response_code="0") == 1
    assert total(after, "rocketmq_rpc_latency_count", protocol_type="remoting",
                 request_code="30", response_code="17") == 1

    assert cluster.namesrv is not None and cluster.namesrv.metrics is not None
    ns = await scrape(cluster.namesrv.metrics.address)
    assert total(ns, "aiorocketmq_namesrv_live_brokers", broker_cluster="DefaultCluster") == 2
    assert total(ns, "rocketmq_topic_number") >= 1
    assert total(ns, "rocketmq_rpc_latency_count", protocol_type="grpc", request_code="105") >= 1
    assert total(ns, "rocketmq_rpc_latency_count", request_code="103") >= 2  # registrations


async def test_a_consumers_metrics_opt_in(cluster: LocalCluster) -> None:
    """The library opens no port: the application registers the collector where it likes."""
    from prometheus_client import CollectorRegistry, generate_latest

    from aiorocketmq.consumer.metrics import ConsumerCollector

    received = Received()
    consumer = new_consumer(cluster, "cm", TOPIC, "c1", received)
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(consumer))
    await consumer.start()
    try:
        await wait_until(lambda: len(consumer.assigned_queues) == 8, message="8 queues held")
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for i in range(10):
                await producer.send(Message(TOPIC, b"c%02d" % i))
        await wait_until(lambda: len(received.by_body) == 10, timeout=20, message="10 consumed")
        samples: Samples = defaultdict(list)
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                samples[sample.name].append((sample.labels, sample.value))
        mine = {"consumer_group": "cm", "client_id": consumer.client_id}
        assert total(samples, "aiorocketmq_consumer_queues_held", **mine) == 8
        assert total(samples, "aiorocketmq_consumer_queue_moves_total", direction="added") >= 8
        assert total(samples, "aiorocketmq_consumer_messages_consumed_total", **mine) == 10
        assert total(samples, "aiorocketmq_consumer_rebalances_total") >= 1
        # its own start settled once (a second client's join would add a notification's)
        name = "aiorocketmq_consumer_rebalance_convergence_seconds"
        assert total(samples, f"{name}_count", **mine) >= 1
        assert total(samples, f"{name}_bucket", le="+Inf", **mine) == total(
            samples, f"{name}_count", **mine
        )
        assert 0 < total(samples, f"{name}_sum", **mine) < 30
    finally:
        await consumer.shutdown()
