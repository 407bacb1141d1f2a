"""Who this server is: the program name and the one serverInfo object.

A leaf module (it imports nothing of the server), so the entry point, the protocol and the
identity tool share it without importing each other.
"""

from __future__ import annotations

from assay._version import __version__

__all__ = ["PROG", "server_info"]

PROG = "assay-mcp-server"


def server_info() -> dict[str, str]:
    """The serverInfo of the `initialize` result, and the payload of `assay_server_identity`."""
    return {"name": PROG, "version": __version__}
