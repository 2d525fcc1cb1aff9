"""The console tools fail as tools should: one line naming the problem and what to do, a
non-zero exit code, no traceback; and they take ``-n`` and ``NAMESRV_ADDR`` as RocketMQ's do."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys

import pytest

from aiorocketmq.cli.common import Progress
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.nameserver.config import NamesrvConfig
from aiorocketmq.producer import Message, Producer
from tests.helpers import BIN, free_port

TOPIC = "CliTopic"


def tool(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_dead_name_server_is_one_line_for_produce_and_consume() -> None:
    dead = f"127.0.0.1:{free_port()}"
    line = one_line_error(
        tool(
            "aiorocketmq", "produce", "--namesrv-wait", "0", "-n", dead, "-t", TOPIC, "--count", "1"
        )
    )
    assert f"cannot reach a name server at {dead}" in line and "NAMESRV_ADDR" in line
    # the consumer says so at start instead of retrying silently
    line = one_line_error(
        tool("aiorocketmq", "consume", "--namesrv-wait", "0", "-n", dead, "-g", "g", "-t", TOPIC)
    )
    assert f"cannot reach a name server at {dead}" in line
    line = one_line_error(tool("mqadmin", "clusterList", "-n", dead))
    assert line.startswith("mqadmin clusterList: cannot reach a name server")


def test_namesrv_addr_forms_and_the_environment() -> None:
    port1, port2 = free_port(), free_port()
    # NAMESRV_ADDR is the default of every tool
    env = {"NAMESRV_ADDR": f"127.0.0.1:{port1}"}
    for argv in (
        ("aiorocketmq", "produce", "--namesrv-wait", "0", "-t", TOPIC, "--count", "1"),
        ("aiorocketmq", "consume", "--namesrv-wait", "0", "-g", "g", "-t", TOPIC),
        ("mqadmin", "topicList"),
    ):
        assert f"127.0.0.1:{port1}" in one_line_error(tool(*argv, env=env)), argv
    # a bare host gets the name server's port, not gRPC's 443
    line = one_line_error(
        tool("aiorocketmq", "produce", "--namesrv-wait", "0", "-n", "localhost", "-t", TOPIC)
    )
    assert "localhost:9876" in line
    # a comma list is RocketMQ's semicolon list
    line = one_line_error(
        tool("mqadmin", "topicList", "-n", f"127.0.0.1:{port1},127.0.0.1:{port2}")
    )
    assert f"127.0.0.1:{port1};127.0.0.1:{port2}" in line
    # a malformed address is a usage error naming it
    line = one_line_error(tool("mqadmin", "topicList", "-n", "127.0.0.1:x"), code=2)
    assert "port 'x'" in line


def test_usage_errors_are_one_line() -> None:
    line = one_line_error(
        tool(
            "aiorocketmq",
            "consume",
            "--namesrv-wait",
            "0",
            "-g",
            "g",
            "-t",
            TOPIC,
            "--strategy",
            "NOPE",
        ),
        code=2,
    )
    assert "NOPE" in line and "AVG" in line
    line = one_line_error(tool("mqadmin", "noSuchCommand"), code=2)
    assert "noSuchCommand" in line


@pytest.fixture
async def running(tmp_path):  # type: ignore[no-untyped-def]
    async with LocalCluster(tmp_path / "c", brokers=1) as cluster:
        await cluster.create_topic(TOPIC, 4)
        yield cluster


async def run_tool(*argv: str, shell: str | None = None) -> tuple[int, str, str]:
    if shell is not None:
        proc = await asyncio.create_subprocess_shell(
            shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    else:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / argv[0]), *argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_a_broker_given_as_the_name_server(running: LocalCluster) -> None:
    broker = running.broker_list[0].address
    code, _, err = await run_tool("mqadmin", "clusterList", "-n", broker)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "not a name server (a broker?)" in err
    code, _, err = await run_tool(
        "aiorocketmq", "produce", "--namesrv-wait", "0", "-n", broker, "-t", TOPIC
    )
    assert code == 1 and "not a name server" in err and len(err.strip().splitlines()) == 1


async def test_a_closed_pipe_ends_quietly(running: LocalCluster) -> None:
    async with Producer("pg", running.namesrv_addr) as producer:
        for i in range(200):
            await producer.send(Message(TOPIC, b"line %03d" % i))
    mqadmin = BIN / "mqadmin"
    reader = f"{sys.executable} -c 'import sys; sys.stdin.readline()'"
    code, _, err = await run_tool(
        shell=f"{mqadmin} consumeMessage -n {running.namesrv_addr} -t {TOPIC} -c 200 | {reader}"
    )
    assert code == 0  # the pipeline's status is the reader's
    assert err == "", err  # no BrokenPipeError, no traceback


def test_progress_is_shown_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    progress = Progress("sent", stream=term, interval=0.0)
    for _ in range(3):
        progress.add()
    progress.done("messages to T")
    assert "\rsent 3 (" in term.getvalue() and "sent 3 messages to T in" in term.getvalue()

    pipe = io.StringIO()
    quiet = Progress("sent", stream=pipe, interval=0.0)
    quiet.add(5)
    quiet.done("messages to T")
    assert pipe.getvalue().count("\n") == 1 and "\r" not in pipe.getvalue()


async def test_a_producer_started_before_its_name_server_waits_for_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "aiorocketmq"),
        "produce",
        "--namesrv-wait",
        "30",
        "-n",
        f"127.0.0.1:{port}",
        "-t",
        TOPIC,
        "--count",
        "3",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        await asyncio.sleep(1.0)  # the tool is waiting, not failing
        assert proc.returncode is None
        config = NamesrvConfig(listen=f"127.0.0.1:{port}")
        async with LocalCluster(tmp_path / "c", brokers=1, namesrv_config=config) as cluster:
            await cluster.create_topic(TOPIC, 4)
            _, err = await asyncio.wait_for(proc.communicate(), 60)
            assert proc.returncode == 0, err.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_a_negative_consume_time_is_refused_by_name() -> None:
    result = tool("aiorocketmq", "consume", "-g", "g", "-t", TOPIC, "--consume-ms", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--consume-ms: must be 0 or more, got -1" in result.stderr
