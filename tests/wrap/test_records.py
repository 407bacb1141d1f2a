"""Record builders of the wrap relay against the examples of docs/wrap-records.md (decision events,
audit records, the stderr lines, session reports) and docs/wrap.md (receipts, the stop record),
byte for byte where the docs show bytes; the Recorder against the generic builders."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import jcs_bytes
from assay.session import records
from assay.policy import Decision, SessionState, evaluate, load_policy
from assay.policy.decision import ApprovalState
from assay.session.records import (
    ABSENT,
    audit_decision,
    delegation_of,
    encode_line,
    merge_obligations,
    obligation_outcomes,
    rfc3339_utc,
    tool_call_id_for,
    tool_identity_line,
    typed_decision_of,
    verbose_line,
    wrap_reason_code,
)
from assay.session.reports import (
    coverage_report,
    declared_tools_of,
    new_session_id,
    pretty_json,
    session_context,
    state_window,
)

from assay.session.records.arguments import logged_arguments

from tests.wrap.records_oracle import (
    audit_record,
    audit_record_for,
    coverage_of_events,
    decision_data,
    decision_event,
)

DIGEST = "sha256:" + "ab" * 32
EVT_ID = "evt_decision_3b0f6c1e-8a47-4b1e-9a51-0c7d2f9e4a10"
EVT_TIME = "2026-08-22T10:15:02.123456789+00:00"
DENIED_BY_NAME = "Tool is explicitly denylisted by name"
SESSION = "client:4242:8613312"  # the agent session of the examples of docs/wrap-records.md
NO_SCHEMA = "Tool allowed but has no schema"


def make(outcome: str, tool: str, **fields) -> Decision:
    """A Decision as the policy engine builds it: ``typed_decision`` follows the outcome unless
    given."""
    fields.setdefault("typed_decision", typed_decision_of(outcome, fields.get("reason_code")))
    return Decision(outcome, tool, **fields)


def compact(pretty: str) -> bytes:
    """The docs print one-line records across several lines; join them back."""
    return "".join(line.strip() for line in pretty.strip().splitlines()).encode() + b"\n"


def exec_deny() -> Decision:
    return make(
        "deny",
        "exec",
        reason_code="E_TOOL_DENIED",
        reason=DENIED_BY_NAME,
        contract={"status": "deny", "error_code": "E_TOOL_DENIED", "tool": "exec", "reason": DENIED_BY_NAME},
        match_basis="name",
        matched_rule="tools.deny",
        policy_version="2.0",
        policy_digest=DIGEST,
    )


def warn_facts(tool: str = "search") -> Decision:
    return make(
        "allow_with_warning",
        tool,
        reason_code="E_TOOL_UNCONSTRAINED",
        reason=NO_SCHEMA,
        obligations=merge_obligations("allow_with_warning", "E_TOOL_UNCONSTRAINED", NO_SCHEMA),
        policy_version="2.0",
        policy_digest=DIGEST,
    )


# --- decision events: the enforce-mode example of docs/wrap-records.md, byte for byte ---------

DOC_EVENT = """
{"specversion":"1.0","id":"evt_decision_3b0f6c1e-8a47-4b1e-9a51-0c7d2f9e4a10","type":"assay.tool.decision",
 "source":"assay://org/app","time":"2026-08-22T10:15:02.123456789+00:00","data":{
 "tool":"exec","match_basis":"name","matched_rule":"tools.deny","typed_decision":"deny",
 "policy_version":"2.0","policy_digest":"sha256:<64hex>","policy_snapshot_digest":"sha256:<64hex>",
 "policy_snapshot_digest_alg":"sha256","policy_snapshot_canonicalization":"jcs:mcp_policy",
 "policy_snapshot_schema":"assay.mcp.policy.snapshot.v1",
 "decision_outcome_kind":"policy_deny","decision_origin":"policy_engine",
 "outcome_compat_state":"legacy_fields_preserved","fulfillment_decision_path":"policy_deny",
 "decision_basis_version":"wave39_v1","compat_fallback_applied":false,
 "classification_source":"converged_outcome","replay_diff_reason":"converged_policy_deny",
 "legacy_shape_detected":false,"decision_consumer_contract_version":"wave41_v1",
 "consumer_read_path":"converged_decision","consumer_fallback_applied":false,
 "consumer_payload_state":"converged",
 "required_consumer_fields":["decision","reason_code","decision_outcome_kind","decision_origin","fulfillment_decision_path","decision_basis_version"],
 "decision_context_contract_version":"wave42_v1","context_payload_state":"absent_envelope",
 "required_context_fields":["lane","principal","auth_context_summary","approval_state"],
 "missing_context_fields":["lane","principal","auth_context_summary","approval_state"],
 "policy_deny":true,"fail_closed_deny":false,"enforcement_deny":false,
 "deny_precedence_version":"wave40_v1","deny_classification_source":"outcome_kind",
 "deny_legacy_fallback_applied":false,"deny_convergence_reason":"outcome_policy_deny",
 "obligation_applied_present":false,"obligation_skipped_present":false,"obligation_error_present":false,
 "decision":"deny","reason_code":"P_TOOL_DENIED","error_code":"E_TOOL_DENIED","reason":"Tool is explicitly denylisted by name",
 "session":"client:4242:8613312","server":"shell","tool_call_id":"req_7","request_id":7}}
""".replace("sha256:<64hex>", DIGEST)


def test_enforce_deny_event_bytes():
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "exec", "arguments": {}}}
    data = decision_data(
        exec_deny(),
        dry_run=False,
        tool_call_id=tool_call_id_for(request["params"], request["id"]),
        request_id=request["id"],
        session=SESSION,
        server="shell",
    )
    event = decision_event("assay://org/app", data, event_id=EVT_ID, time=EVT_TIME)
    assert encode_line(event) == compact(DOC_EVENT)


def _engine(policy_yaml: str, tool: str, arguments=None, state=None) -> Decision:
    policy = load_policy(policy_yaml.encode(), warn=lambda _line: None)
    return evaluate(policy, tool, arguments, state if state is not None else SessionState())


def test_enforce_deny_event_from_the_real_policy_engine():
    """The same example end to end: assay.policy's Decision → the documented bytes."""
    facts = _engine('version: "2.0"\ntools: {deny: ["exec"]}\n', "exec", {})
    assert facts.policy_digest and facts.policy_digest.startswith("sha256:")
    data = decision_data(facts, dry_run=False, tool_call_id="req_7", request_id=7, session=SESSION, server="shell")
    event = decision_event("assay://org/app", data, event_id=EVT_ID, time=EVT_TIME)
    assert encode_line(event) == compact(DOC_EVENT.replace(DIGEST, facts.policy_digest))


def test_warning_allow_and_rate_limit_from_the_real_policy_engine():
    warn = _engine('version: "2.0"\n', "search", {})
    data = decision_data(warn, dry_run=False, tool_call_id="x")
    assert data["obligations"] == [{"type": "legacy_warning", "detail": f"E_TOOL_UNCONSTRAINED:{NO_SCHEMA}"}]
    assert data["decision_outcome_kind"] == "obligation_applied" and data["reason"] == NO_SCHEMA
    allow = decision_data(
        _engine(
            'version: "2.0"\ntools: {allow: ["read_file"]}\nenforcement: {unconstrained_tools: allow}\n', "read_file"
        ),
        dry_run=False,
        tool_call_id="x",
    )
    assert (allow["match_basis"], allow["matched_rule"], allow["reason_code"]) == (
        "name",
        "tools.allow",
        "P_POLICY_ALLOW",
    )
    assert "reason" not in allow and allow["decision_outcome_kind"] == "obligation_skipped"
    state = SessionState()
    policy = 'version: "2.0"\nlimits: {max_tool_calls_total: 1}\n'
    _engine(policy, "search", {}, state)
    limited = _engine(policy, "search", {}, state)
    assert limited.tool == "search" and limited.reason_code == "E_RATE_LIMIT"  # the called tool, not "ALL"
    assert decision_data(limited, dry_run=False, tool_call_id="x")["reason_code"] == "P_RATE_LIMIT"


