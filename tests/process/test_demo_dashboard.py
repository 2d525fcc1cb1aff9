"""``aiorocketmq demo --dashboard``: the story runs watched by the dashboard, which stays up
(with the cluster) until Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import re
import signal

import aiohttp

from tests.helpers import BIN, free_port


async def test_the_demo_with_its_dashboard_until_ctrl_c() -> None:
    listen = f"127.0.0.1:{free_port()}"
    # Started with SIGINT ignored, as a non-interactive shell starts a background job (Python
    # then raises no KeyboardInterrupt): Ctrl-C must stop it all the same.
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "aiorocketmq"), "demo", "--step", "0.5", "--dashboard", listen,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(90):
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, "".join(lines)
                lines.append(line)
                if "the dashboard stays up at" in line:
                    break
        watch = next(m for m in (re.search(r"watch it live: (\S+)", x) for x in lines) if m)
        assert watch.group(1) == f"http://{listen}/groups/demo_group"
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://{listen}/api/groups/demo_group") as r:
                view = json.loads(await r.text())
            async with s.get(f"http://{listen}/groups/demo_group/events") as r:
                async for raw in r.content:
                    if raw.startswith(b"data: "):
                        timeline = json.loads(raw[6:])["timeline"]
                        break
        assert r.status == 200
        assert view["members"] == []  # the story is over: every consumer left
        joined = [e["text"].split(" ")[0] for e in timeline["events"] if e["kind"] == "joined"]
        assert [c.split("@")[1] for c in joined] == ["A", "B", "C"]
        holders = {bar["holder"].split("@")[1] for row in timeline["rows"] for bar in row["bars"]}
        assert holders == {"A", "B", "C"}
        proc.send_signal(signal.SIGINT)
        try:
            code = await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            assert proc.stderr is not None
            err = (await proc.stderr.read()).decode()
            raise AssertionError(f"no exit 30 s after Ctrl-C; its stderr:\n{err[-6000:]}") from None
        assert code in (0, 130)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
