"""The tools listing `assay mcp auth login` checks a login with (the shell; docs/auth.md,
"Logging in").

The conversation a client has with a Streamable HTTP server, and no more: ``initialize`` (its
``Mcp-Session-Id`` and protocol version kept), ``notifications/initialized``, ``tools/list``
(each page), then the session DELETEd. An answer is a JSON body or an event stream (read with
:class:`assay.shells.upstream_http.sse.SSEDecoder`); every body is capped. The first refused request is where
the OAuth flow starts: the client's auth does it (a login needed is its exception).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from assay._version import __version__
from assay.shells.upstream_http.sse import Event, SSEDecoder

__all__ = ["CAP", "ListingError", "list_tools"]

CAP = 16 << 20  # bytes of one answer
MAX_PAGES = 100
VERSION = "2025-11-25"


class ListingError(Exception):
    """The server did not answer the listing; ``str()`` is one line."""


async def _answer(resp: httpx2.Response, want: int) -> dict[str, Any]:
    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    size = 0
    if kind == "text/event-stream":
        decoder = SSEDecoder(CAP)
        async for chunk in resp.aiter_bytes():
            for event in decoder.feed(chunk):
                if isinstance(event, Event) and event.type == "message":
                    msg = _json(event.data)
                    if isinstance(msg, dict) and msg.get("id") == want and ("result" in msg or "error" in msg):
                        return msg
        raise ListingError("the server's event stream ended before its answer")
    chunks: list[bytes] = []
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > CAP:
            raise ListingError(f"the server's answer is longer than {CAP} bytes")
        chunks.append(chunk)
    msg = _json(b"".join(chunks))
    if not isinstance(msg, dict) or msg.get("id") != want:
        raise ListingError(f"the server's answer is not a JSON-RPC answer ({kind or 'no content type'})")
    return msg


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


class _Session:
    def __init__(self, client: httpx2.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.session_id: str | None = None
        self.version: str | None = None
        self.next_id = 0

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        async with self.client.stream("POST", self.url, content=body, headers=self._headers()) as resp:
            if resp.status_code >= 300:
                raise ListingError(f"the server answered HTTP {resp.status_code} to {method}")
            sid = resp.headers.get("mcp-session-id")
            if method == "initialize" and sid and sid.isascii() and sid.isprintable():
                self.session_id = sid
            msg = await _answer(resp, self.next_id)
        if "error" in msg:
            error = msg["error"] if isinstance(msg["error"], dict) else {}
            raise ListingError(f"the server refused {method} (JSON-RPC error {error.get('code')})")
        return msg.get("result")

    async def notify(self, method: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method}).encode()
        async with self.client.stream("POST", self.url, content=body, headers=self._headers()) as resp:
            if resp.status_code >= 300:
                raise ListingError(f"the server answered HTTP {resp.status_code} to {method}")

    async def close(self) -> None:
        if self.session_id is None:
            return
        try:
            await self.client.delete(self.url, headers=self._headers())
        except httpx2.HTTPError:
            pass


async def list_tools(client: httpx2.AsyncClient, url: str) -> int:
    """How many tools the server at ``url`` lists to ``client`` (whose auth logs in)."""
    session = _Session(client, url)
    try:
        result = await session.request(
            "initialize",
            {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "assay", "version": __version__}},
        )
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        session.version = (
            version if isinstance(version, str) and version.isascii() and version.isprintable() else VERSION
        )
        await session.notify("notifications/initialized")
        count = 0
        cursor: Any = None
        for _ in range(MAX_PAGES):
            page = await session.request("tools/list", {} if cursor is None else {"cursor": cursor})
            tools = page.get("tools") if isinstance(page, dict) else None
            count += len(tools) if isinstance(tools, list) else 0
            cursor = page.get("nextCursor") if isinstance(page, dict) else None
            if not isinstance(cursor, str) or not cursor:
                break
        return count
    except httpx2.TransportError as exc:
        raise ListingError(f"connection lost ({type(exc).__name__})") from None
    finally:
        await session.close()
