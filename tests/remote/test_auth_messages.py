"""Messages that lead somewhere (docs/auth.md, "Messages"): a 401 to a request that carried a
static credential (--header, --header-env) names the header refused and where its value comes
from; `auth login` is suggested only when the server advertises OAuth (protected-resource
metadata). wrap runs as a real process; the value sent appears nowhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ASSAY
from tests.remote.conftest import AuthServer, running

VALUE = "Bearer a-wrong-key-never-shown"


@pytest.fixture(scope="module")
def server() -> Iterator[AuthServer]:
    with running() as running_server:
        yield running_server


def _fatal(server: AuthServer, tmp_path: Path, env: dict[str, str], *extra: str) -> str:
    policy = tmp_path / "assay.yaml"
    policy.write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    run = subprocess.run(
        [
            str(ASSAY),
            "mcp",
            "wrap",
            "--policy",
            str(policy),
            "--state-dir",
            str(tmp_path / "state"),
            *extra,
            "--url",
            server.url,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2, run.stderr
    assert VALUE not in run.stderr and "a-wrong-key" not in run.stderr
    (line,) = [x for x in run.stderr.splitlines() if x.startswith("fatal: ")]
    return line


@pytest.mark.parametrize("oauth", [True, False])
def test_a_refused_header_from_the_entry_env_is_named_with_its_variable(oauth, server, tmp_path, env):
    server.post("/test/reset")
    server.post(f"/test/set?prm={int(oauth)}")
    line = _fatal(server, tmp_path, {**env, "ASSAY_HEADER_1": VALUE}, "--header-env", "Authorization=ASSAY_HEADER_1")
    text = (
        f"fatal: {server.url} refused the Authorization header (HTTP 401); its value comes from ASSAY_HEADER_1 "
        "in wrap's environment (this entry's env)"
    )
    if oauth:
        assert (
            line == f"{text}; the server also takes an OAuth login: run assay mcp auth login {server.url} and "
            "drop the Authorization header"
        )
    else:
        assert line == text
    server.post("/test/reset")


def test_a_header_from_a_variable_or_the_command_line(server, tmp_path, env):
    server.post("/test/reset")
    server.post("/test/set?prm=0")
    line = _fatal(server, tmp_path, {**env, "KEY": VALUE}, "--header", "X-Api-Key: ${KEY}")
    assert line == (
        f"fatal: {server.url} refused the X-Api-Key header (HTTP 401); its value comes from KEY in wrap's "
        "environment (this entry's env)"
    )
    line = _fatal(server, tmp_path, env, "--header", f"X-Api-Key: {VALUE}")
    assert line == (
        f"fatal: {server.url} refused the X-Api-Key header (HTTP 401); its value is written on wrap's "
        "command line (--header)"
    )
    server.post("/test/reset")


def test_no_credential_and_no_oauth_suggests_no_login(server, tmp_path, env):
    server.post("/test/reset")
    server.post("/test/set?prm=0")
    line = _fatal(server, tmp_path, env)
    assert "auth login" not in line
    assert line == (
        f"fatal: {server.url} refused the request (HTTP 401) and advertises no OAuth login (no "
        "protected-resource metadata): it needs a credential; give it with --header-env Name=VARIABLE"
    )
    server.post("/test/reset")
