"""Argv shown to a person is shell-quoted (docs/protect.md, "Output and exit codes";
docs/discover.md, "Output"): an argument with spaces reads as one."""

from __future__ import annotations

import json
import shlex

from assay import clients
from assay import discover as d
from assay.clients import protect as p
from tests.discover._discover_helpers import make_env, run_assay

ARGV = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/ws/My Notes", "it's", ""]


def test_protect_and_undo_print_the_server_shell_quoted(tmp_path):
    home = tmp_path / "home"
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"mcpServers": {"fs": {"command": ARGV[0], "args": ARGV[1:]}}}))
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(home)
    res = run_assay("mcp", "protect", "claude", "--policy", str(policy), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    shown = "npx -y @modelcontextprotocol/server-filesystem '/ws/My Notes' 'it'\"'\"'s' ''"
    assert f'  wrapped   "fs": {shown}\n' in res.stdout.decode()
    assert shlex.split(shown) == ARGV
    res = run_assay("mcp", "protect", "claude", "--undo", env=env, cwd=tmp_path)
    assert f'  unwrapped "fs": {shown}\n' in res.stdout.decode()


def test_a_process_cmdline_is_shell_quoted():
    proc = d.ProcInfo(7, 1, ("node", "/x/mcp-server.js", "/ws/My Notes"), 70, "1700000007", "u")
    (entry,) = d.classify_processes([proc])
    assert entry["source"]["cmdline"] == "node /x/mcp-server.js '/ws/My Notes'"


def test_a_plain_command_line_reads_as_before():
    loc = clients.client_locations("cursor", "linux", "/h", {}, "/w")[0]
    text = json.dumps({"mcpServers": {"a": {"command": "npx", "args": ["-y", "srv", "/tmp"]}}})
    (change,) = p.protect_text(text, loc, p.WrapOptions("/bin/assay", "/p.yaml")).changes
    assert change.detail == "npx -y srv /tmp"
