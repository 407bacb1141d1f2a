"""`assay mcp discover`: arrives with its own issue; until then it refuses with exit 2."""

from __future__ import annotations

import cyclopts

from assay.cli.errors import fatal


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="discover")
    def discover_command(*tokens: str) -> int:
        """Not available in this release yet."""
        return fatal("assay mcp discover is not available in this release yet")