def test_drift_from_the_real_policy_engine():
    policy = (
        'version: "2.0"\ntool_pins:\n  read_file:\n    server_id: default-mcp-server\n'
        "    tool_name: read_file\n    schema_hash: " + "a" * 64 + "\n    meta_hash: " + "b" * 64 + "\n"
    )
    state = SessionState()
    state.observe_tools("default-mcp-server", [{"name": "read_file", "description": "Read a file"}])
    facts = _engine(policy, "read_file", {}, state)
    data = decision_data(facts, dry_run=False, tool_call_id="x")
    assert data["typed_decision"] == "deny_with_alert" and data["reason_code"] == "P_TOOL_DRIFT"
    assert data["obligations"] == [{"type": "alert", "detail": f"E_TOOL_DRIFT:{facts.reason}"}]  # not doubled
    assert [o["type"] for o in data["obligation_outcomes"]] == ["alert"]
    assert facts.contract == {
        "status": "deny",
        "error_code": "E_TOOL_DRIFT",
        "tool": "read_file",
        "reason": "Tool metadata or schema has changed without policy update",
    }


def test_envelope_defaults_and_no_datacontenttype():
    event = decision_event("assay://x", {"tool": "t"})
    assert list(event) == ["specversion", "id", "type", "source", "time", "data"]
    assert "datacontenttype" not in event
    assert event["id"].startswith("evt_decision_")
    assert uuid.UUID(event["id"].removeprefix("evt_decision_")).version == 4
    stamp = datetime.fromisoformat(event["time"])
    assert event["time"].endswith("+00:00") and len(event["time"].split(".")[1]) == len("123456+00:00")
    assert abs(datetime.now(timezone.utc) - stamp) < timedelta(minutes=5)


