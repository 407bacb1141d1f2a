"""``Mcp-Param-*`` headers of a 2026-07-28 ``tools/call`` (sans-IO): docs/remote.md, "Requests
and headers".

A tool's input schema may mark a property with ``x-mcp-header: <token>``; a client then mirrors
that argument into the ``Mcp-Param-<token>`` header of each call, so that something in front of
the server can route on it without reading the body. wrap speaks HTTP in the client's place, so
it learns the marks from the ``tools/list`` answers it relays (:func:`header_map`) and adds the
headers to each call (:func:`param_headers`), as the SDK clients do:

- a mark counts on a property reached from the root through ``properties`` alone, of type
  ``string``, ``integer`` or ``boolean``, whose token is an HTTP field name, unique without
  regard to case; a schema with any other mark has none that count (a conforming client
  leaves such a tool's headers out);
- a value is sent when present and not null: a boolean as ``true``/``false``, a number as
  written, a string as is, or base64-wrapped (:func:`assay.shells.upstream_http.messages.header_value`) when
  it would not survive an HTTP field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from assay.shells.upstream_http.messages import header_value

__all__ = ["MAX_DEPTH", "PREFIX", "header_map", "param_headers"]

PREFIX = "Mcp-Param-"
MARK = "x-mcp-header"
MAX_DEPTH = 32  # deeper schemas are not walked (and give no headers)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_TYPES = ("string", "integer", "boolean")
_DATA = frozenset({"default", "examples", "const", "enum"})  # values, not schemas


def header_map(schema: Any) -> dict[tuple[str, ...], str]:
    """property path -> token of every mark that counts; {} when any mark is invalid."""
    found: dict[tuple[str, ...], str] = {}
    seen: set[str] = set()
    stack: list[tuple[Any, tuple[str, ...] | None, int]] = [(schema, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return {}
        if isinstance(node, list):
            stack.extend((item, None, depth + 1) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if MARK in node:
            token = node[MARK]
            if (
                not path
                or not isinstance(token, str)
                or not _TOKEN.match(token)
                or node.get("type") not in _TYPES
                or token.lower() in seen
            ):
                return {}
            seen.add(token.lower())
            found[path] = token
        for key, value in node.items():
            if key in _DATA or key == MARK:
                continue
            if key == "properties" and path is not None and isinstance(value, dict):
                stack.extend((sub, (*path, name), depth + 1) for name, sub in value.items())
            else:
                stack.append((value, None, depth + 1))
    return found


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        try:
            return str(value)
        except ValueError:  # an integer beyond the digit limit
            return None
    return None


def param_headers(marks: Mapping[tuple[str, ...], str], arguments: Any) -> list[tuple[str, str]]:
    """The ``Mcp-Param-*`` headers of one call's ``arguments``."""
    headers: list[tuple[str, str]] = []
    for path, token in marks.items():
        node = arguments
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        rendered = None if node is None else _render(node)
        if rendered is not None:
            headers.append((PREFIX + token, header_value(rendered)))
    return headers
