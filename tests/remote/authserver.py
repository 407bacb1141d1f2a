"""A test authorization server and an OAuth-protected MCP server on one 127.0.0.1 port
(docs/auth.md): protected-resource metadata, authorization-server metadata, dynamic
registration, authorize (approves at once: a redirect with code, state and iss), token
(authorization_code with PKCE, refresh_token with rotation, client_credentials with a secret or
a private_key_jwt assertion), revocation, and an MCPServer over Streamable HTTP at /mcp that
needs a bearer token with the required scope (at /open/mcp it needs none).

Test controls (POST): /test/expire (every access token stops working), /test/revoke (every
refresh token is refused), /test/require?scope=... (the scope /mcp needs). GET /test/stats.

Run: python authserver.py [--lifetime S] [--cc ID:SECRET] [--jwt ID:PUBLIC_KEY_PEM_FILE];
it prints "READY <port>" once it listens.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
import socket
import sys
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


class State:
    def __init__(self, base: str, lifetime: int, cc: dict[str, str], jwt_keys: dict[str, str]) -> None:
        self.base = base
        self.lifetime = lifetime
        self.clients: dict[str, dict[str, Any]] = {cid: {"secret": s} for cid, s in cc.items()}
        self.jwt_keys = jwt_keys
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.required = "mcp"
        self.stats: dict[str, Any] = {"register": 0, "authorize": [], "grants": [], "mcp_401": 0, "mcp_ok": 0}

    def issue(self, client_id: str, scope: str, *, refresh: bool) -> dict[str, Any]:
        token = secrets.token_urlsafe(24)
        self.access[token] = {"client_id": client_id, "scope": scope, "exp": time.time() + self.lifetime}
        out: dict[str, Any] = {"access_token": token, "token_type": "bearer", "expires_in": self.lifetime,
                               "scope": scope}
        if refresh:
            rt = secrets.token_urlsafe(24)
            self.refresh[rt] = {"client_id": client_id, "scope": scope}
            out["refresh_token"] = rt
        return out


def build(state: State) -> Any:
    base = state.base
    resource = f"{base}/mcp"

    async def as_metadata(request: Request) -> Response:
        return JSONResponse({
            "issuer": base, "authorization_endpoint": f"{base}/authorize", "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register", "revocation_endpoint": f"{base}/revoke",
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "private_key_jwt"],
            "scopes_supported": ["mcp", "admin"], "authorization_response_iss_parameter_supported": True,
        })

    async def pr_metadata(request: Request) -> Response:
        return JSONResponse({"resource": resource, "authorization_servers": [base], "scopes_supported": ["mcp"]})

    async def register(request: Request) -> Response:
        body = await request.json()
        state.stats["register"] += 1
        cid = "dyn-" + secrets.token_hex(6)
        method = body.get("token_endpoint_auth_method") or "none"
        entry: dict[str, Any] = {"redirect_uris": body.get("redirect_uris") or []}
        out = {**body, "client_id": cid, "token_endpoint_auth_method": method}
        if method == "client_secret_post":
            entry["secret"] = out["client_secret"] = secrets.token_hex(12)
        state.clients[cid] = entry
        return JSONResponse(out, status_code=201)

    async def authorize(request: Request) -> Response:
        q = request.query_params
        client = state.clients.get(q.get("client_id", ""))
        state.stats["authorize"].append({"scope": q.get("scope"), "resource": q.get("resource")})
        if client is None or q.get("redirect_uri") not in client.get("redirect_uris", [q.get("redirect_uri")]):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        state.codes[code] = {"client_id": q["client_id"], "redirect_uri": q["redirect_uri"],
                             "challenge": q["code_challenge"], "scope": q.get("scope") or "mcp"}
        params = urlencode({"code": code, "state": q.get("state", ""), "iss": base})
        return RedirectResponse(f"{q['redirect_uri']}?{params}", status_code=302)

    def bad(error: str, status: int = 400) -> Response:
        return JSONResponse({"error": error}, status_code=status)

    async def token(request: Request) -> Response:
        form = dict(await request.form())
        kind = form.get("grant_type")
        state.stats["grants"].append(kind)
        if kind == "authorization_code":
            code = state.codes.pop(str(form.get("code")), None)
            if code is None or code["client_id"] != form.get("client_id") or code["redirect_uri"] != form.get("redirect_uri"):
                return bad("invalid_grant")
            client = state.clients[code["client_id"]]
            if client.get("secret") and client["secret"] != form.get("client_secret"):
                return bad("invalid_client", 401)
            digest = hashlib.sha256(str(form.get("code_verifier", "")).encode()).digest()
            if base64.urlsafe_b64encode(digest).decode().rstrip("=") != code["challenge"]:
                return bad("invalid_grant")
            return JSONResponse(state.issue(code["client_id"], code["scope"], refresh=True))
        if kind == "refresh_token":
            old = state.refresh.pop(str(form.get("refresh_token")), None)
            if old is None:
                return bad("invalid_grant")
            return JSONResponse(state.issue(old["client_id"], old["scope"], refresh=True))
        if kind == "client_credentials":
            cid = str(form.get("client_id", ""))
            if form.get("client_assertion"):
                claims = jwt.decode(str(form["client_assertion"]), options={"verify_signature": False})
                cid = str(claims.get("sub", ""))
                key = state.jwt_keys.get(cid)
                try:
                    jwt.decode(str(form["client_assertion"]), key or "", algorithms=["RS256"], audience=base)
                except jwt.PyJWTError:
                    return bad("invalid_client", 401)
            elif state.clients.get(cid, {}).get("secret") != form.get("client_secret") or cid not in state.clients:
                return bad("invalid_client", 401)
            return JSONResponse(state.issue(cid, str(form.get("scope") or "mcp"), refresh=False))
        return bad("unsupported_grant_type")

    async def revoke(request: Request) -> Response:
        form = await request.form()
        state.refresh.pop(str(form.get("token")), None)
        state.access.pop(str(form.get("token")), None)
        return Response(status_code=200)

    async def expire(request: Request) -> Response:
        for entry in state.access.values():
            entry["exp"] = 0
        return Response(status_code=204)

    async def revoke_all(request: Request) -> Response:
        state.refresh.clear()
        return Response(status_code=204)

    async def require(request: Request) -> Response:
        state.required = request.query_params["scope"]
        return Response(status_code=204)

    async def stats(request: Request) -> Response:
        return JSONResponse(state.stats)

    control = Starlette(routes=[
        Route("/.well-known/oauth-authorization-server", as_metadata),
        Route("/.well-known/oauth-protected-resource/mcp", pr_metadata),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/revoke", revoke, methods=["POST"]),
        Route("/test/expire", expire, methods=["POST"]),
        Route("/test/revoke", revoke_all, methods=["POST"]),
        Route("/test/require", require, methods=["POST"]),
        Route("/test/stats", stats),
    ])

    server = MCPServer("oauth-test", version="1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo:{text}"

    mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    meta = f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await mcp_app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == "/open/mcp":
            await mcp_app({**scope, "path": "/mcp", "raw_path": b"/mcp"}, receive, send)
            return
        if path != "/mcp":
            await control(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        value = headers.get(b"authorization", b"").decode()
        entry = state.access.get(value[7:]) if value.startswith("Bearer ") else None
        if entry is None or entry["exp"] <= time.time():
            state.stats["mcp_401"] += 1
            challenge = f'Bearer error="invalid_token", {meta}' if value else f"Bearer {meta}"
            response: Response = JSONResponse({"error": "invalid_token"}, status_code=401,
                                              headers={"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        if not set(state.required.split()) <= set(entry["scope"].split()):
            response = JSONResponse({"error": "insufficient_scope"}, status_code=403, headers={
                "WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{state.required}", {meta}'})
            await response(scope, receive, send)
            return
        state.stats["mcp_ok"] += 1
        await mcp_app(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lifetime", type=int, default=3600)
    parser.add_argument("--cc", action="append", default=[])
    parser.add_argument("--jwt", action="append", default=[])
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    cc = dict(item.split(":", 1) for item in args.cc)
    keys = {}
    for item in args.jwt:
        cid, path = item.split(":", 1)
        with open(path) as f:
            keys[cid] = f.read()
    state = State(f"http://127.0.0.1:{port}", args.lifetime, cc, keys)
    config = uvicorn.Config(build(state), log_level="warning", lifespan="on")
    print(f"READY {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
