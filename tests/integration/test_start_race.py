"""A consumer starting, and a message sent at once: the message is consumed (no start race).

The defect this guards against: a brand-new group (CONSUME_FROM_LAST_OFFSET) on a fresh topic
asked the broker for its offset of a still-empty queue, got QUERY_NOT_FOUND, then asked
GET_MAX_OFFSET in a second call, and a message stored between the two calls was skipped. The
broker now answers 0 for a young queue in the same step (broker/offset/consume_from_where.py).
"""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq import (
    ConsumeConcurrentlyStatus,
    LocalCluster,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.consumer.types import ConsumeConcurrentlyContext
from tests.helpers import fast_client_config, wait_until

pytestmark = pytest.mark.cluster(brokers=3)

REPETITIONS = 50
AT_ONCE = 5  # repetitions running side by side (each with its own topic and group)


async def start_then_send(
    cluster: LocalCluster, producer: Producer, handoff: str, n: int
) -> tuple[bool, bool]:
    """One repetition: (consumed, raced) where raced = the send beat the first rebalance."""
    topic, group = f"Race{handoff}{n}", f"race_{handoff}_{n}"
    await cluster.create_topic(topic, 8)
    got: list[bytes] = []

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        instance_name=f"r{n}",
        client_config=fast_client_config(),
        handoff=handoff,
        rebalance_dispatch_delay_ms=20,
    )  # CONSUME_FROM_LAST_OFFSET, the default
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    # Sent while start() runs: start() returns after its join, and its first rebalance may be
    # done by then (it is woken by the group's notification during the join), which would
    # leave the window this guards unexercised.
    starting = asyncio.ensure_future(consumer.start())
    try:
        await asyncio.sleep(0.01 * (n % 5))
        sent = await producer.send(Message(topic, b"first"))
        impl = consumer.rebalance_impl
        raced = impl is None or sent.message_queue not in impl.process_queue_table
        await starting
        try:
            await wait_until(lambda: b"first" in got, timeout=15, message=f"{topic}: first message")
        except AssertionError:
            return False, raced
        return True, raced
    finally:
        await asyncio.gather(starting, return_exceptions=True)
        await consumer.shutdown()


@pytest.mark.parametrize("handoff", ["classic", "fenced"])
async def test_the_first_message_after_start_is_consumed(
    cluster: LocalCluster, handoff: str
) -> None:
    async with Producer("race_producer", cluster.namesrv_addr) as producer:
        outcomes: list[tuple[bool, bool]] = []
        for first in range(0, REPETITIONS, AT_ONCE):
            outcomes += await asyncio.gather(
                *(
                    start_then_send(cluster, producer, handoff, n)
                    for n in range(first, first + AT_ONCE)
                )
            )
    lost = [n for n, (consumed, _) in enumerate(outcomes) if not consumed]
    raced = sum(r for _, r in outcomes)
    assert lost == [], f"first message lost in repetitions {lost} ({raced} raced the rebalance)"
    assert raced >= 1, "no send raced the first rebalance: the test did not exercise the window"
