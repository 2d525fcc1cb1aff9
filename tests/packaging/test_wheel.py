"""What ``pip install`` gives an application: one import package, quiet, no name clashes.

The wheel is built from this checkout and installed into a folder of its own; an application
in another folder, holding modules named like our role folders (``consumer.py``, ``protocol/``,
``broker.py``), runs against it as a separate process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("aiorocketmq-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed (without its dependencies, which this environment has) in a folder."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"aiorocketmq", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    top_level = next(n for n in names if n.endswith("top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["aiorocketmq"]
    for inside in (
        "aiorocketmq/broker/__main__.py",
        "aiorocketmq/consumer/push_consumer.py",
        "aiorocketmq/protocol/v1/broker_pb2.py",
        "aiorocketmq/cli/mqadmin.py",
        "aiorocketmq/py.typed",
        "aiorocketmq/dashboard/static/dashboard.js",
        "aiorocketmq/dashboard/static/dashboard.css",
    ):
        assert inside in names, inside


APP = textwrap.dedent(
    """
    import asyncio, json, sys, tempfile
    from pathlib import Path

    import broker, consumer, protocol  # the application's own modules
    from aiorocketmq import (
        ConsumeConcurrentlyStatus, ConsumeFromWhere, LocalCluster, Message, Producer,
        PushConsumer,
    )
    import aiorocketmq

    QUIET = sys.argv[1:] == ["--quiet"]

    async def main() -> None:
        got: list[str] = []
        async def on_messages(msgs, ctx):
            got.extend(m.body.decode() for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        with tempfile.TemporaryDirectory() as root:
            async with LocalCluster(Path(root), broker_overrides={
                "register_name_server_period_ms": 200}) as cluster:
                await cluster.create_topic("AppTopic", 4)
                c = PushConsumer("app_group", cluster.namesrv_addr,
                                 consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
                c.subscribe("AppTopic")
                c.register_message_listener(on_messages)
                async with c, Producer("app_producer", cluster.namesrv_addr) as p:
                    for i in range(20):
                        await p.send(Message("AppTopic", f"m{i}".encode()))
                    for _ in range(400):
                        if len(set(got)) == 20:
                            break
                        await asyncio.sleep(0.05)
                    if QUIET:  # a few seconds more of heartbeats, rebalances, offset commits
                        await asyncio.sleep(3)
        if QUIET:
            sys.exit(0 if len(set(got)) == 20 else 3)
        print(json.dumps({
            "got": sorted(set(got)),
            "mine": [broker.MINE, consumer.MINE, protocol.MINE],
            "package": aiorocketmq.__file__,
        }))

    asyncio.run(main())
    """
)


@pytest.fixture
def app_dir(tmp_path: Path) -> Iterator[Path]:
    app = tmp_path / "app"
    (app / "protocol").mkdir(parents=True)
    (app / "consumer.py").write_text("MINE = 'consumer.py'\n")
    (app / "broker.py").write_text("MINE = 'broker.py'\n")
    (app / "protocol" / "__init__.py").write_text("MINE = 'protocol/'\n")
    (app / "app.py").write_text(APP)
    yield app


def run_app(
    app: Path, installed: Path, code: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=app, env=env, capture_output=True, text=True, timeout=120,
    )


def test_an_application_with_its_own_consumer_protocol_and_broker_modules(
    app_dir: Path, installed: Path
) -> None:
    done = run_app(app_dir, installed, (app_dir / "app.py").read_text())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["got"] == sorted(f"m{i}" for i in range(20))
    assert result["mine"] == ["broker.py", "consumer.py", "protocol/"]
    assert result["package"].startswith(str(installed))  # the wheel's copy, not the checkout


QUIET_APP = "import logging\nlogging.basicConfig(level=logging.WARNING)\n" + APP


def test_with_logging_at_warning_a_producer_and_a_consumer_print_nothing(
    app_dir: Path, installed: Path
) -> None:
    done = run_app(app_dir, installed, QUIET_APP, "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""
