"""`assay mcp preflight` (docs/preflight.md): a thin layer over :func:`assay.preflight.preflight`."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="preflight")
    def preflight_command(
        *,
        policy_root: Annotated[str, Parameter(name="--policy-root")] = ".",
        format: Annotated[Literal["terminal", "json"], Parameter(name="--format")] = "terminal",
    ) -> int:
        """Check that assay-mcp-server on PATH matches this CLI and starts with a policy root.

        Exit codes: 0 ready (the server on PATH matches and accepted the policy root); 2 not ready (missing, unstartable, wrong version, invalid root, startup refused or timed out) and usage errors.

        Parameters
        ----------
        policy_root
            The directory a host would pass to the server as --policy-root.
        format
            terminal (two lines) or json (an assay.mcp_preflight.v0 document).
        """
        import trio

        from assay.preflight import preflight

        report = trio.run(preflight, policy_root)
        sys.stdout.write(report.to_json() if format == "json" else report.to_terminal())
        return report.exit_code
