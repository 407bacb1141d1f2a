"""Approvals asked of an out-of-band approver, in memory (docs/serve.md, "Out-of-band
approvers"): with ``SessionOptions.approver`` a call that needs approval is held as a 2025-era
call is held, in both eras and whatever the client declared, and the session emits
``AskApprover`` instead of asking the client; ``approver_answered`` settles it. Time is a fake
clock."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.storeapi import MemoryStore, SessionKey
from assay.session.effects import AskApprover, Sink, ToServer, WithdrawApproval
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

TOKEN = "0123456789abcdef0123456789abcdef"
PREFIX = f"assay-approval-{TOKEN}-"
MODERN = "2026-07-28"

POLICY_TEXT = (
    'version: "2.0"\ntools:\n  allow: ["deploy", "echo"]\n  approval_required: ["deploy"]\n'
    "  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)
POLICY = load_policy(POLICY_TEXT.encode())
SHARED_POLICY = load_policy(
    (POLICY_TEXT + "limits:\n  max_tool_calls_total: 5\n").encode()  # totals: a shared session decides in the store
)


def line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def call(rid, name="deploy", *, modern=False, arguments=None) -> bytes:
    params: dict = {"name": name, "arguments": {"env": "prod"} if arguments is None else arguments}
    if modern:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN}
    obj = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    if rid is not None:
        obj["id"] = rid
    return line(obj)


def initialize(caps=None) -> bytes:
    return line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": caps or {}}})


def options(**kw) -> SessionOptions:
    base = dict(
        approver="webhook",
        label="ops",
        subject="alice",
        decision_sinks=(Sink.DECISION_LOG,),
        event_source="assay://t",
    )
    base.update(kw)
    return SessionOptions(**base)


def session(policy=POLICY, caps=None, **kw) -> Harness:
    h = Harness(policy, options(**kw), approval_token=TOKEN)
    h.client(initialize(caps))  # the client declares no elicitation: an approver does not need it
    return h


def asks(effects) -> list[AskApprover]:
    return [e for e in effects if isinstance(e, AskApprover)]


def held(h: Harness, rid=1, *, modern=False, arguments=None) -> AskApprover:
    effects = h.client(call(rid, modern=modern, arguments=arguments))
    assert effects.to_server == b"" and effects.to_client == b"", "held: neither forwarded nor answered"
    (ask,) = asks(effects)
    return ask


def events(effects) -> list[dict]:
    return [json.loads(r)["data"] for r in effects.records(Sink.DECISION_LOG)]


def payload(data: bytes) -> dict:
    (reply,) = [json.loads(x) for x in data.splitlines()]
    return json.loads(reply["result"]["content"][1]["text"]) | {"_reply": reply}


@pytest.mark.parametrize("modern", [False, True], ids=["2025", "2026-07-28"])
def test_a_call_that_needs_approval_is_held_and_the_approver_asked(modern):
    h = session()
    ask = held(h, 7, modern=modern, arguments={"env": "prod", "n": 1})
    assert ask == AskApprover(PREFIX + "1", "alice", "ops", "deploy", {"env": "prod", "n": 1}, h.clock.now + 30)
    assert h.session.deadline == h.clock.now + 30
    effects = h._run(h.session.approver_answered(ask.approval_id, "accept"))
    assert effects.to_server == call(7, modern=modern, arguments={"env": "prod", "n": 1})  # byte for byte
    assert effects.to_client == b""
    (event,) = events(effects)
    assert event["approval_state"] == "approved" and event["decision"] == "allow"
    assert h.session.deadline is None


@pytest.mark.parametrize("modern", [False, True], ids=["2025", "2026-07-28"])
@pytest.mark.parametrize(
    ("answer", "state"),
    [("decline", "declined"), ("cancel", "cancelled"), ("failed", "failed"), ("maybe", "failed")],
)
def test_an_answer_other_than_accept_denies(modern, answer, state):
    h = session()
    ask = held(h, 3, modern=modern)
    effects = h._run(h.session.approver_answered(ask.approval_id, answer))
    assert effects.to_server == b""
    got = payload(effects.to_client)
    assert got["error_code"] == "E_APPROVAL_DENIED" and got["approval"] == state
    assert "approver" in got["reason"]
    assert got["_reply"]["id"] == 3
    assert ("resultType" in got["_reply"]["result"]) is modern  # the deny reply of the call's era
    (event,) = events(effects)
    assert event["approval_state"] == state


def test_the_timeout_denies_and_withdraws_the_question():
    h = session()
    ask = held(h)
    h.clock.advance(29.9)
    assert h._run(h.session.timer()) == []
    h.clock.advance(0.1)
    effects = h._run(h.session.timer())
    assert WithdrawApproval(ask.approval_id) in effects
    assert payload(effects.to_client)["approval"] == "timed_out"
    assert b"notifications/cancelled" not in effects.to_client  # the client was never asked
    assert h._run(h.session.approver_answered(ask.approval_id, "accept")) == []  # late: ignored


def test_an_answer_at_the_deadline_before_the_timer_denies_timed_out():
    h = session()
    ask = held(h)
    h.clock.advance(30)
    effects = h._run(h.session.approver_answered(ask.approval_id, "accept"))
    assert effects.to_server == b"" and payload(effects.to_client)["approval"] == "timed_out"


def test_the_config_timeout_replaces_the_policys():
    h = session(approver_timeout=5.0)
    ask = held(h)
    assert ask.deadline == h.clock.now + 5
    h.clock.advance(5)
    assert payload(h._run(h.session.timer()).to_client)["reason"] == "No answer to the approval request within 5s"


def test_a_timeout_of_zero_denies_without_asking():
    h = session(approver_timeout=0.0)
    effects = h.client(call(1))
    assert asks(effects) == [] and payload(effects.to_client)["approval"] == "timed_out"


def test_the_client_cancels_the_held_call():
    h = session()
    ask = held(h, 4)
    cancel = line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}})
    effects = h.client(cancel)
    assert effects == [WithdrawApproval(ask.approval_id), *[e for e in effects if not isinstance(e, WithdrawApproval)]]
    assert effects.to_client == b"" and effects.to_server == b""  # no reply: the client asked for none
    (event,) = events(effects)
    assert event["approval_state"] == "cancelled"
    assert h._run(h.session.approver_answered(ask.approval_id, "accept")) == []


def test_the_end_of_the_client_denies_and_withdraws():
    h = session()
    ask = held(h)
    effects = h.client_closed()
    assert WithdrawApproval(ask.approval_id) in effects
    assert payload(effects.to_client)["approval"] == "cancelled"
    assert h._run(h.session.approver_answered(ask.approval_id, "accept")) == []


def test_an_unknown_or_settled_id_is_ignored_and_a_client_answer_is_not_the_approvers():
    h = session()
    ask = held(h)
    for bogus in ("nope", PREFIX + "2", 1, None, PREFIX + "1x"):
        assert h._run(h.session.approver_answered(bogus, "accept")) == []
    # a client response that names wrap's id is not an answer out of band: relayed as any response
    forged = line({"jsonrpc": "2.0", "id": ask.approval_id, "result": {"action": "accept"}})
    effects = h.client(forged)
    assert not any(isinstance(e, ToServer) and b"deploy" in e.data for e in effects)
    assert h._run(h.session.approver_answered(ask.approval_id, "decline")).to_client  # still held
    assert h._run(h.session.approver_answered(ask.approval_id, "accept")) == []  # the first answer won


def test_other_frames_flow_while_a_call_is_held_and_the_bounds_hold():
    h = session()
    held(h, 1)
    assert h.client(call(2, "echo")).to_server == call(2, "echo")
    table = h._approvals
    table.limit = 2
    held(h, 3)
    effects = h.client(call(4))
    assert asks(effects) == [] and payload(effects.to_client)["approval"] == "failed"


def test_a_client_that_can_elicit_is_still_not_asked():
    h = session(caps={"elicitation": {}})
    effects = h.client(call(1))
    assert effects.to_client == b"" and len(asks(effects)) == 1


def test_without_an_approver_the_client_is_asked_as_before():
    h = Harness(POLICY, SessionOptions(), approval_token=TOKEN)
    h.client(initialize({"elicitation": {}}))
    effects = h.client(call(1))
    assert asks(effects) == [] and b"elicitation/create" in effects.to_client


def test_a_shared_session_judges_the_accepted_call_in_the_store():
    store = MemoryStore()
    key = SessionKey("user:alice", "user", name="alice")
    h = Harness(SHARED_POLICY, options(), approval_token=TOKEN, shared=(store, key), wall_clock=lambda: 5000.0)
    h.client(initialize())
    ask = held(h, 1)
    effects = h._run(h.session.approver_answered(ask.approval_id, "accept"))
    assert effects.to_server == call(1)
    assert events(effects)[0]["approval_state"] == "approved"


# -- the orders of answer, timeout, cancel and end ------------------------------------------------

STEPS = st.lists(
    st.sampled_from(["accept", "decline", "failed", "tick", "expire", "cancel", "end", "other"]),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, modern=st.booleans())
def test_any_order_settles_the_call_exactly_once(steps, modern):
    """Whatever comes in whatever order, the held call gets one fate: one decision event, at most
    one forward or one deny reply (none for the client's cancel), and nothing after it."""
    h = session()
    ask = held(h, 9, modern=modern)
    fates: list[str] = []
    settled_by = None
    forwards = replies = 0
    ended = False
    for step in steps:
        if step in ("accept", "decline", "failed"):
            effects = h._run(h.session.approver_answered(ask.approval_id, step))
        elif step == "tick":
            h.clock.advance(10)
            effects = h._run(h.session.timer())
        elif step == "expire":
            h.clock.advance(30)
            effects = h._run(h.session.timer())
        elif step == "cancel":
            if ended:
                continue
            effects = h.client(
                line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
            )
        elif step == "end":
            effects = h.client_closed()
            ended = True
        else:
            if ended:
                continue
            effects = h.client(call(10, "echo"))
            assert effects.to_server.endswith(call(10, "echo")) or effects.to_server == call(10, "echo")
        fates += [e["approval_state"] for e in events(effects) if e.get("tool") == "deploy"]
        if fates and settled_by is None:
            settled_by = step
        forwards += effects.to_server.count(b'"deploy"')
        replies += sum(1 for x in effects.to_client.splitlines() if b'"id":9' in x)
    assert len(fates) <= 1
    assert forwards + replies <= 1
    if fates:
        assert forwards == (fates[0] == "approved")
        assert replies == (fates[0] != "approved" and settled_by != "cancel")  # a cancelled call gets no reply
    assert (h._approvals is not None and len(h._approvals) == 0) == bool(fates)
