"""`assay mcp tool`: arrives with its own issue; until then it refuses with exit 2."""

from __future__ import annotations

import cyclopts

from assay.cli.errors import fatal


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="tool")
    def tool_command(*tokens: str) -> int:
        """Not available in this release yet."""
        return fatal("assay mcp tool is not available in this release yet")
