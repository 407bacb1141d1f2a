"""`assay mcp manifest candidate|promote` (docs/manifest.md): thin layer over :mod:`assay.manifest`.

Refusals print one ``fatal: ...`` line and exit 2; success prints nothing on stdout and one note
on stderr, so scripts can rely on the exit code and the created file alone.
"""

from __future__ import annotations

import sys
from typing import Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    manifest = cyclopts.App(
        name="manifest",
        help="Turn an observed tool manifest into a reviewable candidate, then promote it.",
        help_format="plaintext",
    )
    mcp.command(manifest)

    @manifest.command(name="candidate")
    def candidate_command(
        *,
        from_observed: Annotated[str, Parameter(name="--from-observed")],
        out: Annotated[str, Parameter(name="--out")],
    ) -> int:
        """Write a non-approved candidate from one complete observed manifest.

        Parameters
        ----------
        from_observed
            An assay.mcp_manifest_observed.v0 file (at most 1 MiB).
        out
            The candidate to create; an existing path is never replaced.
        """
        from assay.manifest import ManifestError
        from assay.manifest.files import export_candidate

        try:
            export_candidate(from_observed, out)
        except ManifestError as exc:
            return fatal(str(exc))
        sys.stderr.write(f"wrote candidate {out} (not an approval; review it, then run assay mcp manifest promote)\n")
        return 0

    @manifest.command(name="promote")
    def promote_command(
        *,
        candidate: Annotated[str, Parameter(name="--candidate")],
        source: Annotated[str, Parameter(name="--source")],
        out: Annotated[str, Parameter(name="--out")],
    ) -> int:
        """Mint a declared baseline from a candidate and the exact observed bytes it was built from.

        Parameters
        ----------
        candidate
            An assay.mcp_manifest_candidate.v0 file written by `manifest candidate`.
        source
            The observed manifest; must be byte-identical to the one the candidate recorded.
        out
            The assay.declared_mcp_manifest.v0 file to create; an existing path is never replaced.
        """
        from assay.manifest import ManifestError
        from assay.manifest.files import promote_files

        try:
            promote_files(candidate, source, out)
        except ManifestError as exc:
            return fatal(str(exc))
        sys.stderr.write(f"wrote declared manifest {out}\n")
        return 0
