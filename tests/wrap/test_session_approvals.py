"""Approvals that ask a person through the client, in memory (docs/wrap.md, "Approvals").

A call the policy marks ``approval_required`` is held while wrap asks the client with its own
``elicitation/create`` request; the answer (consumed, never forwarded) decides. Time is a fake
clock: timeouts are tested by advancing it.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import Decision, PolicyError, load_policy
from assay.policy.pipeline import Call
from assay.session import approvals
from assay.session.effects import CloseServerInput, Phase, Sink
from assay.session.session import SessionOptions, WrapSession

from tests.docs_examples import policy_example
from tests.wrap._harness import EntrySpy, Harness, add_guard

TOKEN = "0123456789abcdef0123456789abcdef"
PREFIX = f"assay-approval-{TOKEN}-"

POLICY_TEXT = (
    'version: "2.0"\ntools:\n  allow: ["deploy", "echo", "wipe"]\n  approval_required: ["deploy"]\n'
    "  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)
POLICY = load_policy(POLICY_TEXT.encode())
FALLBACK_ALLOW = load_policy(POLICY_TEXT.replace("approval_timeout: 30s", "approval_fallback: allow").encode())

ELICIT_CAPS = {"elicitation": {}}


def frame_line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def call(rid, name="deploy", arguments=None) -> bytes:
    params = {"name": name, "arguments": arguments if arguments is not None else {"env": "prod"}}
    obj = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    if rid is not None:
        obj["id"] = rid
    return frame_line(obj)


def initialize(rid=0, capabilities=None) -> bytes:
    caps = ELICIT_CAPS if capabilities is None else capabilities
    return frame_line({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {"capabilities": caps}})


def answer(approval_id, action="accept") -> bytes:
    return frame_line({"jsonrpc": "2.0", "id": approval_id, "result": {"action": action}})


def cancelled(request_id) -> bytes:
    return frame_line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})


def lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines()]


def session(policy=POLICY, options: SessionOptions | None = None, capabilities=None) -> Harness:
    h = Harness(policy, options or SessionOptions(), approval_token=TOKEN)
    effects = h.client(initialize(0, capabilities))
    assert effects.to_server == initialize(0, capabilities)
    return h


def asked(h: Harness, rid=1, arguments=None) -> tuple[str, dict]:
    """Send a deploy call; return wrap's approval id and request (the call is held)."""
    effects = h.client(call(rid, arguments=arguments))
    assert effects.to_server == b"", "a held call is not forwarded"
    (request,) = lines(effects.to_client)
    assert request["method"] == "elicitation/create"
    return request["id"], request


