"""What a command line is (docs/discover.md): one that runs `assay mcp wrap`, one that looks like
an MCP server, and the auth a server's credential names suggest. Sans-IO; protect and kill read
command lines the same way."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

__all__ = ["MCP_PROCESS_MARKERS", "runs_assay_wrap", "looks_like_mcp_server"]

#: A process whose argv (joined by spaces, lower-cased) contains one of these is an MCP server
#: (docs/discover.md).
MCP_PROCESS_MARKERS = ("mcp-server", "@modelcontextprotocol/server", "mcp_server")

_ASSAY_SCRIPT_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})


def _basename(token: str) -> str:
    return token.replace("\\", "/").rsplit("/", 1)[-1].lower()


def runs_assay_wrap(argv: Sequence[str], _depth: int = 0) -> bool:
    """Does this command line run `assay mcp wrap` (directly, or inside a shell string)?

    ``argv`` is a config entry's ``[command, *args]`` or a process's argv (for a console script
    that is ``[python, /path/bin/assay, mcp, wrap, ...]``). Scanning stops at ``--``: what
    follows belongs to someone else's child. Tokens holding whitespace (``sh -c "..."``) are
    split shell-style and searched too, so a launcher shim still counts (docs/discover.md).
    """
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token == "--":
            break
        is_assay = _basename(token) in _ASSAY_SCRIPT_NAMES or (
            i > 0 and tokens[i - 1] == "-m" and token in ("assay", "assay.cli")
        )
        if is_assay and tokens[i + 1 : i + 3] == ["mcp", "wrap"]:
            return True
        if _depth < 2 and any(c.isspace() for c in token):
            try:
                inner = shlex.split(token)
            except ValueError:
                inner = token.split()
            if runs_assay_wrap(inner, _depth + 1):
                return True
    return False


def looks_like_mcp_server(argv: Sequence[str]) -> bool:
    """Upstream's process predicate (docs/discover.md)."""
    joined = " ".join(argv).lower()
    return any(marker in joined for marker in MCP_PROCESS_MARKERS)


def _auth_from_names(names: Iterable[str]) -> str:
    """``api_key`` when a credential-looking name is present (docs/discover.md)."""
    for name in names:
        upper = name.upper()
        if "KEY" in upper or "TOKEN" in upper:
            return "api_key"
    return "none"
