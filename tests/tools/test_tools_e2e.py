"""`assay mcp tools` against real servers (docs/tools.md): the pinned npm servers of
tests/e2e, a client config in a private HOME with a protected entry, and servers that die or
never answer (a one-line error, exit 2, no process left behind)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ASSAY, REPO

MODULES = REPO / "tests" / "e2e" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "server-filesystem" / "dist" / "index.js"
TIMEOUT = 120


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None or not EVERYTHING.is_file() or not FILESYSTEM.is_file():
        pytest.fail("node and the pinned servers of tests/e2e/node_modules are needed (`./dev test`)", pytrace=False)
    return found


def env_for(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    if home is not None:
        env["HOME"] = str(home)
        env.pop("XDG_CONFIG_HOME", None)
    env.update(extra)
    return env


def tools(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ASSAY), "mcp", "tools", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env or env_for(),
        cwd=cwd,
    )


def rows(stdout: str) -> dict[str, dict]:
    return {d["name"]: d for d in map(json.loads, stdout.splitlines())}


def test_everything_server_names_and_annotations(node):
    res = tools("--json", "--", node, str(EVERYTHING))
    assert res.returncode == 0, res.stderr
    got = rows(res.stdout)
    assert {"echo", "get-sum", "get-env", "gzip-file-as-resource", "trigger-long-running-operation"} <= set(got)
    echo = got["echo"]
    assert list(echo) == ["server", "name", "title", "description", "annotations", "arguments", "policy"]
    assert echo["title"] == "Echo Tool" and echo["policy"] is None
    assert echo["annotations"] == {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
    assert echo["arguments"] == [
        {"name": "message", "type": "string", "required": True, "description": "Message to echo"}
    ]
    assert got["gzip-file-as-resource"]["annotations"]["open_world"] is True
    text = tools("--", node, str(EVERYTHING))
    assert text.returncode == 0
    assert "protocol 2025-11-25, mcp-servers/everything" in text.stdout.splitlines()[0]
    assert "  echo - Echo Tool [read-only, idempotent, closed-world]" in text.stdout.splitlines()


POLICY = """version: "2.0"
tools:
  allow: [read_text_file, list_directory, write_file, move_file]
  deny: [move_file]
  approval_required: [write_file]
schemas:
  read_text_file: {type: object, required: [path], properties: {path: {type: string}}}
path_confinement:
  - {tools: ["read_*", list_directory], args: [path], within: [/workspace]}
limits:
  tools: [{id: reads, tools: ["read_*"], max_calls: 10, per: 60s}]
sequences:
  - {type: never_after, id: no-write-after-read, trigger: read_text_file, forbidden: write_file}
