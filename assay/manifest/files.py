"""The thin file layer of the manifest workflow: bounded reads and create-new writes
(docs/manifest.md, "Rules for every file").

Everything else is the sans-IO core; this module only turns paths into bytes (never more than
limit+1 bytes are read) and bytes into a newly created file.
"""

from __future__ import annotations

import errno

from assay.inputs import InputFileError, read_input_file
from assay.manifest.candidate import build_candidate, promote
from assay.manifest.core import MAX_MANIFEST_BYTES, ManifestError, check_output_size, render_document
from assay.manifest.declared import parse_declared
from assay.manifest.publish import PublishError, publish_new

__all__ = ["read_bounded", "write_new", "export_candidate", "promote_files"]


def read_bounded(path: str, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """Read the regular file ``path`` whole, refusing it once more than ``limit`` bytes
    were seen (the shared reader, :func:`assay.inputs.read_input_file`: a FIFO or device is
    refused, never waited on)."""
    try:
        return read_input_file(path, limit=limit, what="manifest")
    except InputFileError as exc:
        if exc.errno == errno.EFBIG:
            raise ManifestError(
                f"reading {path} within the {limit}-byte manifest limit", f"exceeded source bytes limit of {limit}"
            ) from None
        raise ManifestError(f"reading {path}", exc.reason) from None


def write_new(path: str, data: bytes) -> None:
    """Refuse oversized output, then publish create-new (nothing replaced, no residue)."""
    check_output_size(data, path)
    try:
        publish_new(path, data)
    except PublishError as exc:
        raise ManifestError(exc.message) from None


def export_candidate(from_observed: str, out: str) -> None:
    """``assay mcp manifest candidate``: observed bytes -> candidate file."""
    source = read_bounded(from_observed)
    write_new(out, render_document(build_candidate(source)))


def promote_files(candidate: str, source: str, out: str) -> None:
    """``assay mcp manifest promote``: candidate + the same observed bytes -> declared file."""
    candidate_bytes = read_bounded(candidate)
    declared = promote(candidate_bytes, lambda: read_bounded(source))
    data = render_document(declared)
    parse_declared(data)  # what is written must load as a declared baseline
    write_new(out, data)
