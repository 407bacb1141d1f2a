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
        return "config.toml", (
            f'model = "m"\n\n[mcp_servers.notes]\nurl = "{url}"  # remote\n'
            f'http_headers = {{ "Authorization" = "Bearer {TOKEN}" }}\n'
        )
    entry = {
        "claude-code": f'{{"type": "http", "url": "{url}", "headers": {auth}}}',
        "vscode": f'{{"type": "http", "url": "{url}", "headers": {auth},}}',
        "windsurf": f'{{"serverUrl": "{url}", "headers": {auth}}}',
        "gemini": f'{{"httpUrl": "{url}", "headers": {auth}, "timeout": 30000}}',
        "cursor": f'{{"url": "{url}", "headers": {auth}}}',
    }[client]
    key = "servers" if client == "vscode" else "mcpServers"
    name = {"claude-code": ".claude.json", "gemini": "settings.json", "windsurf": "mcp_config.json"}.get(
        client, "mcp.json"
    )
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
        res = run_assay(
            "mcp", "protect", client, "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr
        entry = _entry(client, config.read_text())
        assert entry["command"] == str(ASSAY) and server.url in entry["args"], entry
        assert TOKEN not in json.dumps(entry["args"]) and TOKEN.encode() not in res.stdout + res.stderr
        assert TOKEN in json.dumps(entry["env"])

        params = StdioServerParameters(
            command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(tmp_path)
        )
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


# Codex starts a stdio server with these variables of its own environment, then the entry's
# env_vars, then its env (codex-rs/rmcp-client, utils.rs: DEFAULT_ENV_VARS on unix)
CODEX_DEFAULT_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "USER",
    "__CF_USER_TEXT_ENCODING",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "TZ",
)


def _as_codex_starts(entry: dict, codex_env: dict[str, str]) -> dict[str, str]:
    env = {k: codex_env[k] for k in CODEX_DEFAULT_ENV if k in codex_env}
    env.update({v: codex_env[v] for v in entry.get("env_vars", []) if v in codex_env})
    env.update(entry.get("env", {}))
    return env


async def test_a_codex_entry_whose_values_stay_in_codexs_environment_runs_and_is_undone(tmp_path, base_env):
    """docs/protect.md, "Remote servers": Codex's bearer_token_env_var and env_http_headers name
    variables of Codex's own environment. protect passes them on to the wrapped entry (its
    env_vars) and wrap reads them there (--bearer-env, --header-env-if-set): no value is
    written into the file or the command line, the server gets what Codex would have sent, and
    undo gives the file back byte for byte."""
    home = tmp_path / "home"
    home.mkdir()
    env = make_env(home)
    policy = remote_policy(tmp_path)
    server_env = {
        **base_env,
        "E2E_EXPECT_AUTH": f"Bearer {TOKEN}",
        "E2E_EXPECT_HEADER": "X-Team: blue",
        "E2E_REFUSE_HEADER": "X-Unset",
    }
    async with remote_server(tmp_path, server_env) as server:
        text = (
            f'model = "m"\n\n[mcp_servers.notes]\nurl = "{server.url}"  # remote\n'
            'bearer_token_env_var = "NOTES_TOKEN"\n'
            'env_http_headers = { "X-Team" = "NOTES_TEAM", "X-Unset" = "NOTES_UNSET" }\n'
            "tool_timeout_sec = 30\n"
        )
        config = tmp_path / "config.toml"
        config.write_bytes(text.encode())
        res = run_assay(
            "mcp", "protect", "codex", "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr
        entry = _entry("codex", config.read_text())
        assert entry["command"] == str(ASSAY) and entry["env_vars"] == ["NOTES_TEAM", "NOTES_UNSET", "NOTES_TOKEN"]
        assert entry["args"][entry["args"].index("--url") :] == [
            "--url",
            server.url,
            "--header-env-if-set",
            "X-Team=NOTES_TEAM",
            "--header-env-if-set",
            "X-Unset=NOTES_UNSET",
            "--bearer-env",
            "NOTES_TOKEN",
        ]
        assert TOKEN not in config.read_text() and TOKEN.encode() not in res.stdout + res.stderr

        # Codex's own environment holds the values; what it starts gets only what it passes on
        codex_env = {**env, "NOTES_TOKEN": TOKEN, "NOTES_TEAM": "blue", "UNRELATED_SECRET": "x" * 12}
        child_env = _as_codex_starts(entry, codex_env)
        assert "UNRELATED_SECRET" not in child_env and child_env["NOTES_TOKEN"] == TOKEN
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=child_env, cwd=str(tmp_path))
        with trio.fail_after(RUN_TIMEOUT), (tmp_path / "wrap.err").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    echo = await session.call_tool("echo", {"message": "through protect"})
                    denied = await session.call_tool("delete_all", {})
        assert echo.is_error is False and denied.is_error is True
        assert server.ran() == ["echo"]
        assert TOKEN not in (tmp_path / "wrap.err").read_text()

        # as Codex does, a bearer variable that is not set is an error before anything is sent
        missing = {k: v for k, v in child_env.items() if k != "NOTES_TOKEN"}
        with trio.fail_after(RUN_TIMEOUT):
            done = await trio.run_process(
                [entry["command"], *entry["args"]],
                env=missing,
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        assert done.returncode == 2
        assert (
            done.stderr.decode().splitlines()[-1] == "fatal: --bearer-env: NOTES_TOKEN is not set in wrap's environment"
        )

        res = run_assay("mcp", "protect", "codex", "--config", str(config), "--undo", env=env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert config.read_bytes() == text.encode()
