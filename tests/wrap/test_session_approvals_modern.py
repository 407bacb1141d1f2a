"""Approvals for 2026-07-28-era requests, in memory (docs/wrap.md, "Approvals").

That era has no ``initialize`` and no requests of wrap's own: wrap answers a call that needs
approval with an ``input_required`` result carrying one ``elicitation/create`` input request
and a ``requestState``; the client retries the same call with the person's answer in
``inputResponses``. The state approves only a retry of that exact call, once.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.session import approvals
from assay.session.effects import Sink
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

KEY = b"k" * 32
MODERN = "2026-07-28"
POLICY_TEXT = (
    'version: "2.0"\ntools:\n  allow: ["deploy", "echo"]\n  approval_required: ["deploy"]\n'
    "  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)
POLICY = load_policy(POLICY_TEXT.encode())
FALLBACK_ALLOW = load_policy(POLICY_TEXT.replace("approval_timeout: 30s", "approval_fallback: allow").encode())
RATED = load_policy(
    (POLICY_TEXT + "limits:\n  tools:\n    - {id: one-deploy, tools: [deploy], max_calls: 1, per: 1h}\n").encode()
)
FORM = {"elicitation": {"form": {}}}
STATE_RE = r"assay-approval\.[0-9a-f]{32}\.[0-9a-f]{64}"


def meta(capabilities=FORM) -> dict:
    m = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    if capabilities is not None:
        m["io.modelcontextprotocol/clientCapabilities"] = capabilities
    return m


def call(rid, name="deploy", arguments=None, capabilities=FORM, **extra) -> dict:
    params = {
        "name": name,
        "arguments": {"env": "prod"} if arguments is None else arguments,
        "_meta": meta(capabilities),
    }
    params.update(extra)
    obj = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    if rid is not None:
        obj["id"] = rid
    return obj


def retry(first: dict, rid, state, action="accept", **changes) -> dict:
    """The client's retry of ``first``: a new id, the answer and the state echoed."""
    frame = copy.deepcopy(first)
    frame["id"] = rid
    frame["params"].update(changes)
    frame["params"]["inputResponses"] = {approvals.INPUT_KEY: {"action": action}}
    frame["params"]["requestState"] = state
    return frame


def line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def session(policy=POLICY, options: SessionOptions | None = None) -> Harness:
    return Harness(policy, options or SessionOptions(), approval_key=KEY)


