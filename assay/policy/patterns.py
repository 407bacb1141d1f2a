"""Tool-name patterns (docs/policy.md, "Tool-name patterns"), compiled once per list.

Six forms only: ``=name`` (exact: the name after the one ``=``, whatever characters it holds,
``*`` and ``=`` included), exact (no ``*``), ``*`` runs on both ends (substring, empty remainder
= all), trailing ``*`` (prefix), leading ``*`` (suffix); a ``*`` anywhere else is a literal
character. A list compiles to a set plus prefix/suffix tuples so a check is a few C-level calls.

Every reader of a pattern goes through this module (the engine's lists, rate rules, path rules,
flow selectors and aliases, ``inspect.tools``, ``resources``/``prompts``, ``assay mcp log``'s
filters), so the exact form means the same everywhere; :func:`exact_pattern` writes the pattern
of one name, :func:`exact_name` reads back the one name a pattern stands for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["EXACT", "pattern_matches", "NameMatcher", "exact_pattern", "exact_name"]

EXACT: Final = "="  # the exact-name form: ``=`` then the name, read literally


def pattern_matches(name: str, pattern: str) -> bool:
    """One pattern against one name (the reference form; :class:`NameMatcher` is the fast one)."""
    if pattern.startswith(EXACT):
        return name == pattern[1:]
    if "*" not in pattern:
        return name == pattern
    starts, ends = pattern.startswith("*"), pattern.endswith("*")
    if starts and ends:
        core = pattern.strip("*")
        return core in name
    if ends:
        return name.startswith(pattern.rstrip("*"))
    if starts:
        return name.endswith(pattern.lstrip("*"))
    return name == pattern


def exact_pattern(name: str) -> str:
    """The pattern that matches ``name`` and nothing else: the name itself when it reads as
    itself (no ``*``, not starting with ``=``), else ``=`` and the name."""
    if "*" in name or name.startswith(EXACT):
        return EXACT + name
    return name


def exact_name(pattern: str) -> str | None:
    """The one name ``pattern`` matches, or None when it can match more than one (``*`` at an
    end, outside the exact form)."""
    if pattern.startswith(EXACT):
        return pattern[1:]
    if pattern.startswith("*") or pattern.endswith("*"):
        return None
    return pattern


class NameMatcher:
    """A compiled list of patterns; ``matcher(name)`` says whether any pattern matches."""

    __slots__ = ("patterns", "_all", "_exact", "_prefixes", "_suffixes", "_subs")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        exact: set[str] = set()
        prefixes: list[str] = []
        suffixes: list[str] = []
        subs: list[str] = []
        match_all = False
        for p in self.patterns:
            if p.startswith(EXACT):
                exact.add(p[1:])
                continue
            if "*" not in p:
                exact.add(p)
                continue
            starts, ends = p.startswith("*"), p.endswith("*")
            if starts and ends:
                core = p.strip("*")
                if core:
                    subs.append(core)
                else:
                    match_all = True
            elif ends:
                prefixes.append(p.rstrip("*"))
            elif starts:
                suffixes.append(p.lstrip("*"))
            else:
                exact.add(p)  # an inner star is literal
        self._all = match_all
        self._exact = frozenset(exact)
        # str.startswith/endswith take a tuple; an empty tuple matches nothing
        self._prefixes = tuple(prefixes)
        self._suffixes = tuple(suffixes)
        self._subs = tuple(subs)

    def __call__(self, name: str) -> bool:
        return (
            self._all
            or name in self._exact
            or name.startswith(self._prefixes)
            or name.endswith(self._suffixes)
            or any(s in name for s in self._subs)
        )

    def __bool__(self) -> bool:  # a matcher object is always "present"; use .patterns for emptiness
        return True
