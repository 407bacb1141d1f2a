"""What the compiled flow rules read (docs/policy.md, "Flow rules"): the arguments an
``args_match`` names (rendered as text; an array matches when any element does), the names a
selector matches in a wrap with a given ``--label``, and the checks of an exported state's values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from assay.policy.argregex import ArgRegex
from assay.policy.patterns import NameMatcher, pattern_matches
from assay.policy.sequence_rules import Aliases, Selector, clock_value

__all__ = [
    "Check",
    "Unreadable",
    "args_ok",
    "count_value",
    "flag_value",
    "index_value",
    "names_for",
    "readable",
    "render",
    "text_value",
    "time_value",
]


class Unreadable(Exception):
    """An argument an ``args_match`` names could not be rendered as text."""


def render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError, OverflowError):
        raise Unreadable from None


def readable(value: Any) -> None:
    """Raise :class:`Unreadable` when ``value`` (an array: one of its elements) cannot be read."""
    if value.__class__ is list:
        for item in value:
            render(item)
    else:
        render(value)


def _any_element(rx: ArgRegex, items: list[Any]) -> bool:
    """An array matches when any element does: each read once, so the work is linear."""
    for item in items:
        if rx.search(item if item.__class__ is str else render(item)):
            return True
    return False


def args_ok(am: tuple[tuple[str, ArgRegex], ...], args: Any) -> bool:
    if not isinstance(args, dict):
        return False
    for key, rx in am:
        if key not in args:
            return False
        value = args[key]
        if value.__class__ is str:  # the usual argument: read as it is
            if not rx.search(value):
                return False
        elif value.__class__ is list:
            if not _any_element(rx, value):
                return False
        elif not rx.search(render(value)):
            return False
    return True


def names_for(sel: Selector, aliases: Aliases, server: str) -> NameMatcher:
    """The names ``sel`` matches in a wrap whose label is ``server``: nothing when its own
    ``server`` pattern does not match the label; else its tool (or its alias's members, less
    those whose ``server`` does not match)."""
    if sel.server is not None and not pattern_matches(server, sel.server):
        return NameMatcher(())
    members = aliases.get(sel.tool, (sel.tool,))
    return NameMatcher(
        m if isinstance(m, str) else m.tool
        for m in members
        if isinstance(m, str) or m.server is None or pattern_matches(server, m.server)
    )


# validators of an exported state's values (``n``: the calls entered); each raises ValueError
def index_value(v: Any, n: int) -> int | None:
    if v is None:
        return None
    if v.__class__ is not int or not 0 <= v < n:
        raise ValueError(f"a call index must be an integer in [0, {n}), got {v!r}")
    return int(v)


def count_value(v: Any, n: int) -> int:
    if v.__class__ is not int or not 0 <= v <= n:
        raise ValueError(f"a count must be an integer in [0, {n}], got {v!r}")
    return int(v)


def flag_value(v: Any, n: int) -> bool:
    if v.__class__ is not bool:
        raise ValueError(f"expected a boolean, got {v!r}")
    return bool(v)


def text_value(v: Any, n: int) -> str | None:
    if v is not None and v.__class__ is not str:
        raise ValueError(f"expected a string or null, got {v!r}")
    return v


def time_value(v: Any, n: int) -> float | None:
    if v is None:
        return None
    t = clock_value(v)
    if t is None:
        raise ValueError(f"a time must be a finite number, got {v!r}"[:200])
    return t


Check = Callable[[Any, int], Any]
