"""The console tools: ``aiorocketmq`` (``cli.main``), ``mqadmin`` (``cli.mqadmin``), the demo,
the process cluster and the producer/consumer commands. They import the roles; no role imports
them. Each tool configures logging for itself (``aiorocketmq.logs.configure_logging``)."""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The ``aiorocketmq`` console script (loaded on call, so importing a tool stays cheap)."""
    from aiorocketmq.cli.main import main as run_main

    return run_main(argv)
