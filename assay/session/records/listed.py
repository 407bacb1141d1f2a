"""The ``assay.tool.listed`` event (docs/wrap-records.md, "Tools seen"): one per tool the first
time a ``tools/list`` answer shows it, and again when its identity changes, in the decision log.

What a later reader needs to put approvals and rules on tools (``assay mcp policy suggest``):
the name, the title, the behaviour hints as the server gave them, the input's property names
and JSON types, and the tool's identity. Everything a server chose is bounded: the record of a
hostile definition stays small.

Sans-IO: plain values in, one line's bytes out.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from assay.session.records.encoding import event_line

__all__ = ["HINTS", "LISTED_TYPE", "listed_data", "listed_line", "new_listed_id"]

LISTED_TYPE: Final = "assay.tool.listed"
HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
TEXT_MAX: Final = 256  # characters of a name or title
PROPERTIES_MAX: Final = 64  # properties listed per tool
PROPERTY_NAME_MAX: Final = 128  # characters of a property name
TYPES_MAX: Final = 8  # types of one property
TYPE_MAX: Final = 32  # characters of one type name


def new_listed_id() -> str:
    """``evt_tool_listed_<uuid4>``."""
    return f"evt_tool_listed_{uuid.uuid4()}"


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and ``…(cut: <length> characters)``."""
    return text if len(text) <= limit else f"{text[:limit]}…(cut: {len(text)} characters)"


def _type_of(schema: Any) -> str | list[str] | None:
    """A property's JSON type as its schema gives it: ``"string"``, ``["string", "null"]``, or
    None (no ``type``, or not one of those shapes)."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return _cut(kind, TYPE_MAX)
    if isinstance(kind, list):
        names = [_cut(k, TYPE_MAX) for k in kind[:TYPES_MAX] if isinstance(k, str)]
        return names or None
    return None


def listed_data(
    tool: dict[str, Any],
    *,
    server: str,
    session: str | None,
    digest: str | None,
    schema_hash: str,
    meta_hash: str,
) -> dict[str, Any]:
    """The event's ``data``, members in this order: ``tool``, ``title``?, ``annotations``?,
    ``input_properties``?, ``input_properties_omitted``?, ``tool_definition_digest``?,
    ``schema_hash``, ``meta_hash``, ``session``, ``server``."""
    data: dict[str, Any] = {"tool": _cut(tool["name"], TEXT_MAX)}
    annotations = tool.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    title = tool.get("title")
    if not isinstance(title, str):
        title = annotations.get("title")
    if isinstance(title, str):
        data["title"] = _cut(title, TEXT_MAX)
    hints = {hint: annotations[hint] for hint in HINTS if isinstance(annotations.get(hint), bool)}
    if hints:
        data["annotations"] = hints
    schema = tool.get("inputSchema", tool.get("input_schema"))
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        shown: dict[str, Any] = {}
        for name, prop in properties.items():
            if len(shown) == PROPERTIES_MAX:
                break
            if isinstance(name, str):
                shown[_cut(name, PROPERTY_NAME_MAX)] = _type_of(prop)
        data["input_properties"] = shown
        if len(properties) > len(shown):
            data["input_properties_omitted"] = len(properties) - len(shown)
    if digest is not None:
        data["tool_definition_digest"] = digest
    data["schema_hash"] = schema_hash
    data["meta_hash"] = meta_hash
    data["session"] = session
    data["server"] = server
    return data


def listed_line(event_id: str, time: str, source: str, data: dict[str, Any]) -> bytes:
    """The CloudEvents 1.0 line (no ``datacontenttype``), encoded like every record."""
    return event_line(LISTED_TYPE, event_id, time, source, data)
