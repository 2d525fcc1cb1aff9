"""The real ``mqnamesrv``, ``mqbroker`` and ``mqadmin`` console scripts, as processes.

A name server and a broker run as processes; ``mqadmin`` creates a topic on the broker, sends
to it, reads it back and shows its status, each as its own process, as an operator would.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from aiorocketmq.nameserver import NameServerClient
from aiorocketmq.protocol.errors import MQError
from tests.helpers import BIN, free_port, mqadmin, wait_until

pytestmark = pytest.mark.process

MQNAMESRV = BIN / "mqnamesrv"
MQBROKER = BIN / "mqbroker"


@contextmanager
def running(name: str, argv: list[str], log_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv``; on exit SIGTERM it and check that it exits 0 within 10 s."""
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
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
                raise AssertionError(f"{name} did not stop within 10 s of SIGTERM") from None
            assert code == 0, f"{name} exited with {code}: {err_path.read_text()}"


def alive(**procs: subprocess.Popen[bytes]) -> None:
    """Fail at once if one of the servers died (instead of waiting out a deadline)."""
    for name, proc in procs.items():
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}")


async def test_mqadmin_creates_sends_consumes_and_shows_status_on_a_broker_process(
    tmp_path: Path,
) -> None:
    namesrv_addr = f"127.0.0.1:{free_port()}"
    broker_addr = f"127.0.0.1:{free_port()}"
    config = tmp_path / "broker.toml"
    config.write_text("register_name_server_period_ms = 500\n")
    with ExitStack() as stack:
        namesrv = stack.enter_context(
            running(
                "mqnamesrv",
                [str(MQNAMESRV), "--listen", namesrv_addr, "--scan-interval-ms", "100"],
                tmp_path,
            )
        )
        broker_argv = [
            str(MQBROKER), "-n", namesrv_addr, "--listen", broker_addr,
            "--store-dir", str(tmp_path / "store"), "--broker-name", "broker-p", "-c", str(config),
        ]  # fmt: skip
        broker = stack.enter_context(running("mqbroker", broker_argv, tmp_path))

        async with NameServerClient(namesrv_addr, timeout=0.5) as ns:

            async def registered() -> bool:
                alive(mqnamesrv=namesrv, mqbroker=broker)
                try:
                    info = await ns.get_broker_cluster_info()
                except MQError:
                    return False
                return [b.broker_addr for b in info.live_brokers] == [broker_addr]

            await wait_until(registered, timeout=20, interval=0.1, message="the broker registered")

            code, out, err = await mqadmin(
                "updateTopic", "-n", namesrv_addr, "-b", broker_addr, "-t", "ProcTopic",
                "-r", "2", "-w", "2",
            )  # fmt: skip
            assert code == 0, err
            assert out.splitlines()[0] == f"create topic to {broker_addr} success."

            async def routed() -> bool:
                alive(mqnamesrv=namesrv, mqbroker=broker)
                try:
                    route = await ns.get_route_info_by_topic("ProcTopic")
                except MQError:
                    return False
                return [qd.read_queue_nums for qd in route.queue_datas] == [2]

            await wait_until(routed, timeout=10, interval=0.1, message="ProcTopic routed")

        sent = []
        for i, tags in enumerate(["TagA", "TagB", "TagA"]):
            code, out, err = await mqadmin(
                "sendMessage", "-n", namesrv_addr, "-t", "ProcTopic", "-p", f"hello {i}",
                "-c", tags, "-k", f"key{i}", "-b", "broker-p", "-i", str(i % 2), "--json",
            )  # fmt: skip
            assert code == 0, err
            result = json.loads(out)
            assert result["sendStatus"] == "SEND_OK"
            sent.append(result)
        assert [(r["messageQueue"]["queueId"], r["queueOffset"]) for r in sent] == [
            (0, 0),
            (1, 0),
            (0, 1),
        ]

        code, out, err = await mqadmin(
            "consumeMessage", "-n", namesrv_addr, "-t", "ProcTopic", "--json"
        )
        assert code == 0, err
        messages = json.loads(out)["messages"]
        assert [(m["queueId"], m["queueOffset"], m["body"]) for m in messages] == [
            (0, 0, "hello 0"),
            (0, 1, "hello 2"),
            (1, 0, "hello 1"),
        ]
        assert {m["msgId"] for m in messages} == {r["msgId"] for r in sent}
        assert [m["keys"] for m in messages] == ["key0", "key2", "key1"]

        code, out, err = await mqadmin(
            "consumeMessage", "-n", namesrv_addr, "-t", "ProcTopic", "-s", "TagB"
        )
        assert code == 0, err
        assert "hello 1" in out and "hello 0" not in out and "hello 2" not in out

        code, out, err = await mqadmin(
            "topicStatus", "-n", namesrv_addr, "-t", "ProcTopic", "--json"
        )
        assert code == 0, err
        table = json.loads(out)["offsetTable"]
        assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in table] == [
            ("broker-p", 0, 0, 2),
            ("broker-p", 1, 0, 1),
        ]
        assert all(q["lastUpdateTimestamp"] > 0 for q in table)

        code, out, err = await mqadmin("consumerProgress", "-n", namesrv_addr, "-g", "nobody_here")
        assert (code, out) == (1, "")
        [line] = err.strip().splitlines()
        assert "nobody_here" in line and "SUBSCRIPTION_GROUP_NOT_EXIST" in line

        alive(mqnamesrv=namesrv, mqbroker=broker)
        assert "boot success" in (tmp_path / "mqbroker.out").read_text()
