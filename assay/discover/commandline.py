"""What a command line is (docs/discover.md): one that runs `assay mcp wrap` (read by the one
reader of wrap lines, :mod:`assay.clients.wrapped`), one that launches one, one that looks like
an MCP server, and the auth a server's credential names suggest. Sans-IO."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from assay.clients.wrapped import WrappedLine, is_assay_executable, parse_wrapped

__all__ = ["MCP_PROCESS_MARKERS", "parse_wrapped", "launched_wrap_lines", "looks_like_mcp_server"]

#: A process whose argv (joined by spaces, lower-cased) contains one of these is an MCP server
#: (docs/discover.md).
MCP_PROCESS_MARKERS = ("mcp-server", "@modelcontextprotocol/server", "mcp_server")


def launched_wrap_lines(argv: Sequence[str], _depth: int = 0) -> list[WrappedLine]:
    """The wrap lines a launcher's argv spells out (``uvx --from assay-mcp assay mcp wrap ...``,
    ``sh -c "assay mcp wrap ..."``), each read by :func:`assay.clients.wrapped.parse_wrapped`.

    Only for running processes, and only as a claim to check against the process tree: a
    launcher counts when one of its descendants *is* such a wrap, with the same options and
    server (:func:`assay.discover.processes.classify_processes`). Scanning stops at ``--``: what
    follows belongs to someone else's child. Tokens holding whitespace are split shell-style."""
    tokens = list(argv)
    found: list[WrappedLine] = []
    for i, token in enumerate(tokens):
        if token == "--":
            break
        if is_assay_executable(token):
            line = parse_wrapped(tokens[i:])
            if line is not None:
                found.append(line)
        if _depth < 2 and any(c.isspace() for c in token):
            try:
                inner = shlex.split(token)
            except ValueError:
                continue
            found.extend(launched_wrap_lines(inner, _depth + 1))
    return found


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