"""


def test_filesystem_server_with_a_policy(node, tmp_path):
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    res = tools("--json", "--policy", str(policy), "--", node, str(FILESYSTEM), str(tmp_path))
    assert res.returncode == 0, res.stderr
    got = rows(res.stdout)
    assert {"read_text_file", "write_file", "move_file", "list_directory", "directory_tree"} <= set(got)
    assert got["read_text_file"]["annotations"]["read_only"] is True
    assert got["write_file"]["annotations"] == {
        "read_only": False,
        "destructive": True,
        "idempotent": True,
        "open_world": False,
    }
    assert got["read_text_file"]["policy"] == {
        "verdict": "allow",
        "reason_code": None,
        "matched_rule": "tools.allow",
        "schema": True,
        "path_confined": ["path"],
        "rate_rules": ["reads"],
        "flow_rules": ["no-write-after-read"],
    }
    assert got["write_file"]["policy"]["verdict"] == "needs approval"
    assert got["list_directory"]["policy"]["verdict"] == "allow with warning"  # no schema, mode warn
    assert got["list_directory"]["policy"]["path_confined"] == ["path"]
    assert got["move_file"]["policy"]["verdict"] == "deny"
    assert got["move_file"]["policy"]["reason_code"] == "E_TOOL_DENIED"
    assert got["directory_tree"]["policy"]["reason_code"] == "E_TOOL_NOT_ALLOWED"
    text = tools("--policy", str(policy), "--", node, str(FILESYSTEM), str(tmp_path))
    assert "      policy: deny E_TOOL_DENIED (tools.deny)" in text.stdout.splitlines()
    assert (
        "      policy: allow (tools.allow); path-confined: path; rate rules: reads; flow rules: no-write-after-read"
        in text.stdout.splitlines()
    )


# a small stdio server: its tools name its environment and working directory, over three pages
PAGED = textwrap.dedent("""
    import json, os, sys
    for raw in sys.stdin:
        msg = json.loads(raw)
        if "id" not in msg:
            continue
        if msg["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "paged", "version": "0"}}
        else:
            page = int((msg.get("params") or {}).get("cursor") or 0)
            result = {"tools": [{"name": f"{os.environ['TOOL_PREFIX']}{page}", "title": os.getcwd(),
                                 "inputSchema": {"type": "object"}}]}
            if page < 2:
                result["nextCursor"] = str(page + 1)
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
        sys.stdout.flush()
""")


def test_a_client_config_protected_entry_env_cwd_and_remote(node, tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    server = tmp_path / "paged.py"
    server.write_text(PAGED)
    policy = tmp_path / "assay.yaml"
    policy.write_text('version: "2.0"\ntools: {allow: ["read_*", list_directory]}\n')
    config = {
        "mcpServers": {
            "paged": {
                "command": sys.executable,
                "args": [str(server)],
                "env": {"TOOL_PREFIX": "page_"},
                "cwd": str(work),
            },
            "fs": {
                "command": str(ASSAY),
                "args": [
                    "mcp",
                    "wrap",
                    "--policy",
                    str(policy),
                    "--label",
                    "files",
                    "--hide-denied-tools",
                    "--",
                    node,
                    str(FILESYSTEM),
                    str(tmp_path),
                ],
            },
            "remote": {"url": "https://mcp.example.com/mcp"},
        }
    }
    (home / ".cursor" / "mcp.json").write_text(json.dumps(config))
    res = tools("cursor", env=env_for(home, XDG_STATE_HOME=str(tmp_path / "state")))
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].startswith(f'server "paged" ({sys.executable} {server}): 3 tools, protocol 2025-06-18, paged 0')
    assert [line for line in out if line.startswith("  page_")] == [f"  page_{i} - {work}" for i in range(3)]
    fs = next(line for line in out if line.startswith('server "fs"'))
    assert "[wrapped]" in fs
    listed = [line.split()[0] for line in out if line.startswith("  ") and not line.startswith("    ")]
    # through wrap's --hide-denied-tools: only what the policy allows reaches the listing
    assert {"read_text_file", "list_directory"} <= set(listed) and "write_file" not in listed
    assert out[-1] == (
        'server "remote": skipped: a remote server (http https://mcp.example.com/mcp): '
        "assay mcp tools starts stdio servers only"
    )
    one = tools(
        "--json", "--policy", str(policy), "cursor", "fs", env=env_for(home, XDG_STATE_HOME=str(tmp_path / "state"))
    )
    assert one.returncode == 0, one.stderr
    assert {d["server"] for d in rows(one.stdout).values()} == {"fs"}
    missing = tools("cursor", "nope", env=env_for(home))
    assert (
        missing.returncode == 2
        and missing.stderr.startswith("assay: error: ")
        and "no server named 'nope'" in missing.stderr
    )


def _gone(pid: int, within: float = 30.0) -> bool:
    """The process has exited (a zombie waiting for init counts): its pidfd turns readable, an
    event waited on with a generous bound (a SIGKILL is delivered, not done, when kill returns)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], within)[0])
    finally:
        os.close(fd)


def test_a_server_that_exits_at_once(tmp_path):
    res = tools("--", "sh", "-c", "echo 'no such module' >&2; exit 3")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        'fatal: server "sh": the server exited with status 3 before answering initialize '
        "(its last stderr line: no such module)\n"
    )
    res = tools("--", str(tmp_path / "missing-server"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "program not found" in res.stderr


def test_a_server_that_never_answers_times_out_and_leaves_nothing(tmp_path):
    pids = tmp_path / "pids"
    # it ignores SIGTERM and starts a grandchild in its group: both must be gone after the timeout
    script = f"trap '' TERM; sleep 300 & echo $$ $! > {pids}; cat > /dev/null; wait"
    res = tools("--timeout", "2", "--", "sh", "-c", script)
    assert res.returncode == 2, res.stderr
    assert res.stderr == 'fatal: server "sh": no answer to initialize within 2 s\n'
    for pid in map(int, pids.read_text().split()):
        assert _gone(pid), pid


def test_usage_errors_and_failures(tmp_path):
    # README.md, "Commands": a bad flag or value is `assay: error:`; a failure of the work itself
    # (a policy or config that cannot be read) is `fatal:`; both exit 2 here (docs/tools.md)
    for args, text in (
        (("--timeout", "0", "--", "x"), "--timeout must be more than 0"),
        (("nosuch",), "'nosuch' is not a client"),
        ((), "give a server command after --"),
    ):
        res = tools(*args)
        assert res.returncode == 2, args
        assert res.stderr.startswith("assay: error: ") and res.stderr.count("\n") == 1 and text in res.stderr, (
            res.stderr
        )
    res = tools("--policy", str(tmp_path / "none.yaml"), "--", "x")
    assert res.returncode == 2 and res.stderr.startswith("fatal: cannot read policy") and res.stderr.count("\n") == 1
    res = tools("cursor", env=env_for(tmp_path))
    assert res.returncode == 2 and res.stderr.startswith("fatal: ") and "does not exist" in res.stderr
