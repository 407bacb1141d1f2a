"""The text of a suggested policy (docs/log.md, "assay mcp policy suggest"): YAML in printable
ASCII and line feeds only.

Every value the logs gave (a tool name, a server label, an argument name, a directory) is
written as a YAML double-quoted scalar with every character outside printable ASCII escaped
(``\\uXXXX``, ``\\UXXXXXXXX``), and so it is in comments: YAML (and libyaml) end a comment and a
line at U+2028, U+2029 and U+0085 as at a line feed, so one raw character of a name would let
the rest of it be read as keys. A tool name is written as the pattern that matches it alone
(:func:`~assay.policy.patterns.exact_pattern`). A name with a lone surrogate has no YAML form
(:class:`Unwritable`): the caller leaves that tool out, so it stays denied. Comments point to
``--help`` pages, never to docs/ files (an installed assay has none).

Sans-IO: a :class:`Plan` in, text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from assay.policy.patterns import exact_pattern

__all__ = ["Plan", "Unwritable", "approval_summary", "printable", "quoted", "render"]

_ESCAPED: Final = re.compile(r'[^\x20-\x7e]|["\\]')
_PRINTABLE: Final = re.compile(r"[\x20-\x7e\n]*")


class Unwritable(ValueError):
    """A text with a lone surrogate: no YAML (or UTF-8) form."""


def _escape(lossy: bool, ch: str) -> str:
    if ch == '"':
        return '\\"'
    if ch == "\\":
        return "\\\\"
    n = ord(ch)
    if 0xD800 <= n <= 0xDFFF and not lossy:
        raise Unwritable(f"a lone surrogate U+{n:04X}")
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def quoted(text: str, *, lossy: bool = False) -> str:
    """``text`` as a YAML double-quoted scalar in printable ASCII. Raises :class:`Unwritable`
    for a lone surrogate, unless ``lossy`` (a message, not YAML: it is escaped all the same)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + _ESCAPED.sub(lambda m: _escape(lossy, m.group()), text) + '"'


def printable(text: str) -> bool:
    """Whether ``text`` is printable ASCII and line feeds only."""
    return _PRINTABLE.fullmatch(text) is not None


@dataclass
class Plan:
    """What the suggested policy says, decided (:mod:`assay.logs.suggest`); names as observed."""

    header: list[str]
    allowed: list[tuple[str, int, list[str]]]  # tool, calls, servers
    approvals: list[str]  # destructive tools a person approves
    unaskable: list[tuple[str, list[str]]]  # destructive tools left unasked, the clients that cannot answer
    ask_unknown: list[str]  # approvals whose callers' elicitation is not in the logs
    denied: list[tuple[str, int]]  # tool, denied calls
    unused: list[tuple[str, bool]]  # listed, never called: tool, destructive
    unwritable: int  # tool names with no YAML form, left out
    rules: list[tuple[list[str], list[str], list[str]]]  # tools, args, within
    unconfined: list[tuple[str, str]]  # allowed tool, why its arguments are not confined


def _tool(name: str) -> str:
    return quoted(exact_pattern(name))


def _n(count: int, one: str) -> str:
    return f"{count} {one}{'' if count == 1 else 's'}"


def render(plan: Plan) -> str:
    """The policy's text, ending with a line feed."""
    out = [f"# {line}" if line else "#" for line in plan.header]
    out += [
        'version: "2.0"',
        'name: "suggested"',
        "tools:",
        "  # the tools that were called, each by its exact name; every other tool is denied",
        "  allow:",
    ]
    for name, calls, servers in plan.allowed:
        where = f" via {', '.join(quoted(s) for s in servers)}" if servers else ""
        out.append(f"    - {_tool(name)}  # {_n(calls, 'call')}{where}")
    if plan.approvals:
        out.append("  # annotated destructive by their server: a person approves each call, asked through the client")
        out.append("  approval_required:")
        out += [f"    - {_tool(t)}" for t in plan.approvals]
        out.append("  # what such a call gets when the client cannot ask a person (it declared no elicitation):")
        out.append("  # deny refuses it; allow lets it run unasked")
        out.append("  approval_fallback: deny")
    if plan.ask_unknown:
        out.append("  # the logs do not say whether the clients that called these can answer an approval")
        out.append("  # (wraps of an older assay, or no decision log): a client that cannot gets approval_fallback")
        out += [f"  #   {quoted(t)}" for t in plan.ask_unknown]
    if plan.unaskable:
        out.append("  # annotated destructive, but left without an approval: a client that called it cannot answer")
        out.append("  # one (it declared no elicitation), so every call would be refused; add it to")
        out.append("  # approval_required once each client of it supports elicitation")
        for t, clients in plan.unaskable:
            said = f" (client {', '.join(quoted(c) for c in clients)})" if clients else ""
            out.append(f"  #   {quoted(t)}{said}")
    if plan.denied:
        out.append("  # called, but denied by the policy in force (left denied):")
        out += [f"  #   {quoted(t)}: {n} denied" for t, n in plan.denied]
    if plan.unused:
        out.append("  # listed by a server but never called (denied):")
        out += [f"  #   {quoted(t)}{' (destructive)' if d else ''}" for t, d in plan.unused]
    if plan.unwritable:
        out.append(f"  # {_n(plan.unwritable, 'tool name')} with a lone surrogate (no YAML form) left out, so denied")
    out += [
        "enforcement:",
        "  # no schemas were guessed: give each allowed tool one under schemas (assay mcp policy --help),",
        "  # then make this deny",
        "  unconstrained_tools: warn",
    ]
    if plan.rules:
        out.append("# path arguments, confined to the directories the observed calls used")
        out.append("path_confinement:")
    for tools, args, within in plan.rules:
        out.append(f"  - tools: [{', '.join(_tool(t) for t in tools)}]")
        out.append(f"    args: [{', '.join(quoted(a) for a in args)}]")
        out.append(f"    within: [{', '.join(quoted(d) for d in within)}]")
    if plan.unconfined:
        out.append("# allowed tools whose path arguments are not confined, and why (--log-arguments:")
        out.append("# assay mcp protect --help, assay mcp wrap --help):")
        out += [f"#   {quoted(t)}: {why}" for t, why in plan.unconfined]
    return "\n".join(out) + "\n"


def approval_summary(plan: Plan) -> list[str]:
    """What the stderr summary says of approvals: which tools need one and what a client
    without elicitation gets, which destructive tools were left unasked and why, and whose
    clients the logs say nothing about."""

    def names(tools: list[str]) -> str:
        shown = ", ".join(quoted(t, lossy=True) for t in tools[:5])
        return shown + (f" and {len(tools) - 5} more" if len(tools) > 5 else "")

    lines: list[str] = []
    if plan.approvals:
        lines.append(
            f"approval needed for {names(plan.approvals)}: a person is asked through the client; "
            "a client without elicitation gets tools.approval_fallback: deny (the call is refused)"
        )
    if plan.unaskable:
        lines.append(
            f"left without approval though annotated destructive: {names([t for t, _ in plan.unaskable])} "
            "(a client that called it declared no elicitation, so it could never approve)"
        )
    if plan.ask_unknown:
        lines.append(
            f"the logs do not say whether the clients of {names(plan.ask_unknown)} can answer an approval "
            "(no assay.client.capabilities record)"
        )
    return lines
