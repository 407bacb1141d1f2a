"""wrap with a recording child: admission, enforcement and records at process level.

The child writes every byte it receives to a file, so each test can prove that rejected or
denied frames never reached it and admitted frames arrived byte-identical (wrap.md §3, §4).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wrap.conftest import stop_and_close, DENY_EXEC, Wrapper, call, exchange, request
from tests.wrap.test_admission import BAD, GOOD

REJECT_CODES = {
    "invalid_utf8": (-32700, "Parse error"),
    "embedded_line_break": (-32700, "Parse error"),
    "malformed_json": (-32700, "Parse error"),
    "batch": (-32600, "Invalid Request"),
    "not_an_object": (-32600, "Invalid Request"),
    "duplicate_member": (-32600, "Invalid Request"),
    "non_string_method": (-32600, "Invalid Request"),
    "frame_too_large": (-32600, "Invalid Request"),
}


def rejection(reason: str) -> bytes:
    code, message = REJECT_CODES[reason]
    return (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"%s","data":{"reason":"%s"}}}\n'
        % (code, message.encode(), reason.encode())
    )


def test_every_bad_frame_is_rejected_locally_and_never_forwarded(wrapper: Wrapper):
    """§3.2/§3.3/D11: one reply and one warning per bad frame; the child sees only good frames."""
    good = [
        request(1, "initialize", {"protocolVersion": "2025-06-18"}),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n',
    ]
    frames = good[0] + b"".join(line for line, _ in BAD) + b"\n  \t\r\n" + good[1]
    for dry in ((), ("--dry-run",)):
        wrapper.record.unlink(missing_ok=True)
        run = wrapper.run(frames, *dry)
        assert run.returncode == 0, run.stderr
        assert run.record == b"".join(good)  # byte for byte, CRLF kept
        lines = run.stdout.splitlines(keepends=True)
        # The child's answer and our local replies travel independently: compare each stream.
        assert [l for l in lines if l.startswith(b'{"jsonrpc": "2.0", "id": 1, "result"')] != []
        assert [l for l in lines if b'"id":null' in l] == [rejection(reason) for _, reason in BAD]
        assert len(lines) == len(BAD) + 1
        warnings = [l for l in run.stderr.decode().splitlines() if "rejected client frame" in l]
        assert warnings == [f"[assay] WARNING: rejected client frame ({reason})" for _, reason in BAD]
        assert b"NaN" not in run.stderr and b"\\ud800" not in run.stderr  # never echoed


def test_frame_too_large(wrapper: Wrapper):
    """D11: frames over --max-frame-bytes are rejected -32600 frame_too_large; exactly N passes."""
    exact = b'{"pad":"' + b"a" * (100 - 10) + b'"}'
    assert len(exact) == 100
    over = b'{"pad":"' + b"a" * (101 - 10) + b'"}'
    run = wrapper.run(exact + b"\n" + over + b"\n" + exact + b"\r\n", "--max-frame-bytes", "100")
    assert run.returncode == 0, run.stderr
    assert run.record == exact + b"\n" + exact + b"\r\n"
    assert run.stdout == rejection("frame_too_large")


def test_admitted_frames_arrive_byte_for_byte(wrapper: Wrapper):
    frames = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in GOOD)
    run = wrapper.run(frames)
    assert run.record == frames


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.sampled_from([line for line, _ in BAD]),
            st.sampled_from([g if g.endswith(b"\n") else g + b"\n" for g in GOOD]),
            st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4).map(
                lambda d: json.dumps({k: v for k, v in d.items() if k != "method"}).encode() + b"\n"
            ),
        ),
        max_size=12,
    )
)
def test_generated_streams_forward_exactly_the_admitted_frames(tmp_path_factory, frames):
    """Hypothesis over whole client streams: forwarded bytes == admitted frames, in order."""
    from assay.wrap.admission import Admitted, admit

    wrapper = Wrapper(tmp_path_factory.mktemp("gen"))
    run = wrapper.run(b"".join(frames))
    expected = b"".join(f for f in frames if isinstance(admit(f), Admitted))
    rejected = sum(1 for f in frames if admit(f) is not None and not isinstance(admit(f), Admitted))
    assert run.returncode == 0
    assert run.record == expected
    assert run.stdout.count(b'"id":null,"error"') == rejected


# -- enforcement ----------------------------------------------------------------------------------


def test_deny_reply_bytes_and_not_forwarded(wrapper: Wrapper):
    """§4.4: exact bytes, id echoed, the denied frame never reaches the child."""
    wrapper.policy.write_text(DENY_EXEC)
    frames = call(7, "exec", {}) + call("s-1", "exec") + call(8, "search", {"q": 1})
    run = wrapper.run(frames)
    lines = run.stdout.splitlines(keepends=True)
    assert lines[0] == (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":"{\\"status\\":\\"deny\\",\\"error_code\\":\\"E_TOOL_DENIED\\",\\"tool\\":\\"exec\\",'
        b'\\"reason\\":\\"Tool is explicitly denylisted by name\\"}"}],'
        b'"isError":true,"structuredContent":{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec",'
        b'"reason":"Tool is explicitly denylisted by name"}}}\n'
    )
    assert lines[1].startswith(b'{"jsonrpc":"2.0","id":"s-1","result":{"content"')
    assert json.loads(lines[2])["id"] == 8
    assert run.record == call(8, "search", {"q": 1})


def test_schema_deny_reply_matches_policy_spec(wrapper: Wrapper):
    """policy.md §6.1 W1 byte for byte."""
    run = wrapper.run(call(7, "read_file", {"path": "/etc/passwd"}))
    payload = (
        b'{"status":"deny","error_code":"E_ARG_SCHEMA","tool":"read_file",'
        b'"violations":[{"path":"/path","message":"\\"/etc/passwd\\" does not match \\"^/workspace/\\""}]}'
    )
    assert run.stdout == (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":' + json.dumps(payload.decode()).encode() + b'}],'
        b'"isError":true,"structuredContent":' + payload + b"}}\n"
    )
    assert run.record == b""


def test_only_tools_call_is_evaluated(wrapper: Wrapper):
    """D10: initialize, tools/list, ping, server/discover pass even under an allowlist."""
    frames = (
        request(1, "initialize", {})
        + request(2, "tools/list")
        + request(3, "ping")
        + request(4, "server/discover", {"_meta": {}})
        + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    run = wrapper.run(frames, "--event-source", "assay://t/x", "--decision-log", "d.ndjson")
    assert run.record == frames
    assert [r["id"] for r in run.replies()] == [1, 2, 3, 4]
    assert run.log("d.ndjson") == []  # no decision event for non-tool frames


def test_denied_notification_is_dropped_without_reply(wrapper: Wrapper):
    """D12: a denied tools/call without id gets no reply and is not forwarded; it is logged."""
    frame = b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"exec"}}\n'
    run = wrapper.run(frame, "--event-source", "assay://t/x", "--decision-log", "d.ndjson")
    assert run.stdout == b"" and run.record == b""
    [event] = run.log("d.ndjson")
    assert event["data"]["decision"] == "deny" and "request_id" not in event["data"]


def test_dry_run_forwards_and_logs(wrapper: Wrapper):
    """Seed + §6.1.7: dry-run forwards the denied call; event says allow; audit says would_deny."""
    frames = call(1, "exec", {}) + call(2, "read_file", {"path": "/workspace/a"})
    run = wrapper.run(
        frames, "--dry-run", "--event-source", "assay://t/x", "--decision-log", "d.ndjson", "--audit-log", "a.ndjson"
    )
    assert run.record == frames
    assert [r["id"] for r in run.replies()] == [1, 2]
    assert all("isError" not in json.dumps(r) for r in run.replies())
    events = run.log("d.ndjson")
    assert [e["data"]["decision"] for e in events] == ["allow", "allow"]
    assert events[0]["data"]["reason_code"] == "P_TOOL_DENIED"
    assert events[0]["data"]["typed_decision"] == "deny"
    assert events[1]["data"]["reason_code"] == "P_POLICY_ALLOW"
    audit = run.log("a.ndjson")
    assert [a["decision"] for a in audit] == ["would_deny", "allow"]
    assert audit[0]["agentic"]["error_code"] == "E_TOOL_DENIED"
    assert "DRY RUN MODE: No actions will be blocked." in run.stderr.decode()


def test_decision_log_event_shape(wrapper: Wrapper):
    """§6.1: CloudEvents envelope, key order, reason-code mapping, tool_call_id/request_id."""
    frames = call(7, "exec", {}) + call(8, "read_file", {"path": "/workspace/x"}) + call(9, "write_file", {})
    run = wrapper.run(frames, "--event-source", "assay://org/app", "--decision-log", "d.ndjson")
    events = run.log("d.ndjson")
    assert [list(e) for e in events] == [["specversion", "id", "type", "source", "time", "data"]] * 3
    assert all(e["type"] == "assay.tool.decision" and e["source"] == "assay://org/app" for e in events)
    assert all(e["id"].startswith("evt_decision_") for e in events)
    got = [(e["data"]["tool"], e["data"]["decision"], e["data"]["reason_code"], e["data"]["tool_call_id"],
            e["data"]["request_id"]) for e in events]
    assert got == [
        ("exec", "deny", "P_TOOL_DENIED", "req_7", 7),
        ("read_file", "allow", "P_POLICY_ALLOW", "req_8", 8),
        ("write_file", "deny", "P_TOOL_NOT_ALLOWED", "req_9", 9),
    ]


def test_verbose_lines(wrapper: Wrapper):
    """§4.3 --verbose lines and D13's TOOL line for tools seen in a tools/list result."""
    tools = json.dumps([{"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}}])
    frames = request(1, "tools/list") + call(2, "read_file", {"path": "/workspace/a"}) + call(3, "exec", {})
    frames += b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"bad":1}}\n'
    run = wrapper.run(frames, "--verbose", server_opts=("--tools", tools))
    err = run.stderr.decode().splitlines()
    assert any(l.startswith('[assay] TOOL "read_file" server_id="default-mcp-server" schema_hash=') for l in err)
    assert '[assay] ALLOW "read_file"' in err
    assert '[assay] DENY "exec" (reason: "Tool is explicitly denylisted by name")' in err
    assert '[assay] DENY "" (reason: "Tool is not in the allowlist")' in err


def test_tool_pins_drift_from_tools_list(wrapper: Wrapper):
    """A pinned tool is denied until listed and when its listed identity drifts (docs/wrap.md,
    "Tool pins"); a denied call is not forwarded; server lines are relayed untouched."""
    tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}}
    from assay.policy import tool_identity

    schema_hash, meta_hash = tool_identity(tool)
    wrapper.policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["echo"]\nschemas:\n  echo: {type: object}\ntool_pins:\n'
        f"  echo:\n    server_id: default-mcp-server\n    tool_name: echo\n"
        f"    schema_hash: \"{schema_hash}\"\n    meta_hash: \"{'0' * 64}\"\n"
    )
    proc = wrapper.popen(server_opts=("--tools", json.dumps([tool])))
    try:
        first = exchange(proc, call(1, "echo", {}))
        assert first["result"]["structuredContent"]["error_code"] == "E_TOOL_DRIFT"  # not yet listed
        listed = exchange(proc, request(2, "tools/list"))
        assert "tool_identity" not in listed["result"]["tools"][0]  # D13: server lines untouched
        third = exchange(proc, call(3, "echo", {}))
        assert third["result"]["structuredContent"]["error_code"] == "E_TOOL_DRIFT"
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        stop_and_close(proc)
    assert wrapper.record.read_bytes() == request(2, "tools/list")