def test_rfc3339_utc_converts_and_keeps_six_digits():
    moment = datetime(2026, 8, 22, 12, 15, 2, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert rfc3339_utc(moment) == "2026-08-22T10:15:02.123456+00:00"
    assert rfc3339_utc(datetime(2026, 8, 22, 10, 15, 2)) == "2026-08-22T10:15:02.000000+00:00"


# --- decision events: dry run, warnings, allows, drift -----------------------------------------


def test_dry_run_differs_only_in_listed_keys():
    enforce = decision_data(exec_deny(), dry_run=False, tool_call_id="req_7", request_id=7)
    dry = decision_data(exec_deny(), dry_run=True, tool_call_id="req_7", request_id=7)
    assert list(dry) == list(enforce)
    changed = {k: dry[k] for k in dry if dry[k] != enforce[k]}
    assert changed == {
        "decision": "allow",
        "decision_outcome_kind": "obligation_skipped",
        "decision_origin": "obligation_executor",
        "fulfillment_decision_path": "policy_allow",
        "replay_diff_reason": "converged_obligation_skipped",
        "policy_deny": False,
        "deny_convergence_reason": "outcome_not_deny",
    }
    assert (dry["typed_decision"], dry["reason_code"], dry["reason"]) == ("deny", "P_TOOL_DENIED", DENIED_BY_NAME)


def test_allow_with_warning():
    data = decision_data(warn_facts(), dry_run=False, tool_call_id="req_3", request_id=3)
    assert "match_basis" not in data and "matched_rule" not in data
    assert data["typed_decision"] == "allow_with_obligations"
    assert data["obligations"] == [
        {"type": "legacy_warning", "detail": "E_TOOL_UNCONSTRAINED:Tool allowed but has no schema"}
    ]
    assert encode_line(data["obligation_outcomes"]) == (
        b'[{"type":"log","status":"applied","reason":"mapped from legacy_warning",'
        b'"reason_code":"legacy_warning_mapped","enforcement_stage":"executor","normalization_version":"v1"}]\n'
    )
    assert data["decision_outcome_kind"] == "obligation_applied"
    assert data["obligation_applied_present"] is True and data["obligation_skipped_present"] is False
    assert (data["decision"], data["reason_code"], data["reason"]) == ("allow", "E_TOOL_UNCONSTRAINED", NO_SCHEMA)
    keys = list(data)
    assert keys.index("policy_snapshot_schema") < keys.index("obligations") < keys.index("obligation_outcomes")
    assert keys.index("obligation_outcomes") < keys.index("decision_outcome_kind")


def test_plain_allow_by_name():
    facts = make("allow", "read_file", match_basis="name", matched_rule="tools.allow", policy_version="")
    data = decision_data(facts, dry_run=False, tool_call_id="req_2", request_id=2)
    assert (data["match_basis"], data["matched_rule"], data["typed_decision"]) == ("name", "tools.allow", "allow")
    assert (data["decision"], data["reason_code"]) == ("allow", "P_POLICY_ALLOW")
    assert "reason" not in data and "obligations" not in data and "obligation_outcomes" not in data
    assert data["decision_outcome_kind"] == "obligation_skipped"
    assert data["replay_diff_reason"] == "converged_obligation_skipped"
    assert data["deny_convergence_reason"] == "outcome_not_deny"
    assert data["policy_version"] == "unspecified"  # "unspecified" when empty
    assert "policy_digest" not in data and "policy_snapshot_digest_alg" not in data  # cluster follows the digest


def test_drift_deny():
    reason = (
        "Tool integrity failure: identity drifted from pinned version. "
        "(Runtime: default-mcp-server:read_file:923b083c, Pinned: default-mcp-server:read_file:00000000)"
    )
    facts = make(
        "deny",
        "read_file",
        reason_code="E_TOOL_DRIFT",
        reason=reason,
        obligations=merge_obligations("deny", "E_TOOL_DRIFT", reason),
    )
    data = decision_data(facts, dry_run=False, tool_call_id="req_9", request_id=9)
    assert data["typed_decision"] == "deny_with_alert"
    assert data["obligations"] == [{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}]
    assert data["obligation_outcomes"] == [
        {
            "type": "alert",
            "status": "applied",
            "reason_code": "obligation_applied",
            "enforcement_stage": "executor",
            "normalization_version": "v1",
        }
    ]
    assert data["decision_outcome_kind"] == "policy_deny" and data["policy_deny"] is True
    assert data["reason_code"] == "P_TOOL_DRIFT" and data["decision"] == "deny"


def test_rate_limit_deny_names_the_called_tool():
    facts = make(
        "deny",
        "search",
        reason_code="E_RATE_LIMIT",
        reason="Rate limit exceeded (tool calls)",
        contract={"status": "deny", "error_code": "E_RATE_LIMIT"},
    )
    data = decision_data(facts, dry_run=False, tool_call_id="req_4", request_id=4)
    assert data["tool"] == "search" and data["reason_code"] == "P_RATE_LIMIT"
    record = audit_record_for(facts, dry_run=False, request_id=4, timestamp="t")
    assert record["tool"] == "search" and record["agentic"] == {"status": "deny", "error_code": "E_RATE_LIMIT"}
    assert (
        verbose_line("deny", facts.tool, reason=facts.reason)
        == '[assay] DENY "search" (reason: "Rate limit exceeded (tool calls)")'
    )


def test_optional_clusters_in_order():
    facts = make(
        "allow",
        "read_file",
        tool_classes=("fs.write", "fs.read"),
        matched_tool_classes=("fs.read",),
        match_basis="name+class",
        matched_rule="tools.allow+tools.allow_classes",
        policy_version="2.0",
        policy_digest=DIGEST,
        obligations=[
            {"detail": "runtime approval artifact required", "type": "approval_required"},
            {
                "type": "restrict_scope",
                "detail": "restrict_scope contract captured; runtime enforcement deferred",
                "restrict_scope": {"scope_match_mode": "exact", "scope_value": "*", "scope_type": "resource"},
            },
            {"type": "custom_thing"},
        ],
        approval_state="required",
        scope_type="resource",
        scope_value="*",
        scope_match_mode="exact",
        redaction_target="body",
        redaction_mode="mask",
        redaction_scope="request",
    )
    data = decision_data(
        facts,
        dry_run=False,
        tool_call_id="tc-1",
        request_id="r1",
        delegated_from="agent:planner",
        delegation_depth=2,
        tool_definition_digest="sha256:5b01add87bf5740c5f3b621ca10ed476b89edd522c5476a22f015ae03d4b0915",
    )
    keys = list(data)
    assert keys[:6] == ["tool", "tool_classes", "matched_tool_classes", "match_basis", "matched_rule", "typed_decision"]
    assert data["tool_classes"] == ["fs.read", "fs.write"]
    td = keys.index("tool_definition_digest")
    assert keys[td : td + 5] == [
        "tool_definition_digest",
        "tool_definition_digest_alg",
        "tool_definition_canonicalization",
        "tool_definition_schema",
        "tool_definition_source",
    ]
    assert keys.index("policy_snapshot_schema") < td < keys.index("obligations")
    assert keys.index("obligation_outcomes") < keys.index("approval_state") < keys.index("scope_type")
    assert keys[keys.index("approval_state") :][:7] == [
        "approval_state",
        "scope_type",
        "scope_value",
        "scope_match_mode",
        "redaction_target",
        "redaction_mode",
        "redaction_scope",
    ]
    assert keys.index("redaction_scope") + 1 == keys.index("decision_outcome_kind")
    assert keys[-8:] == [
        "delegated_from",
        "delegation_depth",
        "decision",
        "reason_code",
        "session",
        "server",
        "tool_call_id",
        "request_id",
    ]
    assert keys[-9] == "obligation_error_present"
    assert (data["session"], data["server"]) == (None, "default-mcp-server")  # no shared session: null
    assert data["obligations"][0] == {"type": "approval_required", "detail": "runtime approval artifact required"}
    assert list(data["obligations"][0]) == ["type", "detail"]
    assert list(data["obligations"][1]["restrict_scope"]) == ["scope_type", "scope_value", "scope_match_mode"]
    assert [(o["type"], o["status"], o["reason_code"]) for o in data["obligation_outcomes"]] == [
        ("approval_required", "skipped", "validated_in_handler"),
        ("restrict_scope", "skipped", "contract_only"),
        ("custom_thing", "skipped", "unsupported_obligation_type"),
    ]
    # approval_state is one of the four context fields: the envelope becomes partial
    assert data["context_payload_state"] == "partial_envelope"
    assert data["missing_context_fields"] == ["lane", "principal", "auth_context_summary"]
    assert data["decision_outcome_kind"] == "obligation_skipped" and data["obligation_skipped_present"] is True


def test_request_id_omitted_when_absent_or_null():
    for rid in (ABSENT, None):
        assert "request_id" not in decision_data(exec_deny(), dry_run=False, tool_call_id="gen_x", request_id=rid)
    for rid in (0, "", False, 2**70, 1.5):
        assert decision_data(exec_deny(), dry_run=False, tool_call_id="x", request_id=rid)["request_id"] == rid


def test_obligation_evidence_from_the_real_policy_engine():
    """A policy that attaches approval, scope and redaction obligations: the engine's decision
    carries their contracts and the event lists them after the obligations, in order."""
    decision = _engine(
        'version: "2.0"\ntool_classes: {read_file: [fs.read, fs.write]}\n'
        "tools:\n  allow: [read_file]\n  allow_classes: [fs.read]\n  approval_required: [read_file]\n"
        "  restrict_scope: [read_file]\n  redact_args: [read_file]\nenforcement: {unconstrained_tools: allow}\n",
        "read_file",
        {},
    )
    data = decision_data(decision, dry_run=False, tool_call_id="req_1", request_id=1)
    evidence = {k: data[k] for k in list(data)[list(data).index("approval_state") :][:7]}
    assert evidence == {
        "approval_state": "required",
        "scope_type": "resource",
        "scope_value": "*",
        "scope_match_mode": "exact",
        "redaction_target": "body",
        "redaction_mode": "mask",
        "redaction_scope": "request",
    }
    assert [o["type"] for o in data["obligations"]] == ["approval_required", "restrict_scope", "redact_args"]
    assert list(data["obligations"][2]["redact_args"]) == ["redaction_target", "redaction_mode", "redaction_scope"]
    assert (data["match_basis"], data["tool_classes"]) == ("name+class", ["fs.read", "fs.write"])
    assert data["context_payload_state"] == "partial_envelope"


def test_records_refuse_an_unknown_outcome():
    with pytest.raises(ValueError):
        decision_data(make("would_deny", "t", typed_decision="deny"), dry_run=False, tool_call_id="x")
    with pytest.raises(ValueError):
        audit_record_for(make("would_deny", "t", typed_decision="deny"), dry_run=False)
    with pytest.raises(ValueError):  # a warning needs its code
        decision_data(make("allow_with_warning", "t"), dry_run=False, tool_call_id="x")


# --- reason codes, typed decisions, stderr lines -------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "code", "expected"),
    [
        ("allow", None, "P_POLICY_ALLOW"),
        ("allow_with_warning", "E_TOOL_UNCONSTRAINED", "E_TOOL_UNCONSTRAINED"),
        ("deny", "E_TOOL_DENIED", "P_TOOL_DENIED"),
        ("deny", "E_TOOL_NOT_ALLOWED", "P_TOOL_NOT_ALLOWED"),
        ("deny", "E_ARG_SCHEMA", "P_ARG_SCHEMA"),
        ("deny", "E_RATE_LIMIT", "P_RATE_LIMIT"),
        ("deny", "E_TOOL_DRIFT", "P_TOOL_DRIFT"),
        ("deny", "E_SCHEMA_COMPILE", "P_POLICY_DENY"),
        ("deny", "E_TOOL_UNCONSTRAINED", "P_POLICY_DENY"),
        ("deny", "E_SOMETHING_NEW", "P_POLICY_DENY"),
    ],
)
def test_reason_code_mapping(outcome, code, expected):
    assert wrap_reason_code(outcome, code) == expected


def test_typed_decision_projection():
    assert typed_decision_of("allow", None) == "allow"
    assert typed_decision_of("allow_with_warning", "E_TOOL_UNCONSTRAINED") == "allow_with_obligations"
    assert typed_decision_of("deny", "E_TOOL_DRIFT") == "deny_with_alert"
    assert typed_decision_of("deny", "E_ARG_SCHEMA") == "deny"


