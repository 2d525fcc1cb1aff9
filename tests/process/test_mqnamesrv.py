"""The real ``mqnamesrv`` and ``mqadmin`` console scripts, as processes."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aiorocketmq.nameserver import NameServerClient
from aiorocketmq.protocol.errors import ServiceNotAvailable
from aiorocketmq.protocol.v1 import common_pb2
from tests.helpers import BIN, free_port, mqadmin, wait_until

pytestmark = pytest.mark.process

MQNAMESRV = BIN / "mqnamesrv"


@contextmanager
def mqnamesrv(address: str, log_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``mqnamesrv --listen address``; on exit SIGTERM it and check it exits 0."""
    with (
        (log_dir / "mqnamesrv.out").open("wb") as out,
        (log_dir / "mqnamesrv.err").open("wb") as err,
    ):
        proc = subprocess.Popen(
            [str(MQNAMESRV), "--listen", address, "--scan-interval-ms", "100"],
            stdout=out,
            stderr=err,
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError("mqnamesrv did not stop within 10 s of SIGTERM") from None
            assert code == 0, (log_dir / "mqnamesrv.err").read_text()


async def answers(address: str, proc: subprocess.Popen[bytes]) -> bool:
    """True once the name server at ``address`` answers an RPC; fails if the process died."""
    if proc.poll() is not None:
        raise AssertionError(f"mqnamesrv exited with {proc.returncode} before answering")
    async with NameServerClient(address, timeout=0.5) as client:
        try:
            await client.get_broker_cluster_info()
        except ServiceNotAvailable:
            return False
        return True


async def test_mqnamesrv_serves_mqadmin_and_stops_on_sigterm(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    with mqnamesrv(address, tmp_path) as proc:
        await wait_until(
            lambda: answers(address, proc), timeout=20, interval=0.1, message="mqnamesrv to answer"
        )
        assert proc.poll() is None
        assert f"address={address}" in (tmp_path / "mqnamesrv.out").read_text()

        async with NameServerClient(address) as client:
            await client.register_broker(
                cluster_name="DefaultCluster",
                broker_name="broker-a",
                broker_id=0,
                broker_addr="127.0.0.1:10911",
                topic_configs=[
                    common_pb2.TopicConfig(
                        topic_name="TopicTest", read_queue_nums=4, write_queue_nums=4, perm=6
                    )
                ],
            )

        code, out, err = await mqadmin("clusterList", "-n", address, "--json")
        assert code == 0, err
        info = json.loads(out)
        assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
        assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
        assert [b["brokerAddr"] for b in info["liveBrokers"]] == ["127.0.0.1:10911"]

        code, out, err = await mqadmin("topicRoute", "-t", "TopicTest", "-n", address, "--json")
        assert code == 0, err
        assert json.loads(out)["queueDatas"][0]["readQueueNums"] == 4

        code, out, err = await mqadmin("topicRoute", "-t", "NOPE", "-n", address)
        assert code != 0
        assert out == ""
        [line] = err.strip().splitlines()
        assert "NOPE" in line and "TOPIC_NOT_EXIST" in line


async def test_mqnamesrv_exits_nonzero_when_the_port_is_taken(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    with mqnamesrv(address, tmp_path) as proc:
        await wait_until(
            lambda: answers(address, proc), timeout=20, interval=0.1, message="mqnamesrv to answer"
        )
        second = await asyncio.create_subprocess_exec(
            str(MQNAMESRV), "--listen", address, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, err = await asyncio.wait_for(second.communicate(), timeout=30)
        assert second.returncode == 1
        assert f"cannot listen on {address}" in err.decode()
