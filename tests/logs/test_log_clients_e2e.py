"""`assay mcp log` over the logs of two protected clients (docs/log.md): the code and rule the
agent got (`E_PATH_CONFINEMENT`, `path_confinement`), `--client` and `--server client/server`,
counts per client and server in `--stats`, the client of an audit log read alone; and the first
things a user runs into: `log --help` and a missing log directory, worded as `suggest` words it.

Each client's config is protected with `--log-dir`, its wrapped server started as the client
starts it and driven by the MCP Python SDK."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from assay.logs.view import APPROVAL_STATES, Filter
from assay.logs.entries import INSPECT_ACTIONS, OUTCOMES
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect.test_protect_clients_e2e import TINY

POLICY = """version: "2.0"
tools:
  allow: ["add", "wipe"]
path_confinement:
  - tools: [wipe]
    args: [path]
    within: [/workspace]
enforcement: { unconstrained_tools: allow }
"""


async def _calls(entry: dict, env: dict[str, str], cwd: Path, calls: list[tuple[str, dict]]) -> list[str]:
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
    )
    texts = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                texts.append(" ".join(c.text for c in result.content if c.type == "text"))
    return texts


@pytest.fixture(scope="module")
def two_clients(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clients")
    home = tmp / "home"
    home.mkdir()
    server = tmp / "tiny.py"
    server.write_text(TINY)
    policy = tmp / "assay.yaml"
    policy.write_text(POLICY)
    logs = tmp / "logs"
    env = make_env(home)
    runs = {
        "claude": [("add", {"a": 1, "b": 2}), ("wipe", {"path": "/etc"})],
        "cursor": [("add", {"a": 3, "b": 4}), ("add", {"a": 5, "b": 6})],
    }
    for client, calls in runs.items():
        config = tmp / f"{client}.json"
        config.write_text(json.dumps({"mcpServers": {"tiny": {"command": sys.executable, "args": [str(server)]}}}))
        res = run_assay(
            "mcp",
            "protect",
            client,
            "--config",
            str(config),
            "--policy",
            str(policy),
            "--log-dir",
            str(logs),
            env=env,
            cwd=tmp,
        )
        assert res.returncode == 0, res.stderr
        entry = json.loads(config.read_text())["mcpServers"]["tiny"]
        texts = trio.run(_calls, entry, env, tmp, calls)
        if client == "claude":  # what the agent got
            assert '"error_code":"E_PATH_CONFINEMENT"' in texts[1]
    return logs, env, tmp


def _json(*args: str, env, cwd) -> list[dict]:
    res = run_assay("mcp", "log", *args, "--json", env=env, cwd=cwd)
    assert res.returncode == 0 and res.stderr == b"", res.stderr
    return [json.loads(line) for line in res.stdout.decode().splitlines()]


def test_the_table_shows_the_code_and_rule_the_agent_got(two_clients):
    logs, env, cwd = two_clients
    res = run_assay("mcp", "log", str(logs), env={**env, "COLUMNS": "300"}, cwd=cwd)
    assert res.returncode == 0, res.stderr
    (row,) = [line for line in res.stdout.decode().splitlines() if " wipe " in line]
    cells = re.split(r" {2,}", row)
    assert cells[1:6] == ["claude_desktop/tiny", "wipe", "deny", "E_PATH_CONFINEMENT", "path_confinement"]
    (doc,) = _json(str(logs), "--tool", "wipe", env=env, cwd=cwd)
    assert (doc["error_code"], doc["rule"], doc["reason_code"]) == (
        "E_PATH_CONFINEMENT",
        "path_confinement",
        "P_POLICY_DENY",
    )


def test_calls_are_filtered_by_client_and_by_client_and_server(two_clients):
    logs, env, cwd = two_clients
    every = _json(str(logs), env=env, cwd=cwd)
    assert sorted((d["client"], d["tool"]) for d in every) == [
        ("claude_desktop", "add"),
        ("claude_desktop", "wipe"),
        ("cursor", "add"),
        ("cursor", "add"),
    ]
    for args in (
        ["--client", "cursor"],
        ["--server", "cursor/tiny"],
        ["--server", "cur*/*"],
        ["--client", "cursor", "--server", "tiny"],
    ):
        got = _json(str(logs), *args, env=env, cwd=cwd)
        assert [(d["client"], d["tool"]) for d in got] == [("cursor", "add")] * 2, args
    assert len(_json(str(logs), "--server", "tiny", env=env, cwd=cwd)) == 4
    assert _json(str(logs), "--client", "claude_desktop,zed", "--tool", "wipe", env=env, cwd=cwd)[0]["tool"] == "wipe"
    assert _json(str(logs), "--server", "cursor/wipe", env=env, cwd=cwd) == []


def test_stats_count_per_client_and_server(two_clients):
    logs, env, cwd = two_clients
    res = run_assay("mcp", "log", str(logs), "--stats", env=env, cwd=cwd)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.decode().splitlines()]
    assert rows == [
        ["SERVER", "TOOL", "ALLOW", "ALLOW_WITH_WARNING", "DENY", "WOULD_DENY", "TOTAL"],
        ["claude_desktop/tiny", "add", "1", "0", "0", "0", "1"],
        ["claude_desktop/tiny", "wipe", "0", "0", "1", "0", "1"],
        ["claude_desktop/tiny", "(all)", "1", "0", "1", "0", "2"],
        ["cursor/tiny", "add", "2", "0", "0", "0", "2"],
        ["cursor/tiny", "(all)", "2", "0", "0", "0", "2"],
        ["(all)", "(all)", "3", "0", "1", "0", "4"],
    ]
    docs = _json(str(logs), "--stats", env=env, cwd=cwd)
    assert [(d["client"], d["server"], d["tool"], d["total"]) for d in docs] == [
        ("claude_desktop", "tiny", "add", 1),
        ("claude_desktop", "tiny", "wipe", 1),
        ("cursor", "tiny", "add", 2),
    ]


def test_an_audit_log_read_alone_names_its_client(two_clients):
    """An audit record has no event source: the client is the one protect named the file for."""
    logs, env, cwd = two_clients
    docs = _json(str(logs / "cursor-tiny.audit.ndjson"), env=env, cwd=cwd)
    assert [(d["client"], d["kind"]) for d in docs] == [("cursor", "audit")] * 2
    (wipe,) = _json(str(logs / "claude_desktop-tiny.audit.ndjson"), "--tool", "wipe", env=env, cwd=cwd)
    assert (wipe["client"], wipe["error_code"]) == ("claude_desktop", "E_PATH_CONFINEMENT")


def test_log_help_names_every_outcome_and_no_empty_flags(tmp_path):
    res = run_assay("mcp", "log", "--help", env={**make_env(tmp_path), "COLUMNS": "400"}, cwd=tmp_path)
    assert res.returncode == 0
    text = res.stdout.decode()
    assert "--empty-" not in text
    for flag in ("--client", "--server", "--tool", "--outcome", "--since", "--follow", "--stats", "--json"):
        assert flag in text
    for outcome in (*OUTCOMES, *APPROVAL_STATES, "approval", "inspected", *INSPECT_ACTIONS, "would_"):
        assert outcome in text, outcome
    Filter(outcomes=(*INSPECT_ACTIONS, "inspected", "would_mask"))  # what the help names is accepted


def test_log_and_suggest_word_a_missing_log_directory_alike(tmp_path):
    env = {**make_env(tmp_path), "ASSAY_STATE_DIR": str(tmp_path / "nowhere")}
    log = run_assay("mcp", "log", env=env, cwd=tmp_path)
    suggest = run_assay("mcp", "policy", "suggest", env=env, cwd=tmp_path)
    assert log.returncode == suggest.returncode == 2
    assert (
        log.stderr
        == suggest.stderr
        == (
            f"fatal: no logs in {tmp_path / 'nowhere'} (it does not exist): give the log files or directories, "
            "or the --log-dir you gave assay mcp protect\n"
        ).encode()
    )
