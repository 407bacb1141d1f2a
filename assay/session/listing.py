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
from assay.policy.decision import Outcome
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
    return decision.outcome is Outcome.DENY and decision.reason_code in HIDDEN_CODES


class _Unfit(Exception):
    """The line is not laid out the way the reader read it: it is relayed unchanged."""


_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR = re.compile(r"[^,\]} \t\n\r]+")
_raw_decode = json.JSONDecoder(strict=False).raw_decode  # C speed; NaN and Infinity included


SCAN_BUDGET = 200_000
"""Strings and brackets the slow scan may step over in one line (only values the standard
library's reader refuses get there: nesting beyond its recursion limit, numbers beyond int());
a line that needs more is relayed unchanged (a fraction of a second, never a stall)."""


def _ws(t: str, i: int) -> int:
    return _WS.match(t, i).end()  # type: ignore[union-attr]  # matches everywhere (possibly empty)


def _at(t: str, i: int) -> str:
    if i >= len(t):
        raise _Unfit
    return t[i]


class _Scan:
    """Spans of one line's values, read once each (linear in the line)."""

    __slots__ = ("t", "budget")

    def __init__(self, text: str) -> None:
        self.t = text
        self.budget = SCAN_BUDGET

    def value_end(self, i: int) -> int:
        """The index just after the JSON value that starts at ``t[i]``: the standard library's
        reader where it can (C speed), else a linear scan of strings and brackets."""
        t = self.t
        c = _at(t, i)
        try:
            return _raw_decode(t, i)[1]
        except (ValueError, RecursionError, MemoryError):
            pass
        if c == '"':
            m = _STRING.match(t, i)
            if m is None:
                raise _Unfit
            return m.end()
        if c not in "[{":  # a number or a literal
            m = _SCALAR.match(t, i)
            if m is None:
                raise _Unfit
            return m.end()
        depth = 0
        pos = i
        search = _STRUCTURE.search
        budget = self.budget
        while True:
            budget -= 1
            if budget < 0:
                raise _Unfit
            m = search(t, pos)
            if m is None:
                raise _Unfit
            j = m.start()
            c = t[j]
            if c == '"':
                s = _STRING.match(t, j)
                if s is None:
                    raise _Unfit
                pos = s.end()
                continue
            depth += 1 if c in "[{" else -1
            pos = j + 1
            if depth == 0:
                self.budget = budget
                return pos

    def walk(self, i: int, path: tuple[str, ...]) -> tuple[tuple[int, list[tuple[int, int]], int] | None, int]:
        """Walk the object at ``t[i]`` down ``path`` (member names decoded, escapes included; of
        a member given twice the last counts, as in every JSON reader the clients use) to an
        array: ``((start, element spans, end) or None, the index after the object)``."""
        t = self.t
        if _at(t, i) != "{":
            raise _Unfit
        found: tuple[int, list[tuple[int, int]], int] | None = None
        i = _ws(t, i + 1)
        if _at(t, i) == "}":
            return None, i + 1
        while True:
            m = _STRING.match(t, i)
            if m is None:
                raise _Unfit
            try:
                key = json.loads(m.group(), strict=False)
            except ValueError:
                raise _Unfit from None
            i = _ws(t, m.end())
            if _at(t, i) != ":":
                raise _Unfit
            start = _ws(t, i + 1)
            if key != path[0]:
                end = self.value_end(start)
            elif len(path) > 1 and _at(t, start) == "{":
                found, end = self.walk(start, path[1:])
            elif len(path) == 1 and _at(t, start) == "[":
                spans, end = self.elements(start)
                found = (start, spans, end)
            else:
                found, end = None, self.value_end(start)
            i = _ws(t, end)
            c = _at(t, i)
            if c == ",":
                i = _ws(t, i + 1)
                continue
            if c == "}":
                return found, i + 1
            raise _Unfit

    def elements(self, i: int) -> tuple[list[tuple[int, int]], int]:
        """The spans of the elements of the array at ``t[i]``, and the index after it."""
        t = self.t
        if _at(t, i) != "[":
            raise _Unfit
        spans: list[tuple[int, int]] = []
        i = _ws(t, i + 1)
        if _at(t, i) == "]":
            return spans, i + 1
        while True:
            end = self.value_end(i)
            spans.append((i, end))
            i = _ws(t, end)
            c = _at(t, i)
            if c == ",":
                i = _ws(t, i + 1)
                continue
            if c == "]":
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
        i
        for i, tool in enumerate(tools)
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and hidden(tool["name"])
    }
    if not drop:
        return None
    try:
        text = line.decode("utf-8")  # valid UTF-8: decoding and encoding again give the same bytes
        found, _after = _Scan(text).walk(_ws(text, 0), ("result", "tools"))
    except (_Unfit, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    if found is None or len(found[1]) != len(tools):
        return None
    start, spans, end = found
    kept = [text[a:b] for i, (a, b) in enumerate(spans) if i not in drop]
    cut = "".join((text[:start], "[", ",".join(kept), "]", text[end:])).encode("utf-8")
    expected = dict(message)
    expected["result"] = dict(result)  # type: ignore[arg-type]
    expected["result"]["tools"] = [tool for i, tool in enumerate(tools) if i not in drop]
    try:
        again = read(cut)
        if again.__class__ is not dict:
            return None
        try:
            same = again == expected
        except RecursionError:  # deeper than == recurses: identity_bytes is iterative
            same = False
        if not same and identity_bytes(again) != identity_bytes(expected):  # NaN != NaN, deep values
            return None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
        return None
    return cut
