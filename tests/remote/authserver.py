"""A test authorization server and an OAuth-protected MCP server on one 127.0.0.1 port
(docs/auth.md): protected-resource metadata, authorization-server metadata, dynamic
registration, authorize (approves at once: a redirect with code, state and iss), the token
endpoint of tests/remote/asgrants.py (client authentication as the metadata offers it; the
authorization code, refresh, client-credentials, token-exchange and JWT bearer grants),
revocation, and an MCPServer over Streamable HTTP at /mcp that needs a bearer token with the
required scope (at /open/mcp it needs none). Every request but the /test/ controls is recorded
(``stats["requests"]``: method and path), so a test can say a server was sent nothing.

Test controls: POST /test/expire (every access token stops working), /test/revoke (every
refresh token is refused), /test/require?scope=... (the scope /mcp needs), /test/switch?as=URL
(the resource's metadata names another authorization server, and every access token stops
working), /test/set?methods=a,b&offline=1&registration=0&metadata_documents=1&prm=0&jag_client=AUD=ID
(what the metadata offers from now on; prm=0: no protected-resource metadata; an ID-JAG for the
audience AUD names the client ID), /test/reset (the first authorization server, methods and scope again), GET
/test/stats, GET /test/id-token?sub=S&aud=CLIENT (an ID token this server signs, with
--idp-key).

Run: python authserver.py [--lifetime S] [--client ID[:SECRET]] [--cc ID:SECRET]
[--jwt ID:PUBLIC_KEY_PEM_FILE] [--auth-methods a,b] [--offline] [--no-registration]
[--metadata-documents] [--idp-key PRIVATE_PEM_FILE --jag-client AUDIENCE=CLIENT]
[--trust-idp ISSUER=PUBLIC_PEM_FILE]; it prints "READY <port>" once it listens.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

import asgrants  # the script's directory is on sys.path

METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]


class State:
    def __init__(self, base: str, args: argparse.Namespace) -> None:
        self.base = base
        self.lifetime = args.lifetime
        self.clients: dict[str, dict[str, Any]] = {}
        for item in args.client:
            cid, _, secret = item.partition(":")
            self.clients[cid] = {"secret": secret or None, "redirect_uris": None}
        for item in args.cc:
            cid, _, secret = item.partition(":")
            self.clients[cid] = {"secret": secret, "redirect_uris": None}
        for item in args.jwt:
            cid, _, path = item.partition(":")
            with open(path) as f:
                self.clients.setdefault(cid, {"redirect_uris": None})["key"] = f.read()
        self.auth_methods = args.auth_methods.split(",") if args.auth_methods else METHODS
        self.initial_methods = list(self.auth_methods)
        self.offline = args.offline
        self.registration = not args.no_registration
        self.metadata_documents = args.metadata_documents
        self.idp_key = None
        if args.idp_key:
            with open(args.idp_key) as f:
                self.idp_key = asgrants.load_key(f.read())
        self.jag_clients = dict(item.split("=", 1) for item in args.jag_client)
        self.trusted_idps: dict[str, Any] = {}
        for item in args.trust_idp:
            issuer, _, path = item.partition("=")
            with open(path) as f:
                self.trusted_idps[issuer] = asgrants.load_key(f.read())
        self.authorization_servers = [base]
        self.prm = True  # the protected-resource metadata is published (and named in challenges)
        self.seen_jti: set[Any] = set()
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.required = "mcp"
        self.stats: dict[str, Any] = {
            "register": 0,
            "authorize": [],
            "grants": [],
            "mcp_401": 0,
            "mcp_401_bearer": 0,
            "mcp_ok": 0,
            "requests": [],
            "token_requests": [],
            "registered": [],
        }

    def scopes(self) -> list[str]:
        return ["mcp", "admin"] + (["offline_access"] if self.offline else [])

    def gives_refresh(self, scope: str) -> bool:
        return not self.offline or "offline_access" in scope.split()

    def issue(self, client_id: str, scope: str, *, refresh: bool) -> dict[str, Any]:
        token = secrets.token_urlsafe(24)
        self.access[token] = {"client_id": client_id, "scope": scope, "exp": time.time() + self.lifetime}
        out: dict[str, Any] = {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": self.lifetime,
            "scope": scope,
        }
        if refresh:
            rt = secrets.token_urlsafe(24)
            self.refresh[rt] = {"client_id": client_id, "scope": scope}
            out["refresh_token"] = rt
        return out


def _loopback_callback(uri: str | None) -> bool:
    parts = urlsplit(uri or "")
    return parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.path == "/callback"


def build(state: State) -> Any:
    base = state.base
    resource = f"{base}/mcp"

    async def as_metadata(request: Request) -> Response:
        doc: dict[str, Any] = {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "revocation_endpoint": f"{base}/revoke",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": [
                "authorization_code",
                "refresh_token",
                "client_credentials",
                asgrants.JWT_BEARER,
                asgrants.TOKEN_EXCHANGE,
            ],
            "token_endpoint_auth_methods_supported": state.auth_methods,
            "scopes_supported": state.scopes(),
            "authorization_response_iss_parameter_supported": True,
        }
        if state.registration:
            doc["registration_endpoint"] = f"{base}/register"
        if state.metadata_documents:
            doc["client_id_metadata_document_supported"] = True
        if state.trusted_idps:
            doc["authorization_grant_profiles_supported"] = ["urn:ietf:params:oauth:grant-profile:id-jag"]
        return JSONResponse(doc)

    async def pr_metadata(request: Request) -> Response:
        if not state.prm:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return JSONResponse(
            {"resource": resource, "authorization_servers": state.authorization_servers, "scopes_supported": ["mcp"]}
        )

    async def register(request: Request) -> Response:
        body = await request.json()
        state.stats["register"] += 1
        state.stats["registered"].append(body)
        cid = "dyn-" + secrets.token_hex(6)
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        entry: dict[str, Any] = {"redirect_uris": body.get("redirect_uris") or [], "method": method}
        out = {**body, "client_id": cid, "token_endpoint_auth_method": method}
        if method in ("client_secret_post", "client_secret_basic"):
            entry["secret"] = out["client_secret"] = secrets.token_hex(12)
        state.clients[cid] = entry
        return JSONResponse(out, status_code=201)

    async def authorize(request: Request) -> Response:
        q = request.query_params
        cid = q.get("client_id", "")
        if cid.startswith("https://") and state.metadata_documents and cid not in state.clients:
            state.clients[cid] = {"redirect_uris": None, "method": "none"}  # a metadata document, taken as is
        client = state.clients.get(cid)
        state.stats["authorize"].append({"scope": q.get("scope"), "resource": q.get("resource"), "client_id": cid})
        allowed = client.get("redirect_uris") if client is not None else []
        ok_redirect = _loopback_callback(q.get("redirect_uri")) if allowed is None else q.get("redirect_uri") in allowed
        if client is None or not ok_redirect:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        state.codes[code] = {
            "client_id": cid,
            "redirect_uri": q["redirect_uri"],
            "challenge": q["code_challenge"],
            "scope": q.get("scope") or "mcp",
        }
        params = urlencode({"code": code, "state": q.get("state", ""), "iss": base})
        return RedirectResponse(f"{q['redirect_uri']}?{params}", status_code=302)

    async def token(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        try:
            answer = asgrants.grant(state, form, request.headers.get("authorization", ""))
        except asgrants.Refused as exc:
            return JSONResponse({"error": exc.error}, status_code=exc.status)
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

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

    async def switch(request: Request) -> Response:
        state.authorization_servers = [request.query_params["as"]]
        await expire(request)
        return Response(status_code=204)

    async def settings(request: Request) -> Response:
        q = request.query_params
        if "methods" in q:
            state.auth_methods = q["methods"].split(",") if q["methods"] else METHODS
        for flag in ("offline", "registration", "metadata_documents", "prm"):
            if flag in q:
                setattr(state, flag, q[flag] == "1")
        if "jag_client" in q:
            audience, _, client = q["jag_client"].partition("=")
            state.jag_clients[audience] = client
        return Response(status_code=204)

    async def reset(request: Request) -> Response:
        state.authorization_servers = [base]
        state.auth_methods = list(state.initial_methods)
        state.required = "mcp"
        state.prm = True
        return Response(status_code=204)

    async def stats(request: Request) -> Response:
        return JSONResponse(state.stats)

    async def id_token(request: Request) -> Response:
        assert state.idp_key is not None
        now = int(time.time())
        claims = {
            "iss": base,
            "sub": request.query_params.get("sub", "alice"),
            "aud": request.query_params["aud"],
            "iat": now,
            "exp": now + int(request.query_params.get("lifetime", "600")),
        }
        return Response(asgrants.sign(claims, state.idp_key, "JWT"), media_type="text/plain")

    control = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", as_metadata),
            Route("/.well-known/oauth-protected-resource/mcp", pr_metadata),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/revoke", revoke, methods=["POST"]),
            Route("/test/expire", expire, methods=["POST"]),
            Route("/test/revoke", revoke_all, methods=["POST"]),
            Route("/test/require", require, methods=["POST"]),
            Route("/test/switch", switch, methods=["POST"]),
            Route("/test/set", settings, methods=["POST"]),
            Route("/test/reset", reset, methods=["POST"]),
            Route("/test/stats", stats),
            Route("/test/id-token", id_token),
        ]
    )

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
        if not path.startswith("/test/"):
            state.stats["requests"].append([scope.get("method"), path])
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
            state.stats["mcp_401_bearer"] += 1 if value else 0
            where = meta if state.prm else 'realm="test"'
            challenge = f'Bearer error="invalid_token", {where}' if value else f"Bearer {where}"
            response: Response = JSONResponse(
                {"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": challenge}
            )
            await response(scope, receive, send)
            return
        if not set(state.required.split()) <= set(entry["scope"].split()):
            response = JSONResponse(
                {"error": "insufficient_scope"},
                status_code=403,
                headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{state.required}", {meta}'},
            )
            await response(scope, receive, send)
            return
        state.stats["mcp_ok"] += 1
        await mcp_app(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lifetime", type=int, default=3600)
    for flag in ("--client", "--cc", "--jwt", "--jag-client", "--trust-idp"):
        parser.add_argument(flag, action="append", default=[])
    parser.add_argument("--auth-methods", default="")
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--no-registration", action="store_true")
    parser.add_argument("--metadata-documents", action="store_true")
    parser.add_argument("--idp-key")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    state = State(f"http://127.0.0.1:{port}", args)
    config = uvicorn.Config(build(state), log_level="warning", lifespan="on")
    print(f"READY {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
