"""Kill -9 a process writing with SYNC_FLUSH: every put it acknowledged is there after restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aiorocketmq.broker.store import GetMessageStatus, MessageStore, MessageStoreConfig
from aiorocketmq.protocol.message import Message

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import asyncio, sys
from aiorocketmq.broker.store import MessageStore, MessageStoreConfig
from aiorocketmq.protocol.message import Message

async def writer(store, worker):
    i = 0
    while True:
        body = f"w{worker}-{i}".encode() * 10
        [r] = await store.put_messages(
            "Crash", worker % 2, [Message("Crash", body, tags=f"T{worker}")],
            born_host="127.0.0.1:1", born_timestamp=0,
        )
        sys.stdout.write(f"ACK {worker} {i} {r.queue_offset} {r.status.name}\\n")
        sys.stdout.flush()
        i += 1

async def main():
    config = MessageStoreConfig(
        store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=16384,
        flush_disk_type="SYNC_FLUSH",
    )
    store = MessageStore(config)
    await store.start()
    await asyncio.gather(*(writer(store, w) for w in range(4)))

asyncio.run(main())
"""


def run_and_kill(root: Path, acks_wanted: int) -> list[tuple[int, int, int]]:
    """Start the writer, read acknowledgements, SIGKILL it mid-stream."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acks: list[tuple[int, int, int]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ACK "):
                _, worker, i, offset, status = line.split()
                assert status == "PUT_OK"
                acks.append((int(worker), int(i), int(offset)))
                if len(acks) >= acks_wanted:
                    break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert len(acks) >= acks_wanted, "the writer stopped early"
    return acks


async def test_acknowledged_sync_puts_survive_kill_9(tmp_path: Path) -> None:
    root = tmp_path / "store"
    acks = run_and_kill(root, 400)
    config = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=16384)
    store = MessageStore(config)
    await store.start()
    try:
        for worker, i, offset in acks:
            result = store.get_messages("g", "Crash", worker % 2, offset, 1, None, None)
            assert result.status is GetMessageStatus.FOUND, (worker, i, offset, result.status)
            assert result.messages[0].body == f"w{worker}-{i}".encode() * 10
        for queue_id in (0, 1):  # dense offsets, every entry readable
            offset, count = 0, 0
            while True:
                result = store.get_messages("g", "Crash", queue_id, offset, 32, None, None)
                if result.status is not GetMessageStatus.FOUND:
                    break
                count += len(result.messages)
                offset = result.next_begin_offset
            assert count == store.get_max_offset("Crash", queue_id)
        [after] = await store.put_messages(
            "Crash", 0, [Message("Crash", b"after")], born_host="127.0.0.1:1", born_timestamp=0
        )
        assert after.queue_offset == store.get_max_offset("Crash", 0) - 1
    finally:
        await store.shutdown()
