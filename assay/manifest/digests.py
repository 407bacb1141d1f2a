"""Canonical tool and manifest digests (docs/manifest.md, "1. Get an observed manifest"). Sans-IO.

One function per digest so that the producer (wrap's observed manifest), the candidate check and
the declared-manifest validator cannot drift apart: a digest is only comparable to another one
computed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from assay.canonical import jcs_digest

__all__ = [
    "CANONICALIZATION",
    "FIELD_PROJECTION",
    "FIELD_NAMES",
    "is_canonical_sha256",
    "tool_projection",
    "tool_digest",
    "field_digest",
    "field_digests",
    "manifest_digest",
]

CANONICALIZATION = "assay.mcp_manifest_projection.v0"
FIELD_PROJECTION = "assay.mcp_tool_field.v0"
FIELD_NAMES = ("description", "input_schema", "output_schema", "annotations")

_CANONICAL_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def is_canonical_sha256(value: object) -> bool:
    """``sha256:`` plus exactly 64 lowercase hex: digests are compared as exact bytes."""
    return isinstance(value, str) and _CANONICAL_SHA256.fullmatch(value) is not None


def tool_projection(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The five members a tool digest covers (camelCase schema keys win over snake_case)."""
    name = tool.get("name")

    def pick(camel: str, snake: str) -> Any:
        if camel in tool:
            return tool[camel]
        return tool.get(snake)

    return {
        "name": name if isinstance(name, str) else "",
        "description": tool.get("description"),
        "input_schema": pick("inputSchema", "input_schema"),
        "output_schema": pick("outputSchema", "output_schema"),
        "annotations": tool.get("annotations"),
    }


def tool_digest(tool: Mapping[str, Any]) -> str:
    """``sha256:`` digest of the JCS bytes of :func:`tool_projection` (raw name hashed)."""
    return jcs_digest(tool_projection(tool))


def field_digest(field: str, value: Any) -> str:
    """Attribution digest of one projected field; never part of any other preimage."""
    return jcs_digest({"projection": FIELD_PROJECTION, "field": field, "value": value})


def field_digests(tool: Mapping[str, Any]) -> dict[str, str]:
    """:func:`field_digest` of all four fields, in the order the observed producer writes them."""
    projection = tool_projection(tool)
    return {field: field_digest(field, projection[field]) for field in FIELD_NAMES}


def manifest_digest(pairs: Iterable[tuple[str, str]]) -> str:
    """Digest over ``(name, tool_digest)`` pairs sorted by name then digest (code points)."""
    ordered = sorted((str(name), str(digest)) for name, digest in pairs)
    return jcs_digest(
        {
            "projection": CANONICALIZATION,
            "tools": [{"name": name, "tool_digest": digest} for name, digest in ordered],
        }
    )
