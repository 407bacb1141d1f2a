"""End to end: the official TypeScript SDK v2 client (`@modelcontextprotocol/client`, in
`versionNegotiation: {mode: 'auto'}`) through `assay mcp wrap` to real servers (issue 4).

In auto mode the client first spawns a disposable sibling of the whole command (here: wrap and
its server), sends it `server/discover`, kills it (SIGTERM, SIGKILL 1 s later), and only then
starts the real session. Both runs are visible in the pid files (see _e2e_support.py).
"""

from __future__ import annotations

import hashlib
import json
import sys

import jcs

from _e2e_support import (
    DEMO_CALLS,
    DEMO_POLICY,
    DEMO_SERVER,
    E2E,
    EVERYTHING_SERVER,
    MODERN,
    TS_MODERN_SERVER,
    Call,
    WrapRun,
    assert_all_ended,
    assert_denied,
    assert_logs,
    run_ts_client,
)

EVERYTHING_CALLS = [
    Call("echo", {"message": "hello through wrap"}),
    Call("get-sum", {"a": 2, "b": 40}),
    Call("get-env", {}, "E_TOOL_DENIED"),
    # get-structured-content declares an outputSchema: the client must still accept the deny
    # (isError results are not validated against it).
    Call("get-structured-content", {"location": "New York"}, "E_TOOL_NOT_ALLOWED"),
    Call("echo", {"message": "x" * 41}, "E_ARG_SCHEMA"),
]


def _as_json(calls: list[Call]) -> list[dict]:
    return [{"name": c.name, "arguments": c.arguments} for c in calls]


def _assert_results(results: list[dict], calls: list[Call]) -> None:
    for call, got in zip(calls, results, strict=True):
        assert got["name"] == call.name
        assert "thrown" not in got, f"the TS client refused wrap's reply to {call.name}: {got['thrown']}"
        if call.code is None:
            assert got["is_error"] is False, got
        else:
            assert_denied(call.name, got["is_error"], got["structuredContent"], got["text"], call.code)


async def _assert_probe_and_session_ended(run: WrapRun) -> None:
    """The auto-mode probe run and the session run each started one wrap and one server, and none of
    the four processes outlived the client (no orphans: docs/wrap.md, "Lifecycle and exit
    status")."""
    wraps, servers = run.pids()
    assert len(wraps) == 2, f"expected the probe wrap and the session wrap, got pids {wraps}"
    assert len(servers) == 2, f"expected one server per wrap run, got pids {servers}"
    await assert_all_ended(wraps + servers)


async def test_ts_client_auto_mode_against_server_everything(node, tmp_path, base_env):
    """docs/wrap.md, "Enforcement", "Deny replies", "Lifecycle and exit status";
    docs/wrap-records.md: server-everything (a 2025-era server on SDK v1) makes the auto-mode probe
    fall back to `initialize`; allowed calls reach the server, denied ones come back as isError
    results with the policy's error_code; logs hold one record per call; the probe's wrap and
    server, and the session's, are all gone afterwards."""
    run = WrapRun(tmp_path, E2E / "everything_policy.yaml", ["node", str(EVERYTHING_SERVER), "stdio"])
    out = await run_ts_client(node, run, _as_json(EVERYTHING_CALLS), base_env)

    connected = out["connected"]
    assert connected["era"] == "legacy", connected
    assert {"echo", "get-sum", "get-env", "get-structured-content"} <= set(connected["tools"])
    _assert_results(out["calls"], EVERYTHING_CALLS)
    echo, total = out["calls"][0], out["calls"][1]
    assert echo["text"] == "Echo: hello through wrap"
    assert "42" in total["text"]
    assert_logs(run, EVERYTHING_CALLS)
    await _assert_probe_and_session_ended(run)
    stderr = run.stderr_text()
    assert '[assay] DENY "get-env" (reason: "Tool is explicitly denylisted by name")' in stderr, stderr


