"""Real name server and broker processes for the Spark tests (Spark itself is synchronous).

``aiorocketmq cluster up`` starts a name server and brokers as processes on free ports;
``add_broker`` starts one more ``mqbroker`` with settings of its own (a short retention, say)
in the same cluster. ``down`` stops what was started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiorocketmq.pipeline.client import SyncClient
from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["ClusterProcesses", "sent_messages"]

BIN = Path(sys.executable).parent

FAST_SETTINGS = "register_name_server_period_ms = 1000\n"


class ClusterProcesses:
    """A name server and ``brokers`` brokers (``broker-a``, ``broker-b``, ...) under ``root``."""

    def __init__(self, root: Path, *, brokers: int = 2) -> None:
        self.root = root
        self.brokers = brokers
        self.namesrv = ""
        self.extra: list[subprocess.Popen[bytes]] = []
        self.client: SyncClient | None = None

    def up(self) -> ClusterProcesses:
        settings = self.root / "broker.toml"
        self.root.mkdir(parents=True, exist_ok=True)
        settings.write_text(FAST_SETTINGS)
        subprocess.run(
            [
                str(BIN / "aiorocketmq"),
                "cluster",
                "up",
                "--dir",
                str(self.root / "cluster"),
                "--base-port",
                "0",
                "--brokers",
                str(self.brokers),
                "--topic",
                "TopicTest",
                "--queues",
                "4",
                "--settings",
                str(settings),
                "--server-log-level",
                "WARNING",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        state = json.loads((self.root / "cluster" / "cluster.json").read_text())
        self.namesrv = state["namesrv_addr"]
        self.client = SyncClient(self.namesrv, timeout=5)
        return self

    def add_broker(self, name: str, settings: str) -> None:
        """One more broker named ``name``, with ``settings`` (TOML) added to the fast ones."""
        config = self.root / f"{name}.toml"
        config.write_text(FAST_SETTINGS + settings)
        log = (self.root / f"{name}.log").open("ab")
        self.extra.append(
            subprocess.Popen(
                [
                    str(BIN / "mqbroker"),
                    "-n",
                    self.namesrv,
                    "--listen",
                    "127.0.0.1:0",
                    "--store-dir",
                    str(self.root / name / "store"),
                    "--broker-name",
                    name,
                    "-c",
                    str(config),
                    "--log-level",
                    "WARNING",
                ],
                stdout=log,
                stderr=log,
                env=os.environ.copy(),
            )
        )
        assert self.client is not None
        deadline = time.monotonic() + 30
        while name not in self.client.master_brokers():
            if time.monotonic() > deadline:
                raise AssertionError(f"broker {name} did not register; see {self.root}/{name}.log")
            time.sleep(0.05)

    def down(self) -> None:
        for p in self.extra:
            if p.poll() is None:
                p.terminate()
        for p in self.extra:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if (self.root / "cluster" / "cluster.json").exists():
            subprocess.run(
                [str(BIN / "aiorocketmq"), "cluster", "down", "--dir", str(self.root / "cluster")],
                check=False,
                capture_output=True,
                timeout=60,
            )


def sent_messages(
    response: Any, messages: list[common_pb2.Message]
) -> list[tuple[str, str, int, int, str, common_pb2.Message]]:
    """``(topic, broker, queue id, queue offset, msg id, message)`` of each message of a send."""
    from aiorocketmq.protocol.record import create_message_ids, parse_host

    mq = response.message_queue
    if response.results:
        placed = [(r.queue_offset, r.msg_id) for r in response.results]
    else:
        ip, port = parse_host(response.store_host)
        ids = create_message_ids(ip, port, response.commit_log_offsets)
        placed = [(response.first_queue_offset + i, ids[i]) for i in range(len(messages))]
    return [
        (mq.topic, mq.broker_name, mq.queue_id, offset, msg_id, m)
        for (offset, msg_id), m in zip(placed, messages, strict=True)
    ]
