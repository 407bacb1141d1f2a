"""`assay mcp config-path` (docs/config-path.md), through the real CLI."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_json_for_claude_default_server_keeps_its_shape(home, tmp_path):
    res = run_assay("mcp", "config-path", "claude", "--json", env=make_env(home), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    policy = f"{home}/.config/assay/policy.yaml"
    expected = {
        "client": "Claude Desktop",
        "config_path": f"{home}/.config/Claude/claude_desktop_config.json",
        "config_exists": False,
        "generated_server": {
            "server_name": "filesystem-secure",
            "config": {
                # our own installed script, located from the running one
                "command": str(ASSAY),
                "args": [
                    "mcp",
                    "wrap",
                    "--policy",
                    policy,
                    "--label",
                    "filesystem-secure",
                    "--",
                    "npx",
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    str(home),
                ],
            },
        },
    }
    assert res.stdout.decode() == json.dumps(expected, indent=2) + "\n"


def test_cursor_path_comes_from_the_shared_table_and_exists_flag(home, tmp_path):
    cfg = home / ".cursor" / "mcp.json"
    cfg.parent.mkdir()
    cfg.write_text("{}")
    res = run_assay(
        "mcp",
        "config-path",
        "CURSOR",
        "--json",
        "--server",
        "python '/srv/my server.py' --verbose",
        "--policy",
        "rel/policy.yaml",
        env=make_env(home),
        cwd=tmp_path,
    )
    doc = json.loads(res.stdout)
    assert list(doc) == ["client", "config_path", "config_exists", "generated_server"]
    assert doc["client"] == "Cursor"
    assert (doc["config_path"], doc["config_exists"]) == (str(cfg), True)
    assert doc["generated_server"]["server_name"] == "mcp-secure"
    assert list(doc["generated_server"]["config"]) == ["command", "args"]
    # a relative --policy is made absolute: the client starts servers from its own directory
    assert doc["generated_server"]["config"]["args"] == [
        "mcp",
        "wrap",
        "--policy",
        f"{tmp_path}/rel/policy.yaml",
        "--label",
        "mcp-secure",
        "--",
        "python",
        "/srv/my server.py",
        "--verbose",
    ]


def _block(out: str) -> str:
    """The paste-ready block of the terminal output: between the blank line after the
    'Paste this'/'Append this' line and the blank line before 'Or let assay'."""
    lines = out.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(("Paste this", "Append this"))) + 2
    end = next(i for i, line in enumerate(lines) if line.startswith("Or let assay")) - 1
    assert lines[start - 1] == "" and lines[end] == ""
    return "\n".join(lines[start:end]) + "\n"


CLIENT_ROWS = [
    # argument, display, user file (relative to HOME), servers key, syntax, project file
    ("claude", "Claude Desktop", ".config/Claude/claude_desktop_config.json", "mcpServers", "json", None),
    ("claude-code", "Claude Code", ".claude.json", "mcpServers", "json", ".mcp.json"),
    ("cursor", "Cursor", ".cursor/mcp.json", "mcpServers", "json", ".cursor/mcp.json"),
    ("vscode", "VS Code", ".config/Code/User/mcp.json", "servers", "jsonc", ".vscode/mcp.json"),
    ("windsurf", "Windsurf", ".codeium/windsurf/mcp_config.json", "mcpServers", "json", None),
    ("gemini", "Gemini CLI", ".gemini/settings.json", "mcpServers", "jsonc", ".gemini/settings.json"),
    ("codex", "Codex CLI", ".codex/config.toml", "mcp_servers", "toml", ".codex/config.toml"),
    ("zed", "Zed", ".config/zed/settings.json", "context_servers", "jsonc", ".zed/settings.json"),
]


@pytest.mark.parametrize("arg,display,user,key,syntax,project", CLIENT_ROWS, ids=[r[0] for r in CLIENT_ROWS])
def test_every_client_gets_a_paste_ready_block(home, tmp_path, arg, display, user, key, syntax, project):
    import tomllib

    from assay import clients
    from assay import discover as d

    res = run_assay("mcp", "config-path", arg, "--server", "uvx mcp-server-git", env=make_env(home), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == b""
    out = res.stdout.decode()
    assert "│" not in out and "┌" not in out
    assert out.startswith(f"{display}\n  Config file: {home}/{user} (not found; the block below is a complete file)\n")
    if project:
        assert f"  Project file: {tmp_path}/{project} (same format, for one project)\n" in out
    else:
        assert "Project file" not in out
    assert out.endswith(f"Then restart {display}.\n")
    block = _block(out)
    doc = tomllib.loads(block) if syntax == "toml" else json.loads(block)
    entry = doc[key]["mcp-secure"]
    policy = f"{home}/.config/assay/policy.yaml"
    assert entry["command"] == str(ASSAY)
    assert entry["args"] == ["mcp", "wrap", "--policy", policy, "--label", "mcp-secure", "--", "uvx", "mcp-server-git"]
    assert entry.get("type") == ("stdio" if arg == "vscode" else None)
    assert f"  assay mcp protect {arg} --policy {policy} --init-policy\n" in out
    # the block, pasted as the whole file, is a config the client's own reader accepts
    label = clients.resolve_client(arg)
    location = next(
        r for r in clients.client_locations(label, "linux", str(home), {}, str(tmp_path)) if r.scope == "user"
    )
    servers, errors = d.parse_config_file(block.encode(), location)
    assert errors == [] and [(s["name"], s["wrapped"]) for s in servers] == [("mcp-secure", True)]


def test_existing_files_are_reported(home, tmp_path):
    env = make_env(home, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "Claude").mkdir(parents=True)
    (tmp_path / "xdg" / "Claude" / "claude_desktop_config.json").write_text("{}")
    (tmp_path / "xdg" / "assay").mkdir()
    (tmp_path / "xdg" / "assay" / "policy.yaml").write_text('version: "2.0"\n')
    res = run_assay("mcp", "config-path", "claude-desktop", env=env, cwd=tmp_path)
    out = res.stdout.decode()
    assert f"  Config file: {tmp_path}/xdg/Claude/claude_desktop_config.json (exists)\n" in out
    assert f"  Policy file: {tmp_path}/xdg/assay/policy.yaml (exists)\n" in out
    assert f"  assay mcp protect claude --policy {tmp_path}/xdg/assay/policy.yaml\n" in out
    assert list(home.iterdir()) == []  # nothing is written to disk


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("bogus",),
            'assay: error: unknown client "bogus". Supported: claude, claude-code, cursor, vscode, windsurf, gemini, codex, zed\n',
        ),
        (
            ("claude", "--server", "python 'unclosed"),
            'assay: error: invalid --server "python \'unclosed": No closing quotation\n',
        ),
        # an empty --server used to fall back to the default server silently
        (
            ("claude", "--server", ""),
            'assay: error: --server is empty; give the server command, e.g. --server "npx -y @modelcontextprotocol/server-github"\n',
        ),
        (
            ("claude", "--server", "   "),
            'assay: error: --server is empty; give the server command, e.g. --server "npx -y @modelcontextprotocol/server-github"\n',
        ),
        (
            ("claude", "--policy", ""),
            "assay: error: --policy is empty; give the policy file the entry should enforce\n",
        ),
        ((), None),
    ],
)
def test_bad_values_are_usage_errors(home, tmp_path, args, message):
    res = run_assay("mcp", "config-path", *args, env=make_env(home), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout == b""
    assert res.stderr.startswith(b"assay: error: ") and res.stderr.count(b"\n") == 1
    if message is not None:
        assert res.stderr.decode() == message
