"""The bytes wrap sends to the client: deny replies and rejection replies (docs/wrap-records.md,
"Deny reply (enforce mode)", "2026-07-28-era requests", "Reply to a refused line"), byte for byte."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import SessionState, evaluate, load_policy
from assay.session.records import ABSENT, rejection_warning
from assay.session.replies import REJECTION_REASONS, deny_reply, is_modern_request, rejection_reply

DENIED_BY_NAME = "Tool is explicitly denylisted by name"
EXEC_CONTRACT = {"status": "deny", "error_code": "E_TOOL_DENIED", "tool": "exec", "reason": DENIED_BY_NAME}


# --- deny replies -------------------------------------------------------------------------------


def expected_reply(rid: bytes, payload: bytes, *, structured: bool = True) -> bytes:
    """A deny line (docs/wrap.md, "Deny replies"): the fixed text, then the payload as JSON
    text; the payload again as structuredContent unless the tool declares an outputSchema."""
    text = json.dumps(payload.decode(), ensure_ascii=False).encode()
    line = (
        b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":' + text + b'}],"isError":true'
    )
    return line + (b',"structuredContent":' + payload if structured else b"") + b"}}\n"


DOC_DENY_PAYLOAD = (
    b'{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec","reason":"Tool is explicitly denylisted by name"}'
)
DOC_DENY_REPLY = expected_reply(b"7", DOC_DENY_PAYLOAD)
ARG_SCHEMA_REPLY = expected_reply(
    b"7",
    b'{"status":"deny","error_code":"E_ARG_SCHEMA","tool":"read_file",'
    b'"violations":[{"path":"/path","message":"\\"/etc/passwd\\" does not match \\"^/workspace/\\""}]}',
)
CONTRACT_SHAPES = [
    '{"status":"deny","error_code":"E_TOOL_NOT_ALLOWED","tool":"write_file","reason":"Tool is not in allowlist"}',
    '{"status":"deny","error_code":"E_RATE_LIMIT"}',
    '{"status":"deny","error_code":"E_TOOL_DRIFT","tool":"read_file","reason":"Tool metadata or schema has changed without policy update (SOTA Moat)"}',
    # our engine has no "(SOTA Moat)" suffix; the reply carries whatever the contract says
    '{"status":"deny","error_code":"E_TOOL_DRIFT","tool":"read_file","reason":"Tool metadata or schema has changed without policy update"}',
    '{"status":"deny","error_code":"E_SCHEMA_COMPILE","tool":"lookup","message":"Declared schema failed to prepare or compile: shared and tool-local $defs entries must not overlap"}',
    '{"status":"deny","error_code":"E_TOOL_UNCONSTRAINED","tool":"list_dir","reason":"Tool has no schema (enforcement: deny)"}',
]


def test_deny_reply_example_bytes():
    assert deny_reply(7, EXEC_CONTRACT) == DOC_DENY_REPLY
    assert DOC_DENY_REPLY == (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Content blocked by policy"},'
        b'{"type":"text","text":"{\\"status\\":\\"deny\\",\\"error_code\\":\\"E_TOOL_DENIED\\",\\"tool\\":\\"exec\\",'
        b'\\"reason\\":\\"Tool is explicitly denylisted by name\\"}"}],"isError":true,'
        b'"structuredContent":{"status":"deny","error_code":"E_TOOL_DENIED","tool":"exec",'
        b'"reason":"Tool is explicitly denylisted by name"}}}\n'
    )


def test_deny_reply_without_structured_content_for_output_schema_tools():
    """A tool with an outputSchema: clients validate structuredContent against it even on
    errors (TS SDK v1 throws -32602), so the deny carries the payload only as text."""
    line = deny_reply(7, EXEC_CONTRACT, structured=False)
    assert line == expected_reply(b"7", DOC_DENY_PAYLOAD, structured=False)
    result = json.loads(line)["result"]
    assert "structuredContent" not in result and result["isError"] is True
    assert json.loads(result["content"][1]["text"]) == EXEC_CONTRACT
    modern = json.loads(deny_reply(7, EXEC_CONTRACT, modern=True, structured=False))["result"]
    assert list(modern) == ["content", "isError", "resultType"]


def test_deny_reply_with_a_lone_surrogate_in_the_name_does_not_crash():
    line = deny_reply(7, {"status": "deny", "tool": "\ud800"})
    assert json.loads(line)["result"]["structuredContent"]["tool"] == "\ud800"


def test_arg_schema_reply_bytes():
    contract = {
        "status": "deny",
        "error_code": "E_ARG_SCHEMA",
        "tool": "read_file",
        "violations": [{"path": "/path", "message": '"/etc/passwd" does not match "^/workspace/"'}],
    }
    assert deny_reply(7, contract) == ARG_SCHEMA_REPLY


@pytest.mark.parametrize("contract_text", CONTRACT_SHAPES)
@pytest.mark.parametrize(("rid", "rid_bytes"), [(7, b"7"), ("abc", b'"abc"'), (None, b"null"), (ABSENT, b"null")])
def test_reply_bytes_per_contract_shape(contract_text, rid, rid_bytes):
    contract = json.loads(contract_text)
    assert deny_reply(rid, contract) == expected_reply(rid_bytes, contract_text.encode())


def test_modern_reply_appends_result_type_last():
    modern = deny_reply(7, EXEC_CONTRACT, modern=True)
    assert modern == DOC_DENY_REPLY[: -len(b"}}\n")] + b',"resultType":"complete"}}\n'
    assert list(json.loads(modern)["result"]) == ["content", "isError", "structuredContent", "resultType"]


@pytest.mark.parametrize(
    ("meta", "modern"),
    [
        ({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, True),
        ({"io.modelcontextprotocol/protocolVersion": "2027-01-15"}, True),
        ({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}, False),
        ({"io.modelcontextprotocol/protocolVersion": "2026-07-27"}, False),
        ({"io.modelcontextprotocol/protocolVersion": "2026-99-99"}, False),
        ({"io.modelcontextprotocol/protocolVersion": "2026-02-30"}, False),
        ({"io.modelcontextprotocol/protocolVersion": "9999"}, False),
        ({"io.modelcontextprotocol/protocolVersion": " 2026-07-28"}, False),
        ({"io.modelcontextprotocol/protocolVersion": 20260728}, False),
        ({"protocolVersion": "2026-07-28"}, False),
        ([], False),
        (None, False),
    ],
)
def test_is_modern_request(meta, modern):
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": meta}}
    assert is_modern_request(frame) is modern


def test_protocol_version_must_be_under_params_meta():
    assert not is_modern_request({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert not is_modern_request({"params": ["2026-07-28"]})
    assert not is_modern_request(
        {"params": {"arguments": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}}
    )


from tests.wrap.test_records import JSON_ANY  # noqa: E402  (one strategy for any JSON value)


@settings(max_examples=300, deadline=None)
@given(rid=JSON_ANY, contract=st.dictionaries(st.text(), JSON_ANY, max_size=5), modern=st.booleans())
def test_deny_reply_round_trips_any_id_and_contract(rid, contract, modern):
    line = deny_reply(rid, contract, modern=modern)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    parsed = json.loads(line)
    assert list(parsed) == ["jsonrpc", "id", "result"]
    assert parsed["id"] == rid and type(parsed["id"]) is type(rid)
    assert parsed["result"]["structuredContent"] == contract
    assert list(parsed["result"]["structuredContent"]) == list(contract)
    assert parsed["result"]["content"][0] == {"type": "text", "text": "Content blocked by policy"}
    assert json.loads(parsed["result"]["content"][1]["text"]) == contract
    assert ("resultType" in parsed["result"]) is modern


# --- rejection replies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "code", "message"),
    [
        ("frame_too_large", -32600, "Invalid Request"),
        ("invalid_utf8", -32700, "Parse error"),
        ("embedded_line_break", -32700, "Parse error"),
        ("malformed_json", -32700, "Parse error"),
        ("batch", -32600, "Invalid Request"),
        ("not_an_object", -32600, "Invalid Request"),
        ("duplicate_member", -32600, "Invalid Request"),
        ("non_string_method", -32600, "Invalid Request"),
    ],
)
def test_rejection_reply_bytes(reason, code, message):
    expected = (
        '{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"%s","data":{"reason":"%s"}}}\n'
        % (code, message, reason)
    ).encode()
    assert rejection_reply(reason) == expected
    assert rejection_warning(reason) == f"[assay] WARNING: rejected client frame ({reason})"


def test_rejection_example_and_reason_table_complete():
    assert rejection_reply("malformed_json") == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"reason":"malformed_json"}}}\n'
    )
    assert list(REJECTION_REASONS) == [
        "frame_too_large",
        "invalid_utf8",
        "embedded_line_break",
        "malformed_json",
        "batch",
        "not_an_object",
        "duplicate_member",
        "non_string_method",
    ]
    with pytest.raises(ValueError):
        rejection_reply("other")
    with pytest.raises(ValueError):
        rejection_warning("other")


def test_deny_reply_from_the_real_policy_engine():
    policy = load_policy(b'version: "2.0"\ntools: {deny: ["exec"]}\n', warn=lambda _line: None)
    decision = evaluate(policy, "exec", {}, SessionState())
    assert deny_reply(7, decision.contract) == DOC_DENY_REPLY
