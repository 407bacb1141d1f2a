"""The stdio serving loop of `assay-mcp-server`.

Foundation stage: reads client lines until EOF and exits 0 (spec/server.md C7). The MCP
protocol (spec/server.md §2-§8) replaces this loop in its own issue.
"""

from __future__ import annotations

import sys


def serve_stdio(policy_root: str) -> int:
    """Serve MCP on stdin/stdout with ``policy_root`` as the jail; return the exit code."""
    stdin = sys.stdin.buffer
    while stdin.readline():
        pass
    return 0
