"""A fake gateway and a fake authenticate for the HTTP front's tests (docs/serve.md, "How a
request flows"): echo tools, one that emits a related notification before it answers, one that
blocks until released; users by a bearer token that names them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from assay.gateway.config import Limits
from assay.gateway.contract import AuthFailure, Emit, GatewayError, Identity
from assay.shells.serve.server import Bound, serve_http

TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object"}}
    for name in ("echo", "progress", "block", "ask")
]
CHALLENGE = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp", scope="mcp"'


async def authenticate(authorization: str | None) -> Identity:
    if authorization is None:
        raise AuthFailure(401, CHALLENGE, "authentication required")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or token in ("", "bad"):
        raise AuthFailure(401, CHALLENGE.replace("Bearer ", 'Bearer error="invalid_token", '), "invalid token")
    if token == "noscope":
        raise AuthFailure(403, 'Bearer error="insufficient_scope", scope="mcp"', "insufficient scope")
    return Identity(key=f"user:test#{token}", subject=token, issuer="test", token=authorization)


def _result(msg: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    meta = (msg.get("params") or {}).get("_meta") or {}
    if "io.modelcontextprotocol/protocolVersion" in meta:  # what a 2026-07-28 result carries
        result = {"resultType": "complete", **result}
        if msg["method"] == "tools/list":
            result.update(ttlMs=0, cacheScope="private")
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


@dataclass
class FakeConversation:
    gateway: FakeGateway
    who: Identity
    closed: bool = False

    async def request(self, message: dict[str, Any], related: Emit) -> dict[str, Any]:
        gw = self.gateway
        gw.requests.append((self.who.key, message))
        method = message["method"]
        params = message.get("params") or {}
        if method == "tools/list":
            return _result(message, {"tools": TOOLS})
        if method == "ping":
            return _result(message, {})
        if method != "tools/call":
            raise GatewayError(-32601, f"Method not found: {method}")
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "progress":
            token = (params.get("_meta") or {}).get("progressToken", "none")
            note = {"progressToken": token, "progress": 1, "total": 2, "message": "half"}
            await related({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        elif name == "block":
            gw.blocked += 1
            gw.changed.set()
            try:
                await gw.release.wait()
            except trio.Cancelled:
                gw.cancelled += 1
                gw.changed.set()
                raise
        elif name == "ask":
            asked = {"inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "sure?"}}}}
            return _result(message, {"resultType": "input_required", **asked})
        elif name != "echo":
            return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "Unknown tool"}}
        text = f"{self.who.subject}:{args.get('text', name)}"
        return _result(message, {"content": [{"type": "text", "text": text}], "isError": False})

    async def notify(self, message: dict[str, Any]) -> None:
        self.gateway.notes.append((self.who.key, message))

    async def listen(self, emit: Emit) -> None:
        self.gateway.listening += 1
        self.gateway.changed.set()
        await emit({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        await trio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True
        self.gateway.closed += 1
        self.gateway.changed.set()


@dataclass
class FakeGateway:
    opened: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    blocked: int = 0
    cancelled: int = 0
    listening: int = 0
    closed: int = 0
    release: trio.Event = field(default_factory=trio.Event)
    changed: trio.Event = field(default_factory=trio.Event)

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[FakeConversation, dict[str, Any]]:
        self.opened.append((who.key, initialize))
        if who.subject == "refused":
            raise GatewayError(-32003, "no upstream for this user")
        asked = initialize.get("params", {}).get("protocolVersion")
        version = asked if asked in ("2025-06-18", "2025-11-25", "2026-07-28") else "2025-11-25"
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "fake-gateway", "version": "1"},
        }
        return FakeConversation(self, who), result

    async def until(self, check: Any) -> None:
        """Waits (on events, not a clock) until ``check()`` holds."""
        while not check():
            self.changed = trio.Event()
            await self.changed.wait()


@asynccontextmanager
async def running(
    gateway: FakeGateway, sealer: Any = None, front: dict[str, Any] | None = None, **limits: Any
) -> AsyncIterator[tuple[Bound, trio.Event]]:
    """The front on 127.0.0.1, a free port; yields where it listens and its stop event.
    ``sealer``: seals its session ids (docs/serve.md, "Several replicas"); ``front``: more
    keyword arguments of ``serve_http`` (``report``, ``tls_cert``...)."""
    stop = trio.Event()
    options = {
        "origins": ("http://good.example",),
        "resource_metadata": {"resource": "http://127.0.0.1/mcp"},
        "sealer": sealer,
        **(front or {}),
    }
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(
            lambda task_status: serve_http(
                listen="127.0.0.1:0",
                gateway=gateway,
                authenticate=authenticate,
                limits=Limits(**limits),
                resource_url="http://127.0.0.1/mcp",
                stop=stop,
                task_status=task_status,
                **options,
            )
        )
        yield bound, stop
        nursery.cancel_scope.cancel()
