"""`assay mcp kill`: arrives with its own issue; until then it refuses with exit 2."""

from __future__ import annotations

import cyclopts

from assay.cli.errors import fatal


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="kill")
    def kill_command(*tokens: str) -> int:
        """Not available in this release yet."""
        return fatal("assay mcp kill is not available in this release yet")
