"""Tool-name patterns (docs/policy.md, "Tool-name patterns"), compiled once per list.

Five forms only: exact (no ``*``), ``*`` runs on both ends (substring, empty remainder = all),
trailing ``*`` (prefix), leading ``*`` (suffix); a ``*`` anywhere else is a literal character.
A list compiles to a set plus prefix/suffix tuples so a check is a few C-level calls.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["pattern_matches", "NameMatcher"]


def pattern_matches(name: str, pattern: str) -> bool:
    """One pattern against one name (the reference form; :class:`NameMatcher` is the fast one)."""
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
