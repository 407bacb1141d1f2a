"""Candidate export and promotion (docs/manifest.md, "2. Export a candidate" and "4. Promote").
Sans-IO: bytes in, documents out.

A candidate is a review artifact, never an approval: it is always ``status: candidate``,
``approval: not_approved``, and it records the SHA-256 of the exact source bytes. Promotion does
not trust the candidate file: it rebuilds the candidate from the source bytes and requires the two
to be equal value for value, so neither an edited candidate nor a drifted source can be promoted.
"""

from __future__ import annotations

import hashlib
from typing import Any

from assay.manifest import shapes
from assay.manifest.core import ManifestError, decode_json
from assay.manifest.declared import (
    DECLARED_SCHEMA,
    TOOL_SHAPE,
    construct_declared,
    normalize_tool,
    validate_declared_fields,
)
from assay.manifest.digests import is_canonical_sha256
from assay.manifest.observed import parse_promotable_observed

__all__ = [
    "CANDIDATE_SCHEMA",
    "CANDIDATE_NON_CLAIMS",
    "build_candidate",
    "parse_candidate",
    "promote",
]

CANDIDATE_SCHEMA = "assay.mcp_manifest_candidate.v0"
CANDIDATE_NON_CLAIMS = (
    "candidate is not an approval",
    "source_sha256 proves byte identity, not provenance",
    "does not prove the observed server is honest",
    "does not judge whether any tool is safe",
)

_CANDIDATE_SHAPE = shapes.closed_object(
    shapes.Field("schema", shapes.string),
    shapes.Field("status", shapes.string),
    shapes.Field("approval", shapes.string),
    shapes.Field("source_sha256", shapes.string),
    shapes.Field("canonicalization", shapes.string),
    shapes.Field("manifest_digest", shapes.string),
    shapes.Field("server", shapes.closed_object(shapes.Field("id", shapes.string))),
    shapes.Field("tools", shapes.array_of(TOOL_SHAPE)),
    shapes.Field("non_claims", shapes.array_of(shapes.string)),
)


def _validate_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    """The closed candidate contract, then every rule of a declared baseline."""
    if (
        candidate["schema"] != CANDIDATE_SCHEMA
        or candidate["status"] != "candidate"
        or candidate["approval"] != "not_approved"
    ):
        raise ManifestError("candidate status does not describe a non-approved candidate")
    if tuple(candidate["non_claims"]) != CANDIDATE_NON_CLAIMS:
        raise ManifestError("candidate non_claims do not match the closed candidate contract")
    if not is_canonical_sha256(candidate["source_sha256"]):
        raise ManifestError("candidate source_sha256 is not canonical sha256")
    validate_declared_fields(
        DECLARED_SCHEMA, candidate["canonicalization"], candidate["manifest_digest"], candidate["tools"]
    )
    return candidate


def build_candidate(source: bytes) -> dict[str, Any]:
    """The candidate for these exact observed-manifest bytes, members in the order
    docs/manifest.md, "2. Export a candidate" lists."""
    observed = parse_promotable_observed(source)
    body = observed["observed"]
    tools = sorted((normalize_tool(tool) for tool in body["tool_digests"]), key=lambda tool: tool["name"])
    return _validate_candidate(
        {
            "schema": CANDIDATE_SCHEMA,
            "status": "candidate",
            "approval": "not_approved",
            "source_sha256": "sha256:" + hashlib.sha256(source).hexdigest(),
            "canonicalization": body["canonicalization"],
            "manifest_digest": body["manifest_digest"],
            "server": {"id": observed["server"]["id"]},
            "tools": tools,
            "non_claims": list(CANDIDATE_NON_CLAIMS),
        }
    )


def parse_candidate(data: bytes) -> dict[str, Any]:
    """Strictly parse candidate bytes and check the candidate contract."""
    value = decode_json(data, "candidate must be valid UTF-8")
    try:
        _CANDIDATE_SHAPE(value, "$")
    except shapes.ShapeError as exc:
        raise ManifestError(str(exc)) from None
    candidate = {
        "schema": value["schema"],
        "status": value["status"],
        "approval": value["approval"],
        "source_sha256": value["source_sha256"],
        "canonicalization": value["canonicalization"],
        "manifest_digest": value["manifest_digest"],
        "server": {"id": value["server"]["id"]},
        "tools": [normalize_tool(tool) for tool in value["tools"]],
        "non_claims": list(value["non_claims"]),
    }
    return _validate_candidate(candidate)


def promote(candidate_bytes: bytes, load_source: Any) -> dict[str, Any]:
    """The declared document promoting this candidate over its observed source.

    ``load_source`` is called (with no arguments) to obtain the source bytes only after the
    candidate itself passed its checks, so a bad candidate is reported before the source is read.
    Comparison is semantic: whitespace and member order of the candidate file do not matter;
    any value difference (a renamed tool, a dropped member, another ``source_sha256``, the tools
    reordered) refuses.
    """
    candidate = parse_candidate(candidate_bytes)
    source = load_source() if callable(load_source) else load_source
    rebuilt = build_candidate(source)
    if candidate != rebuilt:
        raise ManifestError("candidate does not match the exact observed source bytes")
    return construct_declared(
        candidate["canonicalization"], candidate["manifest_digest"], candidate["tools"], candidate["server"]["id"]
    )
