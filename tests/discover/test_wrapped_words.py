"""Words never make a server wrapped (docs/discover.md, "Output"): config entries and running
processes are wrapped only when they run `assay mcp wrap` as assay.clients.wrapped reads it; a
launcher (`sh -c`, `uvx`) counts only when the process tree shows the wrap it started."""

from __future__ import annotations

import json

from assay import discover as d
from tests.discover._discover_helpers import config_only_policy, make_env, run_assay, write_json
from tests.protect.test_wrapped_entry import WORDS


def test_fail_on_unmanaged_fails_for_servers_that_only_mention_wrap(tmp_path):
    home = tmp_path / "h"
    write_json(
        home / ".cursor" / "mcp.json",
        {
            "mcpServers": {
                **WORDS,
                "guarded": {
                    "command": "/v/bin/assay",
                    "args": ["mcp", "wrap", "--policy", "/p.yaml", "--", "npx", "srv"],
                },
            }
        },
    )
    policy = config_only_policy(tmp_path / "p.yaml")
    res = run_assay(
        "mcp",
        "discover",
        "--policy",
        str(policy),
        "--format",
        "json",
        "--fail-on",
        "unmanaged",
        env=make_env(home),
        cwd=tmp_path,
    )
    assert res.returncode == 10, res.stderr
    assert res.stderr.decode() == "Error: Found 3 unmanaged servers.\n"
    doc = json.loads(res.stdout)
    assert {s["name"]: s["wrapped"] for s in doc["servers"]} == {
        "motd": False,
        "words": False,
        "shell": False,
        "guarded": True,
    }


def P(pid, ppid, *argv):
    return d.ProcInfo(pid, ppid, tuple(argv), pid * 10, str(1_700_000_000 + pid), "u")


def _listed(snapshot):
    return {e["source"]["pid"]: e["wrapped"] for e in d.classify_processes(snapshot)}


def test_a_process_that_mentions_wrap_is_an_unmanaged_server():
    snapshot = [
        P(10, 1, "python3", "mcp_server.py", "assay", "mcp", "wrap"),
        P(11, 10, "sleep", "100"),
        P(20, 1, "npx", "-y", "some-mcp-server", "--motd", "works with assay mcp wrap -- x"),
        # a shell whose string says a wrap line, but whose child is the bare server
        P(30, 1, "sh", "-c", "echo assay mcp wrap -- x >/dev/null; python3 mcp_server.py"),
        P(31, 30, "python3", "mcp_server.py"),
    ]
    assert _listed(snapshot) == {10: False, 20: False, 30: False, 31: False}
    assert d.mcp_server_pids(snapshot) == {10, 20, 30, 31}


def test_a_launcher_counts_when_its_tree_runs_the_wrap_it_names():
    line = ["mcp", "wrap", "--policy", "/p.yaml", "--", "npx", "@modelcontextprotocol/server-x"]
    snapshot = [
        P(40, 1, "sh", "-c", "assay mcp wrap --policy /p.yaml -- npx @modelcontextprotocol/server-x"),
        P(41, 40, "/v/bin/python3", "/v/bin/assay", *line),
        P(42, 41, "npx", "@modelcontextprotocol/server-x"),
        # the launcher's other child is a server of its own
        P(43, 40, "python3", "mcp_server.py"),
        P(50, 1, "uvx", "--from", "assay-mcp", "assay", *line),
        P(51, 50, "/c/uv/python3", "/c/uv/bin/assay", *line),
        P(52, 51, "npx", "@modelcontextprotocol/server-x"),
        # names a different server than the wrap below it runs: not its launcher
        P(60, 1, "sh", "-c", "assay mcp wrap --policy /p.yaml -- npx @modelcontextprotocol/server-x; true"),
        P(61, 60, "/v/bin/assay", *line),
    ]
    assert _listed(snapshot) == {41: True, 43: False, 51: True, 60: False, 61: True}
    # kill accepts the launchers too, as before
    assert {40, 50}.issubset(d.mcp_server_pids(snapshot))
