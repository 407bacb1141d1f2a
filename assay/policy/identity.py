"""Tool identities (docs/policy.md, "Tool pins"; docs/wrap.md, "Tool pins"): what a ``tools/list``
entry is, as compared with a pin. :class:`ToolIdentity` is ``(server_id, tool_name, schema_hash,
meta_hash)``; :func:`tool_identity` hashes one entry; :func:`identity_bytes` is the canonical
form those hashes are taken over.
"""

from __future__ import annotations

import hashlib
import json as _json
from typing import Any

from assay.canonical import jcs_bytes

__all__ = ["ToolIdentity", "identity_bytes", "tool_identity"]


class ToolIdentity(tuple[str, str, str, str]):
    """``(server_id, tool_name, schema_hash, meta_hash)`` as observed or pinned (docs/policy.md, "Tool pins")."""

    __slots__ = ()

    def __new__(cls, server_id: str, tool_name: str, schema_hash: str, meta_hash: str) -> "ToolIdentity":
        return tuple.__new__(cls, (server_id, tool_name, schema_hash, meta_hash))

    @property
    def server_id(self) -> str:
        return self[0]

    @property
    def tool_name(self) -> str:
        return self[1]

    @property
    def schema_hash(self) -> str:
        return self[2]

    @property
    def meta_hash(self) -> str:
        return self[3]

    def fingerprint(self) -> str:
        return f"{self[0]}:{self[1]}:{self[2][:8]}"

    def to_dict(self) -> dict[str, str]:
        return {"server_id": self[0], "tool_name": self[1], "schema_hash": self[2], "meta_hash": self[3]}


_FALLBACK_TAG = b"\x00assay-noncanonical\x00"  # never the start of a JCS text


def identity_bytes(value: Any) -> bytes:
    """Canonical bytes of a JSON value taken from a server: RFC 8785 (JCS) when the value has a
    JCS form, else a tagged fallback form. Never raises on parsed JSON content.

    Servers send what JCS cannot encode (lone surrogates such as ``"\\ud83d"``, integers above
    1e308, ``NaN``, nesting deeper than the recursion limit); the fallback is a deterministic,
    iterative encoding (sorted members, ASCII-escaped strings, exact integers) that starts with
    a tag no JCS text starts with, so the two forms never collide.
    """
    try:
        return jcs_bytes(value)
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, MemoryError):
        pass
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        cls = item.__class__
        if cls is _Verbatim:
            out.append(item.text)
        elif cls is str:
            out.append(_json.dumps(item))  # ASCII-escaped: lone surrogates become \\ud83d
        elif item is None or item is True or item is False:
            out.append("null" if item is None else "true" if item else "false")
        elif isinstance(item, int):
            out.append(_int_text(item))
        elif isinstance(item, float):
            out.append(repr(item))
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Verbatim("}"))
            keys = sorted(item, key=str)
            for n, key in enumerate(reversed(keys)):
                stack.append(item[key])
                stack.append(_Verbatim(_json.dumps(str(key)) + ":"))
                if n != len(keys) - 1:
                    stack.append(_Verbatim(","))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Verbatim("]"))
            for n, element in enumerate(reversed(item)):
                stack.append(element)
                if n != len(item) - 1:
                    stack.append(_Verbatim(","))
        else:  # a number too long for int() keeps its digits (json_number_text); else its repr
            text = getattr(item, "json_number_text", None)
            out.append(text if isinstance(text, str) else _json.dumps(repr(item)))
    return _FALLBACK_TAG + "".join(out).encode("ascii", "backslashreplace")


class _Verbatim:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _int_text(number: int) -> str:
    try:
        return str(number)
    except ValueError:  # beyond Python's decimal digit limit: hex is exact and unlimited
        return hex(number)


def tool_identity(tool: dict[str, Any]) -> tuple[str, str]:
    """``(schema_hash, meta_hash)`` of one ``tools/list`` entry (docs/wrap.md, "Tool pins").

    schema_hash = SHA-256 of JCS(``inputSchema``, else ``input_schema``; the bytes ``null`` when
    both are absent or null); meta_hash = SHA-256 of the ``description`` string as given
    (untrimmed), of ``""`` when absent or not a string. Values JCS cannot encode hash their
    :func:`identity_bytes` fallback form; this never raises on parsed JSON content.
    """
    schema = tool.get("inputSchema")
    if schema is None:
        schema = tool.get("input_schema")
    schema_hash = hashlib.sha256(identity_bytes(schema)).hexdigest()
    description = tool.get("description")
    if not isinstance(description, str):
        description = ""
    meta_hash = hashlib.sha256(description.encode("utf-8", "surrogatepass")).hexdigest()
    return schema_hash, meta_hash