def test_event_obligations_same_whether_the_list_holds_the_implied_ones_or_not():
    bare = make("allow_with_warning", "search", reason_code="E_TOOL_UNCONSTRAINED", reason=NO_SCHEMA)
    approval = {"type": "approval_required", "detail": "runtime approval artifact required"}
    with_extra = make(
        "allow_with_warning",
        "search",
        reason_code="E_TOOL_UNCONSTRAINED",
        reason=NO_SCHEMA,
        obligations=[approval],
    )
    final = make(
        "allow_with_warning",
        "search",
        reason_code="E_TOOL_UNCONSTRAINED",
        reason=NO_SCHEMA,
        obligations=merge_obligations("allow_with_warning", "E_TOOL_UNCONSTRAINED", NO_SCHEMA, [approval]),
    )
    kw = {"dry_run": False, "tool_call_id": "x"}
    assert decision_data(bare, **kw)["obligations"] == warn_facts().obligations
    assert decision_data(with_extra, **kw) == decision_data(final, **kw)
    assert [o["type"] for o in decision_data(final, **kw)["obligations"]] == ["legacy_warning", "approval_required"]


def test_merge_obligations_skips_exact_duplicates():
    extra = [{"type": "approval_required", "detail": "d"}, {"type": "approval_required", "detail": "d"}]
    merged = merge_obligations("allow_with_warning", "E_TOOL_UNCONSTRAINED", NO_SCHEMA, extra)
    assert [o["type"] for o in merged] == ["legacy_warning", "approval_required"]
    assert obligation_outcomes([{"type": "log"}])[0] == {
        "type": "log",
        "status": "applied",
        "reason_code": "obligation_applied",
        "enforcement_stage": "executor",
        "normalization_version": "v1",
    }


def test_verbose_lines():
    assert verbose_line("allow", "read_file") == '[assay] ALLOW "read_file"'
    assert verbose_line("allow", None) == "[assay] ALLOW unknown"
    assert verbose_line("allow_with_warning", "search", policy_code="E_TOOL_UNCONSTRAINED", reason=NO_SCHEMA) == (
        '[assay] WARNING: Allowing tool "search" with warning (code: E_TOOL_UNCONSTRAINED, '
        'reason: "Tool allowed but has no schema").'
    )
    assert verbose_line("deny", "exec", reason=DENIED_BY_NAME) == f'[assay] DENY "exec" (reason: "{DENIED_BY_NAME}")'
    assert verbose_line("deny", "exec", reason="r", dry_run=True) == '[assay] WOULD_DENY "exec" (reason: "r")'
    # params that did not fit tools/call: the policy saw tool "", only ALLOW says "unknown"
    assert verbose_line("deny", None, reason="r") == '[assay] DENY "" (reason: "r")'
    assert verbose_line("allow_with_warning", None, policy_code="C", reason="r") == (
        '[assay] WARNING: Allowing tool "" with warning (code: C, reason: "r").'
    )
    assert tool_identity_line("read_file", "default-mcp-server", "a" * 64, "b" * 64) == (
        f'[assay] TOOL "read_file" server_id="default-mcp-server" schema_hash={"a" * 64} meta_hash={"b" * 64}'
    )


FORGED = "x schema_hash=0 meta_hash=0\n[assay] TOOL read_file server_id=default-mcp-server schema_hash="


@pytest.mark.parametrize("name", [FORGED, "a\x1b[2K\rb", "\u009b31m", "\u2028x", "\ud83d", "caf\u00e9"])
def test_stderr_lines_quote_names_and_ids(name):
    """No control character, escape or non-ASCII byte from a name reaches the terminal raw:
    a name cannot forge a second line (docs/wrap.md, "--verbose")."""
    lines = [
        verbose_line("allow", name),
        verbose_line("deny", name, reason=f"Runtime: lab:{name}:0"),
        verbose_line("allow_with_warning", name, policy_code="C", reason=name),
        tool_identity_line(name, name, "a" * 64, "b" * 64),
        records.dropped_response_warning(name),
    ]
    for line in lines:
        assert line.isascii() and line.isprintable(), line
    for line in lines[:-1]:
        assert json.dumps(name) in line
    assert "\n" not in tool_identity_line(FORGED, "s", "a", "b")


def test_dropped_response_warning_cuts_long_ids_and_never_shows_content():
    assert records.dropped_response_warning(7) == (
        "[assay] WARNING: dropped a server response (id 7) that answers no pending client request"
    )
    assert "(no id)" in records.dropped_response_warning(None, has_id=False)
    assert len(records.dropped_response_warning("x" * 10_000)) < 200


JSON_LEAF = st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.text()
JSON_NO_FLOAT = st.recursive(
    JSON_LEAF, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4), max_leaves=16
)
JSON_ANY = st.recursive(
    JSON_LEAF | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4),
    max_leaves=16,
)


# --- encode_line -------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(JSON_NO_FLOAT)
def test_encode_line_equals_compact_stdlib_json(value):
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    assert encode_line(value) == expected


@settings(max_examples=200, deadline=None)
@given(JSON_ANY)
def test_encode_line_floats_parse_back_equal(value):
    assert json.loads(encode_line(value)) == value


def test_encode_line_keeps_slashes_and_unicode():
    assert encode_line({"a": "x/y é \u2028 😀"}) == '{"a":"x/y é \u2028 😀"}\n'.encode()


# --- tool_call_id and delegation ----------------------------------------------------------------

FIXED = uuid.UUID("12345678-1234-4234-9234-123456789abc")


def tcid(params, rid):
    return tool_call_id_for(params, rid, new_uuid=lambda: FIXED)


@pytest.mark.parametrize(
    ("rid", "expected"),
    [
        (7, "req_7"),
        (0, "req_0"),
        (-5, "req_-5"),
        ("abc", "req_abc"),
        ("", "req_"),
        (2**63 - 1, f"req_{2**63 - 1}"),
        (-(2**63), f"req_{-(2**63)}"),
        (2**63, f"gen_{FIXED}"),
        (-(2**63) - 1, f"gen_{FIXED}"),
        (2**100, f"gen_{FIXED}"),
        (True, f"gen_{FIXED}"),
        (False, f"gen_{FIXED}"),
        (7.0, f"gen_{FIXED}"),
        (None, f"gen_{FIXED}"),
        (ABSENT, f"gen_{FIXED}"),
        ([1], f"gen_{FIXED}"),
        ({"a": 1}, f"gen_{FIXED}"),
    ],
)
def test_tool_call_id_from_request_id(rid, expected):
    assert tcid({"name": "t", "arguments": {}}, rid) == expected


def test_tool_call_id_prefers_arguments_meta():
    assert tcid({"name": "t", "arguments": {"_meta": {"tool_call_id": "tc_1"}}}, 7) == "tc_1"
    assert tcid({"name": "t", "arguments": {"_meta": {"tool_call_id": 5}}}, 7) == "req_7"
    assert tcid({"name": "t", "arguments": {"_meta": "tc"}}, 7) == "req_7"
    # under params._meta, not params.arguments._meta: not used
    assert tcid({"name": "t", "_meta": {"tool_call_id": "tc_1"}, "arguments": {}}, 7) == "req_7"
    # params not of the tools/call shape (no string name): arguments are not read
    assert tcid({"arguments": {"_meta": {"tool_call_id": "tc_1"}}}, 7) == "req_7"
    assert tcid(None, "x") == "req_x"


def test_generated_tool_call_id_is_uuid4_by_default():
    value = tool_call_id_for({"name": "t"}, ABSENT)
    assert value.startswith("gen_") and uuid.UUID(value[4:]).version == 4
    assert value[4:] == value[4:].lower()


