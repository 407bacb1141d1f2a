"""protect, run, undo, for each of the eight clients, end to end (docs/protect.md): a config
shaped as the client writes it (comments, trailing commas, a remote entry, a hand-wrapped entry,
an entry that mentions wrap in its arguments), `assay mcp protect`, then every stdio entry is
started exactly as the client would start it (command, args and env from the file) and driven by
the MCP Python SDK (an allowed call answers, a denied call is denied), then `--undo` gives back
the original bytes."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay

TINY = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tiny", version="1.0.0")

    @server.tool()
    def add(a: int, b: int) -> str:
        \"\"\"Add two numbers.\"\"\"
        return f"sum={a + b}"

    @server.tool()
    def wipe(path: str) -> str:
        \"\"\"Delete a path (never reached here).\"\"\"
        return "wiped " + path

    if __name__ == "__main__":
        server.run()
    """
)
POLICY = 'version: "2.0"\ntools:\n  allow: ["add"]\n  deny: ["wipe"]\nenforcement: { unconstrained_tools: allow }\n'


def _configs(py: str, server: str, hand_wrapped: list[str]) -> dict[str, tuple[str, str]]:
    """client -> (file name, text): a tiny stdio server ``tiny`` (with a space in an argument
    and an argument that mentions wrap), a remote entry and an entry wrapped by hand."""
    args = [server, "--motd", "works with assay mcp wrap", "My Notes"]
    a = json.dumps(args)
    hw = json.dumps(hand_wrapped[1:])
    j = lambda key, extra="": (  # noqa: E731
        "{\n"
        '  "theme": "dark",\n'
        f'  "{key}": {{\n'
        f'    "tiny": {{{extra}"command": {json.dumps(py)}, "args": {a}, "env": {{"TINY": "1"}}}},\n'
        f'    "team": {{"command": {json.dumps(hand_wrapped[0])}, "args": {hw}}},\n'
        '    "remote": {"url": "https://example.com/mcp"}\n'
        "  }\n"
        "}\n"
    )
    jsonc = lambda key, extra="": (  # noqa: E731
        "// settings, as the client writes them\n"
        "{\n"
        '  "theme": "dark", // a comment after a member\n'
        f'  "{key}": {{\n'
        "    // the server under test\n"
        f'    "tiny": {{{extra}"command": {json.dumps(py)}, "args": {a}, "env": {{"TINY": "1"}},}},\n'
        f'    "team": {{"command": {json.dumps(hand_wrapped[0])}, "args": {hw}}},\n'
        '    "remote": {"url": "https://example.com/mcp"},\n'
        "  },\n"
        "}\n"
    )
    toml_args = "[\n  " + ",\n  ".join(json.dumps(x) for x in args[:-1]) + ",\n  'My Notes', # a literal string\n]"
    codex = (
        "# ~/.codex/config.toml\n"
        'model = "gpt-5-codex"\n\n'
        "[mcp_servers.tiny]\n"
        f"command = {json.dumps(py)}\n"
        f"args = {toml_args}\n\n"
        "[mcp_servers.tiny.env]\n"
        'TINY = "1"  # passed to the server\n\n'
        "[mcp_servers.team]\n"
        f"command = {json.dumps(hand_wrapped[0])}\n"
        f"args = {hw}\n\n"
        "[mcp_servers.remote]\n"
        'url = "https://example.com/mcp"\n'
    )
    return {
        "claude": ("claude_desktop_config.json", j("mcpServers")),
        "claude-code": (".claude.json", j("mcpServers", '"type": "stdio", ')),
        "cursor": ("mcp.json", j("mcpServers")),
        "vscode": ("mcp.json", jsonc("servers", '"type": "stdio", ')),
        "windsurf": ("mcp_config.json", j("mcpServers")),
        "gemini": ("settings.json", jsonc("mcpServers")),
        "codex": ("config.toml", codex),
        "zed": ("settings.json", jsonc("context_servers")),
        # Zed's older entry form: "command": {"path", "args", "env"}
        "zed-old": (
            "settings.json",
            jsonc("context_servers").replace(
                f'"tiny": {{"command": {json.dumps(py)}, "args": {a}, "env": {{"TINY": "1"}},}}',
                f'"tiny": {{"command": {{"path": {json.dumps(py)}, "args": {a}, "env": {{"TINY": "1"}}}}}}',
            ),
        ),
    }


