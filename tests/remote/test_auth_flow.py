"""`assay mcp auth login` against a real authorization server and a protected MCP server, then
the auth wrap uses (docs/auth.md: "Logging in", "What wrap does with a login", "Machine to
machine", "Step-up")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from assay.auth.lines import NeedsLogin
from assay.shells.upstream_http.tokens import normalize_url, record_path
from tests.remote.conftest import AuthServer, assay, start_server, wrap_auth

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _login(server: AuthServer, state: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    res = assay("mcp", "auth", "login", server.url, "--state-dir", str(state), *extra, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"logged in to {server.url} ")
    path = Path(record_path(str(state), normalize_url(server.url)))
    record: dict[str, Any] = json.loads(path.read_text())
    for secret in (record["tokens"]["access_token"], record["tokens"].get("refresh_token")):
        if secret:
            assert secret not in res.stdout + res.stderr
    return record


def _file(server: AuthServer, state: Path) -> Path:
    return Path(record_path(str(state), normalize_url(server.url)))


async def _tools(server: AuthServer, state: Path, environ: dict[str, str] | None = None) -> tuple[list[str], str]:
    auth = wrap_auth(server.url, state, environ)
    async with httpx2.AsyncClient(auth=auth, timeout=30) as client:
        async with streamable_http_client(server.url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                called = await session.call_tool("echo", {"text": "hi"})
                return [t.name for t in listed.tools], called.content[0].text  # type: ignore[union-attr]


async def _probe(server: AuthServer, state: Path, environ: dict[str, str] | None = None) -> int:
    """What wrap's start probe does: one POST through the auth."""
    auth = wrap_auth(server.url, state, environ)
    async with httpx2.AsyncClient(auth=auth, timeout=30) as client:
        response = await client.post(server.url, json=INIT, headers={"Accept": "application/json, text/event-stream"})
        return response.status_code


async def test_login_stores_a_private_file_and_wrap_auth_lists_and_calls(auth_server, state, env):
    record = _login(auth_server, state, env)
    path = _file(auth_server, state)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert record["url"] == auth_server.url and record["tokens"]["refresh_token"]
    assert record["oauth_metadata"]["token_endpoint"] == f"{auth_server.base}/token"
    stats = auth_server.stats()
    assert stats["register"] == 1
    assert stats["authorize"][-1]["scope"] == "mcp"
    assert stats["authorize"][-1]["resource"] == auth_server.url  # the resource indicator
    assert await _tools(auth_server, state) == (["echo"], "echo:hi")


async def test_an_access_token_past_its_stored_expiry_is_refreshed_before_use(auth_server, state, env):
    record = _login(auth_server, state, env)
    path = _file(auth_server, state)
    record["expires_at"] = 1.0
    path.write_text(json.dumps(record))
    before = auth_server.stats()["mcp_401"]
    assert await _tools(auth_server, state) == (["echo"], "echo:hi")
    stats = auth_server.stats()
    assert stats["grants"][-1] == "refresh_token" and stats["mcp_401"] == before  # no 401 first
    again = json.loads(path.read_text())
    assert again["tokens"]["access_token"] != record["tokens"]["access_token"]
    assert again["expires_at"] > 1000


async def test_an_access_token_the_server_refuses_is_refreshed_once(auth_server, state, env):
    _login(auth_server, state, env)
    auth_server.post("/test/expire")
    assert await _probe(auth_server, state) == 200
    assert auth_server.stats()["grants"][-1] == "refresh_token"


async def test_a_refused_refresh_gives_the_login_line(auth_server, state, env):
    _login(auth_server, state, env)
    auth_server.post("/test/expire")
    auth_server.post("/test/revoke")
    with pytest.raises(NeedsLogin) as caught:
        await _probe(auth_server, state)
    line = str(caught.value)
    assert "\n" not in line and line.endswith(f"run: assay mcp auth login {auth_server.url}")
    assert auth_server.stats()["register"] == 1  # wrap never registers a client


async def test_an_expired_login_whose_refresh_is_refused_says_so(auth_server, state, env):
    record = _login(auth_server, state, env)
    record["expires_at"] = 1.0
    _file(auth_server, state).write_text(json.dumps(record))
    auth_server.post("/test/revoke")
    with pytest.raises(
        NeedsLogin,
        match=r"has expired and its refresh was refused \(HTTP 400, invalid_grant\); "
        "run: assay mcp auth login ",
    ):
        await _probe(auth_server, state)