def test_delegation():
    def deleg(d):
        return delegation_of({"name": "t", "arguments": {"_meta": {"delegation": d}}})

    assert deleg({"delegated_from": " agent:a ", "delegation_depth": 2}) == ("agent:a", 2)
    assert deleg({"delegated_from": "a", "delegation_depth": 2**32 - 1}) == ("a", 2**32 - 1)
    for bad in (0, 2**32, -1, True, 1.0, "2", None):
        assert deleg({"delegated_from": "a", "delegation_depth": bad}) == ("a", None)
    assert deleg({"delegated_from": "  ", "delegation_depth": 1}) == (None, None)
    assert deleg({"delegated_from": 5, "delegation_depth": 1}) == (None, None)
    assert deleg({"delegation_depth": 1}) == (None, None)
    assert deleg("x") == (None, None)
    assert delegation_of({"name": "t"}) == (None, None)
    assert delegation_of({"arguments": {"_meta": {"delegation": {"delegated_from": "a"}}}}) == (None, None)


# --- audit records (docs/wrap-records.md, "Audit record") --------------------------------------

DOC_AUDIT = (
    b'{"timestamp":"2026-08-22T10:15:02.123456789+00:00","decision":"would_deny","tool":"delete_file","reason":"Tool is explicitly denylisted by name","session":"client:4242:8613312","server":"files","request_id":1,"agentic":{"status":"deny","error_code":"E_TOOL_DENIED","tool":"delete_file","reason":"Tool is explicitly denylisted by name"}}\n'
    b'{"timestamp":"2026-08-22T10:15:03.000000001+00:00","decision":"allow","tool":"read_file","reason":null,"session":"client:4242:8613312","server":"files","request_id":2}\n'
    b'{"timestamp":"2026-08-22T10:15:04.5+00:00","decision":"allow_with_warning","tool":"","reason":"Tool allowed but has no schema","session":"client:4242:8613312","server":"web"}\n'
)


def test_audit_records_bytes():
    deny = make(
        "deny",
        "delete_file",
        reason_code="E_TOOL_DENIED",
        reason=DENIED_BY_NAME,
        contract={"status": "deny", "error_code": "E_TOOL_DENIED", "tool": "delete_file", "reason": DENIED_BY_NAME},
    )
    files = {"session": SESSION, "server": "files"}
    lines = [
        audit_record_for(deny, dry_run=True, request_id=1, timestamp="2026-08-22T10:15:02.123456789+00:00", **files),
        audit_record_for(
            make("allow", "read_file"),
            dry_run=True,
            request_id=2,
            timestamp="2026-08-22T10:15:03.000000001+00:00",
            **files,
        ),
        audit_record_for(
            warn_facts(""), dry_run=False, timestamp="2026-08-22T10:15:04.5+00:00", session=SESSION, server="web"
        ),
    ]
    assert b"".join(encode_line(r) for r in lines) == DOC_AUDIT
    # the general builder gives the same bytes
    assert (
        encode_line(
            audit_record(
                "allow", "read_file", None, request_id=2, timestamp="2026-08-22T10:15:03.000000001+00:00", **files
            )
        )
        == DOC_AUDIT.splitlines(keepends=True)[1]
    )


def test_audit_record_rules():
    assert audit_decision("deny", dry_run=False) == "deny"
    assert audit_decision("deny", dry_run=True) == "would_deny"
    assert audit_decision("allow_with_warning", dry_run=True) == "allow_with_warning"
    record = audit_record("allow", None, None, request_id=None, timestamp=datetime(2026, 1, 2, tzinfo=timezone.utc))
    assert record == {
        "timestamp": "2026-01-02T00:00:00.000000+00:00",
        "decision": "allow",
        "tool": None,
        "reason": None,
        "session": None,
        "server": "default-mcp-server",
    }
    # an allowed tools/call whose params did not fit: tool null (upstream)
    assert audit_record_for(make("allow", ""), dry_run=False, tool=None, timestamp="t")["tool"] is None
    with pytest.raises(ValueError):
        audit_record("block", "t", None)


def test_one_audit_record_per_warning():
    record = audit_record_for(
        warn_facts("search"), dry_run=False, request_id=3, timestamp="t", session="name:team", server="web"
    )
    assert record == {
        "timestamp": "t",
        "decision": "allow_with_warning",
        "tool": "search",
        "reason": NO_SCHEMA,
        "session": "name:team",
        "server": "web",
        "request_id": 3,
    }
    assert list(record) == ["timestamp", "decision", "tool", "reason", "session", "server", "request_id"]


# --- coverage (docs/wrap-records.md, "Session reports") ----------------------------------------


def _event(tool: str, classes=()) -> dict:
    facts = make("allow", tool, tool_classes=list(classes))
    return decision_event("assay://org/app", decision_data(facts, dry_run=False, tool_call_id="x"), time="t")


DOC_COVERAGE = {
    "schema_version": "coverage_report_v1",
    "report_version": "1",
    "run": {"assay_version": "5.4.0", "generated_at": "2026-08-22T10:20:00Z", "source": "decision_jsonl"},
    "tools": {"tools_seen": ["exec", "read_file"], "tools_declared": ["exec", "read_file"], "tools_unknown": []},
    "taxonomy": {"tool_classes_seen": [], "tool_classes_missing": ["exec", "read_file"]},
    "routes": {"routes_seen": [{"from": "read_file", "to": "exec", "count": 1}]},
    "findings": [
        {
            "kind": "missing_taxonomy",
            "severity": "note",
            "message": "tool 'exec' was seen but has no taxonomy entry",
            "tool": "exec",
            "count": 1,
        },
        {
            "kind": "missing_taxonomy",
            "severity": "note",
            "message": "tool 'read_file' was seen but has no taxonomy entry",
            "tool": "read_file",
            "count": 1,
        },
    ],
}


def test_coverage_example():
    declared = declared_tools_of(deny=["exec"], schema_keys=["read_file", "$defs"])
    report = coverage_report(
        coverage_of_events([_event("read_file"), _event("exec")]),
        declared,
        assay_version="5.4.0",
        generated_at=datetime(2026, 8, 22, 10, 20, 0, 999999, tzinfo=timezone.utc),
    )
    assert report == DOC_COVERAGE
    assert json.dumps(report) == json.dumps(DOC_COVERAGE)  # key order too
    text = pretty_json(report)
    assert not text.endswith(b"\n") and text == json.dumps(DOC_COVERAGE, indent=2).encode()
    assert b'\n  "schema_version": "coverage_report_v1",\n' in text


def test_coverage_rules():
    events = [
        _event("b", ["net"]),
        _event("a"),
        _event("b", ["fs", " "]),
        _event(""),  # a tools/call that named no tool: skipped, not fatal, and no route through it
        _event("a"),
        _event(" b "),
        {"data": {"tool_name": "c"}},
        {"tool": "d"},
        {"data": {}},
    ]
    report = coverage_report(coverage_of_events(events), ["a", " zz ", ""], generated_at="G")
    assert report["run"]["generated_at"] == "G"
    assert report["tools"] == {
        "tools_seen": ["a", "b", "c", "d"],
        "tools_declared": ["a", "zz"],
        "tools_unknown": ["b", "c", "d"],
    }
    assert report["taxonomy"] == {"tool_classes_seen": ["fs", "net"], "tool_classes_missing": ["a", "c", "d"]}
    assert report["routes"]["routes_seen"] == [
        {"from": "a", "to": "b", "count": 2},
        {"from": "b", "to": "a", "count": 2},
        {"from": "b", "to": "c", "count": 1},
        {"from": "c", "to": "d", "count": 1},
    ]
    kinds = [(f["kind"], f["tool"]) for f in report["findings"]]
    assert kinds == [
        ("missing_taxonomy", "a"),
        ("missing_taxonomy", "c"),
        ("missing_taxonomy", "d"),
        ("unknown_tool", "b"),
        ("unknown_tool", "c"),
        ("unknown_tool", "d"),
    ]
    assert report["findings"][3]["message"] == "tool 'b' was seen but not declared"
    empty = coverage_report(records.Coverage(), [], generated_at="G")
    assert empty["tools"]["tools_seen"] == [] and empty["routes"]["routes_seen"] == [] and empty["findings"] == []


