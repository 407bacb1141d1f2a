"""The policy engine's per-session state (docs/policy.md; docs/wrap.md, "Enforcement" and "Tool
pins"): the request and tool-call counters the session limits read, and the tool identities
observed in ``tools/list`` answers that pins are compared with.
"""

from __future__ import annotations

from typing import Any

from assay.policy.identity import ToolIdentity, tool_identity

__all__ = ["PIN_UNKNOWN_REASONS", "SessionState"]


PIN_UNKNOWN_REASONS = {
    "ambiguous": "Tool integrity failure: the pinned tool is defined more than once in one tools/list answer",
    "unreadable": "Tool integrity failure: a tools/list answer could not be read, so the pinned tool's identity is unknown",
    "not_listed": "Tool integrity failure: the pinned tool has not been seen in a tools/list answer yet",
}


class SessionState:
    """Per-session state for the relay (docs/policy.md; docs/wrap.md, "Enforcement" and "Tool pins").

    The counters (``limits.max_requests_total``, ``limits.max_tool_calls_total``):
    ``requests_count`` counts every client request, ``tool_calls_count`` every ``tools/call``.
    Three places change them, and only these: :meth:`note_request` counts a request that is not
    ``tools/call``; :func:`assay.policy.engine.evaluate` counts a ``tools/call`` as both (once
    per judged call, after the pin check, inline: it is every call's path); :meth:`defer_call`
    takes back the tool-call count of a call asked in two rounds. :meth:`uncounted` is the view a
    re-check judges on.

    Pins fail closed (docs/wrap.md, "Tool pins"): a pinned tool is allowed only when every
    definition of it that reached the client was read and equals the pin. So the state keeps,
    per tool name, every distinct identity observed (not only the latest), the names defined
    more than once in one answer (ambiguous), and whether any ``tools/list`` answer could not be
    read (then every pinned tool's identity is unknown). All of it is sticky for the session.
    """

    __slots__ = ("requests_count", "tool_calls_count", "_identities", "_variants", "_ambiguous", "unreadable")

    MAX_VARIANTS = 16  # distinct identities kept per name; more only confirms the drift

    def __init__(self) -> None:
        self.requests_count = 0
        self.tool_calls_count = 0
        self._identities: dict[str, ToolIdentity] = {}  # latest per name (--verbose)
        self._variants: dict[str, list[ToolIdentity]] = {}  # every distinct identity per name
        self._ambiguous: set[str] = set()
        self.unreadable = False

    def note_request(self) -> None:
        """Count a client request that is not ``tools/call`` (never blocked by policy)."""
        self.requests_count += 1

    def defer_call(self) -> None:
        """The call just counted is asked in two rounds (docs/wrap.md, "Approvals"): it counts
        as a tool call once, at its retry; the first round stays a request."""
        self.tool_calls_count -= 1

    def uncounted(self) -> SessionState:
        """A view of this state with both counters at zero, for judging again a call that was
        counted when it was asked: the same tool identities (shared, read only), and counting
        on the view leaves this state's counters as they are."""
        view = SessionState.__new__(SessionState)
        view.requests_count = view.tool_calls_count = 0
        view._identities = self._identities
        view._variants = self._variants
        view._ambiguous = self._ambiguous
        view.unreadable = self.unreadable
        return view

    def mark_unreadable(self) -> None:
        """A ``tools/list`` answer reached the client that could not be read."""
        self.unreadable = True

    def observe_tools(self, server_id: str, tools: Any) -> list[tuple[str, str, str]]:
        """Record identities from one ``tools/list`` answer's ``tools`` array.

        Entries that are not objects or lack a non-blank string ``name`` are skipped. A name
        that occurs twice in the array is ambiguous from then on. Returns ``(name, schema_hash,
        meta_hash)`` for each tool not seen before or whose identity changed, in list order.
        """
        fresh: list[tuple[str, str, str]] = []
        if not isinstance(tools, list):
            return fresh
        here: set[str] = set()
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if not isinstance(name, str) or not name.strip():
                continue
            if name in here:
                self._ambiguous.add(name)
            here.add(name)
            schema_hash, meta_hash = tool_identity(tool)
            ident = ToolIdentity(server_id, name, schema_hash, meta_hash)
            variants = self._variants.setdefault(name, [])
            if ident not in variants and len(variants) < self.MAX_VARIANTS:
                variants.append(ident)
            if self._identities.get(name) != ident:
                self._identities[name] = ident
                fresh.append((name, schema_hash, meta_hash))
        return fresh

    def identity(self, tool_name: str) -> ToolIdentity | None:
        """The last observed identity of ``tool_name`` or ``None`` if never listed."""
        return self._identities.get(tool_name)

    def pin_problem(
        self, tool_name: str, pinned: ToolIdentity, server_id: str
    ) -> tuple[str, ToolIdentity | None] | None:
        """Why a pinned tool may not run, or None when every definition seen equals the pin.

        Returns ``(kind, runtime)``: kind is ``drifted`` (``runtime`` is an observed identity
        that differs from the pin), ``ambiguous``, ``unreadable`` or ``not_listed``.
        """
        variants = self._variants.get(tool_name)
        if variants:
            for seen in variants:
                runtime = ToolIdentity(server_id, tool_name, seen[2], seen[3])
                if runtime != pinned:
                    return "drifted", runtime
        if tool_name in self._ambiguous:
            return "ambiguous", None
        if self.unreadable:
            return "unreadable", None
        if not variants:
            return "not_listed", None
        return None
