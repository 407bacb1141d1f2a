"""What wrap keeps of the server's ``tools/list`` answers, and what it may take out (sans-IO).

The tool-definition digest that decision events bind a call to, the ``nextCursor`` chains
the observed manifest is built from (docs/wrap.md, "One-run outputs and session reports"), and
``--hide-denied-tools``: :func:`hide_tools` removes tools from one answer's ``tools`` array by
cutting their bytes out of the line, so every other member and value reaches the client exactly
as the server wrote it (docs/wrap.md, "Hiding denied tools").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from assay.canonical import jcs_bytes
from assay.policy import Policy, compile_policy
from assay.policy.engine import identity_bytes

__all__ = ["HIDDEN_CODES", "ListChain", "denied_by_name", "hide_tools", "tool_definition_digest"]


def tool_definition_digest(tool: dict[str, Any], label: str) -> str | None:
    """The tool-definition binding of a decision event (docs/wrap-records.md), or None when
    ``inputSchema`` is not an object. Projection: name, trimmed description (left out when
    empty), input_schema, trimmed server id. Never raises on server content."""
    schema = tool.get("inputSchema", tool.get("input_schema"))
    if not isinstance(schema, dict):
        return None
    projection: dict[str, Any] = {"name": tool["name"]}
    description = tool.get("description")
    if isinstance(description, str) and description.strip():
        projection["description"] = description.strip()
    projection["input_schema"] = schema
    projection["server_id"] = label.strip()
    return "sha256:" + hashlib.sha256(identity_bytes(projection)).hexdigest()


class ListChain:
    """One tools/list exchange, following ``nextCursor`` pages.

    A tool whose definition has no canonical JSON form (a lone surrogate, an integer beyond
    what JCS encodes, nesting deeper than the encoder recurses) cannot be digested for the
    observed manifest: it is left out and the chain counts as incomplete, so the manifest says
    so instead of the session end failing on server content."""

    __slots__ = ("tools", "next_cursor", "complete", "skipped")

    def __init__(self) -> None:
        self.tools: list[dict[str, Any]] = []
        self.next_cursor: str | None = None
        self.complete = False
        self.skipped = False

    def add_page(self, tools: list[Any], next_cursor: Any) -> None:
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            try:
                jcs_bytes(tool)
            except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, MemoryError):
                self.skipped = True
                continue
            self.tools.append(tool)
        self.next_cursor = next_cursor if isinstance(next_cursor, str) else None
        self.complete = self.next_cursor is None and not self.skipped


# ---------------------------------------------------------------------------------------------
# --hide-denied-tools
# ---------------------------------------------------------------------------------------------

HIDDEN_CODES = frozenset({"E_TOOL_DENIED", "E_TOOL_NOT_ALLOWED"})
"""The engine's denies that depend on the tool's name alone (deny lists, the allowlist)."""


def denied_by_name(policy: Policy, name: str) -> bool:
    """Whether every call of ``name`` is denied by the policy's deny lists or its allowlist,
    whatever the arguments and the session (the engine's name-only plan)."""
    decision = compile_policy(policy).plan(name).decision
    return decision.outcome == "deny" and decision.reason_code in HIDDEN_CODES


class _Unfit(Exception):
    """The line is not laid out the way the reader read it: it is relayed unchanged."""


_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^,\]} \t\n\r]+")


def _ws(b: bytes, i: int) -> int:
    return _WS.match(b, i).end()  # type: ignore[union-attr]  # matches everywhere (possibly empty)


def _at(b: bytes, i: int) -> int:
    if i >= len(b):
        raise _Unfit
    return b[i]


def _value_end(b: bytes, i: int) -> int:
    """The index just after the JSON value that starts at ``b[i]`` (linear, any depth)."""
    c = _at(b, i)
    if c == 0x22:  # a string
        m = _STRING.match(b, i)
        if m is None:
            raise _Unfit
        return m.end()
    if c not in (0x5B, 0x7B):  # a number or a literal
        m = _SCALAR.match(b, i)
        if m is None:
            raise _Unfit
        return m.end()
    depth = 0
    pos = i
    search = _STRUCTURE.search
    while True:
        m = search(b, pos)
        if m is None:
            raise _Unfit
        j = m.start()
        c = b[j]
        if c == 0x22:
            s = _STRING.match(b, j)
            if s is None:
                raise _Unfit
            pos = s.end()
            continue
        depth += 1 if c in (0x5B, 0x7B) else -1
        pos = j + 1
        if depth == 0:
            return pos


