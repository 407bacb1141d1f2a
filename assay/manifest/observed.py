"""The observed manifest ``assay.mcp_manifest_observed.v0``: producer and strict reader
(docs/manifest.md, "1. Get an observed manifest" and "2. Export a candidate"). Sans-IO.

The producer turns one ``tools/list`` result into the document wrap writes (docs/wrap.md,
"One-run outputs and session reports"); the reader accepts only a complete, unambiguous,
self-consistent one, because a candidate built from anything less would ask an operator to
approve something nobody fully saw.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from assay.manifest import shapes
from assay.manifest.core import ManifestError, decode_json, strip_white_space
from assay.manifest.digests import CANONICALIZATION, field_digests, manifest_digest, tool_digest

__all__ = [
    "OBSERVED_SCHEMA",
    "OBSERVED_NON_CLAIMS",
    "parse_promotable_observed",
    "observed_document",
    "sanitize_display",
]

OBSERVED_SCHEMA = "assay.mcp_manifest_observed.v0"
OBSERVED_NON_CLAIMS = (
    "does not judge whether a manifest change is malicious",
    "does not infer tools outside the observed tools/list",
    "does not detect behavior drift under identical metadata",
    "privileged is classifier-derived, not the server's own annotations",
)

_TOOL_SHAPE = shapes.closed_object(
    shapes.Field("name", shapes.string),
    shapes.Field("tool_digest", shapes.string),
    shapes.Field("privileged", shapes.boolean),
    shapes.Field("privilege_classification", shapes.string),
    shapes.Field("action_class", shapes.nullable(shapes.string), required=False),
    shapes.Field("field_digests", shapes.nullable(shapes.string_map), required=False),
)

_OBSERVED_SHAPE = shapes.closed_object(
    shapes.Field("schema", shapes.string),
    shapes.Field("status", shapes.string),
    shapes.Field("server", shapes.closed_object(shapes.Field("id", shapes.string))),
    shapes.Field(
        "observed",
        shapes.closed_object(
            shapes.Field("manifest_digest", shapes.nullable(shapes.string), required=False),
            shapes.Field("canonicalization", shapes.string),
            shapes.Field("tool_count", shapes.uint),
            shapes.Field("privileged_tool_count", shapes.uint),
            shapes.Field("tools_list_observed", shapes.boolean),
            shapes.Field("tools_list_complete", shapes.string),
            shapes.Field("tool_digests", shapes.array_of(_TOOL_SHAPE)),
        ),
    ),
    shapes.Field("non_claims", shapes.array_of(shapes.string)),
)


def parse_promotable_observed(data: bytes) -> dict[str, Any]:
    """Decode, check the closed shape, then the eight promotability checks in order."""
    doc: dict[str, Any] = decode_json(data, "observed manifest must be valid UTF-8")
    try:
        _OBSERVED_SHAPE(doc, "$")
    except shapes.ShapeError as exc:
        raise ManifestError(str(exc)) from None
    body = doc["observed"]
    tools = body["tool_digests"]
    digest = body.get("manifest_digest")
    if doc["schema"] != OBSERVED_SCHEMA or doc["status"] != "observed":
        raise ManifestError(f"source must be an observed {OBSERVED_SCHEMA} artifact")
    if not body["tools_list_observed"] or body["tools_list_complete"] != "complete" or digest is None:
        raise ManifestError("observed source must carry one complete, unambiguous tools/list")
    if body["canonicalization"] != CANONICALIZATION:
        raise ManifestError("observed source uses an unsupported canonicalization")
    if not tools or body["tool_count"] != len(tools):
        raise ManifestError("observed source must carry a non-empty, count-consistent tool list")
    if sum(1 for tool in tools if tool["privileged"]) != body["privileged_tool_count"]:
        raise ManifestError("observed source privileged_tool_count does not match its tools")
    names: set[str] = set()
    for tool in tools:
        if not strip_white_space(tool["name"]) or tool["name"] in names:
            raise ManifestError("observed source tool names must be non-empty and unique")
        names.add(tool["name"])
    if manifest_digest((tool["name"], tool["tool_digest"]) for tool in tools) != digest:
        raise ManifestError("observed source manifest_digest cannot be reproduced from its serialized tool identities")
    if tuple(doc["non_claims"]) != OBSERVED_NON_CLAIMS:
        raise ManifestError("observed source non_claims do not match the observed-v0 contract")
    return doc


def sanitize_display(text: str) -> str:
    """Every control character (Cc) except tab, LF, CR becomes U+FFFD for display."""
    return "".join("\ufffd" if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" else ch for ch in text)


def observed_document(
    server_id: str,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    complete: bool = True,
) -> dict[str, Any]:
    """Build an observed-v0 document from one ``tools/list`` result (docs/wrap.md, "One-run
    outputs and session reports").

    ``tools`` is the concatenated ``tools`` array of the whole ``nextCursor`` chain, or ``None``
    when no ``tools/list`` was seen. ``complete`` is true only when that chain ended without a
    cursor. No privilege classifier is applied: every tool is ``privileged: false``,
    ``unclassified``. Digests hash the raw names; displayed names are sanitised.
    """
    if tools is None:
        return {
            "schema": OBSERVED_SCHEMA,
            "status": "not_observed",
            "server": {"id": sanitize_display(server_id)},
            "observed": {
                "manifest_digest": None,
                "canonicalization": CANONICALIZATION,
                "tool_count": 0,
                "privileged_tool_count": 0,
                "tools_list_observed": False,
                "tools_list_complete": "unknown",
                "tool_digests": [],
            },
            "non_claims": list(OBSERVED_NON_CLAIMS),
        }
    entries = []
    pairs = []
    raw_names = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            tool = {}  # a non-object entry is a tool with no name and no fields
        name = tool.get("name")
        raw = name if isinstance(name, str) else ""
        digest = tool_digest(tool)
        pairs.append((raw, digest))
        raw_names.append(raw)
        entries.append(
            {
                "name": sanitize_display(raw),
                "tool_digest": digest,
                "privileged": False,
                "privilege_classification": "unclassified",
                "action_class": None,
                "field_digests": field_digests(tool),
            }
        )
    ambiguous = len(set(raw_names)) != len(raw_names)
    return {
        "schema": OBSERVED_SCHEMA,
        "status": "ambiguous" if ambiguous else "observed",
        "server": {"id": sanitize_display(server_id)},
        "observed": {
            "manifest_digest": None if ambiguous else manifest_digest(pairs),
            "canonicalization": CANONICALIZATION,
            "tool_count": len(entries),
            "privileged_tool_count": 0,
            "tools_list_observed": True,
            "tools_list_complete": "complete" if complete else "partial",
            "tool_digests": entries,
        },
        "non_claims": list(OBSERVED_NON_CLAIMS),
    }