def deny_payload(reply: dict) -> dict:
    result = reply["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Content blocked by policy"
    payload = json.loads(result["content"][1]["text"])
    assert result["structuredContent"] == payload
    return payload


def with_logs() -> SessionOptions:
    return SessionOptions(decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t", receipts=True)


def events(effects) -> list[dict]:
    return [json.loads(r)["data"] for r in effects.records(Sink.DECISION_LOG)]


# -- the request ---------------------------------------------------------------------------------


def test_a_call_that_needs_approval_is_held_and_the_client_asked():
    h = session()
    approval_id, request = asked(h, arguments={"env": "prod", "n": 1})
    assert approval_id == PREFIX + "1"
    params = request["params"]
    assert params["mode"] == "form"
    assert params["requestedSchema"] == {"type": "object", "properties": {}}
    assert '"deploy"' in params["message"] and '{"env":"prod","n":1}' in params["message"]
    assert h.counts["forwarded"] == 1  # the initialize only
    assert h.session.deadline == h.clock.now + 30


def test_calls_without_the_obligation_are_not_asked():
    h = session()
    effects = h.client(call(1, "echo"))
    assert effects.to_server == call(1, "echo") and effects.to_client == b""


# -- the answers ---------------------------------------------------------------------------------


def test_accept_forwards_the_held_line_and_the_answer_is_consumed():
    h = session(options=with_logs())
    approval_id, _ = asked(h)
    effects = h.client(answer(approval_id))
    assert effects.to_server == call(1)  # the held line byte for byte; the answer never
    assert effects.to_client == b""
    (event,) = events(effects)
    assert event["approval_state"] == "approved" and event["decision"] == "allow"
    receipts = [json.loads(r) for r in effects.records(Sink.RECEIPTS)]
    assert [(r["kind"], r["disposition"]) for r in receipts] == [("response", "consumed"), ("request", "forwarded")]
    assert receipts[1]["request_id"] == 1 and receipts[1]["decision_event_id"]
    # the server's answer to the forwarded call reaches the client
    relayed, warnings = h.server_line(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')
    assert relayed and warnings == []
    assert h.session.deadline is None


@pytest.mark.parametrize(
    "reply, which, reason",
    [
        ({"result": {"action": "decline"}}, "declined", "The person declined the tool call"),
        ({"result": {"action": "cancel"}}, "cancelled", "The person dismissed the approval request without answering"),
        (
            {"error": {"code": -32601, "message": "no"}},
            "failed",
            "The client answered the approval request with an error",
        ),
        ({"result": {"action": "maybe"}}, "failed", "The client's answer to the approval request could not be read"),
        ({"result": []}, "failed", "The client's answer to the approval request could not be read"),
        ({"result": {}}, "failed", "The client's answer to the approval request could not be read"),
    ],
)
def test_anything_but_accept_denies_the_call(reply, which, reason):
    h = session(options=with_logs())
    approval_id, _ = asked(h, rid=7)
    effects = h.client(frame_line({"jsonrpc": "2.0", "id": approval_id, **reply}))
    assert effects.to_server == b""
    (deny,) = lines(effects.to_client)
    assert deny["id"] == 7
    assert deny_payload(deny) == {
        "status": "deny",
        "error_code": "E_APPROVAL_DENIED",
        "tool": "deploy",
        "approval": which,
        "reason": reason,
    }
    (event,) = events(effects)
    assert (event["decision"], event["reason_code"], event["approval_state"]) == ("deny", "P_APPROVAL_DENIED", which)
    assert event["matched_rule"] == "tools.approval_required"
    (audit,) = [json.loads(r) for r in effects.records(Sink.AUDIT_LOG)]
    assert audit["decision"] == "deny" and audit["agentic"]["approval"] == which
    assert h.counts["blocked"] == 1
    # the server never saw the call: an answer for id 7 is forged and dropped
    relayed, warnings = h.server_line(b'{"jsonrpc":"2.0","id":7,"result":{}}')
    assert not relayed and warnings


def test_a_late_answer_is_consumed_and_ignored():
    h = session()
    approval_id, _ = asked(h)
    h.client(answer(approval_id, "decline"))
    for late in (answer(approval_id), answer(approval_id, "decline")):
        effects = h.client(late)
        assert effects == [] and h.counts["forwarded"] == 1


def test_accept_runs_the_session_checks_again():
    """Other calls may have entered while the person thought: the pipeline's guards decide again."""

    class Gate:
        deny_now = False

        def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
            if self.deny_now:
                return decision.denied("E_RATE_LIMIT", "too many", {"status": "deny", "error_code": "E_RATE_LIMIT"})
            return None

        def enter(self, call: Call, now: float) -> None:
            pass

    gate = Gate()
    h = Harness(POLICY, SessionOptions(decision_sinks=(Sink.DECISION_LOG,), event_source="assay://t"))
    h.session = WrapSession(POLICY, h.session.options, clock=h.clock, approval_token=TOKEN)
    add_guard(h.session, gate)
    h.client(initialize())
    approval_id, _ = asked(h)
    gate.deny_now = True
    effects = h.client(answer(approval_id))
    assert effects.to_server == b""
    (deny,) = lines(effects.to_client)
    assert deny_payload(deny)["error_code"] == "E_RATE_LIMIT"
    (event,) = events(effects)
    assert event["approval_state"] == "approved" and event["reason_code"] == "P_RATE_LIMIT"


def test_the_entry_hook_runs_only_when_an_approved_call_goes():
    spy = EntrySpy()
    h = Harness(POLICY)
    h.session = WrapSession(POLICY, SessionOptions(), clock=h.clock, approval_token=TOKEN)
    add_guard(h.session, spy)
    entered = spy.entered
    h.client(initialize())
    first, _ = asked(h, 1)
    second, _ = asked(h, 2)
    assert entered == []
    h.client(answer(first, "decline"))
    h.client(answer(second))
    assert [name for name, _ in entered] == ["deploy"]


# -- time ------------------------------------------------------------------------------------------


def test_a_timeout_denies_the_call_and_closes_the_prompt():
    h = session(options=with_logs())
    approval_id, _ = asked(h, rid=3)
    start = h.clock.now
    assert h.session.deadline == start + 30
    h.clock.advance(29.9)
    assert h.session.timer() == []  # early: nothing
    h.clock.advance(0.1)
    effects = h._run(h.session.timer())
    notice, deny = lines(effects.to_client)
    assert notice == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": approval_id, "reason": "assay: the approval timed out"},
    }
    assert deny["id"] == 3
    assert deny_payload(deny)["approval"] == "timed_out"
    assert deny_payload(deny)["reason"] == "No answer to the approval request within 30s"
    assert events(effects)[0]["approval_state"] == "timed_out"
    assert h.session.deadline is None and h.session.phase is Phase.RUNNING
    late = h.client(answer(approval_id))  # the late accept is consumed, not forwarded
    assert late.to_server == b"" and late.to_client == b"" and late.kinds() == ["Record"]


def test_the_deadline_is_the_earliest_held_call():
    h = session()
    first, _ = asked(h, 1)
    h.clock.advance(10)
    second, _ = asked(h, 2)
    assert h.session.deadline == h.clock.now + 20
    h.clock.advance(20)
    effects = h._run(h.session.timer())
    assert [r["id"] for r in lines(effects.to_client) if "result" in r] == [1]
    assert h.session.deadline == h.clock.now + 10
    h.client(answer(second))
    assert h.session.deadline is None


def test_the_default_timeout_is_two_minutes():
    policy = load_policy(b'version: "2.0"\ntools:\n  approval_required: ["deploy"]\n')
    h = session(policy)
    asked(h)
    assert h.session.deadline == h.clock.now + 120


def test_a_zero_timeout_denies_without_asking():
    h = session(load_policy(POLICY_TEXT.replace("30s", "0").encode()))
    outcome = h.handle(call(1))
    (reply,) = lines(outcome.reply)
    assert deny_payload(reply)["approval"] == "timed_out"
    assert h.session.deadline is None


def test_the_lifecycle_deadlines_are_unchanged_after_client_eof():
    h = session()
    asked(h)
    effects = h.client_closed()
    assert h.session.phase is Phase.DRAINING
    assert CloseServerInput() in effects
    assert h.session.deadline == h.clock.now + h.session.options.shutdown_grace


# -- cancel and end ------------------------------------------------------------------------------


def test_the_client_cancelling_a_held_call_drops_it_without_a_reply():
    h = session(options=with_logs())
    approval_id, _ = asked(h, rid=5)
    effects = h.client(cancelled(5))
    assert effects.to_server == b""  # consumed: the server never saw call 5
    (notice,) = lines(effects.to_client)
    assert notice["method"] == "notifications/cancelled" and notice["params"]["requestId"] == approval_id
    (event,) = events(effects)
    assert event["approval_state"] == "cancelled" and event["decision"] == "deny"
    receipts = [json.loads(r) for r in effects.records(Sink.RECEIPTS)]
    assert [(r["kind"], r["disposition"]) for r in receipts] == [("request", "blocked"), ("notification", "consumed")]
    assert h.counts["dropped"] == 1 and h.counts["blocked"] == 0
    assert h.client(answer(approval_id)).to_server == b""  # the late answer: consumed
    assert h.session.deadline is None


def test_a_cancel_for_a_forwarded_call_still_goes_to_the_server():
    h = session()
    h.client(call(5, "echo"))
    effects = h.client(cancelled(5))
    assert effects.to_server == cancelled(5)
    assert h.client(cancelled(99)).to_server == cancelled(99)  # unknown ids: as before


def test_client_eof_denies_every_held_call():
    h = session(options=with_logs())
    first, _ = asked(h, 1)
    second, _ = asked(h, 2)
    effects = h.client_closed()
    out = lines(effects.to_client)
    notices = [m for m in out if m.get("method") == "notifications/cancelled"]
    denies = [m for m in out if "result" in m]
    assert [n["params"]["requestId"] for n in notices] == [first, second]
    assert [d["id"] for d in denies] == [1, 2]
    assert {deny_payload(d)["approval"] for d in denies} == {"cancelled"}
    assert deny_payload(denies[0])["reason"] == "The session ended before the person answered"
    assert [e["approval_state"] for e in events(effects)] == ["cancelled", "cancelled"]
    assert effects.to_server == b""
    assert effects.kinds().index("CloseServerInput") > effects.kinds().index("ToClient")


def test_the_child_exiting_denies_held_calls():
    h = session()
    asked(h, 4)
    effects = h._run(h.session.child_exited(0))
    denies = [m for m in lines(effects.to_client) if "result" in m]
    assert [(d["id"], deny_payload(d)["approval"]) for d in denies] == [(4, "cancelled")]


def test_a_signal_denies_held_calls():
    h = session()
    asked(h, 4)
    effects = h._run(h.session.signal(15))
    denies = [m for m in lines(effects.to_client) if "result" in m]
    assert [d["id"] for d in denies] == [4]
    assert h.session.phase is Phase.SIGNALLED


def test_a_lost_client_still_gets_the_records_of_held_calls():
    h = session(options=with_logs())
    asked(h, 4)
    effects = h._run(h.session.client_lost())
    assert [e["approval_state"] for e in events(effects)] == ["cancelled"]
    assert effects.kinds()[-2:] == ["StopClient", "Finish"]


def test_a_failed_record_says_nothing_more_about_held_calls():
    h = session(options=with_logs())
    asked(h, 4)
    effects = h._run(h.session.output_failed("disk full"))
    assert effects.kinds() == ["StopClient", "Finish"]


def test_a_held_notification_is_dropped_on_decline_and_forwarded_on_accept():
    h = session()
    first, _ = asked(h, None)
    effects = h.client(answer(first, "decline"))
    assert effects.to_client == b"" and effects.to_server == b"" and h.counts["dropped"] == 1
    second, _ = asked(h, None)
    assert h.client(answer(second)).to_server == call(None)


# -- no capability, dry run ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "capabilities",
    [
        {},
        {"elicitation": None},
        {"elicitation": True},
        {"elicitation": []},
        {"elicitation": {"url": {}}},
        {"sampling": {}},
    ],
)
def test_without_elicitation_the_fallback_denies(capabilities):
    h = session(options=with_logs(), capabilities=capabilities)
    outcome = h.handle(call(1))
    assert outcome.disposition == "blocked"
    payload = deny_payload(json.loads(outcome.reply))
    assert payload["approval"] == "unavailable"
    assert "cannot ask a person" in payload["reason"]
    assert events(outcome.effects)[0]["approval_state"] == "unavailable"


def test_without_initialize_the_fallback_denies():
    h = Harness(POLICY, approval_token=TOKEN)
    assert deny_payload(json.loads(h.handle(call(1)).reply))["approval"] == "unavailable"


def test_the_fallback_allow_forwards_and_says_not_asked():
    h = session(FALLBACK_ALLOW, options=with_logs(), capabilities={})
    outcome = h.handle(call(1))
    assert outcome.disposition == "forwarded"
    assert events(outcome.effects)[0]["approval_state"] == "not_asked"


def test_a_later_initialize_replaces_the_capability():
    h = session()
    h.client(initialize(1, {}))
    assert h.handle(call(2)).disposition == "blocked"
    h.client(initialize(3, {"elicitation": {"form": {}}}))
    asked(h, 4)


def test_a_modern_request_gets_the_fallback():
    h = session()
    params = {"name": "deploy", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    outcome = h.handle(frame_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
    reply = json.loads(outcome.reply)
    assert deny_payload(reply)["approval"] == "unavailable" and reply["result"]["resultType"] == "complete"


def test_dry_run_never_asks():
    h = session(options=SessionOptions(dry_run=True, decision_sinks=(Sink.DECISION_LOG,), event_source="assay://t"))
    outcome = h.handle(call(1))
    assert outcome.disposition == "forwarded" and outcome.reply is None
    assert events(outcome.effects)[0]["approval_state"] == "required"
    assert h.session.deadline is None


def test_a_policy_without_approvals_treats_elicitation_answers_as_before():
    h = session(load_policy(b'version: "2.0"\ntools:\n  allow: ["deploy"]\n'))
    line = answer(PREFIX + "1")
    assert h.client(line).to_server == line


# -- other traffic ---------------------------------------------------------------------------------


def test_other_traffic_flows_while_an_approval_is_pending():
    h = session()
    approval_id, _ = asked(h, 1)
    assert h.handle(call(2, "echo")).disposition == "forwarded"
    assert h.server_line(b'{"jsonrpc":"2.0","id":2,"result":{"content":[]}}')[0]
    # a server request and the client's answer to it still pass
    assert h.server_line(b'{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}')[0]
    reply = frame_line({"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}})
    assert h.client(reply).to_server == reply
    # even one that reuses wrap's prefix with another token, or a number
    for rid in ("assay-approval-ffffffffffffffffffffffffffffffff-1", PREFIX + "2", PREFIX + "01", 1):
        other = frame_line({"jsonrpc": "2.0", "id": rid, "result": {}})
        assert h.client(other).to_server == other, rid
    assert h.client(answer(approval_id)).to_server == call(1)


def test_an_accepted_call_goes_where_the_answer_was_in_a_read():
    h = session()
    approval_id, _ = asked(h, 1)
    region = call(2, "echo") + answer(approval_id) + call(3, "echo")
    effects = h.client(region)
    assert effects.to_server == call(2, "echo") + call(1) + call(3, "echo")
    assert effects.kinds().count("ToServer") == 1


def test_an_accepted_call_in_a_partial_read_keeps_its_place():
    h = session()
    approval_id, _ = asked(h, 1)
    data = answer(approval_id) + call(3, "echo")
    first, rest = h.client(data[:5]), h.client(data[5:])
    assert first == [] and rest.to_server == call(1) + call(3, "echo")


def test_the_server_cannot_answer_for_the_client():
    h = session()
    approval_id, _ = asked(h, 1)
    relayed, warnings = h.server_line(answer(approval_id).rstrip(b"\n"))
    assert not relayed and warnings  # a response to nothing the client sent: dropped
    assert h.session.deadline is not None  # still held


def test_at_most_64_approvals_wait_at_once():
    h = session()
    ids = [asked(h, i)[0] for i in range(1, 65)]
    assert len(set(ids)) == 64
    outcome = h.handle(call(65))
    payload = deny_payload(json.loads(outcome.reply))
    assert payload["approval"] == "failed" and "at most 64" in payload["reason"]
    h.client(answer(ids[0], "decline"))
    asked(h, 66)  # room again


def test_held_calls_are_bounded_by_bytes_too():
    """A client cannot make wrap keep more than MAX_HELD_BYTES of call lines waiting: the call
    that would pass it is denied at once, and room comes back when a held call is settled."""
    h = session()
    big = "x" * (approvals.MAX_HELD_BYTES // 3)
    first = asked(h, 1, arguments={"blob": big})[0]
    asked(h, 2, arguments={"blob": big})
    outcome = h.handle(call(3, arguments={"blob": big}))
    payload = deny_payload(json.loads(outcome.reply))
    assert payload["approval"] == "failed" and "MiB" in payload["reason"]
    asked(h, 4, arguments={"blob": "small"})  # a small call still fits
    h.client(answer(first, "decline"))
    asked(h, 5, arguments={"blob": big})  # room again
    table = h.session._approvals
    assert table is not None and len(table) == 3
    assert table.held_bytes == sum(len(c.raw) for c in table.take_all()) and table.held_bytes == 0


# -- ids -------------------------------------------------------------------------------------------


def test_ids_are_never_numeric_looking_and_the_token_is_random_by_default():
    a, b = approvals.Approvals(), approvals.Approvals()
    assert a.prefix != b.prefix
    assert re.fullmatch(r"assay-approval-[0-9a-f]{32}-", a.prefix)
    with pytest.raises(ValueError):
        approvals.Approvals(token="12")
    ids = [a.next_id() for _ in range(3)]
    assert ids == [a.prefix + "1", a.prefix + "2", a.prefix + "3"]
    for rid in ids:
        with pytest.raises(ValueError):
            int(rid)
        with pytest.raises(ValueError):
            float(rid)


def test_a_huge_id_with_wrap_s_prefix_is_not_read_as_a_number():
    h = session()
    asked(h, 1)
    line = answer(PREFIX + "9" * 5000)  # int() refuses more than 4300 digits
    assert h.client(line).to_server == line
    table = approvals.Approvals(token=TOKEN)
    for _ in range(12):
        table.next_id()
    assert [table.owns(PREFIX + n) for n in ("1", "9", "10", "12", "13", "20", "100", "012")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
        False,
    ]


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.integers(-5, 5),
            st.text(max_size=6),
            st.sampled_from([PREFIX + "0", PREFIX + "1", PREFIX + "2", PREFIX + "1 ", PREFIX + "+1", PREFIX + "١"]),
        ),
        max_size=6,
    )
)
def test_only_the_ids_wrap_issued_are_consumed(client_ids):
    """Client responses whose ids wrap did not issue are forwarded, whatever they look like,
    even the issued id's neighbours; the issued one is consumed."""
    h = session()
    approval_id, _ = asked(h, "c-1")
    assert approval_id == PREFIX + "1"
    for rid in client_ids:
        line = frame_line({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept"}})
        effects = h.client(line)
        if rid == approval_id:
            assert effects.to_server == call("c-1")  # accepted
            break
        assert effects.to_server == line


# -- the text --------------------------------------------------------------------------------------


def test_the_prompt_escapes_controls_and_is_bounded():
    text = approvals.approval_text("de\u202eploy\n", {"cmd": "a\u2028b\x1b[2J\u0085", "big": "x" * 10000})
    assert "\u202e" not in text and "\u2028" not in text and "\x1b" not in text and "\x85" not in text
    assert "\\u202e" in text and "\\u2028" in text and "\\u001b" in text
    assert len(text) < approvals.MAX_ARGUMENTS_TEXT + approvals.MAX_NAME_TEXT + 300
    assert "more characters not shown" in text
    assert text.count("\n") == 2  # the three lines of the prompt, no more
    assert "Arguments: none" in approvals.approval_text("t", None)


@given(
    st.text(),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    ),
)
def test_the_request_is_one_json_line_for_any_call(name, arguments):
    line = approvals.elicitation_request(PREFIX + "1", name, arguments)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = json.loads(line)["params"]["message"]
    assert message.count("\n") == 2
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", message)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"capabilities": {"elicitation": {}}}, True),
        ({"capabilities": {"elicitation": {"form": {}}}}, True),
        ({"capabilities": {"elicitation": {"form": {}, "url": {}}}}, True),
        ({"capabilities": {"elicitation": {"url": {}}}}, False),
        ({"capabilities": {"elicitation": "yes"}}, False),
        ({"capabilities": []}, False),
        ({}, False),
        (None, False),
    ],
)
def test_can_elicit(params, expected):
    assert approvals.can_elicit(params) is expected


# -- the policy keys -------------------------------------------------------------------------------


def test_policy_keys_load_and_leave_other_digests_alone():
    base = 'version: "2.0"\ntools:\n  approval_required: ["deploy"]\n'
    plain = load_policy(base.encode())
    assert plain.tools.approval_fallback is None and plain.tools.approval_timeout is None
    assert "approval_fallback" not in plain.to_dict()["tools"]
    assert plain.digest == load_policy((base + "  approval_fallback: null\n").encode()).digest
    full = load_policy((base + "  approval_fallback: allow\n  approval_timeout: 2m\n").encode())
    assert (full.tools.approval_fallback, full.tools.approval_timeout) == ("allow", 120.0)
    assert full.digest != plain.digest
    assert full.warnings == ()


def test_the_digest_of_a_policy_without_the_keys_is_unchanged():
    """Pinned: the digest this policy had before the approval keys existed."""
    policy = load_policy(b'version: "2.0"\ntools:\n  allow: ["a"]\n  approval_required: ["a"]\n')
    assert policy.digest == "sha256:e437bbcbd7549ecdba038493128160619d90b8ed4510892723b184f66d1886ef"


@pytest.mark.parametrize(
    "line, kind, text",
    [
        ("approval_fallback: ask", "structure", "tools.approval_fallback"),
        ("approval_fallback: 1", "structure", "tools.approval_fallback"),
        ("approval_timeout: 1d", "validation", "tools.approval_timeout"),
        ("approval_timeout: -5", "validation", "tools.approval_timeout"),
        ("approval_timeout: true", "validation", "tools.approval_timeout"),
    ],
)
def test_bad_values_are_one_clear_error(line, kind, text):
    with pytest.raises(PolicyError) as info:
        load_policy(f'version: "2.0"\ntools:\n  approval_required: [x]\n  {line}\n'.encode())
    assert info.value.kind == kind
    assert text in str(info.value) and "\n" not in str(info.value)


def test_the_docs_example_asks_for_writes_and_not_for_reads():
    policy = load_policy(policy_example("approvals").encode())
    h = session(policy)
    assert (
        h.handle(
            frame_line(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "read_file", "arguments": {"path": "/workspace/a"}},
                }
            )
        ).disposition
        == "forwarded"
    )
    effects = h.client(call(2, "write_file", {"path": "/workspace/a", "content": "x"}))
    assert effects.to_server == b"" and lines(effects.to_client)[0]["method"] == "elicitation/create"
    assert h.session.deadline == h.clock.now + 120
    assert h.handle(call(3, "exec", {"command": "ls"})).disposition == "blocked"
    no_caps = session(policy, capabilities={})
    assert deny_payload(json.loads(no_caps.handle(call(1, "write_file", {})).reply))["approval"] == "unavailable"