def _last_member(b: bytes, i: int, name: str) -> tuple[int, int]:
    """The span of the value of the last member ``name`` of the object at ``b[i]`` (member
    names decoded, escapes included: the last one is the one JSON readers keep)."""
    if _at(b, i) != 0x7B:
        raise _Unfit
    found: tuple[int, int] | None = None
    i = _ws(b, i + 1)
    if _at(b, i) == 0x7D:
        raise _Unfit
    while True:
        m = _STRING.match(b, i)
        if m is None:
            raise _Unfit
        try:
            key = json.loads(b[m.start():m.end()].decode("utf-8"), strict=False)
        except ValueError:
            raise _Unfit from None
        i = _ws(b, m.end())
        if _at(b, i) != 0x3A:
            raise _Unfit
        start = _ws(b, i + 1)
        end = _value_end(b, start)
        if key == name:
            found = (start, end)
        i = _ws(b, end)
        c = _at(b, i)
        if c == 0x2C:
            i = _ws(b, i + 1)
            continue
        if c == 0x7D:
            if found is None:
                raise _Unfit
            return found
        raise _Unfit


def _elements(b: bytes, i: int) -> tuple[list[tuple[int, int]], int]:
    """The spans of the elements of the array at ``b[i]``, and the index after it."""
    if _at(b, i) != 0x5B:
        raise _Unfit
    spans: list[tuple[int, int]] = []
    i = _ws(b, i + 1)
    if _at(b, i) == 0x5D:
        return spans, i + 1
    while True:
        end = _value_end(b, i)
        spans.append((i, end))
        i = _ws(b, end)
        c = _at(b, i)
        if c == 0x2C:
            i = _ws(b, i + 1)
            continue
        if c == 0x5D:
            return spans, i + 1
        raise _Unfit


def hide_tools(
    line: bytes,
    message: dict[str, Any],
    hidden: Callable[[str], bool],
    read: Callable[[bytes], Any],
) -> bytes | None:
    """``line`` (a ``tools/list`` answer, read as ``message`` by ``read``) without the tools
    whose name ``hidden`` accepts, or None when nothing is to be removed or the line cannot be
    cut faithfully (then it is relayed unchanged; calls of those tools are denied all the same).

    Only the ``tools`` array is rewritten, and only its separators: each kept element keeps
    its exact bytes, and everything outside the array stays as it was (big integers, floats,
    escapes, non-ASCII text, lone surrogate escapes, other members). A line that is not valid
    UTF-8 is never cut (clients disagree on how to read it). The result is read back with
    ``read`` and must equal ``message`` minus the removed tools, value for value; otherwise
    the line is relayed unchanged. Never raises on server content.
    """
    result = message.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return None
    drop = {
        i for i, tool in enumerate(tools)
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and hidden(tool["name"])
    }
    if not drop:
        return None
    try:
        line.decode("utf-8")
        start, end = _last_member(line, _ws(line, 0), "result")
        start, end = _last_member(line, start, "tools")
        spans, after = _elements(line, start)
    except (_Unfit, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    if after != end or len(spans) != len(tools):
        return None
    kept = [line[a:b] for i, (a, b) in enumerate(spans) if i not in drop]
    cut = b"".join((line[:start], b"[", b",".join(kept), b"]", line[end:]))
    expected = dict(message)
    expected["result"] = dict(result)  # type: ignore[arg-type]
    expected["result"]["tools"] = [tool for i, tool in enumerate(tools) if i not in drop]
    try:
        again = read(cut)
        if again.__class__ is not dict or identity_bytes(again) != identity_bytes(expected):
            return None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
        return None
    return cut