async def test_step_up_names_the_scope_to_log_in_with(auth_server, state, env):
    _login(auth_server, state, env)
    auth_server.post("/test/require?scope=mcp%20admin")
    with pytest.raises(NeedsLogin) as caught:
        await _probe(auth_server, state)
    assert str(caught.value).endswith(f"run: assay mcp auth login {auth_server.url} --scope 'mcp admin'")
    res = assay("mcp", "auth", "login", auth_server.url, "--scope", "mcp admin", "--state-dir", str(state), env=env)
    assert res.returncode == 0, res.stderr
    assert await _probe(auth_server, state) == 200


async def test_without_a_login_a_401_gives_the_login_line(auth_server, state):
    with pytest.raises(NeedsLogin, match=f"no login is stored; run: assay mcp auth login {auth_server.url}$"):
        await _probe(auth_server, state)


def test_a_server_that_needs_no_authorization_is_said_so(auth_server, state, env):
    res = assay("mcp", "auth", "login", f"{auth_server.base}/open/mcp", "--state-dir", str(state), env=env)
    assert res.returncode == 0, res.stderr
    assert "answered without authorization (1 tools listed); nothing stored" in res.stdout
    assert not (state / "oauth").exists() or not list((state / "oauth").iterdir())


def test_list_and_logout(auth_server, state, env):
    record = _login(auth_server, state, env)
    res = assay("mcp", "auth", "list", "--state-dir", str(state), env=env)
    assert res.returncode == 0 and auth_server.url in res.stdout and " yes " in res.stdout
    assert record["tokens"]["access_token"] not in res.stdout
    rows = [
        json.loads(x)
        for x in assay("mcp", "auth", "list", "--json", "--state-dir", str(state), env=env).stdout.splitlines()
    ]
    assert rows[0]["url"] == auth_server.url and rows[0]["refresh_token"] is True and rows[0]["scope"] == "mcp"
    res = assay("mcp", "auth", "logout", auth_server.url, "--state-dir", str(state), env=env)
    assert res.returncode == 0 and not _file(auth_server, state).exists()
    res = assay("mcp", "auth", "logout", auth_server.url, "--state-dir", str(state), env=env)
    assert res.returncode == 1 and res.stderr == f"fatal: not logged in to {auth_server.url}\n"


async def test_client_credentials_with_a_secret_from_a_variable(tmp_path, state, env):
    server = start_server("--cc", "robot:s3cret-value", "--lifetime", "3600")
    try:
        env = {**env, "ROBOT_SECRET": "s3cret-value"}
        res = assay(
            "mcp",
            "auth",
            "login",
            server.url,
            "--grant",
            "client-credentials",
            "--client-id",
            "robot",
            "--client-secret-env",
            "ROBOT_SECRET",
            "--state-dir",
            str(state),
            env=env,
        )
        assert res.returncode == 0, res.stderr
        text = _file(server, state).read_text()
        assert "s3cret-value" not in text and "ROBOT_SECRET" in text
        assert await _tools(server, state, {"ROBOT_SECRET": "s3cret-value"}) == (["echo"], "echo:hi")
        server.post("/test/expire")  # no refresh token: a new client-credentials exchange
        assert await _probe(server, state, {"ROBOT_SECRET": "s3cret-value"}) == 200
        assert server.stats()["grants"][-1] == "client_credentials"
        with pytest.raises(NeedsLogin, match="the variable ROBOT_SECRET"):
            wrap_auth(server.url, state, {})
        bad = assay(
            "mcp",
            "auth",
            "login",
            server.url,
            "--grant",
            "client-credentials",
            "--client-id",
            "robot",
            "--client-secret-env",
            "ROBOT_SECRET",
            "--state-dir",
            str(state),
            env={**env, "ROBOT_SECRET": "wrong"},
        )
        assert bad.returncode == 2 and bad.stderr.startswith("fatal: the authorization did not work")
        assert len(bad.stderr.splitlines()) == 1 and "wrong" not in bad.stderr
    finally:
        server.proc.kill()
        server.proc.wait()


async def test_client_credentials_with_private_key_jwt(tmp_path, state, env):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (tmp_path / "pub.pem").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    server = start_server("--jwt", f"signer:{tmp_path / 'pub.pem'}")
    try:
        res = assay(
            "mcp",
            "auth",
            "login",
            server.url,
            "--grant",
            "client-credentials",
            "--client-id",
            "signer",
            "--private-key",
            str(tmp_path / "key.pem"),
            "--state-dir",
            str(state),
            env=env,
        )
        assert res.returncode == 0, res.stderr
        server.post("/test/expire")
        assert await _tools(server, state) == (["echo"], "echo:hi")
    finally:
        server.proc.kill()
        server.proc.wait()


