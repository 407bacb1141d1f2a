"""Enterprise-managed authorization (docs/auth.md, "Enterprise-managed authorization"): the
identity provider's ID token (from a file or a variable) is exchanged at the identity provider
for an ID-JAG (token exchange), which the MCP server's authorization server takes in the JWT
bearer grant. Two real processes: the identity provider and the MCP server with its
authorization server, which trusts the provider's key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest

from assay.auth.lines import NeedsLogin
from tests.remote.conftest import INIT_HEADERS, AuthServer, assay, running, wrap_auth, write_key

IDP_SECRET = "idp-secret-never-shown"
SECRET = "app-secret-never-shown"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AuthServer, AuthServer]]:
    keys = tmp_path_factory.mktemp("idp")
    public = write_key(keys / "idp.pem", "p256")
    with running("--idp-key", str(keys / "idp.pem"), "--client", f"assay-at-idp:{IDP_SECRET}") as idp:
        with running("--trust-idp", f"{idp.base}={public}", "--client", f"app:{SECRET}") as resource:
            idp.post("/test/set?jag_client=" + quote(f"{resource.base}=app", safe=""))
            yield idp, resource


def _args(idp: AuthServer, *source: str) -> list[str]:
    return [
        "--grant",
        "id-jag",
        *source,
        "--idp-issuer",
        idp.base,
        "--idp-client-id",
        "assay-at-idp",
        "--idp-client-secret-env",
        "IDP_SECRET",
        "--client-id",
        "app",
        "--client-secret-env",
        "SEC",
    ]


def _grants(server: AuthServer, since: int) -> list[tuple[str, str, str]]:
    return [
        (r["grant"].rsplit(":", 1)[-1], r["client_id"], r["method"]) for r in server.stats()["token_requests"][since:]
    ]


async def test_an_id_token_from_a_file_becomes_an_access_token_and_is_read_again_to_renew(
    servers, tmp_path, state, env
):
    idp, resource = servers
    env = {**env, "IDP_SECRET": IDP_SECRET, "SEC": SECRET}
    id_token = tmp_path / "id_token"
    id_token.write_text(idp.get("/test/id-token?aud=assay-at-idp"))
    seen = (len(idp.stats()["token_requests"]), len(resource.stats()["token_requests"]))
    res = assay(
        "mcp",
        "auth",
        "login",
        resource.url,
        "--state-dir",
        str(state),
        *_args(idp, "--id-token-file", str(id_token)),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert _grants(idp, seen[0]) == [("token-exchange", "assay-at-idp", "client_secret_basic")]
    assert _grants(resource, seen[1]) == [("jwt-bearer", "app", "client_secret_basic")]
    text = next((state / "oauth").glob("*.json")).read_text()
    record = json.loads(text)
    assert record["grant"]["kind"] == "id_jag" and record["grant"]["id_token_file"] == str(id_token)
    for secret in (IDP_SECRET, SECRET, id_token.read_text()):
        assert secret not in text and secret not in res.stdout + res.stderr
    # the access token expires: wrap exchanges the ID token again (read again from its file)
    id_token.write_text(idp.get("/test/id-token?aud=assay-at-idp&sub=bob"))
    resource.post("/test/expire")
    async with httpx2.AsyncClient(auth=wrap_auth(resource.url, state, env), timeout=30) as client:
        assert (await client.post(resource.url, json=INIT, headers=INIT_HEADERS)).status_code == 200
    assert _grants(idp, seen[0])[1:] == [("token-exchange", "assay-at-idp", "client_secret_basic")]
    assert _grants(resource, seen[1])[1:] == [("jwt-bearer", "app", "client_secret_basic")]


async def test_an_id_token_from_a_variable_and_one_the_provider_refuses(servers, tmp_path, state, env):
    idp, resource = servers
    env = {**env, "IDP_SECRET": IDP_SECRET, "SEC": SECRET, "ID_TOKEN": idp.get("/test/id-token?aud=assay-at-idp")}
    res = assay(
        "mcp",
        "auth",
        "login",
        resource.url,
        "--state-dir",
        str(state),
        *_args(idp, "--id-token-env", "ID_TOKEN"),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    resource.post("/test/expire")
    stale = {**env, "ID_TOKEN": idp.get("/test/id-token?aud=assay-at-idp&lifetime=-60")}  # expired
    async with httpx2.AsyncClient(auth=wrap_auth(resource.url, state, stale), timeout=30) as client:
        with pytest.raises(NeedsLogin) as caught:
            await client.post(resource.url, json=INIT, headers=INIT_HEADERS)
    line = str(caught.value)
    assert "\n" not in line and "ID-JAG" in line and "invalid_grant" in line
    assert f"run: assay mcp auth login {resource.url} --grant id-jag --client-id app --client-secret-env SEC" in line
    assert f"--id-token-env ID_TOKEN --idp-issuer {idp.base} --idp-client-id assay-at-idp" in line
    for secret in (IDP_SECRET, SECRET, stale["ID_TOKEN"]):
        assert secret not in line
    with pytest.raises(NeedsLogin, match="the variable ID_TOKEN \\(the ID token\\) is not set"):
        wrap_auth(resource.url, state, {k: v for k, v in env.items() if k != "ID_TOKEN"})


def test_usage_errors_of_the_enterprise_grant(servers, tmp_path, state, env):
    idp, resource = servers
    for args in (
        ["--grant", "id-jag", "--client-id", "app"],
        _args(idp, "--id-token-file", str(tmp_path / "missing")),
        ["--id-token-env", "X"],
    ):
        res = assay(
            "mcp",
            "auth",
            "login",
            resource.url,
            "--state-dir",
            str(state),
            *args,
            env={**env, "IDP_SECRET": IDP_SECRET, "SEC": SECRET},
        )
        assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, (args, res.stderr)
        assert res.stderr.startswith("assay: error: ")
    assert not (state / "oauth").exists() or not list((state / "oauth").glob("*.json"))


def test_the_record_binds_the_login_to_the_resource_authorization_server(servers, tmp_path, state, env):
    idp, resource = servers
    env = {**env, "IDP_SECRET": IDP_SECRET, "SEC": SECRET}
    id_token = Path(tmp_path / "id_token")
    id_token.write_text(idp.get("/test/id-token?aud=assay-at-idp"))
    res = assay(
        "mcp",
        "auth",
        "login",
        resource.url,
        "--state-dir",
        str(state),
        *_args(idp, "--id-token-file", str(id_token)),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    record = json.loads(next((state / "oauth").glob("*.json")).read_text())
    assert record["issuer"] == resource.base and record["grant"]["idp_issuer"] == idp.base
