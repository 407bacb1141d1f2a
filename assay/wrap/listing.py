"""What wrap keeps of the server's ``tools/list`` answers (sans-IO).

The tool-definition digest that decision events bind a call to, and the ``nextCursor`` chains
the observed manifest is built from (docs/wrap.md, "One-run outputs and session reports").
"""

from __future__ import annotations

import hashlib
from typing import Any

from assay.canonical import jcs_bytes
from assay.policy.engine import identity_bytes

__all__ = ["ListChain", "tool_definition_digest"]


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