async def test_ts_client_auto_mode_modern_era_ts_server(node, tmp_path, base_env):
    """docs/wrap.md, "Deny replies": against a 2026-07-28 server (`serveStdio` from
    @modelcontextprotocol/server) the client negotiates the modern era through wrap, and wrap's deny
    replies are results the client accepts (it refuses a modern result without
    `resultType: "complete"`)."""
    run = WrapRun(tmp_path, DEMO_POLICY, ["node", str(TS_MODERN_SERVER)])
    calls = [c for c in DEMO_CALLS if c.name != "write_file"] + [
        Call("write_file", {"path": "/w"}, "E_TOOL_NOT_ALLOWED")
    ]
    out = await run_ts_client(node, run, _as_json(calls), base_env)

    assert out["connected"]["era"] == "modern", out["connected"]
    assert out["connected"]["protocolVersion"] == MODERN
    _assert_results(out["calls"], calls)
    assert out["calls"][0]["text"] == "# Demo workspace\n"
    assert_logs(run, calls)
    await _assert_probe_and_session_ended(run)


async def test_ts_client_auto_mode_modern_era_python_server(node, tmp_path, base_env):
    """Modern-era deny replies (docs/wrap.md, "Deny replies") across SDKs: the TypeScript client
    negotiates 2026-07-28 with the `mcp` Python SDK's MCPServer (examples/demo_server.py) through
    wrap; allowed and denied calls as the policy says."""
    run = WrapRun(tmp_path, DEMO_POLICY, [sys.executable, str(DEMO_SERVER)])
    out = await run_ts_client(node, run, _as_json(DEMO_CALLS), base_env)

    assert out["connected"]["era"] == "modern", out["connected"]
    assert out["connected"]["protocolVersion"] == MODERN
    assert set(out["connected"]["tools"]) == {"read_file", "list_dir", "write_file", "exec"}
    _assert_results(out["calls"], DEMO_CALLS)
    assert "Hello from the demo server." in out["calls"][0]["text"]
    assert_logs(run, DEMO_CALLS)
    await _assert_probe_and_session_ended(run)


def _pin(label: str, name: str, input_schema: dict, description: str) -> dict:
    """A tool_pins entry computed here from the tool definition the server declares (docs/policy.md,
    "Tool pins": schema_hash = SHA-256 of JCS(inputSchema), meta_hash = SHA-256 of the description),
    independently of wrap's own hashing."""
    return {
        "server_id": label,
        "tool_name": name,
        "schema_hash": hashlib.sha256(jcs.canonicalize(input_schema)).hexdigest(),
        "meta_hash": hashlib.sha256(description.encode()).hexdigest(),
    }


async def test_ts_client_modern_era_tool_pins(node, tmp_path, base_env):
    """docs/wrap.md, "Tool pins": wrap learns tool identities from the real tools/list exchange of a
    modern session (without changing the server's lines). A pin that matches what
    ts_modern_server.mjs declares lets the call through; a pin whose description changed, or
    whose server_id is not this run's --label, denies the call with E_TOOL_DRIFT (drift is
    checked before the deny list, so exec reports drift)."""
    label = "e2e-pinned-server"
    path_schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    exec_schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    pins = {
        "read_file": _pin(label, "read_file", path_schema, "Read a file."),
        "list_dir": _pin(label, "list_dir", path_schema, "List files (an older description)."),
        "exec": _pin("another-server", "exec", exec_schema, "Pretend to run a command."),
    }
    policy = tmp_path / "pinned.yaml"
    policy.write_text(DEMO_POLICY.read_text() + "\ntool_pins: " + json.dumps(pins) + "\n")
    run = WrapRun(tmp_path, policy, ["node", str(TS_MODERN_SERVER)], label=label)
    calls = [
        Call("read_file", {"path": "/workspace/README.md"}),
        Call("list_dir", {"path": "/workspace"}, "E_TOOL_DRIFT"),
        Call("exec", {"command": "id"}, "E_TOOL_DRIFT"),
    ]
    out = await run_ts_client(node, run, _as_json(calls), base_env)

    assert out["connected"]["era"] == "modern", out["connected"]
    _assert_results(out["calls"], calls)
    assert json.loads(out["calls"][1]["text"][len("Content blocked by policy") :])["reason"] == (
        "Tool metadata or schema has changed without policy update"
    )
    assert_logs(run, calls)
    drift = run.decisions()[1]
    assert drift["reason"].startswith("Tool integrity failure: identity drifted from pinned version."), drift
    assert f"(Runtime: {label}:list_dir:" in drift["reason"]
    stderr = run.stderr_text()
    read_pin = pins["read_file"]
    assert (
        f'[assay] TOOL "read_file" server_id="{label}" schema_hash={read_pin["schema_hash"]} '
        f"meta_hash={read_pin['meta_hash']}"
    ) in stderr, stderr
    await _assert_probe_and_session_ended(run)
