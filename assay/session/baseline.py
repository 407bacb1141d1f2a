"""The declared baseline at run time: ``assay mcp wrap --declared-manifest`` (sans-IO).

A declared manifest (``assay.declared_mcp_manifest.v0``, what ``assay mcp manifest promote``
writes) names every tool an operator approved and the ``tool_digest`` of its definition. During
a session :class:`Baseline` keeps what the client was shown, the way pins do (docs/wrap.md,
"Tool pins"): every distinct definition of each declared tool that a ``tools/list`` answer
carried, the names listed twice in one answer, and whether some answer could not be read. All
of it is sticky for the session.

A call then passes only when the tool is declared and every definition of it that reached the
client was read and has the declared digest (docs/wrap.md, "Declared baseline"). The digest is
:func:`assay.manifest.digests.tool_digest` over the definition as wrap read it, the same
function and the same reading the observed manifest is built from, so observe, candidate,
promote and enforce agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from assay.manifest.digests import tool_digest
from assay.policy import Decision

__all__ = ["RULE", "REASONS", "Baseline"]

RULE = "declared_manifest"  # the decision's matched_rule

REASONS = {
    "undeclared": "Tool is not in the declared manifest",
    "drifted": "Tool integrity failure: the definition differs from the declared manifest. (Seen: {seen}, Declared: {declared})",
    "drifted_contract": "Tool definition has changed since the declared manifest was approved",
    "ambiguous": "Tool integrity failure: the declared tool is defined more than once in one tools/list answer",
    "unreadable": "Tool integrity failure: a tools/list answer could not be read, so the declared tool's definition is unknown",
    "not_listed": "Tool integrity failure: the declared tool has not been seen in a tools/list answer yet",
}
NO_CANONICAL_FORM = "a definition with no canonical JSON form"

_DIGEST_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, MemoryError)


def _digest(tool: Mapping[str, Any]) -> str | None:
    """The tool's ``tool_digest``, or None when its definition has no canonical JSON form (a
    lone surrogate, an integer JCS cannot encode): such a definition equals no declared one."""
    try:
        return tool_digest(tool)
    except _DIGEST_ERRORS:
        return None


class Baseline:
    """What one session checks calls against: the declared tools and what was listed."""

    __slots__ = ("_declared", "_seen", "_ambiguous", "unreadable")

    MAX_VARIANTS = 16  # distinct definitions kept per name; a second one already is a drift

    def __init__(self, declared: Mapping[str, Any]) -> None:
        """``declared`` is the document :func:`assay.manifest.declared.parse_declared` returns."""
        self._declared: dict[str, str] = {tool["name"]: tool["tool_digest"] for tool in declared["tools"]}
        self._seen: dict[str, list[str | None]] = {}  # raw name -> distinct digests listed
        self._ambiguous: set[str] = set()
        self.unreadable = False

    def declares(self, name: str) -> bool:
        """Whether ``name`` is in the declared manifest (a call of any other tool is denied)."""
        return name in self._declared

    def mark_unreadable(self) -> None:
        """A ``tools/list`` answer reached the client that could not be read."""
        self.unreadable = True

    def observe(self, tools: Iterable[Any]) -> None:
        """The ``tools`` array of one ``tools/list`` answer the client received. Only declared
        tools are kept (a call of any other is denied anyway, and this bounds the state)."""
        here: set[str] = set()
        declared = self._declared
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if not isinstance(name, str) or not name.strip() or name not in declared:
                continue
            if name in here:
                self._ambiguous.add(name)
            here.add(name)
            digest = _digest(tool)
            variants = self._seen.setdefault(name, [])
            if digest not in variants and len(variants) < self.MAX_VARIANTS:
                variants.append(digest)

    def check(self, name: str, decision: Decision) -> Decision | None:
        """The deny of a call of ``name`` that the policy allowed, or None when it may go on."""
        want = self._declared.get(name)
        if want is None:
            reason = REASONS["undeclared"]
            return decision.denied(
                "E_TOOL_UNDECLARED",
                reason,
                {"status": "deny", "error_code": "E_TOOL_UNDECLARED", "tool": name, "reason": reason},
                matched_rule=RULE,
            )
        seen = self._seen.get(name)
        kind = None
        reason = told = ""
        if seen:
            for digest in seen:
                if digest != want:
                    kind = "drifted"
                    reason = REASONS["drifted"].format(seen=digest or NO_CANONICAL_FORM, declared=want)
                    told = REASONS["drifted_contract"]
                    break
        if kind is None:
            if name in self._ambiguous:
                kind = "ambiguous"
            elif self.unreadable:
                kind = "unreadable"
            elif not seen:
                kind = "not_listed"
            else:
                return None
            reason = told = REASONS[kind]
        return decision.denied(
            "E_TOOL_DRIFT",
            reason,
            {"status": "deny", "error_code": "E_TOOL_DRIFT", "tool": name, "reason": told},
            matched_rule=RULE,
            typed_decision="deny_with_alert",
        )
