"""The client id, ``ip@instanceName``: the name a consumer has in its group.

Two processes with the same client id look like one consumer to the broker, so allocation
gives both the same queues; RocketMQ 5 therefore defaults instanceName to ``pid#nanotime``.
"""

from __future__ import annotations

import os
import socket
import time

__all__ = ["DEFAULT_INSTANCE_NAME", "build_client_id", "default_instance_name", "local_ip"]

DEFAULT_INSTANCE_NAME = "DEFAULT"


def local_ip() -> str:
    """This host's IPv4 address from its own name, or 127.0.0.1 when it has none."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def default_instance_name() -> str:
    """RocketMQ 5's ``changeInstanceNameToPID``: ``pid#nanotime``."""
    return f"{os.getpid()}#{time.monotonic_ns()}"


def build_client_id(ip: str, instance_name: str, unit_name: str | None = None) -> str:
    """``ip@instanceName``, then ``@unitName`` when one is set (``buildMQClientId``)."""
    cid = f"{ip}@{instance_name}"
    if unit_name:
        cid += f"@{unit_name}"
    return cid
