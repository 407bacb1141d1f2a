"""What coverage keeps of a session's decisions (docs/wrap-records.md, "Session reports"):
aggregates, not events, bounded in bytes whatever the client names its tools.

:class:`Coverage` is updated once per recorded call by the
:class:`assay.session.records.Recorder`; :func:`assay.session.reports.coverage_report` reads it at
session end. It keeps, per distinct tool name, the tool classes seen with it, and per
consecutive pair of calls (a route) its count; nothing else, so an ordinary session's report is
what one would compute from all its decision events. The bounds:

- a name longer than :data:`NAME_MAX_LEN` characters is kept as a stand-in: its first 32
  characters, its length and the SHA-256 of its UTF-8 bytes (:func:`coverage_name`);
- at most :data:`TOOLS_MAX` distinct names are kept; a call of a further name is counted in
  ``uncounted_calls`` only (and breaks the route chain: no route is counted into or out of it);
- at most :data:`ROUTES_MAX` distinct routes are kept; further ones count in
  ``uncounted_routes``.

So the aggregate holds at most about 4,096 x 1 KiB of names and 16,384 route counts: a few MiB.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["NAME_MAX_LEN", "ROUTES_MAX", "TOOLS_MAX", "Coverage", "coverage_name"]

NAME_MAX_LEN: Final = 256  # MCP tool names are 1 to 128 characters; the policy caches use 256 too
TOOLS_MAX: Final = 4096
ROUTES_MAX: Final = 16384
_SHOWN: Final = 32


def coverage_name(name: str) -> str:
    """The name coverage keeps for a (trimmed, non-blank) tool name: the name itself, or for a
    name longer than :data:`NAME_MAX_LEN` a stand-in of bounded length,
    ``<first 32 characters>...(cut: <length> characters, sha256:<hex>)``."""
    if len(name) <= NAME_MAX_LEN:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[:_SHOWN]}...(cut: {len(name)} characters, sha256:{digest})"


class Coverage:
    """The coverage aggregate of one session (see the module doc for its bounds).

    :attr:`tools`: kept name -> the (trimmed, non-blank) tool classes seen with it, in
    first-seen order of the names. ``routes``: (from, to) -> count, over consecutive counted
    calls; a route holds the same string objects as the tool entries, never copies.
    """

    __slots__ = ("_entries", "routes", "uncounted_calls", "uncounted_routes", "_last")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, set[str]]] = {}  # name -> (that name, its classes)
        self.routes: dict[tuple[str, str], int] = {}
        self.uncounted_calls = 0
        self.uncounted_routes = 0
        self._last: str | None = None  # the kept name of the previous counted call

    @property
    def tools(self) -> dict[str, set[str]]:
        """Kept name -> its tool classes, in first-seen order."""
        return {name: classes for name, classes in self._entries.values()}

    def add(self, tool: str, tool_classes: tuple[str, ...] | list[str]) -> None:
        """One decided call of ``tool`` (the decision's tool) with its ``tool_classes``. A name
        that is blank once trimmed names nothing to cover and is skipped (the route chain goes
        on past it)."""
        name = tool.strip()
        if not name:
            return
        if len(name) > NAME_MAX_LEN:
            name = coverage_name(name)
        entries = self._entries
        entry = entries.get(name)
        if entry is None:
            if len(entries) >= TOOLS_MAX:
                self.uncounted_calls += 1
                self._last = None
                return
            entry = entries[name] = (name, set())
        name, classes = entry
        if tool_classes:
            classes.update(c.strip() for c in tool_classes if c.strip())
        last = self._last
        self._last = name
        if last is not None:
            routes = self.routes
            pair = (last, name)
            count = routes.get(pair)
            if count is not None:
                routes[pair] = count + 1
            elif len(routes) < ROUTES_MAX:
                routes[pair] = 1
            else:
                self.uncounted_routes += 1
