"""A 2025-era MCP session opened over plain HTTP (httpx2), for the tests that talk to a real
`assay mcp serve` without an SDK client (docs/serve.md, "2025 era")."""

from __future__ import annotations

from typing import Any

import httpx2

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def open_session(
    http: httpx2.AsyncClient,
    url: str,
    *,
    version: str = "2025-06-18",
    client: tuple[str, str] = ("t", "1"),
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """``initialize`` then ``notifications/initialized`` (each checked: 200, then 202); the
    headers of the session's next requests (``headers``, else :data:`ACCEPT`, with the session
    id and the protocol version)."""
    base = ACCEPT if headers is None else headers
    init: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": client[0], "version": client[1]},
        },
    }
    opened = await http.post(url, json=init, headers=base)
    assert opened.status_code == 200, opened.text
    session = {**base, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=session)).status_code == 202
    return session