def test_declared_tools():
    assert declared_tools_of(
        allow=[" read_file ", "fs_*"],
        deny=["exec", "*delete*"],
        schema_keys=["lookup", "$defs"],
        constraint_tools=["legacy"],
        pin_keys=["read_file", ""],
    ) == ["exec", "legacy", "lookup", "read_file"]
    assert declared_tools_of() == []


def test_coverage_generated_at_defaults_to_now_utc_seconds():
    stamp = coverage_report(records.Coverage(), [])["run"]["generated_at"]
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(datetime.now(timezone.utc) - parsed) < timedelta(minutes=5)
    assert coverage_report(records.Coverage(), [])["run"]["assay_version"] == __import__("assay").__version__


# --- state window ------------------------------------------------------------------------------


def test_state_window_example():
    doc = state_window("assay://org/app", "default-mcp-server", "mcpwrap-4242-1755856800123456789")
    assert doc == {
        "schema_version": "session_state_window_v1",
        "report_version": "1",
        "session": {
            "event_source": "assay://org/app",
            "server_id": "default-mcp-server",
            "session_id": "mcpwrap-4242-1755856800123456789",
        },
        "window": {"window_kind": "session"},
        "snapshot": {
            "state_snapshot_id": "sha256:5394486c124c16c0c88fb65504907f69dd5bc4895139d3f9dc302cea27d6b46a",
            "canonicalization": {"method": "canonical_json_sha256"},
        },
        "privacy": {
            "stores_raw_tool_args": False,
            "stores_raw_prompt_bodies": False,
            "stores_raw_document_bodies": False,
        },
    }
    assert list(doc) == ["schema_version", "report_version", "session", "window", "snapshot", "privacy"]
    assert not pretty_json(doc).endswith(b"\n")


@settings(max_examples=100, deadline=None)
@given(st.text(), st.text(), st.text())
def test_snapshot_id_recomputed_independently(source, server, session):
    doc = state_window(source, server, session)
    payload = {k: doc[k] for k in ("session", "window", "privacy")}
    expected = hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert doc["snapshot"]["state_snapshot_id"] == f"sha256:{expected}"


def test_new_session_id():
    assert new_session_id(4242, 1755856800123456789) == "mcpwrap-4242-1755856800123456789"
    import os

    assert new_session_id().startswith(f"mcpwrap-{os.getpid()}-")


# --- session context ---------------------------------------------------------------------------

DOC_SESSION_CONTEXT = b"""{
  "schema": "assay.mcp_session_context.v0",
  "mode": "enforce",
  "command_digest": "sha256:3f1d8172432a2bfb73dc46226e68993089139f2d916e03a34d716a2c35aa6932",
  "command_digest_alg": "sha256",
  "command_canonicalization": "jcs:command_argv.v0"
}"""


def test_session_context_example_bytes():
    argv = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/demo"]
    assert jcs_bytes(argv) == b'["npx","-y","@modelcontextprotocol/server-filesystem","/srv/demo"]'
    assert pretty_json(session_context(argv, dry_run=False)) == DOC_SESSION_CONTEXT
    dry = session_context(argv, dry_run=True)
    assert dry["mode"] == "dry_run"
    assert b"/srv/demo" not in pretty_json(dry) and b"npx" not in pretty_json(dry)


def test_session_context_refuses_unencodable_argv():
    with pytest.raises(ValueError):
        session_context([], dry_run=False)
    with pytest.raises(ValueError):
        session_context(["x", "bad\udcff"], dry_run=False)  # surrogateescape of a non-UTF-8 byte


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=6), st.booleans())
def test_command_digest_matches_independent_jcs_of_string_array(argv, dry_run):
    # For an array of strings, RFC 8785 is ECMAScript JSON.stringify: the stdlib's compact,
    # non-ASCII-escaping form writes strings the same way.
    independent = json.dumps(argv, separators=(",", ":"), ensure_ascii=False).encode()
    doc = session_context(argv, dry_run=dry_run)
    assert doc["command_digest"] == "sha256:" + hashlib.sha256(independent).hexdigest()
    assert doc["mode"] == ("dry_run" if dry_run else "enforce")


# --- the Recorder: one call per evaluated tools/call (docs/wrap-records.md, "How records are built")

WILD_TEXT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=6),  # lone surrogates too
    st.sampled_from(["", " ", '"', "\\", "\n", "/x/", "café", "\u2028", "\ud83d", "😀", "\x00\x1f\x7f"]),
)
ID_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, True, False, None, 1.5, 7.0, [1], {"a": "b"}]),
    WILD_TEXT,
)


@st.composite
def decisions(draw, tool: str) -> Decision:
    outcome = draw(st.sampled_from(["allow", "allow_with_warning", "deny"]))
    if outcome == "allow":
        code = draw(st.sampled_from([None, None, "E_SOMETHING"]))
    elif outcome == "allow_with_warning":
        code = draw(st.sampled_from(["E_TOOL_UNCONSTRAINED", "E_OTHER"]))
    else:
        code = draw(st.sampled_from(["E_TOOL_DENIED", "E_ARG_SCHEMA", "E_RATE_LIMIT", "E_TOOL_DRIFT", "E_NEW"]))
    reason = draw(st.none() | WILD_TEXT)
    contract = None
    if outcome == "deny":
        contract = draw(st.dictionaries(WILD_TEXT, JSON_NO_FLOAT | WILD_TEXT, max_size=3))
    obligation = st.one_of(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["log", "alert", "approval_required", "custom"])}, optional={"detail": WILD_TEXT}
        ),
        st.just({"type": "legacy_warning", "detail": f"{code}:{reason}"}),  # the implied one: not doubled
        st.fixed_dictionaries(
            {
                "type": st.just("restrict_scope"),
                "restrict_scope": st.fixed_dictionaries({"scope_value": WILD_TEXT, "scope_type": WILD_TEXT}),
            }
        ),
    )
    evidence = st.none() | WILD_TEXT
    classes = draw(st.lists(WILD_TEXT, max_size=3))
    return Decision(
        outcome,
        tool,
        reason_code=code,
        reason=reason,
        contract=contract,
        typed_decision=typed_decision_of(outcome, code),
        obligations=draw(st.lists(obligation, max_size=3)),
        tool_classes=tuple(classes),
        matched_tool_classes=tuple(draw(st.lists(st.sampled_from(classes), max_size=2))) if classes else (),
        match_basis=draw(st.sampled_from([None, "name", "class", "name+class"])),
        matched_rule=draw(st.none() | WILD_TEXT),
        policy_version=draw(st.sampled_from(["2.0", "", "  "]) | WILD_TEXT),
        policy_digest=draw(st.sampled_from(["", DIGEST]) | WILD_TEXT),
        approval_state=draw(st.none() | st.sampled_from(list(ApprovalState))),  # a closed set: the enum
        scope_type=draw(evidence),
        scope_value=draw(evidence),
        scope_match_mode=draw(evidence),
        redaction_target=draw(evidence),
        redaction_mode=draw(evidence),
        redaction_scope=draw(evidence),
    )


