"""Path jail (docs/server.md, "Policy path jail"), the dispatch deadline ("Shared rules", fail
closed) and the logging contract ("Logging")."""

from __future__ import annotations

import os

from tests.server._helpers import call, payload_of

DECIDE = "assay_policy_decide"


def decide(i, policy, tool="dangerous_tool"):
    return call(i, DECIDE, {"tool": tool, "policy": policy})


def test_jail_cases(serve, policy_root, tmp_path):
    """`..` that normalizes back inside is allowed; escapes, absolute paths and symlinks out of
    the root are refused (a link out of the root is refused whether or not its target exists:
    nothing outside the root is looked at); a dangling link inside is not found; a directory is
    not a policy; no message names the root."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("blocklist: [dangerous_tool]\n")
    (policy_root / "sub").mkdir()
    (policy_root / "sub" / "inner.yaml").write_text("blocklist: [dangerous_tool]\n")
    os.symlink(outside, policy_root / "escape.yaml")
    os.symlink(tmp_path, policy_root / "escdir")
    os.symlink(policy_root / "sub" / "inner.yaml", policy_root / "inside_link.yaml")
    os.symlink(tmp_path / "nowhere.yaml", policy_root / "dangling_out.yaml")
    os.symlink("sub/nowhere.yaml", policy_root / "dangling.yaml")
    os.symlink(policy_root / "sub", policy_root / "abs_sub")  # absolute, but inside the root
    rootname = policy_root.name
    s = serve(
        [
            decide(1, "sub/../blocklist_policy.yaml"),
            decide(2, "./sub//inner.yaml"),
            decide(3, "inside_link.yaml"),
            decide(4, "../outside.yaml"),
            decide(5, f"sub/../../{rootname}/blocklist_policy.yaml"),
            decide(6, "escape.yaml"),
            decide(7, "escdir/outside.yaml"),
            decide(8, str(policy_root / "blocklist_policy.yaml")),
            decide(9, "dangling.yaml"),
            decide(10, "bad\x00name.yaml"),
            decide(11, ""),
            decide(12, "dangling_out.yaml"),
            decide(13, "abs_sub/inner.yaml"),
            decide(14, "sub"),
        ]
    )
    p = [payload_of(r) for r in s.responses]
    blocked = {"allowed": False, "matches": ["Tool 'dangerous_tool' is blocked by policy"]}
    assert p[0] == p[1] == p[2] == blocked

    def err(code, message):
        return {"allowed": False, "error": {"code": code, "message": message}}

    assert p[3] == err("E_PERMISSION_DENIED", "path escapes policy_root")
    assert p[4] == err("E_PERMISSION_DENIED", "path escapes policy_root")
    assert p[5] == err("E_PERMISSION_DENIED", "policy resolves outside policy_root")
    assert p[6] == err("E_PERMISSION_DENIED", "policy resolves outside policy_root")
    assert p[7] == err("E_PERMISSION_DENIED", "absolute paths are not allowed")
    assert p[8] == err("E_POLICY_NOT_FOUND", "Policy not found: dangling.yaml")
    assert p[9]["error"]["code"] == "E_POLICY_READ"
    assert p[10] == err("E_INVALID_REQUEST", "policy path is empty")
    assert p[11] == err("E_PERMISSION_DENIED", "policy resolves outside policy_root")
    assert p[12] == blocked
    assert p[13] == err("E_POLICY_READ", "Is a directory")
    for r in s.responses[3:]:
        text = r["result"]["content"][0]["text"]
        assert str(tmp_path) not in text and os.path.realpath(tmp_path) not in text


def test_timeout_fails_closed_and_server_keeps_serving(serve):
    """F1/F3/F5: the slow hook outlasts ASSAY_MCP_TIMEOUT_MS -> exactly E_TIMEOUT, isError true;
    the next request is served normally and the late result never produces a second response."""
    env = {"ASSAY_MCP_TIMEOUT_MS": "100", "ASSAY_MCP_TEST_SLOW_MS": "1500"}
    s = serve(
        [
            decide(1, "slow/../blocklist_policy.yaml"),
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            decide(3, "blocklist_policy.yaml", tool="fine"),
            call(4, "assay_check_args", {"tool": "t", "arguments": {}, "policy": "slow/../policy.yaml"}),
        ],
        env=env,
    )
    r = s.responses
    assert [x["id"] for x in r] == [1, 2, 3, 4]
    timeout = {"allowed": False, "error": {"code": "E_TIMEOUT", "message": "Tool execution timed out"}}
    assert payload_of(r[0]) == timeout and r[0]["result"]["isError"] is True
    assert r[1]["result"] == {}
    assert payload_of(r[2]) == {"allowed": True, "reason": "Allowed by policy"}
    assert payload_of(r[3]) == timeout
    timeouts = s.fields("tool_call_timeout")
    assert [t["code"] for t in timeouts] == ["E_TIMEOUT", "E_TIMEOUT"]
    assert all(t["duration_ms"] < 1500 for t in timeouts)


def test_slow_hook_is_off_by_default(serve):
    """F5: without ASSAY_MCP_TEST_SLOW_MS a `slow` path is an ordinary path."""
    s = serve([decide(1, "slow/../blocklist_policy.yaml")], env={"ASSAY_MCP_TIMEOUT_MS": "2000"})
    assert payload_of(s.responses[0])["allowed"] is False and "error" not in payload_of(s.responses[0])


def test_log_events_shape_and_no_caller_strings(serve):
    """G1-G5: JSON lines on stderr; tool_call_* events carry no tool name, path or argument value;
    the identity tool emits no usage event, no tool_decision and no `allowed`."""
    s = serve(
        [
            call(1, DECIDE, {"tool": "SENTINEL_TOOL", "policy": "blocklist_policy.yaml", "x": "SENTINEL_ARG"}),
            call(2, "assay_server_identity", {}),
            call(3, "assay_server_identity", {"SENTINEL_KEY": 1}),
        ]
    )
    events = s.events
    assert all(set(e) == {"timestamp", "level", "fields", "target"} for e in events)
    assert events[0]["fields"]["event"] == "server_start" and events[0]["target"] == "assay_mcp_server"
    for e in events:
        if e["fields"]["event"].startswith("tool_call") or e["fields"]["event"] == "tool_decision":
            assert "SENTINEL" not in str(e)
    assert len(s.fields("assay.usage.metered")) == 1
    assert len(s.fields("tool_decision")) == 1
    done = s.fields("tool_call_done")
    assert done[0]["allowed"] is True and done[0]["outcome"] == "ok" and done[0]["rpc_id"] == 1
    assert "allowed" not in done[1] and "allowed" not in done[2]
    assert done[2]["outcome"] == "app_error" and done[2]["code"] == "E_INVALID_ARGS"
    assert b"SENTINEL_KEY" not in s.stdout + s.stderr
    identity_refusal = payload_of(s.responses[2])
    assert "allowed" not in identity_refusal and s.responses[2]["result"]["isError"] is True


def test_identity_accepts_absent_null_and_empty(serve):
    """assay_server_identity: absent arguments, null and {} are accepted; a list or a string is refused."""
    s = serve(
        [
            call(1, "assay_server_identity"),
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "assay_server_identity", "arguments": None},
            },
            call(3, "assay_server_identity", {}),
            call(4, "assay_server_identity", []),
            call(5, "assay_server_identity", "x"),
        ]
    )
    p = [payload_of(r) for r in s.responses]
    assert p[0] == p[1] == p[2] and p[0]["name"] == "assay-mcp-server"
    assert p[3] == p[4] == {"error": {"code": "E_INVALID_ARGS", "message": "assay_server_identity takes no arguments"}}


def test_invalid_env_values_keep_defaults_and_warn(serve):
    """docs/server.md, "Environment": an unparsable or negative number keeps the default and logs
    one warning."""
    s = serve([], env={"ASSAY_MCP_MAX_BYTES": "-5", "ASSAY_MCP_TIMEOUT_MS": "soon", "ASSAY_LOG": "bogus=="})
    start = s.fields("server_start")[0]
    assert start["max_msg_bytes"] == 1_000_000 and start["timeout_ms"] == 2000
    assert sorted(w["name"] for w in s.fields("invalid_env_value")) == ["ASSAY_MCP_MAX_BYTES", "ASSAY_MCP_TIMEOUT_MS"]
    assert b"soon" not in s.stderr


def test_sequence_limits_legacy_and_bad_history(serve, policy_root):
    """S1, S3, L1: history/next_tool limits, legacy exact match, a non-list history is E_INTERNAL."""
    (policy_root / "legacy.yaml").write_text("[a, b]\n")
    s = serve(
        [
            call(1, "assay_check_sequence", {"history": ["a"], "next_tool": "b", "policy": "legacy.yaml"}),
            call(2, "assay_check_sequence", {"history": ["b"], "next_tool": "a", "policy": "legacy.yaml"}),
            call(3, "assay_check_sequence", {"history": ["a", "a", "a"], "next_tool": "b", "policy": "legacy.yaml"}),
            call(4, "assay_check_sequence", {"history": [], "next_tool": "x" * 13, "policy": "legacy.yaml"}),
            call(5, "assay_check_sequence", {"history": "a", "next_tool": "b", "policy": "legacy.yaml"}),
        ],
        env={"ASSAY_MCP_MAX_TOOL_CALLS": "2", "ASSAY_MCP_MAX_FIELD_BYTES": "12"},
    )
    p = [payload_of(r) for r in s.responses]
    assert p[0] == {"allowed": True, "violations": [], "suggested_fix": None}
    assert p[1]["violations"] == [
        {"constraint": "sequence_exact_match", "suggestion": 'Expected ["a", "b"], found ["b", "a"]'}
    ]
    assert p[2]["error"] == {"code": "E_LIMIT_EXCEEDED", "message": "history too long"}
    assert p[3]["error"] == {"code": "E_LIMIT_EXCEEDED", "message": "next_tool too long"}
    assert p[4]["error"]["code"] == "E_INTERNAL"
