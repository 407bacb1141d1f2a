"""`assay mcp config-path` (spec/cli.md §6; DECISIONS D2, D29, D29a), through the real CLI."""

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


def test_F5_json_for_claude_default_server(home, tmp_path):
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
                # D29: our own installed script, located from the running one
                "command": str(ASSAY),
                "args": ["mcp", "wrap", "--policy", policy, "--", "npx", "-y",
                         "@modelcontextprotocol/server-filesystem", str(home)],
            },
        },
    }
    assert res.stdout.decode() == json.dumps(expected, indent=2) + "\n"


def test_D29a_cursor_path_comes_from_the_shared_table_and_exists_flag(home, tmp_path):
    cfg = home / ".cursor" / "mcp.json"
    cfg.parent.mkdir()
    cfg.write_text("{}")
    res = run_assay("mcp", "config-path", "CURSOR", "--json", "--server", "python '/srv/my server.py' --verbose",
                    "--policy", "rel/policy.yaml", env=make_env(home), cwd=tmp_path)
    doc = json.loads(res.stdout)
    assert doc["client"] == "Cursor"
    assert (doc["config_path"], doc["config_exists"]) == (str(cfg), True)
    assert doc["generated_server"]["server_name"] == "mcp-secure"
    # a relative --policy is made absolute: the client starts servers from its own directory
    assert doc["generated_server"]["config"]["args"] == [
        "mcp", "wrap", "--policy", f"{tmp_path}/rel/policy.yaml", "--", "python", "/srv/my server.py", "--verbose",
    ]


def test_F6_terminal_layout(home, tmp_path):
    env = make_env(home, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "Claude").mkdir(parents=True)
    (tmp_path / "xdg" / "Claude" / "claude_desktop_config.json").write_text("{}")
    res = run_assay("mcp", "config-path", "claude-desktop", "--server", "uvx mcp-server-git", env=env, cwd=tmp_path)
    assert res.returncode == 0
    policy = f"{tmp_path}/xdg/assay/policy.yaml"
    assert res.stdout.decode() == (
        "┌─ Claude Desktop Configuration\n"
        "│\n"
        f"│  Config file: {tmp_path}/xdg/Claude/claude_desktop_config.json\n"
        "│  Status: ✓ Found\n"
        "│\n"
        "├─ Policy file\n"
        "│\n"
        f"│  {policy}\n"
        "│\n"
        "├─ Add this to your mcpServers:\n"
        "│\n"
        "│  {\n"
        '│    "mcp-secure": {\n'
        f'│      "command": "{ASSAY}",\n'
        '│      "args": [\n'
        '│        "mcp",\n'
        '│        "wrap",\n'
        '│        "--policy",\n'
        f'│        "{policy}",\n'
        '│        "--",\n'
        '│        "uvx",\n'
        '│        "mcp-server-git"\n'
        "│      ]\n"
        "│    }\n"
        "│  }\n"
        "│\n"
        "└─ Next steps:\n"
        "   1. Create your policy file\n"
        "   2. Add the above JSON to your config file\n"
        "   3. Restart Claude Desktop\n"
        "\n"
    )
    assert res.stderr == b""


def test_F6_not_found_status_and_nothing_written(home, tmp_path):
    res = run_assay("mcp", "config-path", "cursor", env=make_env(home), cwd=tmp_path)
    assert "│  Status: ✗ Not found (will be created)\n" in res.stdout.decode()
    assert "   3. Restart Cursor\n" in res.stdout.decode()
    assert list(home.iterdir()) == []  # nothing is written to disk


@pytest.mark.parametrize("args", [("vscode",), ("claude", "--server", "python 'unclosed"), ()])
def test_D2_bad_values_are_usage_errors(home, tmp_path, args):
    res = run_assay("mcp", "config-path", *args, env=make_env(home), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout == b""
    assert res.stderr.startswith(b"assay: error: ") and res.stderr.count(b"\n") == 1
    if args == ("vscode",):
        assert res.stderr == b'assay: error: unknown client "vscode". Supported: claude, cursor\n'