def test_modern_deny_reply_carries_result_type(wrapper: Wrapper):
    """D16a: a 2026-07-28-era request gets resultType complete as the last member of result."""
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    frame = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "exec", **meta}}
    ).encode() + b"\n"
    wrapper.policy.write_text(DENY_EXEC)
    run = wrapper.run(frame)
    assert run.stdout.endswith(b'"reason":"Tool is explicitly denylisted by name"},"resultType":"complete"}}\n')


def test_client_responses_are_relayed_without_evaluation(wrapper: Wrapper):
    frame = b'{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}\n'
    run = wrapper.run(frame, "--event-source", "assay://t/x", "--decision-log", "d.ndjson")
    assert run.record == frame
    assert run.log("d.ndjson") == []


def test_rate_limit_counts_every_request(wrapper: Wrapper):
    """D10: max_requests_total counts every client request; the next tools/call is denied."""
    wrapper.policy.write_text('version: "2.0"\nlimits:\n  max_requests_total: 2\n')
    frames = request(1, "initialize", {}) + request(2, "ping") + call(3, "anything", {}) + request(4, "ping")
    run = wrapper.run(frames)
    replies = {r["id"]: r for r in run.replies()}
    assert replies[3]["result"]["structuredContent"] == {"status": "deny", "error_code": "E_RATE_LIMIT"}
    assert replies[4]["result"] == {"echo": "ping"}  # non-tool requests are never blocked


