"""Settings objects from keyword options: one rule for every client (consumers, producer).

A client takes a settings dataclass, keyword options, or both (keywords win). Keyword names of
earlier releases are mapped to the field that replaced them, with a conversion where the unit
changed (seconds to milliseconds). An unknown option is a ``TypeError`` naming it and the
closest known names, so a typo never passes silently.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["Checked", "Legacy", "build_options", "same", "seconds_to_ms"]


class Checked(Protocol):
    """A settings dataclass that can check itself (``ValueError`` naming the bad option)."""

    def check(self) -> None: ...


S = TypeVar("S", bound=Checked)

# old keyword -> (the field that replaced it, how its value converts)
Legacy = dict[str, tuple[str, Callable[[Any], Any]]]


def same(value: Any) -> Any:
    return value


def seconds_to_ms(value: Any) -> Any:
    return round(float(value) * 1000)


def build_options(cls: type[S], base: S | None, options: dict[str, Any], legacy: Legacy) -> S:
    """``base`` (or ``cls()``) with ``options`` applied (legacy names mapped), then checked."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, value in options.items():
        name, convert = legacy.get(key, (key, same))
        if name not in names:
            close = difflib.get_close_matches(key, sorted(names), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise TypeError(f"{cls.__name__} has no option {key!r}{hint}")
        changes[name] = convert(value)
    settings = dataclasses.replace(base, **changes) if base is not None else cls(**changes)  # type: ignore[type-var]
    settings.check()
    return settings
