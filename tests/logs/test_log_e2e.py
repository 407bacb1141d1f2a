"""`assay mcp log` over the logs of a protected session (docs/log.md): a client config protected
with `--log-dir`, its wrapped server started as the client starts it and driven by the MCP Python
SDK, then the table, the JSON lines and the counts show exactly the calls that were made; and
`--follow` shows a call appended after it started."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect.test_protect_clients_e2e import TINY

POLICY = 'version: "2.0"\ntools:\n  allow: ["add"]\n  deny: ["wipe"]\nenforcement: { unconstrained_tools: warn }\n'

GOLDEN = """\
TIME                 SERVER                     TOOL  OUTCOME             CODE                  RULE         REASON / ARGUMENTS
<time>  claude_desktop/tiny  add   allow_with_warning  E_TOOL_UNCONSTRAINED  tools.allow  Tool allowed but has no schema
<time>  claude_desktop/tiny  wipe  deny                E_TOOL_DENIED         tools.deny   Tool is explicitly denylisted by name
<time>  claude_desktop/tiny  add   allow_with_warning  E_TOOL_UNCONSTRAINED  tools.allow  Tool allowed but has no schema
"""


async def _session(entry: dict, env: dict[str, str], cwd: Path) -> list[bool]:
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            results = [
                await session.call_tool("add", {"a": 2, "b": 40}),
                await session.call_tool("wipe", {"path": "/"}),
                await session.call_tool("add", {"a": 1, "b": 1}),
            ]
    return [bool(r.is_error) for r in results]


@pytest.fixture
def protected_logs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    server = tmp_path / "tiny.py"
    server.write_text(TINY)
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"tiny": {"command": sys.executable, "args": [str(server)]}}}))
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    logs = tmp_path / "logs"
    env = make_env(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--config",
        str(config),
        "--policy",
        str(policy),
        "--log-dir",
        str(logs),
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    entry = json.loads(config.read_text())["mcpServers"]["tiny"]
    errors = trio.run(_session, entry, env, tmp_path)
    assert errors == [False, True, False]
    return logs, env, tmp_path


def _mask(text: str) -> str:
    return re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<time>", text, flags=re.M)


def test_log_shows_exactly_the_calls_of_the_session(protected_logs):
    logs, env, cwd = protected_logs
    assert sorted(p.name for p in logs.iterdir()) == [
        "claude_desktop-tiny.audit.ndjson",
        "claude_desktop-tiny.decisions.ndjson",
    ]
    res = run_assay("mcp", "log", str(logs), env=env, cwd=cwd)
    assert res.returncode == 0 and res.stderr == b"", res.stderr
    table = _mask(res.stdout.decode())
    # both logs of the server are read, and each call is shown once
    assert [re.sub(r" {2,}", "  ", line) for line in table.splitlines()] == [
        re.sub(r" {2,}", "  ", line) for line in GOLDEN.splitlines()
    ]

    res = run_assay("mcp", "log", str(logs), "--json", "--tool", "wipe", env=env, cwd=cwd)
    (line,) = res.stdout.decode().splitlines()
    doc = json.loads(line)
    assert list(doc) == [
        "time",
        "client",
        "server",
        "session",
        "tool",
        "outcome",
        "approval",
        "reason_code",
        "rule",
        "reason",
        "request_id",
        "arguments",
        "kind",
        "file",
        "error_code",
        "subject",
        "client_name",
        "client_version",
    ]
    assert doc["subject"] is None and doc["client_name"] is None  # a wrap's record has no user
    assert doc["tool"] == "wipe" and doc["outcome"] == "deny" and doc["client"] == "claude_desktop"
    assert doc["kind"] == "decision" and doc["session"].startswith("client:")

    res = run_assay("mcp", "log", str(logs / "claude_desktop-tiny.audit.ndjson"), "--stats", env=env, cwd=cwd)
    rows = [line.split() for line in res.stdout.decode().splitlines()]
    # the audit log has no event source: its client is the one protect named the file for
    assert rows[1:] == [
        ["claude_desktop/tiny", "add", "0", "2", "0", "0", "2"],
        ["claude_desktop/tiny", "wipe", "0", "0", "1", "0", "1"],
        ["(all)", "(all)", "0", "2", "1", "0", "3"],
    ]

    # the default is the state directory: logs written there are found without a path
    res = run_assay("mcp", "log", "--outcome", "deny", "--json", env={**env, "ASSAY_STATE_DIR": str(logs)}, cwd=cwd)
    assert [json.loads(x)["tool"] for x in res.stdout.decode().splitlines()] == ["wipe"]


def test_torn_and_foreign_lines_are_skipped_and_counted(protected_logs):
    logs, env, cwd = protected_logs
    with open(logs / "claude_desktop-tiny.decisions.ndjson", "ab") as fh:
        fh.write(
            b"not json at all\n[1,2]\n" + b'{"x":"' + b"y" * (9 * 1024 * 1024) + b'"}\n' + b'{"specversion":"1.0","ty'
        )
    res = run_assay("mcp", "log", str(logs), "--json", env=env, cwd=cwd)
    assert res.returncode == 0
    assert len(res.stdout.decode().splitlines()) == 3
    assert res.stderr.decode() == "assay: skipped 4 lines (1 torn, 2 not a decision record, 1 too long)\n"


def test_follow_sees_a_line_appended_after_it_started(protected_logs):
    logs, env, cwd = protected_logs
    decisions = logs / "claude_desktop-tiny.decisions.ndjson"
    # a decision event to append again (the log opens with the client's: docs/wrap-records.md, "The client")
    first = next(x for x in decisions.read_bytes().splitlines(keepends=True) if b'"assay.tool.decision"' in x)
    proc = subprocess.Popen(
        [str(ASSAY), "mcp", "log", "--follow", "--json", str(decisions)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        seen = [json.loads(proc.stdout.readline()) for _ in range(3)]  # what the file held
        assert [s["tool"] for s in seen] == ["add", "wipe", "add"]
        later = json.loads(first)
        later["time"] = "2099-01-01T00:00:00.000000+00:00"
        later["data"]["tool"] = "appended"
        half = json.dumps(later).encode()
        with open(decisions, "ab") as fh:  # a line written in two parts is shown once, whole
            fh.write(half[:40])
            fh.flush()
            fh.write(half[40:] + b"\n")
        got = json.loads(proc.stdout.readline())
        assert got["tool"] == "appended" and got["time"].startswith("2099")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
