"""`assay mcp serve`'s run (docs/serve.md): the trio run of the gateway for the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.gateway.config import ServeConfig


def serve_main(config: ServeConfig, listen: str | None) -> int:
    """Run the gateway until SIGTERM or SIGINT; the exit code."""
    from assay.cli.errors import fatal

    return fatal("assay mcp serve: the gateway is not wired in this build yet (use --check)")
