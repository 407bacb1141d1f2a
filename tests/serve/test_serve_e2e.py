"""`assay mcp serve` as a real process (docs/serve.md): OAuth tokens checked against a JWKS on
127.0.0.1 and an API key, a stdio upstream (started per user) and a remote one (the Python SDK's
Streamable HTTP server, which refuses any Authorization but its own static credential), the MCP
Python SDK client in both eras. One agent session per user across upstreams and connections;
the upstream never sees the user's token; records carry the user."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gwsupport import POLICY, STDIO_SERVER, remote_server

ASSAY = str(Path(sys.executable).parent / "assay")
API_KEY = "bob-key-0123456789"


@contextmanager
def issuer() -> Iterator[tuple[str, RSAKey]]:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    body = json.dumps({"keys": [key.as_dict(private=False)]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", key
    finally:
        server.shutdown()


def token(iss: str, key: RSAKey, sub: str, aud: str, *, exp: int = 3600, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": iss, "sub": sub, "aud": aud, "iat": now, "exp": now + exp, "scope": "mcp", **claims}
    return jwt.encode({"alg": "RS256", "kid": "k1"}, body, key)


@asynccontextmanager
async def serve(
    tmp: Path, iss: str, remote: str, policy: str = POLICY, extra: str = ""
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    (tmp / "policy.yaml").write_text(policy)
    (tmp / "keys.txt").write_text(f"bob sha256:{hashlib.sha256(API_KEY.encode()).hexdigest()}\n")
    (tmp / "web.token").write_text("static-up\n")
    (tmp / "serve.yaml").write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
public_url: http://127.0.0.1/mcp
state_dir: {tmp / "state"}
identity:
  oauth: {{issuer: "{iss}", jwks_url: "{iss}/jwks", scopes: [mcp]}}
  api_keys: keys.txt
logs: {{audit: audit.ndjson}}
upstreams:
  local: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]}}
  web:
    url: "{remote}"
    credential: {{header: Authorization, prefix: "Bearer ", value: {{file: web.token}}}}
{extra}"""
    )
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(tmp / "serve.yaml")], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    assert proc.stderr is not None
    try:
        line = await trio.to_thread.run_sync(proc.stderr.readline)
        assert line.startswith(b"assay: serving http://127.0.0.1:"), line
        url = line.split()[2].decode()
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            await trio.to_thread.run_sync(proc.wait, 30)