def with_logs() -> SessionOptions:
    return SessionOptions(decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t", receipts=True)


def events(effects) -> list[dict]:
    """The decision events (the first call also brings its client's: docs/wrap-records.md, "The client")."""
    return [
        e["data"] for e in map(json.loads, effects.records(Sink.DECISION_LOG)) if e["type"] == "assay.tool.decision"
    ]


def receipts(effects) -> list[dict]:
    return [json.loads(r) for r in effects.records(Sink.RECEIPTS)]


def input_required(h: Harness, first: dict) -> str:
    """Send ``first``; assert wrap answered it with input_required; return its requestState."""
    effects = h.client(line(first))
    assert effects.to_server == b"", "the first round is not forwarded"
    (reply,) = [json.loads(x) for x in effects.to_client.splitlines()]
    assert reply["id"] == first["id"]
    result = reply["result"]
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == [approvals.INPUT_KEY]
    return result["requestState"]


def deny_payload(outcome) -> dict:
    reply = json.loads(outcome.reply)
    result = reply["result"]
    assert result["isError"] is True and result["resultType"] == "complete"
    return json.loads(result["content"][1]["text"])


# -- the first round -----------------------------------------------------------------------------


def test_the_first_round_is_answered_with_input_required_and_not_recorded():
    h = session(options=with_logs())
    first = call(1, arguments={"env": "prod", "n": 1})
    effects = h.client(line(first))
    assert effects.to_server == b""
    reply = json.loads(effects.to_client)
    result = reply["result"]
    assert set(result) == {"resultType", "inputRequests", "requestState"}
    request = result["inputRequests"][approvals.INPUT_KEY]
    assert request == {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": approvals.approval_text("deploy", {"env": "prod", "n": 1}),
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }
    assert "id" not in request and "jsonrpc" not in request
    assert re.fullmatch(STATE_RE, result["requestState"])
    assert events(effects) == []  # no fate yet: the decision event comes with the retry
    assert [(r["kind"], r["disposition"]) for r in receipts(effects)] == [("request", "consumed")]
    assert h.counts == {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}
    assert h.session.deadline is None  # nothing is held: no timer


def test_calls_without_the_obligation_are_forwarded_as_they_are():
    h = session()
    assert h.handle(call(1, "echo")).disposition == "forwarded"


# -- the retry -----------------------------------------------------------------------------------


def test_an_accepted_retry_is_forwarded_without_wraps_members_and_recorded_once():
    h = session(options=with_logs())
    first = call(1, extra_member={"kept": [1, 2.5, True, None]})
    state = input_required(h, first)
    effects = h.client(line(retry(first, 2, state)))
    expected = copy.deepcopy(first)
    expected["id"] = 2
    assert json.loads(effects.to_server) == expected  # everything else kept, _meta included
    assert effects.to_client == b""
    (event,) = events(effects)
    assert event["approval_state"] == "approved" and event["decision"] == "allow"
    assert [(r["kind"], r["disposition"]) for r in receipts(effects)] == [("request", "forwarded")]
    relayed, warnings = h.server_line(b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"resultType":"complete"}}')
    assert relayed and warnings == []  # in the pending table


def test_the_first_rounds_own_input_responses_and_state_are_restored():
    """A call that answers the server's own input_required round keeps the server's members."""
    h = session()
    server_members = {
        "inputResponses": {"server-q": {"action": "accept", "content": {"x": 1}}},
        "requestState": "srv-opaque",
    }
    first = call(1, **server_members)
    state = input_required(h, first)
    again = retry(first, 2, state)
    forwarded = json.loads(h.client(line(again)).to_server)
    assert forwarded["params"]["inputResponses"] == server_members["inputResponses"]
    assert forwarded["params"]["requestState"] == "srv-opaque"


@pytest.mark.parametrize(
    ("action", "which"), [("decline", "declined"), ("cancel", "cancelled"), ("maybe", "failed"), (None, "failed")]
)
def test_other_answers_deny(action, which):
    h = session(options=with_logs())
    first = call(1)
    state = input_required(h, first)
    outcome = h.handle(line(retry(first, 2, state, action=action)))
    assert outcome.forward is None
    payload = deny_payload(outcome)
    assert payload["error_code"] == "E_APPROVAL_DENIED" and payload["approval"] == which
    (event,) = events(outcome.effects)
    assert event["approval_state"] == which and event["decision"] == "deny"


def test_a_retry_without_wraps_answer_is_denied():
    h = session()
    first = call(1)
    state = input_required(h, first)
    frame = retry(first, 2, state)
    del frame["params"]["inputResponses"]
    payload = deny_payload(h.handle(line(frame)))
    assert payload["approval"] == "failed" and payload["reason"] == approvals.REASONS["no_answer"]


def test_a_state_is_used_once():
    h = session()
    first = call(1)
    state = input_required(h, first)
    assert h.handle(line(retry(first, 2, state))).forward is not None
    outcome = h.handle(line(retry(first, 3, state)))
    assert outcome.forward is None
    assert deny_payload(outcome)["reason"] == approvals.REASONS["state"]


def test_a_declined_state_cannot_be_accepted_afterwards():
    h = session()
    first = call(1)
    state = input_required(h, first)
    h.handle(line(retry(first, 2, state, action="decline")))
    assert h.handle(line(retry(first, 3, state))).forward is None


