"""The package's shape: one namespace, roles that never import the tools, a quiet library."""

from __future__ import annotations

import ast
import importlib
import logging
from pathlib import Path

import pytest

import aiorocketmq

PACKAGE = Path(aiorocketmq.__file__).parent
ROLES = ("broker", "consumer", "nameserver", "producer", "protocol", "pipeline")
# The library's own modules (not the tools, which configure logging and print).
CORE = ("logs.py", "trace.py", "trace_check.py", "runtime.py", "local_cluster.py")


def library_files() -> list[Path]:
    files = [PACKAGE / name for name in CORE]
    for role in ROLES:
        files += sorted(p for p in (PACKAGE / role).rglob("*.py") if "_pb2" not in p.name)
    return files


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_roles_are_subpackages_of_aiorocketmq() -> None:
    for role in ROLES:
        module = importlib.import_module(f"aiorocketmq.{role}")
        assert module.__name__ == f"aiorocketmq.{role}"


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_code_imports_no_tool_and_no_top_level_role(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith("aiorocketmq.cli"), f"{path.name} imports the tools: {name}"
        assert name.split(".")[0] not in ROLES, f"{path.name} imports {name}, not aiorocketmq.{name}"


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_code_configures_no_logging_and_prints_nothing(path: Path) -> None:
    if path.name in {"__main__.py", "generate.py"} or path.parent.name == "jobs":
        return  # entry points of a process of their own (servers, `make proto`, Spark jobs)
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            assert func not in {"print", "structlog.configure", "logging.basicConfig"}, (
                f"{path.name}:{node.lineno} calls {func}"
            )
            if func == "configure_logging":
                pytest.fail(f"{path.name}:{node.lineno} configures logging")


def test_the_user_api_is_at_the_top() -> None:
    from aiorocketmq import (  # noqa: F401
        ConsumeFromWhere,
        LitePullConsumer,
        Message,
        MessageModel,
        Producer,
        PushConsumer,
    )

    for name in aiorocketmq.__all__:
        assert getattr(aiorocketmq, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        aiorocketmq.Nope  # noqa: B018


def test_library_loggers_add_no_handlers_and_keep_debug_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aiorocketmq.logs import get_logger

    log = get_logger("aiorocketmq.test")
    with caplog.at_level(logging.INFO, logger="aiorocketmq"):
        log.debug("not shown", group="G")
        log.info("the consumer started", group="G", name="clash")
    assert [r.getMessage() for r in caplog.records] == ["the consumer started"]
    record = caplog.records[0]
    assert (record.levelno, record.group, record.name_) == (logging.INFO, "G", "clash")  # type: ignore[attr-defined]
    assert logging.getLogger("aiorocketmq").handlers == []
    assert logging.getLogger("aiorocketmq.test").handlers == []
