"""A client process holding a channel dies or freezes: the broker notices, the group hears.

The member under test is a child Python process: it opens its OpenChannel stream to the broker,
heartbeats into the group, prints ``registered <channel id>`` and then only keeps heartbeating.
The parent is a plain protocol client of the same group, reading its own stream.

- SIGKILL: the kernel closes the dead process's TCP connection, the broker sees the stream end
  at once and runs the channel-close path; the parent is notified within seconds.
- SIGSTOP: the connection stays up but heartbeats stop; the expiry scan (shrunk settings)
  drops the channel, and with ``notify_consumer_ids_changed_on_channel_expiry`` the parent is
  notified.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.local_cluster import LocalCluster
from tests.integration.protocol_client import ProtocolClient, mq

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
TOPIC = "ProcessTopic"
G = "g"

CHILD = """
import asyncio
import sys

import grpc

from aiorocketmq.protocol.v1 import broker_pb2, broker_pb2_grpc
from tests.integration.protocol_client import heartbeat_request


async def main(addr: str, client_id: str, group: str, topic: str, interval: float) -> None:
    async with grpc.aio.insecure_channel(addr) as connection:
        stub = broker_pb2_grpc.BrokerStub(connection)
        stream = stub.OpenChannel(broker_pb2.OpenChannelRequest(client_id=client_id))
        first = await asyncio.wait_for(stream.read(), 5)
        request = heartbeat_request(first.opened.channel_id, client_id, {group: [topic]})
        await stub.Heartbeat(request, timeout=3)
        print("registered", first.opened.channel_id, flush=True)
        while True:
            await asyncio.sleep(interval)
            await stub.Heartbeat(request, timeout=3)


addr, client_id, group, topic, interval = sys.argv[1:]
asyncio.run(main(addr, client_id, group, topic, float(interval)))
"""


@asynccontextmanager
async def one_broker(tmp_path: Path, **overrides: Any) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(tmp_path / "store", brokers=1, broker_overrides=overrides) as c:
        await c.create_topic(TOPIC, 4)
        yield c


@asynccontextmanager
async def child_member(
    addr: str, client_id: str, log_dir: Path, heartbeat_interval: float = 1.0
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A child process in group G on the broker at ``addr``; killed (SIGKILL) at the end."""
    err_log = log_dir / f"{client_id.replace('@', '_')}.err"
    with err_log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            addr,
            client_id,
            G,
            TOPIC,
            str(heartbeat_interval),
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=REPO,
        )
        try:
            assert proc.stdout is not None
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), 20)
            except TimeoutError:
                raise AssertionError("the child did not register within 20 s") from None
            if not line.startswith(b"registered "):
                stderr = await asyncio.to_thread(err_log.read_text)
                raise AssertionError(f"the child said {line!r}; its stderr: {stderr}")
            yield proc
        finally:
            if proc.returncode is None:
                proc.kill()  # also ends a stopped process
            await asyncio.wait_for(proc.wait(), 10)


async def test_sigkill_of_a_member_process_notifies_the_group(tmp_path: Path) -> None:
    async with (
        one_broker(tmp_path) as cluster,
        ProtocolClient(cluster.broker("broker-a").address, "127.0.0.1@parent") as parent,
    ):
        await parent.open()
        await parent.heartbeat(G, [TOPIC])
        await parent.expect_notify(G)

        async with child_member(parent.addr, "127.0.0.1@child", tmp_path) as child:
            await parent.expect_notify(G)  # the child joined
            assert await parent.consumer_ids(G) == ["127.0.0.1@child", "127.0.0.1@parent"]

            killed_at = time.monotonic()
            child.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(child.wait(), 10) == -signal.SIGKILL

            await parent.expect_notify(G, timeout=5.0)
            assert time.monotonic() - killed_at < 5.0
            assert await parent.consumer_ids(G) == ["127.0.0.1@parent"]
            # Exactly one notification for the death.
            await parent.push_queue_released(G, mq(TOPIC, 3))
            await parent.expect_queue_released(G)


async def test_frozen_member_process_expires_and_the_group_is_notified(tmp_path: Path) -> None:
    overrides = {
        "channel_expired_timeout_ms": 800,
        "client_channel_scan_interval_ms": 100,
        "notify_consumer_ids_changed_on_channel_expiry": True,
    }
    async with (
        one_broker(tmp_path, **overrides) as cluster,
        ProtocolClient(cluster.broker("broker-a").address, "127.0.0.1@parent") as parent,
    ):
        await parent.open()

        async def heartbeats() -> None:
            while True:
                await parent.heartbeat(G, [TOPIC])
                await asyncio.sleep(0.1)

        beating = asyncio.create_task(heartbeats(), name="parent-heartbeats")
        try:
            await parent.expect_notify(G)
            async with child_member(
                parent.addr, "127.0.0.1@child", tmp_path, heartbeat_interval=0.1
            ) as child:
                await parent.expect_notify(G)
                assert await parent.consumer_ids(G) == ["127.0.0.1@child", "127.0.0.1@parent"]

                stopped_at = time.monotonic()
                child.send_signal(signal.SIGSTOP)  # alive, connected, silent
                await parent.expect_notify(G, timeout=5.0)
                # Not before the expiry: its last heartbeat was at most 0.1 s before the stop.
                assert time.monotonic() - stopped_at >= 0.8 - 0.2
                assert await parent.consumer_ids(G) == ["127.0.0.1@parent"]
                assert child.returncode is None
            assert not beating.done(), "the parent's heartbeats failed"
        finally:
            beating.cancel()
            await asyncio.wait([beating])