def test_another_sessions_state_is_refused():
    other = session()
    first = call(1)
    state = input_required(other, first)
    h = Harness(POLICY, SessionOptions(), approval_key=b"x" * 32)
    assert deny_payload(h.handle(line(retry(first, 2, state))))["approval"] == "failed"


def test_a_retry_after_the_timeout_is_denied_timed_out():
    h = session()
    first = call(1)
    state = input_required(h, first)
    h.clock.advance(30)
    payload = deny_payload(h.handle(line(retry(first, 2, state))))
    assert payload["approval"] == "timed_out" and payload["reason"] == approvals.timeout_reason(30)


def test_the_session_checks_run_again_on_the_retry():
    """Two calls asked at once; the first approved uses the tool's one call per hour, so the
    second, approved later, is denied by the rate limit at its retry."""
    h = session(RATED)
    a, b = call(1, arguments={"n": 1}), call(2, arguments={"n": 2})
    state_a, state_b = input_required(h, a), input_required(h, b)
    assert h.handle(line(retry(a, 3, state_a))).forward is not None
    outcome = h.handle(line(retry(b, 4, state_b)))
    assert outcome.forward is None
    assert deny_payload(outcome)["error_code"] != "E_APPROVAL_DENIED"


def test_a_call_in_two_rounds_counts_once_against_the_tool_call_limit():
    h = session(load_policy((POLICY_TEXT + "limits: {max_tool_calls_total: 2}\n").encode()))
    first = call(1)
    state = input_required(h, first)
    assert h.handle(line(retry(first, 2, state))).forward is not None
    assert h.handle(line(call(3, "echo"))).disposition == "forwarded"
    assert h.handle(line(call(4, "echo"))).disposition == "blocked"  # the third call


def test_open_approvals_are_bounded_oldest_first():
    h = session()
    first = call(1, arguments={"n": 0})
    oldest = input_required(h, first)
    for n in range(1, approvals.MAX_OFFERS + 1):
        input_required(h, call(n + 1, arguments={"n": n}))
    assert len(h.session._offers) == approvals.MAX_OFFERS
    assert deny_payload(h.handle(line(retry(first, 999, oldest))))["approval"] == "failed"


def test_the_bound_holds_by_bytes_too():
    offers = approvals.Offers(KEY, byte_limit=100)
    assert offers.issue("t", {}, {"requestState": "x" * 200}, 0.0) is None
    one = offers.issue("t", {}, {"requestState": "x" * 60}, 0.0)
    two = offers.issue("t", {"b": 1}, {"requestState": "y" * 60}, 0.0)
    assert len(offers) == 1 and offers.held_bytes <= 100
    assert offers.redeem(one, "t", {}) is None and offers.redeem(two, "t", {"b": 1}) is not None


# -- what cannot be asked ------------------------------------------------------------------------


@pytest.mark.parametrize("capabilities", [None, {}, {"elicitation": {"url": {}}}, {"sampling": {}}])
def test_a_client_that_cannot_elicit_gets_the_fallback(capabilities):
    h = session()
    payload = deny_payload(h.handle(line(call(1, capabilities=capabilities))))
    assert payload["approval"] == "unavailable"
    h = session(FALLBACK_ALLOW)
    assert h.handle(line(call(1, capabilities=capabilities))).disposition == "forwarded"


def test_an_empty_elicitation_object_is_form_mode():
    h = session()
    input_required(h, call(1, capabilities={"elicitation": {}}))


