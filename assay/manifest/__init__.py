"""Observed -> candidate -> declared MCP tool manifests (docs/manifest.md).

Sans-IO core: :mod:`digests`, :mod:`observed` (producer and strict reader),
:mod:`candidate` (export and promotion), :mod:`declared` (the baseline validator),
:mod:`core` (errors, ceiling, decoding, rendering). File layer: :mod:`files` (bounded reads,
create-new writes) and :mod:`publish` (the reusable create-new publisher).
"""

from assay.manifest.candidate import CANDIDATE_NON_CLAIMS, CANDIDATE_SCHEMA, build_candidate, parse_candidate, promote
from assay.manifest.core import MAX_MANIFEST_BYTES, ManifestError, render_document
from assay.manifest.declared import DECLARED_SCHEMA, parse_declared
from assay.manifest.digests import CANONICALIZATION, field_digest, manifest_digest, tool_digest
from assay.manifest.observed import OBSERVED_NON_CLAIMS, OBSERVED_SCHEMA, observed_document, parse_promotable_observed

__all__ = [
    "MAX_MANIFEST_BYTES",
    "ManifestError",
    "CANONICALIZATION",
    "OBSERVED_SCHEMA",
    "OBSERVED_NON_CLAIMS",
    "CANDIDATE_SCHEMA",
    "CANDIDATE_NON_CLAIMS",
    "DECLARED_SCHEMA",
    "tool_digest",
    "field_digest",
    "manifest_digest",
    "observed_document",
    "parse_promotable_observed",
    "build_candidate",
    "parse_candidate",
    "promote",
    "parse_declared",
    "render_document",
]