def client(url: str, bearer: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def text(result: Any) -> str:
    return str(result.content[0].text)  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_users_sessions_across_upstreams_in_both_eras(tmp_path: Path, mode: str) -> None:
    with issuer() as (iss, key), trio.fail_after(120):
        async with remote_server(tmp_path, {"E2E_EXPECT_AUTH": "Bearer static-up"}) as remote:
            async with serve(tmp_path, iss, remote) as (url, proc):
                alice = token(iss, key, "alice", "http://127.0.0.1/mcp")
                async with client(url, alice, mode) as a:
                    names = sorted(t.name for t in (await a.list_tools()).tools)
                    assert "local__read_secret" in names and "web__echo" in names
                    assert "local__delete_all" not in names  # denied by name: hidden
                    assert not (await a.call_tool("web__echo", {"message": "hi"})).is_error  # static credential
                    assert text(await a.call_tool("local__read_secret", {})) == "the plans are in the drawer"
                    sent = await a.call_tool("web__echo", {"message": "the plans"})
                    assert sent.is_error and text(sent) == "Content blocked by policy"
                # another connection of alice: the same agent session
                async with client(url, alice, mode) as a2:
                    assert (await a2.call_tool("local__send", {"text": "x"})).is_error
                # bob (an API key) is another user: his send goes
                async with client(url, API_KEY, mode) as b:
                    assert text(await b.call_tool("local__send", {"text": "x"})) == "sent x"
                # bad tokens: expired, another audience, signed by another key
                other = RSAKey.generate_key(2048, parameters={"kid": "k1"})
                for bad in (
                    token(iss, key, "alice", "http://127.0.0.1/mcp", exp=-120),
                    token(iss, key, "alice", "https://elsewhere/mcp"),
                    token(iss, other, "alice", "http://127.0.0.1/mcp"),
                ):
                    async with httpx2.AsyncClient() as http:
                        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
                        r = await http.post(
                            url,
                            json=init,
                            headers={"Authorization": f"Bearer {bad}", "Accept": "application/json, text/event-stream"},
                        )
                        assert r.status_code == 401 and "invalid_token" in r.headers["www-authenticate"]
                        assert bad not in r.text and bad.split(".")[1] not in r.text
            assert proc.returncode == 0
    audit = [json.loads(line) for line in (tmp_path / "audit.ndjson").read_text().splitlines()]
    assert {(r["subject"], r["server"]) for r in audit} >= {("alice", "local"), ("alice", "web"), ("bob", "local")}
    assert {r["session"] for r in audit if r["subject"] == "alice"} == {f"user:{iss}#alice"}
    denied = [r for r in audit if r["decision"] == "deny"]
    assert [(r["subject"], r["server"], r["tool"]) for r in denied] == [
        ("alice", "web", "echo"),
        ("alice", "local", "send"),
    ]
    assert all("nothing leaves" in r["reason"] for r in denied)
    res = subprocess.run(
        [ASSAY, "mcp", "log", str(tmp_path / "audit.ndjson"), "--json", "--subject", "bob"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and [json.loads(x)["tool"] for x in res.stdout.splitlines()] == ["send"]
    assert os.path.exists(tmp_path / "state")


TS_CLIENT = Path(__file__).resolve().parent.parent / "e2e" / "ts_serve_client.mjs"


@pytest.mark.parametrize(("sdk", "mode"), [("v1", None), ("v2", "auto")])
async def test_typescript_clients_through_serve(tmp_path: Path, sdk: str, mode: str | None) -> None:
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (./dev test installs it and the pinned MCP packages)", pytrace=False)
    with issuer() as (iss, key), trio.fail_after(120):
        async with remote_server(tmp_path, {"E2E_EXPECT_AUTH": "Bearer static-up"}) as remote:
            async with serve(tmp_path, iss, remote) as (url, _proc):
                alice = token(iss, key, "alice", "http://127.0.0.1/mcp")
                steps = [
                    {"op": "list"},
                    {"op": "call", "name": "local__read_secret"},
                    {"op": "call", "name": "web__echo", "arguments": {"message": "the plans"}},
                ]
                spec = {"sdk": sdk, "mode": mode, "url": url, "token": alice, "steps": steps}
                done = await trio.run_process(
                    [node, str(TS_CLIENT)], stdin=json.dumps(spec).encode(), capture_stdout=True, capture_stderr=True
                )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    era = "2026-07-28" if sdk == "v2" else "2025-11-25"  # v2 on auto settles on the modern era
    assert lines[0] == {"kind": "connected", "protocolVersion": era}, done.stderr
    assert "local__read_secret" in lines[1]["tools"] and "local__delete_all" not in lines[1]["tools"]
    assert lines[2] == {
        "kind": "call",
        "name": "local__read_secret",
        "is_error": False,
        "texts": ["the plans are in the drawer"],
        "asked": 0,
        "sampled": 0,
    }
    # the send after the secret read is denied: the flow rule spans the user's upstreams
    denied = lines[3]
    assert denied["is_error"] is True and denied["texts"][0] == "Content blocked by policy", denied
    contract = json.loads(denied["texts"][1])
    assert contract["error_code"] == "E_SEQUENCE_VIOLATION" and contract["rule"] == "no-exfiltration"


async def test_bad_requests_to_a_real_serve_reach_no_upstream(tmp_path: Path) -> None:
    """A header that disagrees with the body (-32020), a foreign Origin (403), a body over the cap
    (413), malformed JSON (400): refused by the front of a real `assay mcp serve`, and the remote
    upstream's call log stays empty."""
    with issuer() as (iss, key), trio.fail_after(120):
        async with remote_server(tmp_path, {"E2E_EXPECT_AUTH": "Bearer static-up"}) as remote:
            async with serve(tmp_path, iss, remote) as (url, _proc):
                alice = token(iss, key, "alice", "http://127.0.0.1/mcp")
                base = {"Authorization": f"Bearer {alice}", "Accept": "application/json, text/event-stream"}
                meta = {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
                call = {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {"name": "web__echo", "arguments": {"message": "x"}, "_meta": meta},
                }
                modern = {**base, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
                async with httpx2.AsyncClient(timeout=30) as http:
                    r = await http.post(url, json=call, headers={**modern, "Mcp-Name": "web__other"})
                    assert r.status_code == 400 and r.json()["error"]["code"] == -32020 and r.json()["id"] == 7
                    r = await http.post(
                        url, json=call, headers={**modern, "Mcp-Name": "web__echo", "Origin": "https://evil.example"}
                    )
                    assert r.status_code == 403
                    huge = {**call, "params": {**call["params"], "arguments": {"message": "x" * (5 << 20)}}}
                    r = await http.post(url, json=huge, headers={**modern, "Mcp-Name": "web__echo"})
                    assert r.status_code == 413
                    r = await http.post(
                        url,
                        content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                        headers={**base, "Content-Type": "application/json"},
                    )
                    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
                    # the same call, well formed, does reach the upstream (the log is the upstream's)
                    r = await http.post(url, json=call, headers={**modern, "Mcp-Name": "web__echo"})
                    assert r.status_code == 200, r.text
    # only the well-formed call reached the upstream
    calls = [json.loads(line) for line in (tmp_path / "calls.ndjson").read_text().splitlines()]
    assert calls == [{"tool": "echo", "arguments": {"message": "x"}}]
