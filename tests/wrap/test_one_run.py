"""One-run outputs and session-end reports (docs/wrap.md, "One-run outputs and session reports";
formats in docs/wrap-records.md, "Session reports").

Every rule of that section has its own test, with real processes: wrap over the recording child.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ASSAY
from tests.wrap.conftest import (
    stop_and_close,
    RECORDER,
    Wrapper,
    call,
    exchange,
    read_pid,
    request,
    wait_dead,
)

SOURCE = ("--event-source", "assay://org/app")
ONE_RUN = {
    "--decision-log-new": "dln.ndjson",
    "--request-receipts-out": "receipts.ndjson",
    "--session-context-out": "context.json",
    "--session-stop-out": "stop.json",
}
REPORTS = {"--coverage-out": "coverage.json", "--state-window-out": "window.json"}
ALL = {**ONE_RUN, **REPORTS, "--observed-manifest-out": "observed.json"}
DISCOVER = request("d1", "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})


def opts(paths: dict[str, str] = ALL) -> list[str]:
    out = list(SOURCE)
    for flag, name in paths.items():
        out += [flag, name]
    return out


def files(tmp: Path, paths: dict[str, str] = ALL) -> dict[str, bool]:
    return {name: os.path.lexists(tmp / name) for name in paths.values()}


def independent_jcs_argv(argv: list[str]) -> bytes:
    """JCS of an array of strings: for strings, JCS is JSON with minimal escapes, no spaces."""
    return json.dumps(argv, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# -- a normal session ---------------------------------------------------------------------------


def test_session_creates_every_output(wrapper: Wrapper):
    """Checked before spawn, created at the first line that is not server/discover, reports at
    session end; the context, receipts, stop record and reports hold the documented contents."""
    wrapper.policy.write_text('version: "2.0"\ntools:\n  deny: ["exec"]\n')
    tools = json.dumps([{"name": "search", "description": "s", "inputSchema": {"type": "object"}}])
    frames = request(1, "tools/list") + call(2, "exec", {}) + b"[1]\n" + call(3, "search", {"q": 1})
    run = wrapper.run(frames, *opts(), server_opts=("--tools", tools))
    assert run.returncode == 0, run.stderr
    assert all(files(wrapper.tmp).values())
    context = json.loads((wrapper.tmp / "context.json").read_text())
    argv = [sys.executable, str(RECORDER), str(wrapper.record), "--tools", tools]
    assert context == {
        "schema": "assay.mcp_session_context.v0",
        "mode": "enforce",
        "command_digest": "sha256:" + hashlib.sha256(independent_jcs_argv(argv)).hexdigest(),
        "command_digest_alg": "sha256",
        "command_canonicalization": "jcs:command_argv.v0",
    }
    assert not (wrapper.tmp / "context.json").read_bytes().endswith(b"\n")
    logged = run.log("dln.ndjson")  # and the listed tool, when its answer came (docs/wrap-records.md, "Tools seen")
    assert sorted(e["type"] for e in logged) == ["assay.tool.decision", "assay.tool.decision", "assay.tool.listed"]
    assert [e["data"]["tool"] for e in logged if e["type"] == "assay.tool.listed"] == ["search"]
    events = [e for e in logged if e["type"] == "assay.tool.decision"]
    assert [(e["data"]["tool"], e["data"]["decision"]) for e in events] == [("exec", "deny"), ("search", "allow")]
    receipts = run.log("receipts.ndjson")
    assert [(r["seq"], r["kind"], r.get("method"), r.get("request_id"), r["disposition"]) for r in receipts] == [
        (1, "request", "tools/list", 1, "forwarded"),
        (2, "request", "tools/call", 2, "blocked"),
        (3, "rejected", None, None, "rejected"),
        (4, "request", "tools/call", 3, "forwarded"),
    ]
    assert receipts[1]["decision_event_id"] == events[0]["id"]
    assert receipts[3]["decision_event_id"] == events[1]["id"]
    assert "decision_event_id" not in receipts[0]
    assert receipts[2]["reject_reason"] == "batch"
    assert receipts[2]["frame_digest"] == "sha256:" + hashlib.sha256(b"[1]").hexdigest()
    assert receipts[0]["frame_digest"] == "sha256:" + hashlib.sha256(request(1, "tools/list")[:-1]).hexdigest()
    assert all(list(r)[:3] == ["schema", "seq", "frame_digest"] for r in receipts)
    assert b"exec" not in (wrapper.tmp / "receipts.ndjson").read_bytes().replace(b"tools/call", b"")  # no args
    stop = json.loads((wrapper.tmp / "stop.json").read_text())
    assert stop == {
        "schema": "assay.mcp_session_stop.v0",
        "stop_cause": "client_eof",
        "child_exit": {"code": 0, "signal": None},
        "frames": {"forwarded": 2, "blocked": 1, "rejected": 1, "dropped_responses": 0},
    }
    coverage = json.loads((wrapper.tmp / "coverage.json").read_text())
    assert coverage["tools"]["tools_seen"] == ["exec", "search"]
    window = json.loads((wrapper.tmp / "window.json").read_text())
    assert window["session"]["event_source"] == "assay://org/app"
    for name in ("coverage.json", "window.json", "observed.json"):
        assert "Wrote " in run.stderr.decode() and name in run.stderr.decode()


def test_dry_run_context_mode_and_would_deny_receipt(wrapper: Wrapper):
    wrapper.policy.write_text('version: "2.0"\ntools:\n  deny: ["exec"]\n')
    run = wrapper.run(call(1, "exec", {}), "--dry-run", *opts(ONE_RUN))
    assert json.loads((wrapper.tmp / "context.json").read_text())["mode"] == "dry_run"
    [receipt] = run.log("receipts.ndjson")
    assert receipt["disposition"] == "forwarded"  # a would-deny call in dry run is forwarded


# -- refused before spawn -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "directory", "symlink", "dangling_symlink"])
@pytest.mark.parametrize("flag", list(ALL))
def test_an_existing_path_is_refused_before_spawn(wrapper: Wrapper, flag, kind):
    """Anything at the path of a create-new output, reports included -> exit 2, no child,
    nothing written."""
    target = wrapper.tmp / ALL[flag]
    if kind == "file":
        target.write_text("keep me")
    elif kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        (wrapper.tmp / "real.txt").write_text("keep me")
        target.symlink_to(wrapper.tmp / "real.txt")
    else:
        target.symlink_to(wrapper.tmp / "nowhere")
    pidfile = wrapper.tmp / "child.pid"
    run = wrapper.run(call(1, "x", {}), *opts(), server_opts=("--pidfile", str(pidfile)))
    assert run.returncode == 2
    assert run.stderr.decode().strip().splitlines()[-1].startswith("fatal: ")
    assert flag in run.stderr.decode().strip().splitlines()[-1]
    assert not pidfile.exists()  # no child spawned
    others = {n: e for n, e in files(wrapper.tmp).items() if n != ALL[flag]}
    assert not any(others.values())  # no output of any kind written
    if kind == "file":
        assert target.read_text() == "keep me"
    if kind == "symlink":
        assert (wrapper.tmp / "real.txt").read_text() == "keep me" and target.is_symlink()
    if kind == "dangling_symlink":
        assert target.is_symlink() and not (wrapper.tmp / "nowhere").exists()


@pytest.mark.parametrize(
    "a,b",
    [
        (("--session-context-out", "same.json"), ("--session-stop-out", "same.json")),
        (("--session-context-out", "same.json"), ("--session-stop-out", "./sub/../same.json")),
        (("--request-receipts-out", "log.ndjson"), ("--decision-log", "log.ndjson")),
        (("--decision-log-new", "log.ndjson"), ("--audit-log", "./log.ndjson")),
        (("--coverage-out", "c.json"), ("--session-context-out", "c.json")),
        (("--state-window-out", "w.json"), ("--observed-manifest-out", "linkdir/w.json")),
    ],
)
def test_paths_naming_the_same_file_are_refused(wrapper: Wrapper, a, b):
    """Each create-new path must differ from every other wrap output (parent realpath + name)."""
    (wrapper.tmp / "sub").mkdir()
    (wrapper.tmp / "linkdir").symlink_to(wrapper.tmp)
    pidfile = wrapper.tmp / "child.pid"
    run = wrapper.run(call(1, "x", {}), *SOURCE, *a, *b, server_opts=("--pidfile", str(pidfile)))
    assert run.returncode == 2, run.stderr
    assert "names the same file" in run.stderr.decode()
    assert not pidfile.exists()
    assert not (wrapper.tmp / "same.json").exists() and not (wrapper.tmp / "log.ndjson").exists()


def test_a_missing_parent_directory_is_refused(wrapper: Wrapper):
    pidfile = wrapper.tmp / "child.pid"
    run = wrapper.run(b"", "--session-context-out", "no/such/dir/c.json", server_opts=("--pidfile", str(pidfile)))
    assert run.returncode == 2
    assert "parent directory does not exist" in run.stderr.decode()
    assert not pidfile.exists()


# -- when the session starts: the files (docs/wrap.md, "One-run outputs and session reports"; the
# rules themselves, frame by frame, are checked in memory in tests/wrap/test_session_frames.py) ---


def test_client_eof_without_any_line_starts_a_session(wrapper: Wrapper):
    run = wrapper.run(b"", *opts())
    assert run.returncode == 0
    assert all(files(wrapper.tmp).values())
    assert json.loads((wrapper.tmp / "stop.json").read_text())["frames"] == {
        "forwarded": 0,
        "blocked": 0,
        "rejected": 0,
        "dropped_responses": 0,
    }
    assert (wrapper.tmp / "receipts.ndjson").read_bytes() == b""


def test_a_discover_only_run_leaves_nothing_and_the_paths_stay_usable(wrapper: Wrapper):
    """Only server/discover then EOF: no output, no report; the next run uses the paths."""
    run = wrapper.run(DISCOVER + DISCOVER, *opts())
    assert run.returncode == 0
    assert [r["id"] for r in run.replies()] == ["d1", "d1"]  # forwarded and answered
    assert not any(files(wrapper.tmp).values())
    run = wrapper.run(request(1, "initialize", {}), *opts())
    assert run.returncode == 0
    assert all(files(wrapper.tmp).values())


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_discover_probe_killed_by_a_signal_leaves_nothing(wrapper: Wrapper, how):
    """A disposable probe process (discover, then a signal) creates nothing."""
    proc = wrapper.popen(*opts(), server_opts=("--on-eof-hang",))
    try:
        assert exchange(proc, DISCOVER)["id"] == "d1"
        proc.send_signal(how)
        proc.wait(timeout=60)
    finally:
        stop_and_close(proc)
    assert not any(files(wrapper.tmp).values())


# -- race: a path taken between the check and the session start ---------------------------------


def test_a_path_taken_in_the_race_is_refused_nothing_overwritten_frame_not_forwarded(wrapper: Wrapper):
    """Another process (here: the server itself) creates the context path after the pre-spawn
    check. wrap refuses it, overwrites nothing, does not handle the triggering frame, keeps the
    outputs it already created, exits 2 and leaves no child."""
    pidfile = wrapper.tmp / "child.pid"
    taken = wrapper.tmp / "context.json"
    proc = wrapper.popen(*opts(), server_opts=("--touch", str(taken), "--pidfile", str(pidfile), "--on-eof-hang"))
    try:
        child = read_pid(pidfile)  # the server has run its startup code: the path is taken
        out, err = proc.communicate(call(1, "search", {"q": 1}), timeout=60)
    finally:
        stop_and_close(proc)
    assert proc.returncode == 2
    assert err.decode().strip().splitlines()[-1].startswith("fatal: --session-context-out")
    assert taken.read_text() == "theirs"  # untouched
    assert out == b""  # not handled: no reply
    assert wrapper.record.read_bytes() == b""  # not forwarded
    assert (wrapper.tmp / "dln.ndjson").read_bytes() == b""  # created before, left in place
    assert (wrapper.tmp / "receipts.ndjson").read_bytes() == b""  # no receipt for the frame
    assert not (wrapper.tmp / "stop.json").exists()  # after the refused one: never created
    assert not (wrapper.tmp / "coverage.json").exists() and not (wrapper.tmp / "window.json").exists()
    assert wait_dead(child)


# -- the stop record -----------------------------------------------------------------------------


def test_stop_record_child_exit(wrapper: Wrapper):
    proc = wrapper.popen(*opts(ONE_RUN), server_opts=("--exit-after", "1", "--exit-code", "4"))
    try:
        proc.stdin.write(request(1, "ping"))
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 4
    finally:
        stop_and_close(proc)
    stop = json.loads((wrapper.tmp / "stop.json").read_text())
    assert stop["stop_cause"] == "child_exit"
    assert stop["child_exit"] == {"code": 4, "signal": None}


def test_stop_record_signal(wrapper: Wrapper):
    pidfile = wrapper.tmp / "child.pid"
    proc = wrapper.popen(*opts(ONE_RUN), server_opts=("--on-eof-hang", "--pidfile", str(pidfile)))
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        stop_and_close(proc)
    stop = json.loads((wrapper.tmp / "stop.json").read_text())
    assert stop["stop_cause"] == "signal"
    assert stop["wrap_signal"] == signal.SIGTERM
    assert list(stop) == ["schema", "stop_cause", "wrap_signal", "child_exit", "frames"]
    assert stop["child_exit"]["code"] is None and stop["child_exit"]["signal"] == signal.SIGTERM
    assert wait_dead(read_pid(pidfile))


def test_reports_written_whatever_the_stop_cause(wrapper: Wrapper):
    """Coverage and state window are written at session end also after a signal."""
    proc = wrapper.popen(*opts(), server_opts=("--on-eof-hang",))
    try:
        assert exchange(proc, call(1, "search", {}))["id"] == 1
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        stop_and_close(proc)
    assert json.loads((wrapper.tmp / "coverage.json").read_text())["tools"]["tools_seen"] == ["search"]
    assert (wrapper.tmp / "window.json").exists()


# -- observed manifest --------------------------------------------------------------------------


def test_observed_manifest_follows_next_cursor_and_feeds_manifest_candidate(wrapper: Wrapper):
    tools = [{"name": f"t{i}", "description": f"tool {i}", "inputSchema": {"type": "object"}} for i in range(5)]
    proc = wrapper.popen(
        *SOURCE,
        "--observed-manifest-out",
        "observed.json",
        server_opts=("--tools", json.dumps(tools), "--page-size", "2"),
    )
    try:
        cursor = None
        pages = 0
        while True:
            params = {"cursor": cursor} if cursor else None
            reply = exchange(proc, request(10 + pages, "tools/list", params))
            pages += 1
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                break
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        stop_and_close(proc)
    assert pages == 3
    doc = json.loads((wrapper.tmp / "observed.json").read_text())
    assert doc["observed"]["tool_count"] == 5
    assert doc["observed"]["tools_list_complete"] == "complete"
    res = subprocess.run(
        [str(ASSAY), "mcp", "manifest", "candidate", "--from-observed", "observed.json", "--out", "cand.json"],
        cwd=wrapper.tmp,
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((wrapper.tmp / "cand.json").read_text())["status"] == "candidate"


def test_observed_manifest_partial_chain(wrapper: Wrapper):
    tools = [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(3)]
    run = wrapper.run(
        request(1, "tools/list"),
        *SOURCE,
        "--observed-manifest-out",
        "observed.json",
        server_opts=("--tools", json.dumps(tools), "--page-size", "2"),
    )
    assert run.returncode == 0
    doc = json.loads((wrapper.tmp / "observed.json").read_text())
    assert doc["observed"]["tools_list_complete"] == "partial"
    assert doc["observed"]["tool_count"] == 2


def test_observed_manifest_without_tools_list(wrapper: Wrapper):
    run = wrapper.run(request(1, "ping"), *SOURCE, "--observed-manifest-out", "observed.json")
    assert run.returncode == 0
    assert json.loads((wrapper.tmp / "observed.json").read_text())["status"] == "not_observed"


# -- context digest property ----------------------------------------------------------------------

argv_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(argv_text, max_size=4))
def test_context_digest_end_to_end_matches_independent_jcs(tmp_path_factory, extra):
    """The context digest covers the exact strings after --, unicode included; no plaintext."""
    wrapper = Wrapper(tmp_path_factory.mktemp("ctx"))
    argv = [sys.executable, str(RECORDER), str(wrapper.record), "--exit-code", "0", *[f"x{a}" for a in extra]]
    # The recorder ignores unknown trailing options only if they come in pairs; keep it simple:
    argv = argv[:5] + []
    wrap_argv = [
        str(ASSAY),
        "mcp",
        "wrap",
        "--policy",
        str(wrapper.policy),
        "--session-context-out",
        "c.json",
        "--",
        sys.executable,
        "-c",
        "import sys",
        *extra,
    ]
    res = subprocess.run(wrap_argv, input=b"", capture_output=True, timeout=60, cwd=wrapper.tmp)
    assert res.returncode == 0, res.stderr
    raw = (wrapper.tmp / "c.json").read_bytes()
    digest = json.loads(raw)["command_digest"]
    child_argv = [sys.executable, "-c", "import sys", *extra]
    assert digest == "sha256:" + hashlib.sha256(independent_jcs_argv(child_argv)).hexdigest()
    for arg in extra:
        if len(arg) > 3:
            assert arg.encode() not in raw