@st.composite
def calls(draw, tool: str, valid: bool):
    """(frame, params) of a tools/call of ``tool``: ids of every kind, arguments with and
    without ``_meta.tool_call_id`` and ``_meta.delegation``."""
    meta = draw(
        st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "tool_call_id": WILD_TEXT | st.integers(),
                "delegation": st.fixed_dictionaries(
                    {},
                    optional={
                        "delegated_from": WILD_TEXT | st.integers(),
                        "delegation_depth": st.sampled_from([0, 1, 2, 2**32 - 1, 2**32, -1, True, 1.0, "2"]),
                    },
                ),
            },
        )
    )
    arguments = draw(
        st.sampled_from(
            [
                None,
                {},
                {"q": "x/y"},
                [1],
                {"token": "t", "path": "/a\ud83d"},
                {"cmd": "curl -H 'Authorization: Bearer 0123456789abcdefXYZ' x" * 3},
            ]
        )
    )
    if meta is not None:
        arguments = {"q": 1, "_meta": meta}
    params: Any = (
        {"name": tool, "arguments": arguments} if valid else draw(st.sampled_from([None, [], {"arguments": arguments}]))
    )
    frame = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    rid = draw(st.none() | ID_VALUES)
    if not (rid is None and draw(st.booleans())):
        frame["id"] = rid
    return frame, params


def _twin(decision: Decision, contract) -> Decision:
    """Another Decision object equal to ``decision`` but for its deny contract."""
    fields = decision.to_dict()
    for key in ("outcome", "tool", "contract", "event_reason_code"):
        del fields[key]
    fields["tool_classes"] = tuple(fields["tool_classes"])
    fields["matched_tool_classes"] = tuple(fields["matched_tool_classes"])
    return Decision(
        decision.outcome, decision.tool, contract=contract if decision.outcome == "deny" else None, **fields
    )


def test_a_twin_without_the_lone_surrogate_of_its_template_is_written_in_utf8():
    """A deny whose contract held a lone surrogate made its template's audit parts unusable; a
    later decision of the same kind with a clean contract is written in UTF-8 like any other
    line, not escaped because its template was (found by the property below)."""
    rec = records.Recorder(
        source="assay://org/app",
        label="default-mcp-server",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=False,
        verbose=False,
    )
    first = Decision(
        "deny",
        "t",
        reason_code="E_TOOL_DENIED",
        reason="no",
        contract={"status": "deny", "why": "\ud83d"},
        typed_decision="deny",
    )
    twin = _twin(first, {"status": "deny", "why": "caf\u00e9"})
    for decision, rid in ((first, 1), (twin, "\x80")):
        frame = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "t"}}
        out = rec.record(decision, frame, frame["params"], "t", True, None)
        _full, event_line, audit_line = _expected(
            decision, frame, frame["params"], "t", True, None, out, source="assay://org/app", dry_run=False
        )
        assert (out.decision_line, out.audit_line) == (event_line, audit_line)
    assert "\x80".encode() in out.audit_line and "café".encode() in out.audit_line


def _expected(
    decision,
    frame,
    params,
    name,
    valid,
    digest,
    out,
    *,
    source,
    dry_run,
    session=None,
    server="default-mcp-server",
    arguments_max=None,
):
    """What the generic builders give for the values the recorder used."""
    request_id = frame["id"] if "id" in frame else ABSENT
    arguments = ABSENT
    if arguments_max is not None and isinstance(params, dict) and "arguments" in params:
        arguments = logged_arguments(params["arguments"], arguments_max)
    event = json.loads(out.decision_line)
    made = event["data"]["tool_call_id"]
    tcid = tool_call_id_for(params, request_id, new_uuid=lambda: uuid.UUID(made[4:]))
    delegated_from, delegation_depth = delegation_of(params)
    data = decision_data(
        decision,
        dry_run=dry_run,
        tool_call_id=tcid,
        request_id=request_id,
        delegated_from=delegated_from,
        delegation_depth=delegation_depth,
        tool_definition_digest=digest,
        session=session,
        server=server,
        arguments=arguments,
    )
    full = decision_event(source, data, event_id=out.event_id, time=event["time"])
    audit = audit_record_for(
        decision,
        dry_run=dry_run,
        request_id=request_id,
        tool=name if valid or decision.outcome != "allow" else None,
        timestamp=event["time"],
        session=session,
        server=server,
        arguments=arguments,
    )
    return full, encode_line(full), encode_line(audit)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_recorder_lines_equal_the_generic_builders(data):
    valid = data.draw(st.booleans())
    name = data.draw(WILD_TEXT) if valid else ""
    decision = data.draw(decisions(name))
    source = data.draw(st.sampled_from(["assay://org/app", ""]) | WILD_TEXT)
    # the session key and the --label: fixed by the wrap's user, so hostile too (quotes,
    # backslashes, control characters, a lone surrogate from a non-UTF-8 argv byte)
    label = data.draw(st.sampled_from(["default-mcp-server", "a\udcff"]) | WILD_TEXT)
    session = data.draw(st.sampled_from([None, "client:4242:8613312", "name:team"]) | WILD_TEXT.map("name:".__add__))
    dry_run = data.draw(st.booleans())
    custom = data.draw(st.booleans())
    arguments_max = data.draw(st.sampled_from([None, None, 4096, 16]))  # --log-arguments
    ids = iter(data.draw(st.lists(WILD_TEXT, min_size=5, max_size=5)))
    stamps = iter(data.draw(st.lists(WILD_TEXT, min_size=5, max_size=5)))
    rec = records.Recorder(
        source=source,
        label=label,
        session=session,
        dry_run=dry_run,
        decision_log=True,
        audit_log=True,
        keep_events=data.draw(st.booleans()),
        verbose=True,
        new_event_id=(lambda: next(ids)) if custom else None,
        now=(lambda: next(stamps)) if custom else None,
        arguments_max=arguments_max,
    )
    # the same decision object several times: the first is built the generic way, later ones
    # from the template (the engine hands out one object per plain call of a tool); then
    # decisions just like it with their own deny contract (a fresh one per schema deny)
    twins = data.draw(st.lists(st.none() | st.dictionaries(WILD_TEXT, WILD_TEXT, max_size=2), max_size=2))
    repeats = data.draw(st.integers(min_value=1, max_value=3))
    kept: list[dict] = []
    for turn in range(repeats + len(twins)):
        if turn >= repeats:
            decision = _twin(decision, twins[turn - repeats])
        frame, params = data.draw(calls(name, valid))
        digest = data.draw(st.sampled_from([None, "sha256:" + "5b" * 32]))
        out = rec.record(decision, frame, params, name, valid, digest)
        full, event_line, audit_line = _expected(
            decision,
            frame,
            params,
            name,
            valid,
            digest,
            out,
            source=source,
            dry_run=dry_run,
            session=session,
            server=label,
            arguments_max=arguments_max,
        )
        assert out.decision_line == event_line
        assert out.audit_line == audit_line
        assert out.event_id == full["id"]
        if rec.keep_events:
            kept.append(full)
        assert out.verbose == verbose_line(
            decision.outcome,
            name if valid else None,
            policy_code=decision.reason_code,
            reason=decision.reason,
            dry_run=dry_run,
        )
    if rec.keep_events:  # the aggregate is what the events give
        expected = coverage_of_events(kept)
        assert (rec.coverage.tools, rec.coverage.routes) == (expected.tools, expected.routes)
    else:
        assert rec.coverage is None


def _recorder(**overrides) -> records.Recorder:
    options = dict(
        source="assay://org/app",
        label="default-mcp-server",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=False,
        verbose=False,
    )
    options.update(overrides)
    return records.Recorder(**options)


