"""JSON with value spans (docs/protect.md): a strict parse of a client config that remembers
where each value sits, so protect replaces only the spans of ``command`` and ``args``. Sans-IO.

The strict reading (duplicate members and NaN/Infinity refused) is :func:`json.loads` with the
shared strict hooks of :mod:`assay.strictjson`; the span parser then walks the checked text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# json.decoder sets scanstring (the C one, or its Python fallback); typeshed leaves it out as undocumented.
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from assay.discover import strip_jsonc
from assay.clients.protect.model import ProtectError
from assay.strictjson import ConstantError, DuplicateMemberError, refuse_constant, unique_pairs


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    members: dict[str, tuple[int, "_Node"]] | None = None  # object: key -> (key start, node)
    items: list["_Node"] | None = None


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WS = " \t\n\r"


class _SpanParser:
    """A strict JSON parser that remembers where each value sits (input already checked by
    :func:`json.loads`, so errors here are unexpected and reported as one line)."""

    def __init__(self, text: str) -> None:
        self.s = text

    def ws(self, i: int) -> int:
        s = self.s
        while i < len(s) and s[i] in _WS:
            i += 1
        return i

    def value(self, i: int) -> _Node:
        s = self.s
        i = self.ws(i)
        c = s[i : i + 1]
        if c == "{":
            members: dict[str, tuple[int, _Node]] = {}
            j = self.ws(i + 1)
            if s[j : j + 1] == "}":
                return _Node(i, j + 1, {}, members=members)
            while True:
                j = self.ws(j)
                if s[j : j + 1] != '"':
                    raise ProtectError(f"expected a member name at offset {j}")
                key, after = scanstring(s, j + 1)
                k = self.ws(after)
                if s[k : k + 1] != ":":
                    raise ProtectError(f"expected ':' at offset {k}")
                node = self.value(k + 1)
                members[key] = (j, node)
                j = self.ws(node.end)
                if s[j : j + 1] == ",":
                    j += 1
                    continue
                if s[j : j + 1] == "}":
                    return _Node(i, j + 1, {k2: n.value for k2, (_, n) in members.items()}, members=members)
                raise ProtectError(f"expected ',' or '}}' at offset {j}")
        if c == "[":
            items: list[_Node] = []
            j = self.ws(i + 1)
            if s[j : j + 1] == "]":
                return _Node(i, j + 1, [], items=items)
            while True:
                node = self.value(j)
                items.append(node)
                j = self.ws(node.end)
                if s[j : j + 1] == ",":
                    j += 1
                    continue
                if s[j : j + 1] == "]":
                    return _Node(i, j + 1, [n.value for n in items], items=items)
                raise ProtectError(f"expected ',' or ']' at offset {j}")
        if c == '"':
            text, end = scanstring(s, i + 1)
            return _Node(i, end, text)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, i):
                return _Node(i, i + len(word), val)
        m = _NUMBER.match(s, i)
        if m:
            return _Node(i, m.end(), json.loads(m.group()))
        raise ProtectError(f"unexpected character at offset {i}")


def _parse_json(text: str, jsonc: bool) -> tuple[str, _Node]:
    """``(text the spans index, root node)``; comments are blanked, never removed, so the
    spans index the original text too."""
    scan = strip_jsonc(text) if jsonc else text
    try:
        json.loads(scan, object_pairs_hook=unique_pairs, parse_constant=refuse_constant)
    except DuplicateMemberError as exc:
        raise ProtectError(f"duplicate key {json.dumps(exc.name, ensure_ascii=False)} in an object") from None
    except ConstantError as exc:
        raise ProtectError(f"{exc.name} is not JSON") from None
    except json.JSONDecodeError as exc:
        hint = " (this client's file is plain JSON: no comments or trailing commas)" if not jsonc else ""
        raise ProtectError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}){hint}") from None
    except RecursionError:
        raise ProtectError("invalid JSON: nested too deeply") from None
    try:
        root = _SpanParser(scan).value(0)
    except RecursionError:
        raise ProtectError("invalid JSON: nested too deeply") from None
    if root.members is None:
        raise ProtectError("the top level is not a JSON object")
    return scan, root
