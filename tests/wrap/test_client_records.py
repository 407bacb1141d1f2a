"""``assay.client.capabilities`` events (docs/wrap-records.md, "The client"): what the client
declared about itself, in the decision log, for both protocol eras; and the deny a client that
cannot answer an approval gets names the fix (docs/wrap.md, "Approvals")."""

from __future__ import annotations

import json

import pytest

from assay.logs.entries import OTHER, parse_line
from assay.policy import load_policy
from assay.session.effects import Sink
from assay.session.session import SessionOptions
from tests.wrap._harness import Harness

POLICY = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["*"]\n  approval_required: ["deploy"]\n'
    b"enforcement: {unconstrained_tools: allow}\n"
)
MODERN = "2026-07-28"


def line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def initialize(rid, capabilities, client=None, version="2025-06-18") -> bytes:
    params = {"protocolVersion": version, "capabilities": capabilities}
    if client is not None:
        params["clientInfo"] = client
    return line({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params})


def modern_call(rid, capabilities, name="echo", client=None) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    if client is not None:
        meta["io.modelcontextprotocol/clientInfo"] = client
    return line(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}, "_meta": meta}}
    )


def logged(options: SessionOptions | None = None) -> Harness:
    return Harness(
        POLICY,
        options or SessionOptions(decision_sinks=(Sink.DECISION_LOG,), event_source="assay://protect/claude/fs"),
        approval_token="0123456789abcdef0123456789abcdef",
    )


def client_events(effects) -> list[dict]:
    events = [json.loads(r) for r in effects.records(Sink.DECISION_LOG)]
    return [e for e in events if e["type"] == "assay.client.capabilities"]


@pytest.mark.parametrize(
    "capabilities, mode",
    [
        ({"elicitation": {}}, "form"),
        ({"elicitation": {"form": {}, "url": {}}}, "form"),
        ({"elicitation": {"url": {}}}, "url"),
        ({"sampling": {}}, "none"),
        ({"elicitation": True}, "none"),
        (None, "none"),
    ],
)
def test_an_initialize_records_what_the_client_declared(capabilities, mode):
    h = logged()
    effects = h.client(initialize(0, capabilities, {"name": "claude-code", "version": "2.1", "x": 1}))
    [event] = client_events(effects)
    assert event["id"].startswith("evt_client_") and event["source"] == "assay://protect/claude/fs"
    assert event["data"] == {
        "declared_in": "initialize",
        "protocol_version": "2025-06-18",
        "client": {"name": "claude-code", "version": "2.1"},
        "elicitation": mode,
        "session": None,
        "server": "default-mcp-server",
    }
    assert effects.to_server == initialize(0, capabilities, {"name": "claude-code", "version": "2.1", "x": 1})


def test_a_later_initialize_is_recorded_again_and_the_records_are_bounded():
    from assay.session.records.clients import EVENTS_MAX

    h = logged()
    kinds = []
    for i in range(EVENTS_MAX + 5):
        kinds += [
            e["data"]["elicitation"]
            for e in client_events(h.client(initialize(i, {"elicitation": {}} if i % 2 else {})))
        ]
    assert kinds == ["none", "form"] * (EVENTS_MAX // 2)


def test_a_2026_era_request_records_its_own_declaration_once_per_change():
    h = logged()
    seen = []
    for caps in ({"elicitation": {}}, {"elicitation": {}}, {}, {}, {"elicitation": {"url": {}}}):
        effects = h.client(modern_call(len(seen) + 1, caps, client={"name": "v2-client", "version": "2.0.0"}))
        seen.append(
            [
                (e["data"]["declared_in"], e["data"]["elicitation"], e["data"]["protocol_version"])
                for e in client_events(effects)
            ]
        )
    assert seen == [[("request", "form", MODERN)], [], [("request", "none", MODERN)], [], [("request", "url", MODERN)]]
    # a request of an older revision (no protocolVersion date) declares nothing this way
    legacy = line(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "echo", "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        }
    )
    assert client_events(h.client(legacy)) == []


def test_a_hostile_client_name_is_bounded_and_the_record_precedes_the_calls_event():
    h = logged()
    effects = h.client(initialize(0, {}, {"name": "n" * 100_000, "version": ["not", "text"]}, version="v" * 5000))
    [event] = client_events(effects)
    assert event["data"]["client"] == {"name": "n" * 256 + "…(cut: 100000 characters)"}
    assert event["data"]["protocol_version"].endswith("…(cut: 5000 characters)")
    effects = h.client(modern_call(1, {}, name="echo"))
    types = [json.loads(r)["type"] for r in effects.records(Sink.DECISION_LOG)]
    assert types == ["assay.client.capabilities", "assay.tool.decision"]


def test_no_decision_log_no_client_event():
    h = logged(SessionOptions(audit=True))
    effects = h.client(initialize(0, {"elicitation": {}}))
    assert effects.records(Sink.AUDIT_LOG) == [] and effects.records(Sink.DECISION_LOG) == []


def test_log_passes_the_event_over_and_suggest_reads_it():
    from assay.logs.suggest import Observed, client_record

    h = logged()
    [raw] = h.client(initialize(0, {"elicitation": {"url": {}}}, {"name": "c"})).records(Sink.DECISION_LOG)
    assert parse_line(raw) == OTHER  # not a call, not counted as skipped (docs/log.md, "What it reads")
    data = client_record(raw)
    assert data is not None
    observed = Observed()
    observed.client(data)
    assert observed.clients == {(None, "default-mcp-server"): {"url"}}


def test_the_unavailable_deny_names_the_fix_in_the_reply_and_in_the_log():
    h = logged()
    h.client(initialize(0, {}))
    effects = h.client(line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "deploy"}}))
    reply = json.loads(effects.to_client)
    payload = reply["result"]["structuredContent"]
    assert payload["approval"] == "unavailable"
    for said in (payload["reason"],):
        assert "approval_fallback: allow" in said and "supports MCP elicitation" in said
    [decision] = [
        json.loads(r) for r in effects.records(Sink.DECISION_LOG) if json.loads(r)["type"] == "assay.tool.decision"
    ]
    entry = parse_line(json.dumps(decision).encode())
    assert not isinstance(entry, str)
    assert entry.approval == "unavailable" and "approval_fallback: allow" in (entry.reason or "")