# -- any interleaving ------------------------------------------------------------------------------

ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("deploy")),
        st.tuples(st.just("echo")),
        st.tuples(st.sampled_from(["accept", "decline", "cancel", "error", "late"]), st.integers(0, 9)),
        st.tuples(st.just("client_cancel"), st.integers(0, 9)),
        st.tuples(st.just("wait"), st.sampled_from([1.0, 10.0, 29.0, 31.0])),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_every_call_has_exactly_one_fate_in_any_interleaving(actions):
    """Whatever the order of calls, answers, cancels and time: each call is forwarded once, or
    answered with one deny, or (cancelled by the client) neither; wrap's ids never reach the
    server; the deadline is the earliest pending one; one decision event per call."""
    h = session(options=SessionOptions(decision_sinks=(Sink.DECISION_LOG,), event_source="assay://t"))
    to_server, to_client, records = b"", [], []
    asked_at: dict[str, float] = {}  # approval id -> when asked, while pending (the model)
    id_of: dict[str, int] = {}
    cancelled_by_client: set[int] = set()
    next_rid = 1

    def take(effects):
        nonlocal to_server
        to_server += effects.to_server
        to_client.extend(lines(effects.to_client))
        records.extend(effects.records(Sink.DECISION_LOG))
        for message in lines(effects.to_client):
            if message.get("method") == "elicitation/create":
                asked_at[message["id"]] = h.clock.now
            if message.get("method") == "notifications/cancelled":
                asked_at.pop(message["params"]["requestId"], None)
            if "result" in message and message["id"] in id_of.values():
                asked_at.pop(next(a for a, r in id_of.items() if r == message["id"]), None)

    for action in actions:
        kind = action[0]
        pending = sorted(asked_at)
        if kind in ("deploy", "echo"):
            before = set(asked_at)
            take(h.client(call(next_rid, kind)))
            for new in set(asked_at) - before:
                id_of[new] = next_rid
            next_rid += 1
        elif kind == "wait":
            h.clock.advance(action[1])
            if h.session.deadline is not None and h.clock.now >= h.session.deadline:
                take(h._run(h.session.timer()))
        elif kind == "client_cancel":
            if pending:
                rid = id_of[pending[action[1] % len(pending)]]
                cancelled_by_client.add(rid)
                take(h.client(cancelled(rid)))
        elif id_of:
            target = (
                sorted(id_of)[action[1] % len(id_of)]
                if kind == "late"
                else (pending[action[1] % len(pending)] if pending else None)
            )
            if target is None:
                continue
            if kind == "error":
                line = frame_line({"jsonrpc": "2.0", "id": target, "error": {"code": -1, "message": "x"}})
            else:
                line = answer(target, "accept" if kind == "late" else kind)
            accepted = kind == "accept" or (kind == "late" and target in asked_at)
            if accepted:
                asked_at.pop(target)
            take(h.client(line))
        expected = min(asked_at.values()) + 30 if asked_at else None
        assert h.session.deadline == expected
    take(h.client_closed())

    forwarded = [json.loads(line) for line in to_server.splitlines()]
    assert all(not str(f.get("id", "")).startswith("assay-approval") for f in forwarded)
    assert all("method" in f for f in forwarded)  # no answer to wrap's requests reached the server
    forwarded_ids = [f["id"] for f in forwarded if f.get("method") == "tools/call"]
    denied_ids = [m["id"] for m in to_client if "result" in m]
    all_ids = list(range(1, next_rid))
    assert len(forwarded_ids) == len(set(forwarded_ids)) and len(denied_ids) == len(set(denied_ids))
    assert not set(forwarded_ids) & set(denied_ids)
    assert set(forwarded_ids) | set(denied_ids) | cancelled_by_client == set(all_ids)
    assert not cancelled_by_client & (set(forwarded_ids) | set(denied_ids))
    requests = [m["id"] for m in to_client if m.get("method") == "elicitation/create"]
    assert len(requests) == len(set(requests))
    assert sorted(json.loads(r)["data"]["request_id"] for r in records) == all_ids


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 400), max_size=8))
def test_how_the_client_stream_is_cut_does_not_change_what_is_forwarded(cuts):
    """The same client bytes, read whole or cut anywhere (the careful path), forward the same
    bytes and send the same lines to the client."""
    stream = (
        call(2, "echo")
        + answer(PREFIX + "1")
        + call(3)
        + call(4, "echo")
        + answer(PREFIX + "2", "decline")
        + cancelled(5)
        + call(6, "echo")
    )

    def run(chunks):
        h = session()
        asked(h, 1)
        server, client = b"", b""
        for chunk in chunks:
            effects = h.client(chunk)
            server += effects.to_server
            client += effects.to_client
        return server, client

    pieces, at = [], 0
    for cut in sorted(set(cuts)):
        if at < cut < len(stream):
            pieces.append(stream[at:cut])
            at = cut
    pieces.append(stream[at:])
    whole = run([stream])
    assert run(pieces) == whole
    assert whole[0] == call(2, "echo") + call(1) + call(4, "echo") + cancelled(5) + call(6, "echo")


def test_the_request_shown_in_the_docs_is_what_wrap_sends():
    """docs/wrap.md, "Approvals": the example request, byte for byte but for the id."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "wrap.md").read_text()
    shown = next(line for line in page.splitlines() if '"method":"elicitation/create"' in line)
    example = json.loads(shown)
    sent = approvals.elicitation_request(example["id"], "write_file", {"path": "/workspace/x", "content": "y"})
    assert sent == shown.encode() + b"\n"
