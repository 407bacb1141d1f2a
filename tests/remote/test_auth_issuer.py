"""Credentials go only to the authorization server they belong to (docs/auth.md, "The
authorization server a login belongs to"): after a login, the resource's metadata names another
authorization server (the right resource, another ``authorization_servers``) and every token
stops working. wrap refuses the change before anything is sent: the other server, a real process
that records every request it gets, gets nothing, and the login's own server gets no token
request either. Tested for every way a client can be registered, with wrap as a real process
(``--login auto``, a browser at hand: an issuer change is never followed on its own)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ASSAY
from tests.remote.conftest import AuthServer, login, running, write_key

SECRET = "s3cret-value-never-shown"
POLICY = 'version: "2.0"\nname: remote\ntools:\n  allow: ["echo"]\n'


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    write_key(directory / "key.pem", "p256")
    return directory


@pytest.fixture(scope="module")
def home(keys: Path) -> Iterator[AuthServer]:
    """The MCP server and its authorization server, with a client of each kind registered."""
    pub = str(keys / "key.pub")
    with running(
        "--client",
        "pub",
        "--client",
        f"sec:{SECRET}",
        "--client",
        "signer",
        "--jwt",
        f"signer:{pub}",
        "--cc",
        f"robot:{SECRET}",
        "--jwt",
        f"keybot:{pub}",
    ) as server:
        yield server


@pytest.fixture(scope="module")
def other() -> Iterator[AuthServer]:
    with running() as server:
        yield server


def _cases(keys: Path) -> dict[str, tuple[str, list[str]]]:
    """(what the authorization server offers, the login's options) of each way to register."""
    key = str(keys / "key.pem")
    secret = ["--client-secret-env", "SEC"]
    return {
        "dynamic registration": ("", []),
        "client metadata document": (
            "metadata_documents=1",
            ["--client-metadata-url", "https://client.example/assay.json"],
        ),
        "pre-registered public client": ("", ["--client-id", "pub"]),
        "pre-registered, client_secret_basic": ("methods=client_secret_basic,none", ["--client-id", "sec", *secret]),
        "pre-registered, client_secret_post": ("methods=client_secret_post,none", ["--client-id", "sec", *secret]),
        "pre-registered, private_key_jwt": ("", ["--client-id", "signer", "--private-key", key]),
        "client credentials, secret": ("", ["--grant", "client-credentials", "--client-id", "robot", *secret]),
        "client credentials, private_key_jwt": (
            "",
            ["--grant", "client-credentials", "--client-id", "keybot", "--private-key", key],
        ),
    }


CASES = [
    "dynamic registration",
    "client metadata document",
    "pre-registered public client",
    "pre-registered, client_secret_basic",
    "pre-registered, client_secret_post",
    "pre-registered, private_key_jwt",
    "client credentials, secret",
    "client credentials, private_key_jwt",
]


@pytest.mark.parametrize("case", CASES)
async def test_an_issuer_change_is_refused_before_anything_is_sent(case, home, other, keys, tmp_path, state, env):
    offers, login_args = _cases(keys)[case]
    env = {**env, "SEC": SECRET}
    home.post("/test/reset")
    home.post(f"/test/set?metadata_documents=0&{offers}")
    try:
        assert (await login(home.url, state, env, *login_args)).startswith("logged in")
        record = next((state / "oauth").glob("*.json")).read_bytes()
        token_requests = len(home.stats()["token_requests"])
        home.post(f"/test/switch?as={other.base}")
        policy = tmp_path / "assay.yaml"
        policy.write_text(POLICY)
        run = subprocess.run(
            [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--state-dir", str(state), "--url", home.url],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert other.requests() == []  # nothing, not even its metadata
        assert len(home.stats()["token_requests"]) == token_requests  # no refresh, no new grant
    finally:
        home.post("/test/reset")
    assert run.returncode == 2, run.stderr
    (fatal,) = [line for line in run.stderr.splitlines() if line.startswith("fatal: ")]
    assert f"the authorization server of {home.url} has changed" in fatal
    assert other.base in fatal and f"run: assay mcp auth login {home.url}" in fatal
    assert SECRET not in run.stderr
    assert next((state / "oauth").glob("*.json")).read_bytes() == record  # the login is left as it was