def _read(client: str, text: str) -> dict:
    """The server map as the client reads it (comments and trailing commas stripped for JSONC)."""
    if client == "codex":
        return tomllib.loads(text)["mcp_servers"]
    plain = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    plain = re.sub(r",\s*//[^\n\"]*\n", ",\n", plain)
    plain = re.sub(r",(\s*[}\]])", r"\1", plain)
    data = json.loads(plain)
    key = {"vscode": "servers", "zed": "context_servers", "zed-old": "context_servers"}.get(client, "mcpServers")
    servers = data[key]
    for entry in servers.values():  # Zed's older form, read as Zed reads it
        if isinstance(entry.get("command"), dict):
            entry.update(entry.pop("command"))
            entry["command"] = entry.pop("path")
    return servers


async def _drive(entry: dict, env: dict[str, str], cwd: Path) -> tuple[str, bool]:
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            added = await session.call_tool("add", {"a": 2, "b": 40})
            wiped = await session.call_tool("wipe", {"path": "/"})
    return added.content[0].text, wiped.is_error


@pytest.mark.parametrize(
    "case", ["claude", "claude-code", "cursor", "vscode", "windsurf", "gemini", "codex", "zed", "zed-old"]
)
async def test_protect_run_and_undo_for_every_client(case, tmp_path):
    client = case.removesuffix("-old")
    home = tmp_path / "home"
    home.mkdir()
    server = tmp_path / "tiny.py"
    server.write_text(TINY)
    hand = [str(ASSAY), "mcp", "wrap", "--policy", "/etc/assay/team.yaml", "--", "uvx", "mcp-server-git"]
    name, text = _configs(sys.executable, str(server), hand)[case]
    assert case == client or '{"path"' in text
    config = tmp_path / name
    config.write_bytes(text.encode())
    config.chmod(0o600)
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    env = make_env(home)

    res = run_assay("mcp", "protect", client, "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    servers = _read(case, config.read_text())
    tiny = servers["tiny"]
    assert tiny["command"] == str(ASSAY) and "wrap" in tiny["args"], tiny
    assert servers["team"] == {"command": hand[0], "args": hand[1:]}  # wrapped by hand: left alone
    remote = servers["remote"]  # a remote server runs under wrap --url (docs/protect.md, "Remote servers")
    assert remote["command"] == str(ASSAY) and "https://example.com/mcp" in remote["args"], remote

    with trio.fail_after(120):
        added, denied = await _drive(tiny, env, tmp_path)
    assert added == "sum=42"
    assert denied is True

    res = run_assay("mcp", "protect", client, "--config", str(config), "--undo", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert config.read_bytes() == text.encode()
    assert config.stat().st_mode & 0o777 == 0o600


def test_a_7_mb_claude_json_is_protected_and_given_back_byte_for_byte(tmp_path):
    """Claude Code's ~/.claude.json grows with every project's history: 7 MB here, with a
    local-scope server in some projects."""
    home = tmp_path / "home"
    home.mkdir()
    projects = {}
    i = 0
    while True:
        project = {"allowedTools": [], "history": [{"display": f"prompt {i}.{k} " + "x" * 300} for k in range(20)]}
        if i % 50 == 0:
            project["mcpServers"] = {
                f"local{i}": {"type": "stdio", "command": "npx", "args": ["-y", f"srv-{i}", "My Notes"]}
            }
        projects[f"/home/u/dev/p{i}"] = project
        i += 1
        if i % 100 == 0 and len(json.dumps(projects)) > 7_000_000:
            break
    data = {
        "numStartups": 12,
        "mcpServers": {"ctx": {"type": "stdio", "command": "npx", "args": ["--yes", "ctx"]}},
        "projects": projects,
    }
    text = json.dumps(data, indent=2) + "\n"
    config = home / ".claude.json"
    config.write_text(text)
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    env = make_env(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude-code",
        "--config",
        str(config),
        "--policy",
        str(policy),
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    after = json.loads(config.read_text())
    assert "wrap" in after["mcpServers"]["ctx"]["args"]
    assert "wrap" in after["projects"]["/home/u/dev/p50"]["mcpServers"]["local50"]["args"]
    assert after["projects"]["/home/u/dev/p1"] == projects["/home/u/dev/p1"]
    res = run_assay(
        "mcp", "protect", "claude-code", "--config", str(config), "--undo", env=env, cwd=tmp_path, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert config.read_bytes() == text.encode()
