"""Logging as a library should: structlog's API over stdlib ``logging``, configured by nobody here.

Library code asks :func:`get_logger` for a logger named after its module
(``aiorocketmq.consumer.rebalance``, ...). Each call becomes one stdlib ``LogRecord`` on that
logger: the event text is the message, the fields are record attributes (``record.group``), and
the level decides through stdlib's own ``isEnabledFor``. The library adds no handler and touches
no global configuration, so an application that set ``logging.basicConfig(level=WARNING)`` sees
warnings and nothing else, and one that set nothing sees only what stdlib's last-resort handler
shows (warnings and errors on stderr).

The console tools and servers call :func:`configure_logging` for themselves: a stderr handler on
the root logger that renders the same records as console lines on a terminal and JSON otherwise.

Event names are RocketMQ's where it has one ("rebalanced result changed",
"NOTIFY_CONSUMER_IDS_CHANGED"); ids go in fields, never in the event text.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["ROOT_LOGGER", "configure_logging", "get_logger"]

ROOT_LOGGER = "aiorocketmq"

# Attributes every LogRecord has: a field of the same name is renamed ("name" -> "name_").
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _to_stdlib(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """The last processor: the event text as the message, the other fields as ``extra``."""
    kwargs: dict[str, Any] = {}
    for key in ("exc_info", "stack_info"):
        if key in event_dict:
            kwargs[key] = event_dict.pop(key)
    msg = event_dict.pop("event", "")
    extra = {(f"{k}_" if k in _RESERVED else k): v for k, v in event_dict.items()}
    return (msg,), {"extra": extra, **kwargs}


_PROCESSORS: list[Any] = [structlog.stdlib.filter_by_level, _to_stdlib]


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing to stdlib's ``logging.getLogger(name)``, nothing else."""
    return structlog.stdlib.BoundLogger(logging.getLogger(name), _PROCESSORS, {})


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    """For tools and servers only: render every record to stderr at ``level``; JSON off a tty."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_aiorocketmq", False)]:
        root.removeHandler(old)
    handler._aiorocketmq = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(numeric)