def test_a_legacy_initialize_does_not_stand_in_for_the_requests_own_capabilities():
    h = session()
    h.client(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": FORM}}))
    assert deny_payload(h.handle(line(call(1, capabilities=None))))["approval"] == "unavailable"


def test_a_modern_notification_gets_the_fallback():
    h = session()
    outcome = h.handle(line(call(None)))
    assert outcome.forward is None and outcome.reply is None and h.counts["dropped"] == 1


def test_dry_run_never_asks():
    h = session(options=SessionOptions(dry_run=True))
    assert h.handle(line(call(1))).disposition == "forwarded"


def test_approval_timeout_zero_denies_without_asking():
    h = session(load_policy(POLICY_TEXT.replace("30s", "0s").encode()))
    assert deny_payload(h.handle(line(call(1))))["approval"] == "timed_out"


def test_a_line_that_cannot_be_rewritten_faithfully_is_not_forwarded():
    assert approvals.rewrite_retry({"id": 1, "params": {"x": {1, 2}}}, {}) is None  # not JSON
    assert approvals.rewrite_retry({"id": 1, "params": "not an object"}, {}) is None
    assert (
        approvals.rewrite_retry({"id": 1, "params": {"a": 1, "requestState": "s"}}, {}) == b'{"id":1,"params":{"a":1}}'
    )


# -- forged, replayed and mismatched states (hypothesis) ------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(max_size=4), json_values, max_size=4)


def _typed(value):
    """A rendering that tells 1, 1.0 and true apart, with object members in a fixed order."""
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, _typed(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("a", tuple(_typed(v) for v in value))
    return (type(value).__name__, repr(value))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(asked=arguments, data=st.data())
def test_a_state_approves_only_the_arguments_it_was_asked_for(asked, data):
    sent = data.draw(st.one_of(st.just(copy.deepcopy(asked)), arguments), label="sent")
    h = session()
    first = call(1, arguments=asked)
    state = input_required(h, first)
    outcome = h.handle(line(retry(first, 2, state, arguments=sent)))
    if _typed(asked) == _typed(sent):
        assert outcome.forward is not None
        assert json.loads(outcome.forward)["params"]["arguments"] == sent
    elif asked != sent:  # different even with 1, 1.0 and true read alike
        assert outcome.forward is None and deny_payload(outcome)["approval"] == "failed"
    # else equal only up to 1 / 1.0 / true: JCS makes 1 and 1.0 one number (and true another)


@settings(max_examples=30, deadline=None)
@given(args=arguments)
def test_a_state_does_not_approve_another_tool(args):
    h = session(
        load_policy(
            POLICY_TEXT.replace('approval_required: ["deploy"]', 'approval_required: ["deploy", "echo"]').encode()
        )
    )
    first = call(1, arguments=args)
    state = input_required(h, first)
    outcome = h.handle(line(retry(first, 2, state, name="echo")))
    assert outcome.forward is None and deny_payload(outcome)["approval"] == "failed"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_forged_states_are_denied(data):
    h = session()
    first = call(1)
    real = input_required(h, first)
    forged = data.draw(
        st.one_of(
            st.text(max_size=120).map(lambda t: approvals.STATE_PREFIX + t),
            st.integers(0, len(real) - 1).flatmap(
                lambda i: st.sampled_from("0123456789abcdef.").map(lambda c: real[:i] + c + real[i + 1 :])
            ),
            st.just(real + "0"),
            st.just(approvals.STATE_PREFIX + real[len(approvals.STATE_PREFIX) :].upper()),
        )
    )
    outcome = h.handle(line(retry(first, 2, forged)))
    if forged == real:  # a substitution that changed nothing
        assert outcome.forward is not None
    else:
        assert outcome.forward is None
        if forged.startswith(approvals.STATE_PREFIX):
            assert deny_payload(outcome)["approval"] == "failed"
        else:  # not wrap's state at all (its prefix altered): a fresh call, asked again
            assert json.loads(outcome.reply)["result"]["resultType"] == "input_required"
        # the real state still works afterwards: a forged one does not use it up
        assert h.handle(line(retry(first, 3, real))).forward is not None


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 5))
def test_replays_are_denied(n):
    h = session()
    first = call(1)
    state = input_required(h, first)
    forwarded = [h.handle(line(retry(first, 10 + i, state))).forward is not None for i in range(n)]
    assert forwarded == [True] + [False] * (n - 1)
