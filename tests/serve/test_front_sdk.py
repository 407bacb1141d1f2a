"""The `mcp` SDK's Streamable HTTP client against the front, both eras (docs/serve.md, "How a
request flows"): initialize, tools/list, tools/call, a progress notification over the event
stream, the GET stream, DELETE; and the 2026-07-28 era by server/discover."""

from __future__ import annotations

from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.serve.frontfakes import FakeGateway, running


def _client(url: str, user: str, mode: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {user}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode, **options)


async def test_legacy_session_initialize_list_call_progress_get_stream_delete() -> None:
    gateway = FakeGateway()
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)
        gateway.changed.set()

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with running(gateway) as (bound, _stop):
        async with _client(bound.url, "alice", "legacy", message_handler=on_message) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None and client.server_info.name == "fake-gateway"
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["echo", "progress", "block", "ask"]
            echoed = await client.call_tool("echo", {"text": "hi"})
            assert echoed.content[0].text == "alice:hi"  # type: ignore[union-attr]
            called = await client.call_tool("progress", {}, progress_callback=on_progress)
            assert called.content[0].text == "alice:progress"  # type: ignore[union-attr]
            assert progress == [(1, 2, "half")]
            # the GET stream the SDK opens after initialize carries the session's own messages
            await gateway.until(lambda: any("list_changed" in repr(m) for m in seen))
            assert gateway.listening == 1
            assert [key for key, _ in gateway.opened] == ["user:test#alice"]
            assert any(m.get("method") == "notifications/initialized" for _, m in gateway.notes)
        # leaving the client DELETEs the session: the gateway's conversation is closed
        await gateway.until(lambda: gateway.closed >= 1)


async def test_modern_era_discover_then_stateless_calls() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _stop):
        async with _client(bound.url, "bob", "auto") as client:
            assert client.protocol_version == "2026-07-28"
            tools = await client.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            echoed = await client.call_tool("echo", {"text": "yo"})
            assert echoed.content[0].text == "bob:yo"  # type: ignore[union-attr]
        # one conversation per request, each closed once answered; no session was minted
        await gateway.until(lambda: gateway.closed == len(gateway.opened))
    versions = [init["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] for _, init in gateway.opened]
    assert versions and set(versions) == {"2026-07-28"}


async def test_http2_prior_knowledge() -> None:
    gateway = FakeGateway()
    async with running(gateway) as (bound, _stop):
        async with httpx2.AsyncClient(http1=False, http2=True) as http:
            headers = {"authorization": "Bearer carol", "accept": "application/json, text/event-stream"}
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
            response = await http.post(bound.url, json=init, headers=headers)
            assert response.http_version == "HTTP/2"
            assert response.status_code == 200 and response.headers["mcp-session-id"]
