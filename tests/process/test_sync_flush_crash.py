"""SYNC_FLUSH under a crash: ``kill -9`` the real ``mqbroker`` while sends are in flight.

A SYNC_FLUSH broker acknowledges a send only once the store holds it (after the group-commit
fsync). So after SIGKILL and a restart on the same store, every acknowledged message must be
found at the queue offset its acknowledgement named, with its body, and the store must have
recovered: every queue dense from 0, the commit log cut at the last whole record, and new sends
appended right after the recovered tail.

SIGKILL does not lose the page cache, so this checks what the process controls: nothing is
acknowledged before it is written, and recovery keeps every whole record and drops a torn one.
Messages whose send failed at the kill may or may not be stored; they are not checked, but they
take offsets, which must still be dense.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from aiorocketmq.nameserver import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2
from tests.helpers import free_port, wait_until

pytestmark = pytest.mark.process

BIN = Path(sys.executable).parent
MQNAMESRV = BIN / "mqnamesrv"
MQBROKER = BIN / "mqbroker"

TOPIC = "SyncFlushCrash"
QUEUES = 4
SENDERS = 6
SETTINGS = 'flush_disk_type = "SYNC_FLUSH"\nregister_name_server_period_ms = 500\n'


@contextmanager
def process(argv: list[str], log_dir: Path, name: str) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` with output in ``log_dir``; on exit stop it (SIGTERM, then SIGKILL)."""
    with (
        (log_dir / f"{name}.out").open("ab") as out,
        (log_dir / f"{name}.err").open("ab") as err,
    ):
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def broker_argv(ns_addr: str, addr: str, tmp_path: Path) -> list[str]:
    return [
        str(MQBROKER),
        "-n",
        ns_addr,
        "--listen",
        addr,
        "--store-dir",
        str(tmp_path / "store"),
        "--broker-name",
        "broker-a",
        "-c",
        str(tmp_path / "settings.toml"),
    ]


async def broker_answers(stub: Any, proc: subprocess.Popen[bytes], log_dir: Path) -> bool:
    if proc.poll() is not None:
        raise AssertionError(
            f"mqbroker exited with {proc.returncode}:\n{(log_dir / 'mqbroker.err').read_text()}"
        )
    try:
        await stub.GetAllTopicConfig(broker_pb2.GetAllTopicConfigRequest(), timeout=0.5)
    except grpc.aio.AioRpcError:
        return False
    return True


@dataclass
class Stream:
    """The send stream's bookkeeping: what was acknowledged, and what is in flight."""

    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (queue, offset) -> body
    sent: set[bytes] = field(default_factory=set)  # every body a send carried, acked or not
    in_flight: int = 0
    failures: list[str] = field(default_factory=list)
    not_ok: int = 0  # acknowledged with FLUSH_DISK_TIMEOUT (stored, not known durable)


async def sender(stub: Any, n: int, stream: Stream, rng: random.Random) -> None:
    """Send batches of 1..5 messages until a send fails (the broker is gone)."""
    seq = 0
    while True:
        queue = rng.randrange(QUEUES)
        bodies = [f"s{n}-b{seq}-m{j}".encode() * 8 for j in range(rng.randint(1, 5))]
        seq += 1
        request = broker_pb2.SendMessageRequest(
            producer_group="crash-pg",
            topic=TOPIC,
            queue_id=queue,
            messages=[common_pb2.Message(topic=TOPIC, body=b) for b in bodies],
        )
        stream.sent.update(bodies)
        stream.in_flight += 1
        try:
            response = await stub.SendMessage(request, timeout=5)
        except grpc.aio.AioRpcError as e:
            stream.failures.append(f"{e.code().name}: {e.details()}")
            return
        finally:
            stream.in_flight -= 1
        assert response.message_queue.queue_id == queue
        assert len(response.results) == len(bodies)
        if response.send_status != broker_pb2.SEND_OK:
            stream.not_ok += 1
        for body, result in zip(bodies, response.results, strict=True):
            stream.acked[(queue, result.queue_offset)] = body


async def pull_all(stub: Any, queue: int, max_offset: int) -> list[common_pb2.MessageExt]:
    """Every message of ``queue`` from offset 0 up to ``max_offset``."""
    messages: list[common_pb2.MessageExt] = []
    offset = 0
    while offset < max_offset:
        got = await stub.PullMessage(
            broker_pb2.PullMessageRequest(
                consumer_group="crash-check",
                topic=TOPIC,
                queue_id=queue,
                queue_offset=offset,
                max_msg_nums=1024,
                has_subscription=True,
                sub_expression="*",
            ),
            timeout=5,
        )
        assert got.status == broker_pb2.FOUND, (queue, offset, got.status)
        assert got.next_begin_offset > offset
        messages.extend(got.messages)
        offset = got.next_begin_offset
    return messages


async def queue_max_offsets(stub: Any) -> dict[int, int]:
    stats = await stub.GetTopicStatsInfo(
        broker_pb2.GetTopicStatsInfoRequest(topic=TOPIC), timeout=3
    )
    assert all(o.min_offset == 0 for o in stats.offsets)
    return {o.message_queue.queue_id: o.max_offset for o in stats.offsets}


