"""``PermName``: the permission bits of a topic or broker (RocketMQ's ``PermName``)."""

from __future__ import annotations

from enum import IntFlag

__all__ = ["PermName"]


class PermName(IntFlag):
    """Permission bits; a topic's default is READ | WRITE (6)."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8

    # Plain int arithmetic: these run on every send and pull, and IntFlag's operators build
    # enum members.
    @staticmethod
    def is_readable(perm: int) -> bool:
        return int(perm) & 4 == 4

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return int(perm) & 2 == 2

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return int(perm) & 1 == 1

    @staticmethod
    def is_valid(perm: int) -> bool:
        """RocketMQ accepts 0 <= perm < 8 (PRIORITY is not settable on a topic)."""
        return 0 <= perm < 8

    @staticmethod
    def to_string(perm: int) -> str:
        """``RWX``-style text as mqadmin prints it: R, W, X (inherit) or '-'."""
        return "".join(
            (
                "R" if PermName.is_readable(perm) else "-",
                "W" if PermName.is_writeable(perm) else "-",
                "X" if PermName.is_inherited(perm) else "-",
            )
        )
