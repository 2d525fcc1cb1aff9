"""The committed stubs in protocol/v1 are exactly what `make proto` generates from proto/."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.protocol.generate import PACKAGE_PATH, ROOT, generate, generated_files


def test_generated_stubs_are_current(tmp_path: Path) -> None:
    fresh = {p.name: p.read_bytes() for p in generate(tmp_path)}
    committed = {p.name: p.read_bytes() for p in generated_files(ROOT / PACKAGE_PATH)}
    assert sorted(fresh) == sorted(committed), "stub files differ: run `make proto`"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated stubs {stale}: run `make proto` and commit"
