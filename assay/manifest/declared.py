"""The declared approval baseline ``assay.declared_mcp_manifest.v0`` (docs/manifest.md, "4. Promote").

This is the one validator for a declared baseline: promotion checks what it mints with it, and a
server loading ``--declared-mcp-manifest`` should load through :func:`parse_declared` so both
agree on what a valid baseline is. It checks the baseline's internal truth (closed shape, digest
syntax, unique names, a manifest digest that recomputes from the tools), never that the baseline
is the *right* approval. Sans-IO.
"""

from __future__ import annotations

import json
from typing import Any

from assay.manifest import shapes
from assay.manifest.core import ManifestError, decode_json, strip_white_space
from assay.manifest.digests import CANONICALIZATION, FIELD_NAMES, is_canonical_sha256, manifest_digest

__all__ = [
    "DECLARED_SCHEMA",
    "TOOL_SHAPE",
    "normalize_tool",
    "validate_declared_fields",
    "construct_declared",
    "parse_declared",
]

DECLARED_SCHEMA = "assay.declared_mcp_manifest.v0"

TOOL_SHAPE = shapes.closed_object(
    shapes.Field("name", shapes.string),
    shapes.Field("tool_digest", shapes.string),
    shapes.Field("privileged", shapes.nullable(shapes.boolean), required=False),
    shapes.Field("privilege_classification", shapes.nullable(shapes.string), required=False),
    shapes.Field("action_class", shapes.nullable(shapes.string), required=False),
    shapes.Field("field_digests", shapes.nullable(shapes.string_map), required=False),
)

SERVER_SHAPE = shapes.closed_object(shapes.Field("id", shapes.string))

DECLARED_SHAPE = shapes.closed_object(
    shapes.Field("schema", shapes.string),
    shapes.Field("canonicalization", shapes.string),
    shapes.Field("manifest_digest", shapes.string),
    shapes.Field("tools", shapes.array_of(TOOL_SHAPE)),
    shapes.Field("note", shapes.nullable(shapes.string), required=False),
    shapes.Field("server", shapes.nullable(SERVER_SHAPE), required=False),
)


def _q(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def normalize_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool entry in member order, optional members written as ``null``, field digests sorted by key."""
    fields = tool.get("field_digests")
    return {
        "name": tool["name"],
        "tool_digest": tool["tool_digest"],
        "privileged": tool.get("privileged"),
        "privilege_classification": tool.get("privilege_classification"),
        "action_class": tool.get("action_class"),
        "field_digests": None if fields is None else {key: fields[key] for key in sorted(fields)},
    }


def validate_declared_fields(schema: str, canonicalization: str, digest: str, tools: list[dict[str, Any]]) -> None:
    """The checks of a declared baseline in order; the first failure is raised as :class:`ManifestError`."""
    if schema != DECLARED_SCHEMA:
        raise ManifestError(f"schema must be {DECLARED_SCHEMA}, got {_q(schema)}")
    if canonicalization != CANONICALIZATION:
        raise ManifestError(
            f"canonicalization must be {CANONICALIZATION}, got {_q(canonicalization)}; "
            "a digest is only comparable to one computed the same way"
        )
    if not is_canonical_sha256(digest):
        raise ManifestError(f"manifest_digest must be sha256: plus 64 lowercase hex, got {_q(digest)}")
    if not tools:
        raise ManifestError("tools must be a non-empty array")
    seen: set[str] = set()
    for tool in tools:
        name = tool["name"]
        if not strip_white_space(name):
            raise ManifestError("every tool must have a non-empty name")
        if not is_canonical_sha256(tool["tool_digest"]):
            raise ManifestError(
                f"tool {_q(name)} tool_digest must be sha256: plus 64 lowercase hex, got {_q(tool['tool_digest'])}"
            )
        fields = tool.get("field_digests") or {}
        for key in sorted(fields):
            if key not in FIELD_NAMES:
                raise ManifestError(f"tool {_q(name)} has unknown field_digest key {_q(key)}")
            if not is_canonical_sha256(fields[key]):
                raise ManifestError(
                    f"tool {_q(name)} field_digest {_q(key)} must be sha256: plus 64 lowercase hex, got {_q(fields[key])}"
                )
        if name in seen:
            raise ManifestError(f"duplicate tool name {_q(name)} (an approval baseline must be unambiguous)")
        seen.add(name)
    recomputed = manifest_digest((tool["name"], tool["tool_digest"]) for tool in tools)
    if recomputed != digest:
        raise ManifestError(
            f"manifest_digest does not recompute from the declared tools: file says {_q(digest)}, tools yield {_q(recomputed)}"
        )


def construct_declared(
    canonicalization: str, digest: str, tools: list[dict[str, Any]], server_id: str
) -> dict[str, Any]:
    """Mint a declared document (members in the order docs/manifest.md, "4. Promote" lists,
    ``note`` null) and validate it."""
    normalized = [normalize_tool(tool) for tool in tools]
    validate_declared_fields(DECLARED_SCHEMA, canonicalization, digest, normalized)
    return {
        "schema": DECLARED_SCHEMA,
        "canonicalization": canonicalization,
        "manifest_digest": digest,
        "tools": normalized,
        "note": None,
        "server": {"id": server_id},
    }


def parse_declared(data: bytes) -> dict[str, Any]:
    """Strictly parse and validate declared-manifest bytes (already read within the ceiling).

    Returns the document with tools normalized. A candidate is refused here: its extra
    members (``status``, ``approval``, ...) are unknown to the closed declared shape.
    """
    value = decode_json(data, "declared manifest must be valid UTF-8")
    try:
        DECLARED_SHAPE(value, "$")
    except shapes.ShapeError as exc:
        raise ManifestError(str(exc)) from None
    tools = [normalize_tool(tool) for tool in value["tools"]]
    validate_declared_fields(value["schema"], value["canonicalization"], value["manifest_digest"], tools)
    server = value.get("server")
    return {
        "schema": value["schema"],
        "canonicalization": value["canonicalization"],
        "manifest_digest": value["manifest_digest"],
        "tools": tools,
        "note": value.get("note"),
        "server": None if server is None else {"id": server["id"]},
    }
