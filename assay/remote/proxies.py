"""Which requests go through a proxy (docs/remote.md, "TLS"; docs/auth.md, "What is sent where").

The one rule every HTTP client of assay's remote side is built with (the MCP server's, the
OAuth client's): proxies from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
``NO_PROXY``) are honoured, except that a loopback host (``localhost``, a name under
``.localhost``, ``127.0.0.0/8``, ``::1``) is always reached directly: a token for a server on
this machine never travels to a proxy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOOPBACK_PATTERNS", "client_routing"]

# httpx2 URL patterns; a pattern mapped to None uses the client's direct transport, and these
# are more specific than the environment's scheme-wide proxy patterns, so they win.
LOOPBACK_PATTERNS = ("all://localhost", "all://*.localhost", "all://127.0.0.0/8", "all://[::1]")


def client_routing() -> dict[str, Any]:
    """The keyword arguments of ``httpx2.AsyncClient`` that say how requests are routed."""
    return {"trust_env": True, "mounts": dict.fromkeys(LOOPBACK_PATTERNS)}
