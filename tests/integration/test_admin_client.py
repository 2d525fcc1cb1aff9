"""``aiorocketmq.admin.AdminClient``: what mqadmin does, as methods, against a real cluster."""

from __future__ import annotations

import pytest

from aiorocketmq.admin import AdminClient, AdminError
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.protocol.errors import InvalidArgument, SubscriptionGroupNotExist
from tests.helpers import wait_until
from tests.integration.support import Received, new_consumer

pytestmark = pytest.mark.cluster(brokers=2)


async def test_topics_messages_groups_and_settings(cluster: LocalCluster) -> None:
    async with AdminClient(cluster.namesrv_addr) as admin:
        info = await admin.cluster_info()
        assert sorted(info.cluster_addr_table["DefaultCluster"].broker_names) == [
            "broker-a", "broker-b"]
        config, addrs = await admin.update_topic("AdminTopic", 4, cluster="DefaultCluster")
        assert config.read_queue_nums == 4 and len(addrs) == 2

        async def routed() -> bool:
            return "AdminTopic" in await admin.topic_list()

        await wait_until(routed, message="the topic routed")
        result = await admin.send_message("AdminTopic", b"hello", tags="T", keys="k1",
                                          broker_name="broker-b", queue_id=2)
        assert (result.message_queue.broker_name, result.message_queue.queue_id) == ("broker-b", 2)
        offsets = await admin.topic_status("AdminTopic")
        assert len(offsets) == 8
        assert sum(o.max_offset for o in offsets) == 1
        messages, pulls = await admin.consume_messages("AdminTopic", broker_name="broker-b")
        assert [(m.body, m.keys, m.tags) for m in messages] == [(b"hello", "k1", "T")]
        assert {p.queue.queue_id for p in pulls} == {0, 1, 2, 3}

        received = Received()
        consumer = new_consumer(cluster, "admin_g", "AdminTopic", "c1", received)
        await consumer.start()
        try:
            await wait_until(lambda: len(consumer.assigned_queues) == 8, message="8 held")
            _, _, conn = await admin.consumer_connection("admin_g")
            assert [c.client_id for c in conn.connections] == [consumer.client_id]
            queues, _ = await admin.consume_stats("admin_g", "AdminTopic")
            assert {q.holder_client_id for q in queues} == {consumer.client_id}
            [status] = await admin.consumer_status("admin_g")
            assert status.info is not None and status.info.client_id == consumer.client_id
        finally:
            await consumer.shutdown()

        addr = cluster.broker_list[0].address
        assert (await admin.broker_config(addr))["brokerName"] == "broker-a"
        changed = await admin.update_broker_config(addr, {"maxPullMsgNums": "512"})
        assert changed == {"maxPullMsgNums": "512"}

        # bad input: named, nothing changed
        with pytest.raises(AdminError, match="cluster Nope not found"):
            await admin.update_topic("X", cluster="Nope")
        with pytest.raises(InvalidArgument, match="queue numbers"):
            await admin.update_topic("X", 0, broker_addr=addr)
        with pytest.raises(SubscriptionGroupNotExist):
            await admin.consume_stats("nobody")
        with pytest.raises(AdminError, match="go together"):
            await admin.send_message("AdminTopic", b"x", broker_name="broker-a")
