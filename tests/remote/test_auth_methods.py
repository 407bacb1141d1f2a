"""Token endpoint client authentication as the authorization server's metadata says (docs/auth.md,
"Client authentication"): client_secret_basic when offered (the default), client_secret_post
where only that is offered, private_key_jwt signed with the algorithm of the given key (ES256,
ES384, RS256, EdDSA), for clients registered beforehand (the authorization code and its
refreshes) and for the client-credentials grant. The test server records how each token request
authenticated; it accepts only the methods its metadata offers."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.auth.clientauth import basic_header
from tests.remote.asgrants import decode_basic
from tests.remote.conftest import INIT_HEADERS, AuthServer, assay, login, running, wrap_auth, write_key

SECRET = "s3cret: with+odd%chars and spaces"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def _login(server: AuthServer, state: Path, env: dict[str, str], *args: str) -> None:
    line = await login(server.url, state, env, *args)
    assert line.startswith("logged in") and SECRET not in line


def _methods(server: AuthServer, client_id: str) -> list[tuple[str, str, str | None]]:
    return [
        (r["grant"], r["method"], r.get("alg"))
        for r in server.stats()["token_requests"]
        if r.get("client_id") == client_id
    ]


async def _renew(server: AuthServer, state: Path, env: dict[str, str]) -> int:
    """Every token expired, one request through wrap's auth: the login is renewed first."""
    server.post("/test/expire")
    async with httpx2.AsyncClient(auth=wrap_auth(server.url, state, env), timeout=30) as client:
        response = await client.post(server.url, json=INIT, headers=INIT_HEADERS)
        return response.status_code


KINDS = ("rsa", "p256", "p384", "ed25519")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    for kind in KINDS:
        write_key(directory / f"{kind}.pem", kind)
    return directory


@pytest.fixture(scope="module")
def server(keys: Path) -> Iterator[AuthServer]:
    """Clients with a secret (app, robot) and with keys (signer; cc-<kind> for each kind)."""
    args = [
        "--client",
        f"app:{SECRET}",
        "--cc",
        f"robot:{SECRET}",
        "--client",
        "signer",
        "--jwt",
        f"signer:{keys / 'p256.pub'}",
    ]
    for kind in KINDS:
        args += ["--jwt", f"cc-{kind}:{keys / kind}.pub"]
    with running(*args) as running_server:
        yield running_server


def _fresh(server: AuthServer, methods: str = "") -> None:
    server.post("/test/reset")
    server.post("/test/revoke")
    server.post(f"/test/set?methods={methods}")


async def test_a_secret_goes_by_basic_by_default_and_a_key_signs_with_its_algorithm(server, keys, tmp_path, env):
    env = {**env, "SEC": SECRET}
    _fresh(server)
    seen = len(server.stats()["token_requests"])

    def _methods(server: AuthServer, client_id: str) -> list[tuple[str, str, str | None]]:
        return [
            (r["grant"], r["method"], r.get("alg"))
            for r in server.stats()["token_requests"][seen:]
            if r.get("client_id") == client_id
        ]

    await _login(server, tmp_path / "s1", env, "--client-id", "app", "--client-secret-env", "SEC")
    assert await _renew(server, tmp_path / "s1", env) == 200
    assert _methods(server, "app") == [
        ("authorization_code", "client_secret_basic", None),
        ("refresh_token", "client_secret_basic", None),
    ]
    await _login(
        server,
        tmp_path / "s2",
        env,
        "--grant",
        "client-credentials",
        "--client-id",
        "robot",
        "--client-secret-env",
        "SEC",
    )
    assert await _renew(server, tmp_path / "s2", env) == 200
    assert _methods(server, "robot") == [("client_credentials", "client_secret_basic", None)] * 2
    await _login(server, tmp_path / "s3", env, "--client-id", "signer", "--private-key", str(keys / "p256.pem"))
    assert await _renew(server, tmp_path / "s3", env) == 200
    assert _methods(server, "signer") == [
        ("authorization_code", "private_key_jwt", "ES256"),
        ("refresh_token", "private_key_jwt", "ES256"),
    ]
    for kind, alg in (("rsa", "RS256"), ("p256", "ES256"), ("p384", "ES384"), ("ed25519", "EdDSA")):
        await _login(
            server,
            tmp_path / kind,
            env,
            "--grant",
            "client-credentials",
            "--client-id",
            f"cc-{kind}",
            "--private-key",
            str(keys / f"{kind}.pem"),
        )
        assert _methods(server, f"cc-{kind}") == [("client_credentials", "private_key_jwt", alg)], kind


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic"])
async def test_where_one_secret_method_is_offered_that_one_is_used(method, server, tmp_path, env):
    env = {**env, "SEC": SECRET}
    _fresh(server, f"{method},none")
    before = {cid: len(_methods(server, cid)) for cid in ("app", "robot")}
    await _login(server, tmp_path / "s1", env, "--client-id", "app", "--client-secret-env", "SEC")
    assert await _renew(server, tmp_path / "s1", env) == 200
    await _login(
        server,
        tmp_path / "s2",
        env,
        "--grant",
        "client-credentials",
        "--client-id",
        "robot",
        "--client-secret-env",
        "SEC",
    )
    assert _methods(server, "app")[before["app"] :] == [
        ("authorization_code", method, None),
        ("refresh_token", method, None),
    ]
    assert _methods(server, "robot")[before["robot"] :] == [("client_credentials", method, None)]


def test_a_server_that_takes_neither_secret_method_is_one_line_and_gets_no_secret(server, tmp_path, env):
    env = {**env, "SEC": SECRET}
    _fresh(server, "private_key_jwt")
    before = len(server.stats()["token_requests"])
    res = assay(
        "mcp",
        "auth",
        "login",
        server.url,
        "--state-dir",
        str(tmp_path / "s"),
        "--grant",
        "client-credentials",
        "--client-id",
        "robot",
        "--client-secret-env",
        "SEC",
        env=env,
    )
    assert len(server.stats()["token_requests"]) == before
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "takes neither client_secret_basic nor client_secret_post" in res.stderr and SECRET not in res.stderr


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40), st.text(max_size=60))
def test_the_basic_header_reads_back_as_an_oauth_server_reads_it(client_id, secret):
    """The header assay writes is what a server decodes (base64, the first colon, each half
    form-decoded): any id and secret, colons, percents, pluses, spaces and non-ASCII included."""
    header = basic_header(client_id, secret)
    assert header.isascii() and "\n" not in header
    assert decode_basic(header) == (client_id, secret)
    base64.b64decode(header[6:], validate=True)


def test_a_pkcs1_rsa_key_works_and_an_encrypted_or_public_key_is_one_line(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from assay.auth.sources import read_key

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    plain = tmp_path / "pkcs1.pem"
    plain.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    assert read_key(str(plain)).algorithms[0] == "RS256"
    locked = tmp_path / "locked.pem"
    locked.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
        )
    )
    public = write_key(tmp_path / "p256.pem", "p256")
    for path, text in ((locked, "is an encrypted key"), (public, "is not a PEM private key")):
        with pytest.raises(ValueError) as caught:
            read_key(str(path))
        assert str(caught.value) == f"{path} {text}" or str(caught.value).startswith(f"{path} {text}")
