"""``aiorocketmq cluster up|status|down``: a local cluster of real processes, as an operator runs it.

``up`` returns while the name server and brokers keep running (detached); ``status --json``
sees them; ``mqadmin`` sends and reads through them; ``down`` stops every pid and is a no-op the
second time. A failed ``up`` leaves nothing running.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.cli.cluster import STATE_FILE, pid_alive

pytestmark = pytest.mark.process

BIN = Path(sys.executable).parent
AIOROCKETMQ = BIN / "aiorocketmq"
MQADMIN = BIN / "mqadmin"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a console script to completion (it must not wait for the processes it starts)."""
    return subprocess.run(
        [str(argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def cluster(*argv: str) -> subprocess.CompletedProcess[str]:
    return run(str(AIOROCKETMQ), "cluster", *argv)


def recorded(directory: Path) -> list[dict[str, Any]]:
    """The processes of ``cluster.json``."""
    processes: list[dict[str, Any]] = json.loads((directory / STATE_FILE).read_text())["processes"]
    return processes


def still_alive(processes: list[dict[str, Any]]) -> list[str]:
    return [
        p["name"]
        for p in processes
        if p["pid"] is not None and pid_alive(p["pid"], p["start_time"])
    ]


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """A cluster directory; whatever a failed test left running there is stopped."""
    directory = tmp_path / "cluster"
    try:
        yield directory
    finally:
        if (directory / STATE_FILE).exists():
            leftovers = recorded(directory)
            cluster("down", "--dir", str(directory), "--timeout", "5")
            for p in leftovers:
                if p["pid"] is not None and pid_alive(p["pid"], p["start_time"]):
                    os.kill(p["pid"], signal.SIGKILL)


def test_up_status_send_consume_down(cluster_dir: Path, tmp_path: Path) -> None:
    up = cluster("up", "--dir", str(cluster_dir), "--base-port", "0")
    assert up.returncode == 0, up.stderr
    processes = recorded(cluster_dir)
    assert [p["name"] for p in processes] == ["namesrv-0", "broker-a", "broker-b"]
    assert still_alive(processes) == ["namesrv-0", "broker-a", "broker-b"]
    for p in processes:
        assert (cluster_dir / p["log"]).exists()
    assert (cluster_dir / "broker-a" / "store").is_dir()
    assert (cluster_dir / "broker-b" / "store").is_dir()

    status = cluster("status", "--dir", str(cluster_dir), "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    document = json.loads(status.stdout)
    assert document["healthy"] is True
    assert [(p["name"], p["alive"], p["answering"]) for p in document["processes"]] == [
        ("namesrv-0", True, True),
        ("broker-a", True, True),
        ("broker-b", True, True),
    ]
    assert document["brokersRegistered"] == ["broker-a", "broker-b"]
    assert document["clusterInfo"]["clusterAddrTable"] == {
        "DefaultCluster": ["broker-a", "broker-b"]
    }
    route = document["topic"]["route"]
    assert sorted(
        (qd["brokerName"], qd["readQueueNums"], qd["writeQueueNums"]) for qd in route["queueDatas"]
    ) == [("broker-a", 8, 8), ("broker-b", 8, 8)]
    assert all("TopicTest" in topics for topics in document["topics"].values())
    namesrv_addr = document["namesrvAddr"]
    assert f"export NAMESRV_ADDR='{namesrv_addr}'" in up.stdout

    # A second up refuses while the first runs.
    again = cluster("up", "--dir", str(cluster_dir), "--base-port", "0")
    assert again.returncode == 1
    assert "already running" in again.stderr

    env = {**os.environ, "NAMESRV_ADDR": namesrv_addr}
    sent = run(
        str(MQADMIN), "sendMessage", "-t", "TopicTest", "-p", "hello cluster", "--json", env=env
    )
    assert sent.returncode == 0, sent.stderr
    result = json.loads(sent.stdout)
    assert result["sendStatus"] == "SEND_OK"
    consumed = run(str(MQADMIN), "consumeMessage", "-t", "TopicTest", "--json", env=env)
    assert consumed.returncode == 0, consumed.stderr
    messages = json.loads(consumed.stdout)["messages"]
    assert [(m["msgId"], m["body"]) for m in messages] == [(result["msgId"], "hello cluster")]

    # Every server has a remoting port too: Apache's client produces through it.
    assert all(p["remotingAddress"] for p in document["processes"])
    remoting_ns = document["namesrvRemotingAddr"]
    assert remoting_ns and remoting_ns in up.stdout
    if importlib.util.find_spec("rocketmq") is not None:
        apache = run(
            sys.executable, "-m", "tests.integration.apache_client", "produce", "-n", remoting_ns,
            "-t", "TopicTest", "--count", "3", env={**os.environ, "HOME": str(tmp_path)},
        )
        assert apache.returncode == 0, apache.stderr
        assert [json.loads(line)["status"] for line in apache.stdout.splitlines()] == [0, 0, 0]

    # Ours sends through the brokers' remoting ports too, when told to.
    ours = run(
        str(AIOROCKETMQ), "produce", "-t", "TopicTest", "--count", "3", "--rate", "0",
        "--data-transport", "remoting", env=env,
    )
    assert ours.returncode == 0, ours.stderr
    assert "3 messages to TopicTest" in ours.stdout + ours.stderr

    down = cluster("down", "--dir", str(cluster_dir))
    assert down.returncode == 0, down.stderr
    assert still_alive(processes) == []
    assert [p["pid"] for p in recorded(cluster_dir)] == [None, None, None]
    for name in ("namesrv-0", "broker-a", "broker-b"):
        assert f"{name} (pid " in down.stdout and "killed" not in down.stdout

    again = cluster("down", "--dir", str(cluster_dir))
    assert again.returncode == 0, again.stderr
    assert "nothing running" in again.stdout

    stopped = cluster("status", "--dir", str(cluster_dir), "--json")
    assert stopped.returncode == 1
    assert json.loads(stopped.stdout)["healthy"] is False


def test_a_failed_up_leaves_nothing_running(cluster_dir: Path, tmp_path: Path) -> None:
    settings = tmp_path / "broker.toml"
    settings.write_text("no_such_setting = 1\n")
    up = cluster("up", "--dir", str(cluster_dir), "--base-port", "0", "--settings", str(settings))
    assert up.returncode == 1
    assert "no_such_setting" in up.stderr
    processes = recorded(cluster_dir)
    assert still_alive(processes) == []
    assert all(p["pid"] is None for p in processes)
    down = cluster("down", "--dir", str(cluster_dir))
    assert down.returncode == 0 and "nothing running" in down.stdout


def test_down_and_status_without_a_cluster(tmp_path: Path) -> None:
    down = cluster("down", "--dir", str(tmp_path / "none"))
    assert down.returncode == 0 and "nothing running" in down.stdout
    status = cluster("status", "--dir", str(tmp_path / "none"))
    assert status.returncode == 1 and "no cluster" in status.stdout


def test_up_with_the_dashboard(cluster_dir: Path) -> None:
    up = cluster(
        "up", "--dir", str(cluster_dir), "--base-port", "0", "--brokers", "1",
        "--dashboard", "127.0.0.1:0",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    processes = recorded(cluster_dir)
    assert [p["name"] for p in processes] == ["namesrv-0", "broker-a", "dashboard"]
    url = processes[-1]["address"]
    assert url.startswith("http://127.0.0.1:") and url in up.stdout
    with urllib.request.urlopen(url + "api/cluster", timeout=10) as response:
        document = json.loads(response.read())
    assert [b["name"] for b in document["brokers"]] == ["broker-a"]
    status = json.loads(cluster("status", "--dir", str(cluster_dir), "--json").stdout)
    assert status["healthy"] is True
    assert ("dashboard", True, True) in [
        (p["name"], p["alive"], p["answering"]) for p in status["processes"]
    ]
    down = cluster("down", "--dir", str(cluster_dir))
    assert down.returncode == 0, down.stderr
    assert still_alive(processes) == []
