"""Evaluation (docs/policy.md, "Evaluation and reason codes"): check order, every reason code,
deny payloads byte for byte, metadata, session state, identity and policy digests. Rate-limit
denies name the called tool and the drift reason has no upstream suffix (docs/compatibility.md,
"Policies")."""

from __future__ import annotations

import hashlib
import re
import json
from pathlib import Path

import jcs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import Decision, SessionState, evaluate, load_policy, tool_identity

DATA = Path(__file__).parent / "data"
COMPLETE = (DATA / "complete.yaml").read_text()
MINIMAL = (DATA / "minimal.yaml").read_text()


def P(text: str):
    return load_policy(text.encode(), source="t.yaml")


def wire(d: Decision, id_=7) -> str:
    """The wrap's deny line (W1), built by wrap's records from the decision's contract."""
    from assay.session.replies import deny_reply

    return deny_reply(id_, d.contract).decode("utf-8").rstrip("\n")


def sc(d: Decision) -> str:
    return json.dumps(d.contract, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- deny replies (docs/wrap.md, "Deny replies")


def test_W1_arg_schema_deny_line_byte_for_byte():
    d = evaluate(P(MINIMAL), "read_file", {"path": "/etc/passwd"})
    assert wire(d) == (
        '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        '{"type":"text","text":' + json.dumps(sc(d), ensure_ascii=False) + "}],"
        '"isError":true,"structuredContent":{"status":"deny","error_code":"E_ARG_SCHEMA","tool":"read_file",'
        '"violations":[{"path":"/path","message":"\\"/etc/passwd\\" does not match \\"^/workspace/\\""}]}}}'
    )


def test_wrap_4_4_denylist_line_byte_for_byte():
    d = evaluate(P('version: "2.0"\ntools: {deny: ["exec"]}\n'), "exec", {})
    assert wire(d) == (
        '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        '{"type":"text","text":"{\\"status\\":\\"deny\\",\\"error_code\\":\\"E_TOOL_DENIED\\",\\"tool\\":\\"exec\\",'
        '\\"reason\\":\\"Tool is explicitly denylisted by name\\"}"}],'
        '"isError":true,"structuredContent":{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec",'
        '"reason":"Tool is explicitly denylisted by name"}}}'
    )


def test_W2_not_allowed_payload():
    d = evaluate(P(COMPLETE), "write_file", {})
    assert (
        sc(d)
        == '{"status":"deny","error_code":"E_TOOL_NOT_ALLOWED","tool":"write_file","reason":"Tool is not in allowlist"}'
    )
    assert d.reason == "Tool is not in the allowlist"  # C1


def test_W2_rate_limit_payload_and_D10_tool_name():
    p = P('version: "2.0"\nlimits: {max_tool_calls_total: 0}\n')
    d = evaluate(p, "search", {})
    assert sc(d) == '{"status":"deny","error_code":"E_RATE_LIMIT"}'
    assert d.tool == "search"  # the called tool, not upstream's "ALL" (docs/compatibility.md, "Policies")
    assert d.reason == "Rate limit exceeded (tool calls)"
    assert d.event_reason_code == "P_RATE_LIMIT"


def test_W2_schema_compile_payload():
    p = P('schemas:\n  $defs: {id: {type: string}}\n  lookup: {$defs: {id: {type: integer}}, $ref: "#/$defs/id"}\n')
    d = evaluate(p, "lookup", {})
    assert sc(d) == (
        '{"status":"deny","error_code":"E_SCHEMA_COMPILE","tool":"lookup","message":'
        '"Declared schema failed to prepare or compile: shared and tool-local $defs entries must not overlap"}'
    )
    assert d.reason == d.contract["message"] and d.event_reason_code == "P_POLICY_DENY"


def test_W2_drift_payload_without_sota_suffix_D16():
    p, state = _pinned_policy()
    state.observe_tools("fs-prod", [dict(READ_FILE, description="Read any file")])
    d = evaluate(p, "read_file", {"path": "/workspace/a"}, state, server_id="fs-prod")
    # upstream's "(SOTA Moat)" suffix is dropped (docs/compatibility.md, "Policies")
    assert sc(d) == (
        '{"status":"deny","error_code":"E_TOOL_DRIFT","tool":"read_file",'
        '"reason":"Tool metadata or schema has changed without policy update"}'
    )


# ---------------------------------------------------------------- decision vectors, one per outcome and code


@pytest.mark.parametrize(
    "tool, args, outcome, code, extra",
    [
        ("exec", {}, "deny", "E_TOOL_DENIED", {"match_basis": "name", "matched_rule": "tools.deny"}),
        ("bulk_delete_rows", {}, "deny", "E_TOOL_DENIED", {"matched_rule": "tools.deny"}),
        ("shell_run", {}, "deny", "E_TOOL_DENIED", {}),
        ("write_file", {}, "deny", "E_TOOL_NOT_ALLOWED", {"matched_rule": None}),
        ("read_file", {"path": "/etc/passwd"}, "deny", "E_ARG_SCHEMA", {"matched_rule": "tools.allow"}),
        ("read_file", {"path": "/workspace/a", "x": 1}, "deny", "E_ARG_SCHEMA", {}),
        ("read_file", {"path": "/workspace/a"}, "allow", None, {"typed_decision": "allow"}),
        ("list_dir", {}, "deny", "E_TOOL_UNCONSTRAINED", {"typed_decision": "deny"}),
        ("deploy", {}, "deny", "E_TOOL_UNCONSTRAINED", {"tool_classes": ("release",)}),
    ],
)
def test_decision_vectors(tool, args, outcome, code, extra):
    d = evaluate(P(COMPLETE), tool, args)
    assert (d.outcome, d.reason_code) == (outcome, code)
    for k, v in extra.items():
        assert getattr(d, k) == v


def test_arg_schema_single_violation_at_path_and_additional_properties():
    p = P(COMPLETE)
    assert evaluate(p, "read_file", {"path": "/etc/passwd"}).contract["violations"] == [
        {"path": "/path", "message": '"/etc/passwd" does not match "^/workspace/"'}
    ]
    v = evaluate(p, "read_file", {"path": "/workspace/a", "x": 1}).contract["violations"]
    assert v == [{"path": "", "message": "Additional properties are not allowed ('x' was unexpected)"}]


def test_allow_carries_restrict_scope_obligation():
    d = evaluate(P(COMPLETE), "read_file", {"path": "/workspace/a"})
    assert d.obligations == [
        {
            "type": "restrict_scope",
            "detail": "restrict_scope contract captured; runtime enforcement deferred",
            "restrict_scope": {"scope_type": "resource", "scope_value": "repo/", "scope_match_mode": "prefix"},
        }
    ]
    assert d.event_reason_code == "P_POLICY_ALLOW" and d.contract is None


def test_warn_mode_allow_with_warning():
    d = evaluate(P(COMPLETE.replace("unconstrained_tools: deny", "unconstrained_tools: warn")), "list_dir", {})
    assert d.outcome == "allow_with_warning" and d.typed_decision == "allow_with_obligations"
    assert d.reason_code == "E_TOOL_UNCONSTRAINED" and d.reason == "Tool allowed but has no schema"
    assert d.obligations[0] == {
        "type": "legacy_warning",
        "detail": "E_TOOL_UNCONSTRAINED:Tool allowed but has no schema",
    }
    assert d.event_reason_code == "E_TOOL_UNCONSTRAINED"


def test_approval_obligation_on_warned_deploy():
    d = evaluate(P(COMPLETE.replace("unconstrained_tools: deny", "unconstrained_tools: warn")), "deploy", {})
    assert [o["type"] for o in d.obligations] == ["legacy_warning", "approval_required"]
    assert d.approval_state == "required"


def test_third_call_rate_limited():
    # without its pin: a pinned tool never listed is denied first (docs/wrap.md, "Tool pins")
    unpinned = re.sub(r"tool_pins:.*?\n(?=signatures)", "", COMPLETE, flags=re.S)
    p = P(unpinned.replace("max_tool_calls_total: 500", "max_tool_calls_total: 2"))
    state = SessionState()
    got = [evaluate(p, "read_file", {"path": "/workspace/a"}, state).outcome for _ in range(3)]
    assert got == ["allow", "allow", "deny"]
    d = evaluate(p, "read_file", {"path": "/workspace/a"}, state)
    assert d.reason_code == "E_RATE_LIMIT" and d.tool == "read_file"
    assert (state.requests_count, state.tool_calls_count) == (4, 4)  # ST1: counters keep growing


# ---------------------------------------------------------------- precedence E1-E8, R1-R6


def test_E1_drift_beats_everything_and_R3_does_not_count():
    p, state = _pinned_policy(extra="tools: {deny: [read_file]}\nlimits: {max_tool_calls_total: 0}\n")
    state.observe_tools("fs-prod", [dict(READ_FILE, description="changed")])
    d = evaluate(p, "read_file", {}, state, server_id="fs-prod")
    assert d.reason_code == "E_TOOL_DRIFT" and d.typed_decision == "deny_with_alert"
    assert d.event_reason_code == "P_TOOL_DRIFT"
    assert d.reason == (
        "Tool integrity failure: identity drifted from pinned version. "
        f"(Runtime: fs-prod:read_file:{READ_FILE_SCHEMA_HASH[:8]}, Pinned: fs-prod:read_file:{READ_FILE_SCHEMA_HASH[:8]})"
    )
    assert d.obligations == [{"type": "alert", "detail": f"E_TOOL_DRIFT:{d.reason}"}]
    assert state.tool_calls_count == 0 and state.requests_count == 0


def test_E1_pinned_tool_denied_until_listed_and_allowed_when_identity_matches():
    p, state = _pinned_policy()
    d = evaluate(p, "read_file", {"path": "/workspace/a"}, state, server_id="fs-prod")
    assert d.reason_code == "E_TOOL_DRIFT" and "not been seen in a tools/list answer" in d.reason
    assert state.observe_tools("fs-prod", [READ_FILE]) == [("read_file", READ_FILE_SCHEMA_HASH, READ_FILE_META_HASH)]
    assert evaluate(p, "read_file", {"path": "/workspace/a"}, state, server_id="fs-prod").outcome == "allow"
    # the label is part of the identity: another --label drifts
    d = evaluate(p, "read_file", {"path": "/workspace/a"}, state, server_id="default-mcp-server")
    assert d.reason_code == "E_TOOL_DRIFT"
    assert "Runtime: default-mcp-server:read_file:" in d.reason
    # ST3: no state (assay_check_args) never reports drift
    assert evaluate(p, "read_file", {"path": "/workspace/a"}).outcome == "allow"


def test_observe_tools_reports_new_and_changed_only():
    s = SessionState()
    assert s.observe_tools("x", [READ_FILE, {"name": " "}, 5, {"name": "b"}]) == [
        ("read_file", READ_FILE_SCHEMA_HASH, READ_FILE_META_HASH),
        ("b", hashlib.sha256(b"null").hexdigest(), hashlib.sha256(b"").hexdigest()),
    ]
    assert s.observe_tools("x", [READ_FILE]) == []
    assert len(s.observe_tools("x", [dict(READ_FILE, description="d")])) == 1
    assert s.identity("read_file").meta_hash == hashlib.sha256(b"d").hexdigest()


def test_E2_E3_D10_requests_counted_by_note_request():
    p = P("limits: {max_requests_total: 3}\n")
    state = SessionState()
    state.note_request()  # initialize
    state.note_request()  # tools/list
    assert evaluate(p, "a", {}, state).outcome == "allow_with_warning"  # request 3
    d = evaluate(p, "a", {}, state)  # request 4
    assert d.reason_code == "E_RATE_LIMIT" and d.reason == "Rate limit exceeded (total requests)"
    assert (state.requests_count, state.tool_calls_count) == (4, 2)


def test_E3_requests_limit_checked_before_tool_calls_limit():
    d = evaluate(P("limits: {max_requests_total: 0, max_tool_calls_total: 0}\n"), "a", {})
    assert d.reason == "Rate limit exceeded (total requests)"


def test_R2_denied_calls_consume_counter_slots():
    p = P("tools: {deny: [x]}\nlimits: {max_tool_calls_total: 1}\n")
    s = SessionState()
    assert evaluate(p, "x", {}, s).reason_code == "E_TOOL_DENIED"
    assert evaluate(p, "y", {}, s).reason_code == "E_RATE_LIMIT"


def test_E3_fresh_state_limit_bites_only_at_zero_ST3():
    p = P("limits: {max_tool_calls_total: 1}\n")
    assert all(evaluate(p, "a", {}).outcome != "deny" for _ in range(5))


@pytest.mark.parametrize(
    "tools, tool_classes, tool, code, reason, basis, rule, matched",
    [
        ("{deny: [x]}", "{}", "x", "E_TOOL_DENIED", "Tool is explicitly denylisted by name", "name", "tools.deny", ()),
        (
            "{deny_classes: [c]}",
            "{x: [c, d]}",
            "x",
            "E_TOOL_DENIED",
            "Tool is explicitly denylisted by class",
            "class",
            "tools.deny_classes",
            ("c",),
        ),
        (
            "{deny: [x], deny_classes: [c]}",
            "{x: [c]}",
            "x",
            "E_TOOL_DENIED",
            "Tool is explicitly denylisted by name and class",
            "name+class",
            "tools.deny+tools.deny_classes",
            ("c",),
        ),
        (
            "{allow: [x], deny: [x]}",
            "{}",
            "x",
            "E_TOOL_DENIED",
            "Tool is explicitly denylisted by name",
            "name",
            "tools.deny",
            (),
        ),  # R1
        ("{allow: []}", "{}", "x", "E_TOOL_NOT_ALLOWED", "Tool is not in the allowlist", None, None, ()),  # R5
        ("{allow_classes: []}", "{x: [c]}", "x", "E_TOOL_NOT_ALLOWED", "Tool is not in the allowlist", None, None, ()),
        ("{allow: [], allow_classes: [c]}", "{x: [c]}", "x", None, None, "class", "tools.allow_classes", ("c",)),
        (
            "{allow: [x], allow_classes: [c]}",
            "{x: [c]}",
            "x",
            None,
            None,
            "name+class",
            "tools.allow+tools.allow_classes",
            ("c",),
        ),
        ("{allow: ['*']}", "{}", "", None, None, "name", "tools.allow", ()),
    ],
)
def test_E4_E5_deny_and_allow_table(tools, tool_classes, tool, code, reason, basis, rule, matched):
    p = P(f"tools: {tools}\ntool_classes: {tool_classes}\nenforcement: {{unconstrained_tools: allow}}\n")
    d = evaluate(p, tool, {})
    assert d.reason_code == code and d.reason == reason
    assert (d.match_basis, d.matched_rule, d.matched_tool_classes) == (basis, rule, matched)
    assert d.outcome == ("deny" if code else "allow")
    assert (
        d.event_reason_code
        == {None: "P_POLICY_ALLOW", "E_TOOL_DENIED": "P_TOOL_DENIED", "E_TOOL_NOT_ALLOWED": "P_TOOL_NOT_ALLOWED"}[code]
    )


def test_R4_schema_never_consulted_for_a_tool_not_allowed():
    p = P("tools: {allow: [a]}\nschemas: {b: {type: bogus}}\n")
    assert evaluate(p, "b", {}).reason_code == "E_TOOL_NOT_ALLOWED"


def test_R6_schema_does_not_allow_by_itself():
    p = P("tools: {allow: [a]}\nschemas: {b: {type: object}}\n")
    assert evaluate(p, "b", {}).reason_code == "E_TOOL_NOT_ALLOWED"


def test_E6_S6_absent_arguments_are_null():
    d = evaluate(P("schemas: {t: {type: object}}\n"), "t", None)
    assert d.contract["violations"] == [{"path": "", "message": 'null is not of type "object"'}]


def test_E6_violation_pointer_escaping_and_nested_paths():
    p = P("schemas: {t: {type: object, properties: {'a/b~c': {type: array, items: {type: integer}}}}}\n")
    d = evaluate(p, "t", {"a/b~c": [1, "x"]})
    assert d.contract["violations"][0]["path"] == "/a~1b~0c/1"


@pytest.mark.parametrize(
    "mode, outcome, code",
    [
        ("deny", "deny", "E_TOOL_UNCONSTRAINED"),
        ("warn", "allow_with_warning", "E_TOOL_UNCONSTRAINED"),
        ("allow", "allow", None),
    ],
)
def test_E7_unconstrained_modes(mode, outcome, code):
    d = evaluate(P(f"enforcement: {{unconstrained_tools: {mode}}}\n"), "t", {})
    assert (d.outcome, d.reason_code) == (outcome, code)


def test_E7_defs_key_is_never_a_tool():
    d = evaluate(P("schemas: {$defs: {a: {type: string}}}\nenforcement: {unconstrained_tools: deny}\n"), "$defs", {})
    assert d.reason_code == "E_TOOL_UNCONSTRAINED"


# ---------------------------------------------------------------- schema details (docs/policy.md, "Schemas")


def test_S5_dollar_does_not_match_before_trailing_newline():
    p = P('schemas:\n  t: {type: object, properties: {p: {type: string, pattern: "^/workspace/[a-z]+$"}}}\n')
    assert evaluate(p, "t", {"p": "/workspace/a"}).outcome == "allow"
    assert evaluate(p, "t", {"p": "/workspace/a\n"}).reason_code == "E_ARG_SCHEMA"
    p = P('schemas:\n  t: {type: object, patternProperties: {"^x$": {type: integer}}}\n')
    assert evaluate(p, "t", {"x\n": "s"}).outcome == "allow"  # "x\n" is not matched by ^x$
    assert evaluate(p, "t", {"x": "s"}).reason_code == "E_ARG_SCHEMA"


@pytest.mark.parametrize(
    "schema, fragment",
    [
        ('{$ref: "https://example.com/s.json"}', "external JSON Schema retrieval is disabled"),
        ('{$ref: "file:///etc/passwd"}', "external JSON Schema retrieval is disabled"),
        ('{$ref: "#/schemas/$defs/x"}', ""),  # old DOC form never resolves (S3)
        ("{type: bogus}", ""),
        ("{minLength: -1}", ""),
        ("[1]", '[1] is not of types "boolean", "object"'),
        ('"x"', '"x" is not of types "boolean", "object"'),
        ('{$schema: "https://example.com/meta"}', ""),
    ],
)
def test_S4_compile_failures_deny_per_call(schema, fragment):
    p = P(f"schemas:\n  t: {schema}\n")
    d = evaluate(p, "t", {})
    assert d.reason_code == "E_SCHEMA_COMPILE"
    assert d.reason.startswith("Declared schema failed to prepare or compile: ") and fragment in d.reason
    assert "\n" not in d.reason


def test_S2_S3_defs_preparation():
    ok = P(
        'schemas:\n  $defs: {s: {type: string}}\n  t: {type: object, properties: {a: {$ref: "#/$defs/s"}}, required: [a]}\n'
    )
    assert evaluate(ok, "t", {"a": "x"}).outcome == "allow"
    assert evaluate(ok, "t", {"a": 1}).reason_code == "E_ARG_SCHEMA"
    bad = P("schemas:\n  $defs: [1]\n  t: {type: object}\n")
    assert evaluate(bad, "t", {}).reason.endswith("shared $defs must be a mapping")
    local = P("schemas:\n  $defs: {s: {}}\n  t: {$defs: 3}\n")
    assert evaluate(local, "t", {}).reason.endswith("tool-local $defs must be a mapping")
    boolean = P("schemas:\n  $defs: {s: {type: bogus}}\n  t: true\n")
    assert "shared $defs failed to compile: " in evaluate(boolean, "t", {}).reason
    assert evaluate(P("schemas:\n  $defs: {s: {}}\n  t: true\n"), "t", 5).outcome == "allow"


def test_S4_format_is_annotation_only_in_2020_12_and_draft_from_dollar_schema():
    p = P("schemas:\n  t: {type: object, properties: {e: {format: email}}}\n")
    assert evaluate(p, "t", {"e": "not an email"}).outcome == "allow"
    # an explicit older draft is honoured (draft-07 asserts formats, as the Rust validator does)
    p = P(
        'schemas:\n  t: {$schema: "http://json-schema.org/draft-07/schema#", type: object, properties: {e: {format: email}}}\n'
    )
    assert evaluate(p, "t", {"e": "not an email"}).reason_code == "E_ARG_SCHEMA"


# ---------------------------------------------------------------- server surface (docs/server.md, `assay_check_args`)


def test_check_args_payloads():
    p = P(COMPLETE.replace("unconstrained_tools: deny", "unconstrained_tools: warn"))
    assert evaluate(p, "read_file", {"path": "/workspace/x"}).check_args_result() == {
        "allowed": True,
        "violations": [],
        "suggested_fix": None,
    }
    warned = evaluate(p, "list_dir", {}).check_args_result()
    assert warned == {
        "allowed": True,
        "violations": [],
        "suggested_fix": None,
        "warning": {"code": "E_TOOL_UNCONSTRAINED", "reason": "Tool allowed but has no schema"},
    }
    assert list(warned) == ["allowed", "warning", "violations", "suggested_fix"]
    r = evaluate(p, "write_file", {}).check_args_result()
    assert json.dumps(r, separators=(",", ":")) == (
        '{"allowed":false,"code":"E_TOOL_NOT_ALLOWED","reason":"Tool is not in the allowlist","violations":[],'
        '"suggested_fix":null,"contract":{"status":"deny","error_code":"E_TOOL_NOT_ALLOWED","tool":"write_file",'
        '"reason":"Tool is not in allowlist"}}'
    )
    r = evaluate(p, "read_file", {"path": "/etc"}).check_args_result()
    assert r["violations"] == r["contract"]["violations"] and r["code"] == "E_ARG_SCHEMA"


def test_decision_is_immutable_and_contract_is_a_copy():
    d = evaluate(P("tools: {deny: [x]}\n"), "x", {})
    with pytest.raises(AttributeError):
        d.outcome = "allow"  # type: ignore[misc]
    d.contract["tool"] = "mutated"
    assert evaluate(P("tools: {deny: [x]}\n"), "x", {}).contract["tool"] == "x"
    assert d.contract["tool"] == "x"


# ---------------------------------------------------------------- digests (docs/policy.md, "Tool pins"; policy_digest)


READ_FILE = {
    "name": "read_file",
    "description": "Read a file",
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
READ_FILE_SCHEMA_HASH = (
    "923b083c9bcab2e3d3e07c7d9b4401688ad9f3d5e2c2f0c48fcd43052bdcb71b"  # the read_file example of docs/wrap-records.md
)
READ_FILE_META_HASH = "79bca57b81581be037bf5f27e7eebc65f58e9ce237a81a7933e4c6483c583fb6"


def _pinned_policy(extra: str = ""):
    text = (
        'version: "2.0"\n'
        "schemas: {read_file: {type: object}}\n"
        "tool_pins:\n  read_file:\n    server_id: fs-prod\n    tool_name: read_file\n"
        f"    schema_hash: {READ_FILE_SCHEMA_HASH}\n    meta_hash: {READ_FILE_META_HASH}\n" + extra
    )
    return P(text), SessionState()


def test_D2_D3_identity_vectors():
    assert tool_identity(READ_FILE) == (READ_FILE_SCHEMA_HASH, READ_FILE_META_HASH)
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert tool_identity({"name": "x"}) == (hashlib.sha256(b"null").hexdigest(), empty)
    assert tool_identity({"name": "x", "description": 5})[1] == empty
    assert tool_identity({"input_schema": {"a": 1}})[0] == hashlib.sha256(b'{"a":1}').hexdigest()
    assert tool_identity({"description": " x "})[1] == hashlib.sha256(b" x ").hexdigest()  # untrimmed
    # JCS numbers are doubles: 1.0 == 1, 2^53+1 == 2^53 (RFC 8785)
    assert tool_identity({"inputSchema": {"m": 1.0}})[0] == tool_identity({"inputSchema": {"m": 1}})[0]
    assert tool_identity({"inputSchema": 2**53 + 1})[0] == tool_identity({"inputSchema": 2**53})[0]


def test_D1_policy_digest_covers_the_normalized_model():
    p = P(MINIMAL)
    expected_model = {
        "version": "2.0",
        "name": "",
        "tools": {
            "allow": ["read_file"],
            "deny": None,
            "allow_classes": None,
            "deny_classes": None,
            "approval_required": None,
            "approval_required_classes": None,
            "restrict_scope": None,
            "restrict_scope_classes": None,
            "restrict_scope_contract": None,
            "redact_args": None,
            "redact_args_classes": None,
            "redact_args_contract": None,
        },
        "allow": None,
        "deny": None,
        "schemas": {
            "read_file": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "pattern": "^/workspace/", "minLength": 1, "maxLength": 4096}
                },
                "required": ["path"],
            }
        },
        "constraints": [],
        "enforcement": {"unconstrained_tools": "warn"},
        "limits": None,
        "signatures": None,
        "tool_pins": {},
        "tool_classes": {},
        "discovery": None,
        "runtime_monitor": None,
        "kill_switch": None,
    }
    digest = "sha256:" + hashlib.sha256(jcs.canonicalize(expected_model)).hexdigest()
    assert p.digest == digest
    # pinned literal (our own vector: no upstream vector exists for the policy digest)
    assert digest == "sha256:2a10fca04dce3e69a65b74c81f9f4a55056c4b52bb49ccafdd8002f63af5e240"
    d = evaluate(p, "read_file", {"path": "/workspace/a"})
    assert d.policy_digest == digest and d.policy_version == "2.0"


def test_D1_digest_stable_across_spelling_and_moved_by_content():
    a = P('version: "2.0"\ntools: {allow: [a]}\nallow: [b]\n')
    b = P('version: "2.0"\ntools:\n  allow:\n    - a\n    - b\n')
    assert a.digest == b.digest  # L7 normalization happens before the digest
    assert P("tool_classes: {t: [b, a, a]}\n").digest == P("tool_classes: {t: [a, b]}\n").digest
    assert P('version: "2.0"\ntools: {allow: [a]}\n').digest != P('version: "2.0"\ntools: {allow: [b]}\n').digest


def test_policy_version_unspecified_when_blank():
    assert evaluate(P('version: "  "\n'), "t", {}).policy_version == "unspecified"


# ---------------------------------------------------------------- determinism


_names = st.sampled_from(
    ["read_file", "exec", "list_dir", "deploy", "web_search", "write_file", "", "*", "bulk_delete"]
)
_args = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["path", "query", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_names, _args)
def test_evaluation_is_deterministic(name, args):
    p1, p2 = P(COMPLETE), P(COMPLETE)
    first = evaluate(p1, name, args).to_dict()
    assert evaluate(p1, name, args).to_dict() == first  # cached plan
    assert evaluate(p2, name, args).to_dict() == first  # fresh policy
    assert first["policy_digest"] == p2.digest


def test_one_decision_value_serves_the_server_payload():
    """`Decision.check_args_result` is exactly the server's `assay_check_args` payload (same
    members, same order, same deny fallback), so the server needs no copy of its own."""
    from assay.server.tools.check_args import decision_payload

    p = P(
        'version: "2.0"\ntools: {allow: [read_file, list_dir, "w*"], deny: [exec]}\n'
        "schemas: {read_file: {type: object, required: [path]}, broken: {type: 7}}\n"
        "limits: {max_tool_calls_total: 3}\n"
        "path_confinement: [{tools: [list_dir], args: [path], within: [/w]}]\n"
    )
    state = SessionState()
    calls = [
        ("read_file", {"path": "/w"}),
        ("read_file", {}),
        ("list_dir", {"path": "/etc"}),
        ("list_dir", {"path": "/w"}),
        ("exec", {}),
        ("nope", {}),
        ("write", {}),
    ]
    decisions = [evaluate(p, name, args) for name, args in calls]
    decisions += [evaluate(p, "write", {}, state) for _ in range(4)]  # the last is E_RATE_LIMIT
    assert {d.reason_code for d in decisions} >= {
        None,
        "E_ARG_SCHEMA",
        "E_PATH_CONFINEMENT",
        "E_TOOL_DENIED",
        "E_TOOL_NOT_ALLOWED",
        "E_TOOL_UNCONSTRAINED",
        "E_RATE_LIMIT",
    }
    for d in decisions:
        mine, server = d.check_args_result(), decision_payload(d)
        assert json.dumps(mine) == json.dumps(server), d


def test_decision_lives_in_its_own_module():
    import assay.policy
    import assay.policy.decision
    import assay.policy.engine

    assert assay.policy.Decision is assay.policy.decision.Decision is assay.policy.engine.Decision
    assert not hasattr(assay.policy.Decision, "metadata") and not hasattr(assay.policy.Decision, "deny_result")