def test_recorder_writes_the_documented_example_from_the_engine():
    """The enforce-mode example of docs/wrap-records.md, from a real engine decision, on the
    first call (generic) and on later ones (template): the same bytes."""
    policy = load_policy(b'version: "2.0"\ntools: {deny: ["exec"]}\n', warn=lambda _line: None)
    state = SessionState()
    rec = _recorder(new_event_id=lambda: EVT_ID, now=lambda: EVT_TIME, label="shell", session=SESSION)
    frame = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "exec", "arguments": {}}}
    lines = set()
    for _ in range(3):
        decision = evaluate(policy, "exec", {}, state)
        out = rec.record(decision, frame, frame["params"], "exec", True, None)
        lines.add(out.decision_line)
        assert out.audit_line == (
            b'{"timestamp":"' + EVT_TIME.encode() + b'","decision":"deny","tool":"exec",'
            b'"reason":"Tool is explicitly denylisted by name","session":"client:4242:8613312","server":"shell",'
            b'"request_id":7,"agentic":'
            b'{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec","reason":"Tool is explicitly denylisted by name"}}\n'
        )
        assert out.event_id == EVT_ID
    assert lines == {compact(DOC_EVENT.replace(DIGEST, decision.policy_digest))}


def test_recorder_default_ids_are_uuid4_and_unique_and_times_rfc3339():
    rec = _recorder()
    decision = make("allow", "read_file")
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read_file"}}
    ids = set()
    before = datetime.now(timezone.utc)
    for _ in range(1000):  # more than one batch of ids
        out = rec.record(decision, frame, frame["params"], "read_file", True, None)
        event, audit = json.loads(out.decision_line), json.loads(out.audit_line)
        assert event["id"] == out.event_id and event["id"].startswith("evt_decision_")
        value = uuid.UUID(event["id"].removeprefix("evt_decision_"))
        assert value.version == 4 and value.variant == uuid.RFC_4122
        assert str(value) == event["id"].removeprefix("evt_decision_")  # lowercase 8-4-4-4-12
        ids.add(event["id"])
        assert event["time"] == audit["timestamp"]  # one time per call
    after = datetime.now(timezone.utc)
    assert len(ids) == 1000
    stamp = event["time"]
    assert stamp.endswith("+00:00") and len(stamp) == len("2026-08-22T10:15:02.123456+00:00")
    assert before - timedelta(seconds=1) <= datetime.fromisoformat(stamp) <= after + timedelta(seconds=1)
    assert rfc3339_utc(datetime.fromisoformat(stamp)) == stamp


def test_recorder_builds_only_what_is_on():
    decision = make("deny", "exec", reason_code="E_TOOL_DENIED", reason="r", contract={"status": "deny"})
    frame = {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "exec"}}
    nothing = _recorder(decision_log=False, audit_log=False)
    assert not nothing.active and _recorder(decision_log=False, audit_log=False, verbose=True).active
    off = nothing.record(decision, frame, frame["params"], "exec", True, None)
    assert (off.decision_line, off.audit_line, off.verbose, off.event_id) == (None,) * 4
    assert not hasattr(off, "event")  # events are not kept: coverage keeps aggregates
    audit = _recorder(decision_log=False).record(decision, frame, frame["params"], "exec", True, None)
    assert audit.decision_line is None and audit.event_id is None and audit.audit_line.startswith(b'{"timestamp":')
    kept = _recorder(decision_log=False, audit_log=False, keep_events=True, verbose=True, dry_run=True)
    out = kept.record(decision, frame, frame["params"], "exec", True, None)
    assert out.decision_line is None and out.audit_line is None
    assert out.event_id.startswith("evt_decision_")  # receipts name it
    assert kept.coverage.tools == {"exec": set()} and kept.coverage.routes == {}
    assert out.verbose == '[assay] WOULD_DENY "exec" (reason: "r")'


def test_recorder_allow_with_params_that_do_not_fit_writes_tool_null_in_audit():
    rec = _recorder(now=lambda: "t")
    decision = make("allow", "")
    frame = {"jsonrpc": "2.0", "method": "tools/call", "params": [1]}
    for _ in range(2):
        out = rec.record(decision, frame, frame["params"], "", False, None)
        assert out.audit_line == (
            b'{"timestamp":"t","decision":"allow","tool":null,"reason":null,"session":null,"server":"default-mcp-server"}\n'
        )
        assert json.loads(out.decision_line)["data"]["tool_call_id"].startswith("gen_")


# --- receipts and the stop record (docs/wrap.md, "One-run outputs and session reports") --------


def test_receipt_lines():
    assert records.receipt_line(
        2, "sha256:ab", "request", "blocked", method="tools/call", request_id=7, decision_event_id=EVT_ID
    ) == (
        b'{"schema":"assay.mcp_request_receipt.v0","seq":2,"frame_digest":"sha256:ab","kind":"request",'
        b'"method":"tools/call","request_id":7,"disposition":"blocked","decision_event_id":"'
        + EVT_ID.encode()
        + b'"}\n'
    )
    assert records.receipt_line(3, "sha256:cd", "rejected", "rejected", reject_reason="batch") == (
        b'{"schema":"assay.mcp_request_receipt.v0","seq":3,"frame_digest":"sha256:cd","kind":"rejected",'
        b'"disposition":"rejected","reject_reason":"batch"}\n'
    )
    # a null id is written (unlike in decision events); an absent one is not
    assert b'"request_id":null' in records.receipt_line(1, "d", "request", "forwarded", method="ping", request_id=None)
    assert b"request_id" not in records.receipt_line(1, "d", "notification", "forwarded", method="x")


def test_stop_record():
    assert records.stop_record(
        "client_eof", child_returncode=0, forwarded=3, blocked=2, rejected=1, dropped_responses=4
    ) == {
        "schema": "assay.mcp_session_stop.v0",
        "stop_cause": "client_eof",
        "child_exit": {"code": 0, "signal": None},
        "frames": {"forwarded": 3, "blocked": 2, "rejected": 1, "dropped_responses": 4},
    }
    killed = records.stop_record(
        "signal", child_returncode=-15, forwarded=0, blocked=0, rejected=0, dropped_responses=0, wrap_signal=15
    )
    assert list(killed)[:3] == ["schema", "stop_cause", "wrap_signal"] and killed["wrap_signal"] == 15
    assert killed["child_exit"] == {"code": None, "signal": 15}
    unknown = records.stop_record("x", child_returncode=None, forwarded=0, blocked=0, rejected=0, dropped_responses=0)
    assert unknown["child_exit"] == {"code": None, "signal": None}


def test_recorder_schema_denies_carry_their_own_violations():
    """The engine makes a fresh Decision per schema deny: the second one is built from the
    first one's template, with its own contract in the audit record."""
    policy = load_policy(
        b'version: "2.0"\ntools: {allow: [search]}\nschemas:\n  search: {type: object, required: [q], '
        b"properties: {q: {type: string}}, additionalProperties: false}\n",
        warn=lambda _line: None,
    )
    state = SessionState()
    rec = _recorder(new_event_id=lambda: EVT_ID, now=lambda: EVT_TIME)
    for i, arguments in enumerate(({"q": 5}, {"x": 1}, {"q": "ok", "z": "\u00e9"})):
        decision = evaluate(policy, "search", arguments, state)
        assert decision.reason_code == "E_ARG_SCHEMA"
        frame = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "search", "arguments": arguments},
        }
        out = rec.record(decision, frame, frame["params"], "search", True, None)
        data = decision_data(decision, dry_run=False, tool_call_id=f"req_{i}", request_id=i)
        assert out.decision_line == encode_line(decision_event("assay://org/app", data, event_id=EVT_ID, time=EVT_TIME))
        audit = audit_record_for(decision, dry_run=False, request_id=i, timestamp=EVT_TIME)
        assert out.audit_line == encode_line(audit)
        assert json.loads(out.audit_line)["agentic"] == decision.contract
