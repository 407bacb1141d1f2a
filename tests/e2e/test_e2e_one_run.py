"""End to end: one-run outputs with the TypeScript SDK v2 client in auto mode (issue 5; docs/wrap.md,
"One-run outputs and session reports").

The client's disposable probe process (wrap + server, sent only `server/discover`, then killed by
a signal) and its real session process get the *same* output paths. The probe must leave nothing
behind, or the session run would refuse its paths (anything already at a path is refused before
spawn) and the client would fail; the session run must create every file.
"""

from __future__ import annotations

import json

from _e2e_support import E2E, EVERYTHING_SERVER, WrapRun, assert_all_ended, run_ts_client

OUTPUTS = {
    "--decision-log-new": "session-decisions.ndjson",
    "--request-receipts-out": "receipts.ndjson",
    "--session-context-out": "context.json",
    "--session-stop-out": "stop.json",
    "--coverage-out": "coverage.json",
    "--state-window-out": "window.json",
    "--observed-manifest-out": "observed.json",
}


async def test_probe_leaves_nothing_and_session_creates_every_output(node, tmp_path, base_env):
    extra: list[str] = []
    for flag, name in OUTPUTS.items():
        extra += [flag, str(tmp_path / name)]
    run = WrapRun(tmp_path, E2E / "everything_policy.yaml", ["node", str(EVERYTHING_SERVER), "stdio"], extra=extra)
    calls = [{"name": "echo", "arguments": {"message": "hi"}}, {"name": "get-env", "arguments": {}}]
    out = await run_ts_client(node, run, calls, base_env)
    assert out["calls"][0]["is_error"] is False
    assert out["calls"][1]["structuredContent"]["error_code"] == "E_TOOL_DENIED"

    wraps, servers = run.pids()
    assert len(wraps) == 2, "the auto-mode probe run and the session run"
    await assert_all_ended(wraps + servers)
    for name in OUTPUTS.values():
        assert (tmp_path / name).exists(), f"{name} missing: the session run did not create it"

    receipts = [json.loads(line) for line in (tmp_path / "receipts.ndjson").read_text().splitlines()]
    methods = [r.get("method") for r in receipts]
    assert methods[0] == "initialize", methods  # the probe's server/discover is not in this run
    assert "server/discover" not in methods
    tool_calls = [r for r in receipts if r.get("method") == "tools/call"]
    assert [r["disposition"] for r in tool_calls] == ["forwarded", "blocked"]
    logged = [json.loads(line) for line in (tmp_path / "session-decisions.ndjson").read_text().splitlines()]
    session_events = [e for e in logged if e["type"] == "assay.tool.decision"]  # docs/wrap-records.md, "Tools seen"
    assert [e["data"]["tool"] for e in session_events] == ["echo", "get-env"]
    assert {r["decision_event_id"] for r in tool_calls} == {e["id"] for e in session_events}

    context = json.loads((tmp_path / "context.json").read_text())
    assert context["mode"] == "enforce"
    stop = json.loads((tmp_path / "stop.json").read_text())
    assert stop["schema"] == "assay.mcp_session_stop.v0"
    assert stop["frames"]["blocked"] == 1
    assert stop["stop_cause"] in ("client_eof", "signal", "child_exit")
    coverage = json.loads((tmp_path / "coverage.json").read_text())
    assert coverage["tools"]["tools_seen"] == ["echo", "get-env"]
    observed = json.loads((tmp_path / "observed.json").read_text())
    assert observed["status"] == "observed" and observed["observed"]["tool_count"] >= 5