def test_tool_pins_checked_after_a_tools_list_larger_than_the_line_buffer(wrapper: Wrapper):
    """A tools/list answer of several MiB (longer than the 1 MiB partial-line buffer, so it is
    written through in pieces) still yields identities: a server cannot dodge its pins by
    padding its tool list. The answer reaches the client byte for byte."""
    from assay.policy import tool_identity

    pinned = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}}
    padding = [
        {"name": f"pad{i}", "description": "x" * 1000, "inputSchema": {"type": "object"}} for i in range(3000)
    ]
    tools = padding + [dict(pinned, description="Echo, changed")]
    (wrapper.tmp / "tools.json").write_text(json.dumps(tools))
    schema_hash, meta_hash = tool_identity(pinned)
    wrapper.policy.write_text(
        'version: "2.0"\ntools:\n  allow: ["echo"]\nschemas:\n  echo: {type: object}\ntool_pins:\n'
        f"  echo:\n    server_id: default-mcp-server\n    tool_name: echo\n"
        f'    schema_hash: "{schema_hash}"\n    meta_hash: "{meta_hash}"\n'
    )
    proc = wrapper.popen(server_opts=("--tools-file", str(wrapper.tmp / "tools.json")))
    try:
        listed = exchange(proc, request(1, "tools/list"))
        assert len(listed["result"]["tools"]) == 3001
        denied = exchange(proc, call(2, "echo", {}))
        assert denied["result"]["structuredContent"]["error_code"] == "E_TOOL_DRIFT"
    finally:
        stop_and_close(proc)
