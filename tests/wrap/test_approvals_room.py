"""The approvals room and the call path on their own, in memory (docs/wrap.md, "Approvals",
"Deny replies"): asking, each answer, a cancel, a timeout, the end, the fallback, and the
2026-07-28-era offer and its retry."""

from __future__ import annotations

import json
from typing import Any

from assay.policy import SessionState, load_policy
from assay.policy.decision import ApprovalState, Outcome
from assay.policy.guards import GuardContext, Surface, build_guards
from assay.policy.pipeline import Pipeline
from assay.session import approvals, records
from assay.session.approvals.room import ApprovalRoom
from assay.session.calls import CallPath
from assay.session.jobs import tool_call_of
from assay.session.effects import Effect, Record, Sink, ToClient
from assay.session.ledger import Ledger
from assay.session.server_side import ServerSide
from assay.session.toolbook import ToolBook

TOKEN = "0123456789abcdef0123456789abcdef"
POLICY_TEXT = (
    'version: "2.0"\ntools:\n  allow: ["deploy", "echo"]\n  approval_required: ["deploy"]\n'
    "  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)
POLICY = load_policy(POLICY_TEXT.encode())


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


class KeepingLedger(Ledger):
    """A ledger with a decision log that also keeps the events it wrote (read back as JSON)."""

    def __init__(self, recorder: records.Recorder) -> None:
        super().__init__(recorder, (Sink.DECISION_LOG,), receipts=False)
        self.events: list[dict[str, Any]] = []

    def record(self, decision, frame, params, name, valid, binding, out):  # type: ignore[no-untyped-def]
        mine: list[Effect] = []
        event_id = super().record(decision, frame, params, name, valid, binding, mine)
        self.events.extend(json.loads(e.data) for e in mine if isinstance(e, Record) and e.sink is Sink.DECISION_LOG)
        out.extend(mine)
        return event_id


def rooms(policy=POLICY, *, dry_run: bool = False) -> tuple[CallPath, ApprovalRoom, Clock]:
    clock = Clock()
    state = SessionState()
    recorder = records.Recorder(
        source="assay://test",
        label="srv",
        dry_run=dry_run,
        decision_log=True,
        audit_log=False,
        keep_events=False,
        verbose=False,
    )
    ledger = KeepingLedger(recorder)
    server = ServerSide(ToolBook(policy, state, "srv", verbose=False, hide=False, baseline=None), 1 << 20, None)
    room = ApprovalRoom(policy, dry_run=dry_run, token=TOKEN, key=b"k" * 32)
    guards = build_guards(GuardContext(policy, Surface.WRAP, "srv", state, clock, asker=room if room.asks else None))
    calls = CallPath(
        Pipeline(policy, state, guards.checks, guards.approvals, clock=clock), ledger, server, "srv", dry_run, clock
    )
    room.attach(calls)
    calls.attach(room)
    server.prefix = room.prefix
    return calls, room, clock


def frame(rid: Any = 1, name: str = "deploy", **params: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": name, "arguments": {"env": "prod"}, **params},
    }
    if rid is not None:
        obj["id"] = rid
    return obj


def raw(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def replies_of(out: list[Effect]) -> list[dict[str, Any]]:
    return [json.loads(line) for e in out if isinstance(e, ToClient) for line in e.data.splitlines()]


def ask(calls: CallPath, rid: Any = 1) -> tuple[str, list[Effect]]:
    calls.can_elicit = True
    out: list[Effect] = []
    f = frame(rid)
    assert calls.tool_call(tool_call_of(raw(f), f, "srv"), out) is False
    (request,) = replies_of(out)
    assert request["method"] == "elicitation/create"
    return request["id"], out


def test_a_tool_call_reads_its_frame_once():
    call = tool_call_of(b"x", frame(7, arguments={"a": 1}), "srv")
    assert (call.name, call.arguments, call.valid, call.has_id) == ("deploy", {"a": 1}, True, True)
    odd = tool_call_of(None, {"method": "tools/call", "params": {"name": 3}}, "srv")
    assert (odd.name, odd.arguments, odd.valid, odd.has_id) == ("", None, False, False)


def test_asking_holds_the_call_and_accept_releases_it():
    calls, room, clock = rooms()
    approval_id, _ = ask(calls)
    assert room.owns(approval_id) and room.deadline == clock.now + 30
    out: list[Effect] = []
    room.answer(None, {"jsonrpc": "2.0", "id": approval_id, "result": {"action": "accept"}}, out)
    assert calls.released == [raw(frame(1))[:-1]] and calls.ledger.forwarded == 1
    (event,) = calls.ledger.events
    assert event["data"]["approval_state"] == ApprovalState.APPROVED and room.deadline is None


def test_decline_denies_with_the_reply_and_a_late_answer_is_ignored():
    calls, room, clock = rooms()
    approval_id, _ = ask(calls)
    out: list[Effect] = []
    room.answer(None, {"jsonrpc": "2.0", "id": approval_id, "result": {"action": "decline"}}, out)
    (reply,) = replies_of(out)
    assert reply["id"] == 1 and calls.ledger.blocked == 1
    assert calls.ledger.events[-1]["data"]["approval_state"] == "declined"
    out = []
    room.answer(None, {"jsonrpc": "2.0", "id": approval_id, "result": {"action": "accept"}}, out)
    assert out == [] and calls.released == []


def test_an_answer_after_the_deadline_is_a_timeout():
    calls, room, clock = rooms()
    approval_id, _ = ask(calls)
    clock.now += 31
    out: list[Effect] = []
    room.answer(None, {"jsonrpc": "2.0", "id": approval_id, "result": {"action": "accept"}}, out)
    assert calls.ledger.events[-1]["data"]["approval_state"] == ApprovalState.TIMED_OUT and calls.released == []


def test_expire_cancel_abandon_and_discard():
    calls, room, clock = rooms()
    ask(calls, 1)
    clock.now += 30
    out: list[Effect] = []
    room.expire(clock.now, out)
    assert [r.get("method") for r in replies_of(out)] == ["notifications/cancelled", None]
    ask(calls, 2)
    out = []
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    assert room.cancel(None, cancel, out) is True
    assert [r.get("method") for r in replies_of(out)] == ["notifications/cancelled"]  # no deny reply
    assert calls.ledger.dropped == 1
    ask(calls, 3)
    out = []
    room.abandon(out)
    assert calls.ledger.events[-1]["data"]["approval_state"] == ApprovalState.CANCELLED
    ask(calls, 4)
    room.discard()
    assert room.deadline is None and room.table is not None and len(room.table) == 0


def test_a_client_that_cannot_be_asked_gets_the_fallback():
    calls, room, _ = rooms()
    out: list[Effect] = []
    f = frame(1)
    assert calls.tool_call(tool_call_of(raw(f), f, "srv"), out) is False
    (reply,) = replies_of(out)
    assert calls.ledger.events[-1]["data"]["approval_state"] == ApprovalState.UNAVAILABLE and reply["id"] == 1


def test_a_dry_run_asks_nobody():
    calls, room, _ = rooms(dry_run=True)
    assert room.table is None and room.prefix is None and not room.owns("x")
    f = frame(1)
    assert calls.tool_call(tool_call_of(raw(f), f, "srv"), []) is True


def test_the_modern_era_offers_and_the_retry_is_rewritten():
    calls, room, _ = rooms()
    meta = {"_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}
    first = frame(1, **meta)
    first["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
    out: list[Effect] = []
    modern = approvals.modern_can_elicit(first["params"])
    assert modern
    assert calls.tool_call(tool_call_of(raw(first), first, "srv"), out) is False  # answered input_required
    assert calls.ledger.events == []  # nothing recorded in the first round
    (offer,) = replies_of(out)
    state = offer["result"]["requestState"]
    retry = frame(2, **meta, requestState=state, inputResponses={approvals.INPUT_KEY: {"action": "accept"}})
    retry["params"]["_meta"] = first["params"]["_meta"]
    out = []
    assert calls.tool_call(tool_call_of(raw(retry), retry, "srv"), out) is False
    assert calls.ledger.events[-1]["data"]["decision"] == Outcome.ALLOW
    assert calls.ledger.events[-1]["data"]["approval_state"] == ApprovalState.APPROVED
    assert len(calls.released) == 1 and b"requestState" not in calls.released[0]
