"""Login, then `assay mcp wrap --url` as a real process driven by the MCP SDK's stdio client,
through the OAuth-protected test server (docs/auth.md, "What wrap does with a login")."""

from __future__ import annotations

import subprocess

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import ASSAY
from tests.remote.conftest import assay

POLICY = 'version: "2.0"\nname: remote\ntools:\n  allow: ["echo"]\n'


async def test_wrap_url_uses_the_stored_login(auth_server, state, env, tmp_path):
    res = assay("mcp", "auth", "login", auth_server.url, "--state-dir", str(state), env=env)
    assert res.returncode == 0, res.stderr
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    auth_server.post("/test/expire")  # wrap refreshes the token it finds stored
    params = StdioServerParameters(
        command=str(ASSAY),
        args=["mcp", "wrap", "--policy", str(policy), "--state-dir", str(state), "--url", auth_server.url],
        env=env,
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["echo"]
            called = await session.call_tool("echo", {"text": "through wrap"})
            assert called.content[0].text == "echo:through wrap"  # type: ignore[union-attr]
    assert auth_server.stats()["grants"][-1] == "refresh_token"


def test_wrap_url_without_a_login_fails_at_start_with_one_line(auth_server, state, env, tmp_path):
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    res = subprocess.run(
        [
            str(ASSAY),
            "mcp",
            "wrap",
            "--policy",
            str(policy),
            "--state-dir",
            str(state),
            "--login",
            "never",
            "--url",
            auth_server.url,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 2
    lines = [x for x in res.stderr.splitlines() if not x.startswith("[assay] ")]  # the banner lines
    assert len(lines) == 1 and lines[0].startswith("fatal: "), res.stderr
    assert lines[0].endswith(f"no login is stored; run: assay mcp auth login {auth_server.url}")


BLOCKED = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types", "pydantic", "jwt"):
            raise ImportError(f"{name} is not a runtime dependency of assay")
sys.meta_path.insert(0, Blocker())
from assay.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


async def test_login_and_wrap_need_no_mcp_sdk(auth_server, state, env, tmp_path):
    """docs/auth.md: the OAuth client is assay's own; with the MCP SDK (and pydantic, PyJWT) made
    impossible to import, `auth login` and `wrap --url` (a refresh at start) still work."""
    import sys

    runner = tmp_path / "blocked.py"
    runner.write_text(BLOCKED)
    login = subprocess.run(
        [sys.executable, str(runner), "mcp", "auth", "login", auth_server.url, "--state-dir", str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert login.returncode == 0, login.stderr
    auth_server.post("/test/expire")
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(runner), "mcp", "wrap", "--policy", str(policy), "--state-dir", str(state), "--url", auth_server.url],
        env=env,
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            called = await session.call_tool("echo", {"text": "no sdk"})
            assert called.content[0].text == "echo:no sdk"  # type: ignore[union-attr]
    assert auth_server.stats()["grants"][-1] == "refresh_token"
