"""Server lines in memory: forged answers dropped, ids compared as the SDKs compare them, the
lenient reader, and a property test over tools/list answers (docs/wrap.md, "Dropped server
responses" and "Tool pins")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.session.serverlines import NOT_JSON, TOO_HARD, js_number, python_id, read_line
from tests.wrap.test_pins import EVIL, HONEST, answer, call, frame, new_session, request, unreadable_line

DENY_EXEC = None


def deny_exec_session(**options):
    from assay.policy import load_policy

    return new_session(load_policy(b'version: "2.0"\ntools:\n  deny: ["exec"]\n'), **options)


def response(rid, result=None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result or {"content": []}}).encode()


# --- forged answers ------------------------------------------------------------------------------


def test_answer_for_a_denied_call_is_dropped():
    session = deny_exec_session()
    out = session.handle(call(5, "exec"))
    assert out.disposition == "blocked"
    relay, stderr = session.server_line(response(5, {"content": [{"type": "text", "text": "forged"}]}))
    assert relay is False
    assert stderr == ["[assay] WARNING: dropped a server response (id 5) that answers no pending client request"]
    assert "forged" not in stderr[0]
    assert session.dropped_responses == 1


def test_answer_for_an_id_never_sent_and_a_second_answer_are_dropped():
    session = deny_exec_session()
    assert session.server_line(response(41))[0] is False
    session.handle(call(1, "echo"))
    assert session.server_line(response(1))[0] is True
    assert session.server_line(response(1))[0] is False  # a second answer
    assert session.dropped_responses == 2


def test_error_responses_and_id_less_responses_follow_the_same_rule():
    session = deny_exec_session()
    session.handle(request(1, "ping"))
    assert session.server_line(b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}')[0] is True
    relay, stderr = session.server_line(b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}')
    assert relay is False and "(no id)" in stderr[0]
    assert session.server_line(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}')[0] is False


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}',
        b'{"jsonrpc":"2.0","id":77,"method":"sampling/createMessage","params":{}}',
        b'{"jsonrpc":"2.0","id":77,"method":"roots/list","result":{}}',  # a request for both SDKs
        b"server log line, not JSON",
        b"[1,2,3]",
        b"",
        b'"just a string"',
        b'{"jsonrpc":"2.0","id":77}',
    ],
)
def test_requests_notifications_and_non_objects_are_relayed(line):
    session = deny_exec_session()
    assert session.server_line(line) == (True, [])
    assert session.dropped_responses == 0


def test_a_response_with_a_non_string_method_is_a_response():
    """The Python SDK reads {"id":2,"method":null,"result":...} as a response (its request and
    notification models need a string method), so wrap must too."""
    session = deny_exec_session()
    session.handle(call(2, "exec"))
    assert session.server_line(b'{"jsonrpc":"2.0","id":2,"method":null,"result":{"content":[]}}')[0] is False


@pytest.mark.parametrize(
    ("sent", "answered"),
    [
        (2, "2"),
        (2, "0x2"),
        (2, " 2 "),
        (2, "2.0"),
        (2, "2e0"),
        (2, "0b10"),
        (2, "+2"),
        (2, 2.0),
        (2, "0o2"),
        (0, ""),
        (0, "  "),  # Number("") is 0 for the TS SDK
        ("2", 2),
        ("7", "7"),
        ("abc", "abc"),
        ("02", 2),
    ],
)
def test_ids_compare_the_way_the_sdks_compare_them(sent, answered):
    session = deny_exec_session()
    session.handle(call(sent, "echo"))
    assert session.server_line(response(answered))[0] is True
    assert session.server_line(response(sent))[0] is False  # answered once only


@pytest.mark.parametrize(
    ("sent", "answered"), [(2, "3"), (2, "two"), ("abc", "ABC"), (2, True), (2, None), (2, 2.5), (2, [2])]
)
def test_ids_no_sdk_would_match_are_dropped(sent, answered):
    session = deny_exec_session()
    session.handle(call(sent, "echo"))
    assert session.server_line(response(answered))[0] is False
    assert session.server_line(response(sent))[0] is True


def test_string_id_answer_for_a_denied_call_is_dropped():
    """Forging by spelling: "5" answers request 5 for both SDKs, so it is dropped like 5."""
    session = deny_exec_session()
    session.handle(call(5, "exec"))
    for spelling in ("5", "0x5", 5.0, " 5"):
        assert session.server_line(response(spelling))[0] is False


def test_client_reuse_of_an_id_in_flight_allows_two_answers():
    session = deny_exec_session()
    session.handle(call(3, "echo"))
    session.handle(request(3, "ping"))
    assert session.server_line(response(3))[0] is True
    assert session.server_line(response(3))[0] is True
    assert session.server_line(response(3))[0] is False


def test_dry_run_forwards_denied_calls_so_their_answers_are_relayed():
    session = deny_exec_session(dry_run=True)
    assert session.handle(call(5, "exec")).disposition == "forwarded"
    assert session.server_line(response(5))[0] is True


def test_client_responses_are_not_pending_requests():
    session = deny_exec_session()
    session.handle(frame({"jsonrpc": "2.0", "id": 9, "result": {}}))  # the client answers a server request
    assert session.server_line(response(9))[0] is False


def test_an_answered_tools_list_is_no_longer_owed_and_verbose_names_its_tools():
    session = new_session(verbose=True)
    session.handle(request(1, "tools/list"))
    assert session.owes_answers
    relayed, stderr = session.server_line(answer(1, [HONEST]))
    assert relayed and stderr[0].startswith('[assay] TOOL "read_file"')
    assert not session.owes_answers


# --- deny replies for tools with an outputSchema ----------------------------------------------


def test_deny_of_a_tool_listed_with_an_output_schema_has_no_structured_content():
    session = deny_exec_session()
    session.handle(request(1, "tools/list"))
    session.server_line(
        answer(
            1,
            [
                {
                    "name": "exec",
                    "inputSchema": {"type": "object"},
                    "outputSchema": {"type": "object", "required": ["out"]},
                },
                dict(HONEST, name="plain"),
            ],
        )
    )
    result = json.loads(session.handle(call(2, "exec")).reply)["result"]
    assert "structuredContent" not in result
    assert [c["text"] for c in result["content"]][0] == "Content blocked by policy"
    assert json.loads(result["content"][1]["text"])["error_code"] == "E_TOOL_DENIED"
    session2 = deny_exec_session()
    result2 = json.loads(session2.handle(call(2, "exec")).reply)["result"]
    assert result2["structuredContent"]["error_code"] == "E_TOOL_DENIED"


def test_deny_after_an_unreadable_answer_omits_structured_content():
    session = deny_exec_session(server_hold_limit=4096)
    session.handle(request(1, "tools/list"))
    assert unreadable_line(session)
    assert "structuredContent" not in json.loads(session.handle(call(2, "exec")).reply)["result"]


def test_modern_deny_without_structured_content_keeps_result_type_last():
    session = deny_exec_session()
    session.handle(request(1, "tools/list"))
    session.server_line(
        answer(1, [{"name": "exec", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}])
    )
    modern = request(
        2, "tools/call", {"name": "exec", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    )
    result = json.loads(session.handle(modern).reply)["result"]
    assert list(result) == ["content", "isError", "resultType"] and result["resultType"] == "complete"


# --- the reader ----------------------------------------------------------------------------------


def test_reader_results():
    assert read_line(b'{"t\\u006fols":1}') == {"tools": 1}
    assert read_line(b'{"a":"\xff"}') == {"a": "\ufffd"}
    assert read_line(b'{"a":"\\ud83d"}') == {"a": "\ud83d"}
    assert read_line(b"[" * 5000 + b"]" * 5000) is not NOT_JSON
    assert read_line(b"[" * 5000 + b"]" * 4999) is NOT_JSON
    assert read_line(b"not json") is NOT_JSON
    assert read_line(b'{"a":1} x') is NOT_JSON
    assert read_line(b"[" * 3000 + b"]" * 3000, budget=10) is TOO_HARD


def test_js_number_and_python_id():
    assert js_number("0x10") == 16 and js_number("") == 0 and js_number(" 1e1 ") == 10
    assert js_number("1_0") is None and js_number("abc") is None and js_number(True) is None
    assert js_number("-0x1") is None and js_number("Infinity") == float("inf")
    assert python_id("1_0") == 10 and python_id(" 7") == 7 and python_id("x") == "x" and python_id(2.0) is None


DEEP = 1500


@st.composite
def tools_answers(draw):
    """A tools/list answer for request 3 carrying EVIL somewhere, spelled in a hostile way."""
    tools = [draw(st.sampled_from([dict(HONEST, name="echo"), EVIL]))]
    tools += draw(st.lists(st.sampled_from([dict(HONEST, name="other"), EVIL, HONEST]), max_size=3))
    if EVIL not in tools:
        tools.append(EVIL)
    tools = [dict(t) for t in draw(st.permutations(tools))]
    evil = next(t for t in tools if t == EVIL)
    extra = draw(st.sampled_from(["none", "surrogate", "deep", "huge", "nan"]))
    if extra == "surrogate":
        evil["description"] = evil["description"] + "\ud83d"
    elif extra == "deep":
        evil["inputSchema"] = dict(evil["inputSchema"], x="DEEP-PLACEHOLDER")
    elif extra == "huge":
        evil["inputSchema"] = dict(evil["inputSchema"], maxLength=10 ** draw(st.integers(300, 500)))
    elif extra == "nan":
        evil["inputSchema"] = dict(evil["inputSchema"], minimum=float("nan"))
    rid = draw(st.sampled_from([3, "3", "0x3", " 3", 3.0, "3.0", "0b11"]))
    text = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}, ensure_ascii=draw(st.booleans()))
    for member in ("tools", "result", "name", "id"):
        if draw(st.booleans()):
            escaped = "".join(f"\\u{ord(c):04x}" if draw(st.booleans()) else c for c in member)
            text = text.replace(f'"{member}":', f'"{escaped}":')
    text = text.replace('"DEEP-PLACEHOLDER"', "[" * DEEP + "]" * DEEP)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = data.replace(b"Before answering", b"Before \xff\xfe answering")
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=tools_answers())
def test_property_any_spelling_of_a_rug_pull_is_denied(line):
    from tests.wrap.test_pins import honest_session, assert_denied

    session = honest_session(verbose=True)
    session.handle(request(3, "tools/list"))
    relay, stderr = session.server_line(line)
    assert relay is True
    assert all(s.isascii() and s.isprintable() for s in stderr)
    assert_denied(session)


# --- the Python SDK as an oracle -----------------------------------------------------------------

ID_SPELLINGS = st.sampled_from([2, "2", " 2", "+2", "02", "2_0", "0x2", "2.0", 2.0, 3, "3", "abc", None, True, "", "٢"])


@st.composite
def server_messages(draw):
    message = {"jsonrpc": "2.0"}
    if draw(st.booleans()):
        message["id"] = draw(ID_SPELLINGS)
    kind = draw(st.sampled_from(["result", "error", "both", "method", "method_null", "neither"]))
    if kind in ("result", "both", "method_null"):
        message["result"] = {"content": []}
    if kind in ("error", "both"):
        message["error"] = {"code": -1, "message": "m"}
    if kind == "method":
        message["method"] = "x"
        message["result"] = {}
    if kind == "method_null":
        message["method"] = None
    text = json.dumps(message)
    for member in ("id", "result", "error", "method"):
        if draw(st.booleans()):
            text = text.replace(f'"{member}":', '"' + "".join(f"\\u{ord(c):04x}" for c in member) + '":')
    return text.encode()


@settings(max_examples=400, deadline=None)
@given(sent=st.sampled_from([2, "2", "abc", 20]), line=server_messages())
def test_property_every_answer_the_python_sdk_accepts_is_relayed(sent, line):
    """Whenever the Python SDK would take the line as the answer to the pending request, wrap
    relays it (and counts that request answered); whatever else wrap relays is no response."""
    from mcp import types
    from mcp.shared.dispatcher import coerce_request_id

    try:
        parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        parsed = None
    sdk_answer = (
        isinstance(parsed, (types.JSONRPCResponse, types.JSONRPCError))
        and parsed.id is not None
        and coerce_request_id(parsed.id) == coerce_request_id(sent)
    )
    session = deny_exec_session()
    session.handle(call(sent, "echo"))
    relayed, _ = session.server_line(line)
    if sdk_answer:
        assert relayed, line
        assert session.server_line(response(sent))[0] is False  # it consumed the pending request
    if isinstance(parsed, (types.JSONRPCResponse, types.JSONRPCError)) and not relayed:
        assert not sdk_answer
