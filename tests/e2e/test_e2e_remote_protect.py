"""protect a client's remote entries, run them as the client would, undo (docs/protect.md,
"Remote servers"; docs/remote.md): a config with a remote server in each client's spelling,
its `Authorization` header holding a token, `assay mcp protect`, then the wrapped entry is
started exactly as the client starts it (command, args and env from the file) and driven by the
MCP Python SDK against a real server on loopback that refuses requests without the token; then
`--undo` gives back the original bytes."""

from __future__ import annotations

import json
import tomllib

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import RUN_TIMEOUT
from _remote_support import remote_policy, remote_server
from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay

TOKEN = "e2e-" + "k" * 28


def _config(client: str, url: str) -> tuple[str, str]:
    """(file name, text) with one remote entry `notes` in the client's own spelling."""
    auth = json.dumps({"Authorization": f"Bearer {TOKEN}"})
    if client == "codex":
        return "config.toml", (f'model = "m"\n\n[mcp_servers.notes]\nurl = "{url}"  # remote\n'
                               f'http_headers = {{ "Authorization" = "Bearer {TOKEN}" }}\n')
    entry = {
        "claude-code": f'{{"type": "http", "url": "{url}", "headers": {auth}}}',
        "vscode": f'{{"type": "http", "url": "{url}", "headers": {auth},}}',
        "windsurf": f'{{"serverUrl": "{url}", "headers": {auth}}}',
        "gemini": f'{{"httpUrl": "{url}", "headers": {auth}, "timeout": 30000}}',
        "cursor": f'{{"url": "{url}", "headers": {auth}}}',
    }[client]
    key = "servers" if client == "vscode" else "mcpServers"
    name = {"claude-code": ".claude.json", "gemini": "settings.json", "windsurf": "mcp_config.json"}.get(client, "mcp.json")
    comment = "  // the team's notes\n" if client == "vscode" else ""
    return name, f'{{\n  "theme": "dark",\n  "{key}": {{\n{comment}    "notes": {entry}\n  }}\n}}\n'


def _entry(client: str, text: str) -> dict:
    if client == "codex":
        return tomllib.loads(text)["mcp_servers"]["notes"]
    plain = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    data = json.loads(plain.replace(",}", "}"))
    return data["servers" if client == "vscode" else "mcpServers"]["notes"]


@pytest.mark.parametrize("client", ["claude-code", "vscode", "windsurf", "gemini", "cursor", "codex"])
async def test_a_protected_remote_entry_runs_and_is_undone(client, tmp_path, base_env):
    home = tmp_path / "home"
    home.mkdir()
    env = make_env(home)
    policy = remote_policy(tmp_path)
    async with remote_server(tmp_path, {**base_env, "E2E_EXPECT_AUTH": f"Bearer {TOKEN}"}) as server:
        name, text = _config(client, server.url)
        config = tmp_path / name
        config.write_bytes(text.encode())
        res = run_assay("mcp", "protect", client, "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        entry = _entry(client, config.read_text())
        assert entry["command"] == str(ASSAY) and server.url in entry["args"], entry
        assert TOKEN not in json.dumps(entry["args"]) and TOKEN.encode() not in res.stdout + res.stderr
        assert TOKEN in json.dumps(entry["env"])

        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={**env, **entry.get("env", {})}, cwd=str(tmp_path))
        with trio.fail_after(RUN_TIMEOUT), (tmp_path / "wrap.err").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name for t in (await session.list_tools()).tools}
                    echo = await session.call_tool("echo", {"message": "through protect"})
                    denied = await session.call_tool("delete_all", {})
        assert {"echo", "delete_all"} <= tools
        assert echo.is_error is False and denied.is_error is True
        assert server.ran() == ["echo"]
        assert TOKEN not in (tmp_path / "wrap.err").read_text()

        res = run_assay("mcp", "protect", client, "--config", str(config), "--undo", env=env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert config.read_bytes() == text.encode()