def test_usage_errors_are_one_line_exit_2(state, env, tmp_path):
    cases = [
        ("ftp://x/mcp",),
        ("http://127.0.0.1:9/mcp", "--grant", "client-credentials"),
        ("http://127.0.0.1:9/mcp", "--grant", "client-credentials", "--client-id", "a"),
        ("http://127.0.0.1:9/mcp", "--client-secret-env", "X"),
        ("http://127.0.0.1:9/mcp", "--private-key", str(tmp_path / "k")),
        (
            "http://127.0.0.1:9/mcp",
            "--grant",
            "client-credentials",
            "--client-id",
            "a",
            "--client-secret-file",
            str(tmp_path / "missing"),
        ),
    ]
    for args in cases:
        res = assay("mcp", "auth", "login", *args, "--state-dir", str(state), env=env)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith("assay: error: ") and len(res.stderr.splitlines()) == 1, (args, res.stderr)


def test_a_server_that_is_down_is_one_line(state, env):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = assay("mcp", "auth", "login", f"http://127.0.0.1:{port}/mcp", "--state-dir", str(state), env=env)
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr.startswith(f"fatal: cannot use http://127.0.0.1:{port}/mcp")  # the work failed, not the usage
    assert not os.path.exists(state / "oauth") or not os.listdir(state / "oauth")


async def test_offline_access_is_asked_for_where_the_server_lists_it_and_the_refresh_token_used(
    auth_server, state, env
):
    """docs/auth.md, "Scopes": the server lists offline_access (and issues refresh tokens only to
    logins that asked for it)."""
    auth_server.post("/test/set?offline=1")
    record = _login(auth_server, state, env)
    stats = auth_server.stats()
    assert stats["authorize"][-1]["scope"] == "mcp offline_access"
    assert stats["registered"][-1]["grant_types"] == ["authorization_code", "refresh_token"]
    assert record["tokens"]["refresh_token"] and "offline_access" in record["tokens"]["scope"].split()
    auth_server.post("/test/expire")
    assert await _probe(auth_server, state) == 200
    assert auth_server.stats()["grants"][-1] == "refresh_token"


def test_offline_access_is_not_asked_of_a_server_that_does_not_list_it(auth_server, state, env, tmp_path):
    _login(auth_server, state, env, "--scope", "mcp offline_access")
    assert auth_server.stats()["authorize"][-1]["scope"] == "mcp"


async def test_a_logout_during_a_session_is_not_undone_by_a_renewal(auth_server, state, env):
    _login(auth_server, state, env)
    auth = wrap_auth(auth_server.url, state)  # a wrap that runs: it has the login in memory
    res = assay("mcp", "auth", "logout", auth_server.url, "--state-dir", str(state), env=env)
    assert res.returncode == 0
    auth_server.post("/test/expire")
    async with httpx2.AsyncClient(auth=auth, timeout=30) as client:
        with pytest.raises(NeedsLogin, match="the stored login for .* was removed; run: assay mcp auth login"):
            await client.post(auth_server.url, json=INIT, headers={"Accept": "application/json, text/event-stream"})
    assert not _file(auth_server, state).exists()
    assert auth_server.stats()["grants"][-1] == "authorization_code"  # no refresh was sent


async def test_after_an_issuer_change_the_old_tokens_are_sent_nowhere(auth_server, state, env):
    """docs/auth.md, "The authorization server a login belongs to": once the change is seen,
    the stored access token no longer goes to the server either, and nothing is asked again."""
    _login(auth_server, state, env)
    auth_server.post("/test/switch?as=https://other.example")
    async with httpx2.AsyncClient(auth=wrap_auth(auth_server.url, state), timeout=30) as client:
        for _ in range(2):
            with pytest.raises(NeedsLogin, match="the authorization server of .* has changed"):
                await client.post(auth_server.url, json=INIT, headers={"Accept": "application/json, text/event-stream"})
        stats = auth_server.stats()
    # 401s: the login's first request, the first request here (with the token), the second (without)
    assert stats["mcp_401"] == 3 and stats["mcp_401_bearer"] == 1
    fetched = [path for _, path in stats["requests"] if "well-known" in path]
    assert fetched == [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
    ]  # the login's, then the first request's


def test_issuer_names_the_only_authorization_server_credentials_go_to(auth_server, state, env):
    """docs/auth.md, "Logging in": a server naming another authorization server than --issuer
    gets nothing; the one it names is the one the login goes to."""
    env = {**env, "SEC": "s3cret"}
    res = assay(
        "mcp",
        "auth",
        "login",
        auth_server.url,
        "--state-dir",
        str(state),
        "--issuer",
        "https://as.example",
        "--client-id",
        "x",
        "--client-secret-env",
        "SEC",
        env=env,
    )
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "not https://as.example (--issuer)" in res.stderr
    assert auth_server.stats()["token_requests"] == [] and auth_server.stats()["register"] == 0
    record = _login(auth_server, state, env, "--issuer", auth_server.base + "/")
    assert record["issuer"] == auth_server.base
