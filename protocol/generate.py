"""Regenerate the committed protobuf/gRPC stubs in ``protocol/v1`` from ``proto/``.

``python -m aiorocketmq.protocol.generate`` writes them; ``generate(out_dir)`` writes them elsewhere so a
test can compare a fresh generation with what is committed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
PACKAGE_PATH = "aiorocketmq/protocol/v1"  # compiled as aiorocketmq/protocol/v1/<name>.proto
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")

__all__ = ["PACKAGE_PATH", "PROTO_DIR", "generate", "generated_files"]


def generate(out_root: Path) -> list[Path]:
    """Compile every ``proto/*.proto`` into ``out_root/protocol/v1`` and list what was written."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency: only generation needs it

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    protos = sorted(PROTO_DIR.glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PACKAGE_PATH}={PROTO_DIR}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(f"{PACKAGE_PATH}/{p.name}" for p in protos),
    ]
    (out_root / PACKAGE_PATH).mkdir(parents=True, exist_ok=True)
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {[p.name for p in protos]}")
    return generated_files(out_root / PACKAGE_PATH)


def generated_files(directory: Path) -> list[Path]:
    """The generated stub files in ``directory``, sorted."""
    return sorted(p for p in directory.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        target = ROOT / PACKAGE_PATH
        for old in generated_files(target):
            old.unlink()
        for path in fresh:
            (target / path.name).write_bytes(path.read_bytes())
            print(f"wrote {PACKAGE_PATH}/{path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