async def test_acknowledged_sends_survive_kill_9_under_sync_flush(tmp_path: Path) -> None:
    started = time.monotonic()
    (tmp_path / "settings.toml").write_text(SETTINGS)
    ns_addr = f"127.0.0.1:{free_port()}"
    addr = f"127.0.0.1:{free_port()}"
    rng = random.Random()
    conns = BrokerConnections()
    with ExitStack() as stack:
        stack.enter_context(process([str(MQNAMESRV), "--listen", ns_addr], tmp_path, "mqnamesrv"))
        broker = stack.enter_context(
            process(broker_argv(ns_addr, addr, tmp_path), tmp_path, "mqbroker")
        )
        try:
            stub = conns.stub(addr)
            await wait_until(
                lambda: broker_answers(stub, broker, tmp_path),
                timeout=20,
                interval=0.05,
                message="mqbroker to answer",
            )
            await stub.UpdateAndCreateTopic(
                broker_pb2.UpdateAndCreateTopicRequest(
                    topic_config=common_pb2.TopicConfig(
                        topic_name=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES, perm=6
                    )
                ),
                timeout=3,
            )
            async with NameServerClient(ns_addr, timeout=1) as ns:

                async def routed() -> bool:
                    try:
                        route = await ns.get_route_info_by_topic(TOPIC)
                    except Exception:
                        return False
                    return [q.write_queue_nums for q in route.queue_datas] == [QUEUES]

                await wait_until(routed, timeout=10, message="the name server to route the topic")

            # The stream: several senders, each with one batch in flight at a time.
            stream = Stream()
            senders = [
                asyncio.create_task(sender(stub, n, stream, random.Random(rng.random())))
                for n in range(SENDERS)
            ]
            try:
                await wait_until(
                    lambda: len(stream.acked) >= 300 or any(t.done() for t in senders),
                    timeout=15,
                    interval=0.01,
                    message="300 acknowledged messages",
                )
                assert not any(t.done() for t in senders), stream.failures
                await asyncio.sleep(rng.uniform(0, 0.05))  # land the kill anywhere in a batch
                await wait_until(lambda: stream.in_flight > 0, timeout=5, interval=0.001)
                broker.send_signal(signal.SIGKILL)
                in_flight_at_kill = stream.in_flight
                acked_before_kill = len(stream.acked)
                await asyncio.wait_for(asyncio.gather(*senders), timeout=10)
            finally:
                for t in senders:
                    t.cancel()
                await asyncio.gather(*senders, return_exceptions=True)
            assert broker.wait(timeout=5) == -signal.SIGKILL
            assert in_flight_at_kill > 0
            assert len(stream.failures) == SENDERS, stream.failures
            acked = dict(stream.acked)
            assert len(acked) >= acked_before_kill >= 300
        finally:
            await conns.close()

        # Restart on the same port and store.
        broker = stack.enter_context(
            process(broker_argv(ns_addr, addr, tmp_path), tmp_path, "mqbroker")
        )
        conns = BrokerConnections()
        try:
            stub = conns.stub(addr)
            await wait_until(
                lambda: broker_answers(stub, broker, tmp_path),
                timeout=20,
                interval=0.05,
                message="the restarted mqbroker to answer",
            )
            max_offsets = await queue_max_offsets(stub)
            assert sorted(max_offsets) == list(range(QUEUES))
            for queue in range(QUEUES):
                messages = await pull_all(stub, queue, max_offsets[queue])
                # Dense: offsets 0..max-1, each once, in order.
                assert [m.queue_offset for m in messages] == list(range(max_offsets[queue]))
                stored = {m.queue_offset: m.body for m in messages}
                strays = [m.queue_offset for m in messages if m.body not in stream.sent]
                assert not strays, f"queue {queue}: offsets {strays} hold bodies never sent"
                for (q, offset), body in acked.items():
                    if q == queue:
                        assert stored.get(offset) == body, (
                            f"acknowledged message lost or changed at queue {q} offset {offset}"
                        )
            # No corrupt tail: the next sends land right after the recovered end and read back.
            for queue in range(QUEUES):
                response = await stub.SendMessage(
                    broker_pb2.SendMessageRequest(
                        producer_group="crash-pg",
                        topic=TOPIC,
                        queue_id=queue,
                        messages=[
                            common_pb2.Message(topic=TOPIC, body=b"after-restart-%d" % queue)
                        ],
                    ),
                    timeout=5,
                )
                assert response.send_status == broker_pb2.SEND_OK
                assert [r.queue_offset for r in response.results] == [max_offsets[queue]]
                tail = await pull_all(stub, queue, max_offsets[queue] + 1)
                assert tail[-1].body == b"after-restart-%d" % queue
                assert tail[-1].queue_offset == max_offsets[queue]
        finally:
            await conns.close()
    assert broker.returncode == 0, (tmp_path / "mqbroker.err").read_text()
    assert stream.not_ok == 0
    assert time.monotonic() - started < 60
