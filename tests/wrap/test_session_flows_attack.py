"""A hostile client against wrap's flow rules and per-tool rate limits, in memory
(docs/policy.md, "Flow rules", "Per-tool rate limits"; docs/wrap.md, "Approvals"): frames chosen
to bypass a rule, to make the session judge a call on the wrong state, or to use memory without
bound. No frame may raise out of the session."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.flows import FlowTracker
from assay.session.session import SessionOptions

from tests.wrap._harness import EntrySpy, Harness, add_guard

MIB = 1 << 20


def session(policy_text: bytes, **options) -> Harness:
    h = Harness(load_policy(policy_text), SessionOptions(**options))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    return h


def call(h: Harness, name: str, arguments: object = None, rid: object = 1, **extra):
    frame: dict = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
    if rid is not ...:
        frame["id"] = rid
    frame.update(extra)
    return h.handle(frame)


def test_long_tool_names_do_not_pile_up_in_the_session():
    h = session(
        b'version: "2.0"\ntools: {allow: ["send_*"]}\nenforcement: {unconstrained_tools: allow}\n'
        b'limits: {tools: [{tools: ["send_*"], max_calls: 100000, per: 60s}]}\n'
        b'sequences: [{type: max_calls, tool: "send_*", max: 100000}]\n'
    )
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(24):
            line = json.dumps(
                {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": f"send_{i}_" + "x" * MIB}}
            ).encode()
            assert h.handle(line).disposition == "forwarded"
            del line
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # the policy's plan cache, the rate and the flow caches each kept every name (24 MiB)
    assert held < 4 * MIB, held
    assert h.session._flows.n == 24


BEFORE = (
    b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
    b"sequences: [{type: before, first: run_tests, then: deploy, id: tests-first}]\n"
)
NO_ANSWER_IDS = [..., None, True, False, {"a": 1}, [1], 1.5, 1.0]  # ...: no id at all


def deny_payload(out) -> dict:
    return json.loads(out.reply)["result"]["structuredContent"]


@pytest.mark.parametrize("rid", NO_ANSWER_IDS, ids=repr)
def test_a_call_no_server_runs_cannot_satisfy_a_before_rule(rid):
    # MCP servers neither run nor answer a tools/call notification, nor one whose id is not an
    # integer or a string; it used to enter the history as if run_tests had run, letting deploy
    # through
    h = session(BEFORE)
    out = call(h, "run_tests", rid=rid)
    assert out.disposition in ("blocked", "dropped") and out.forward is None
    if rid is not ...:
        assert deny_payload(out) == {
            "status": "deny",
            "error_code": "E_SEQUENCE_VIOLATION",
            "tool": "run_tests",
            "rule": "sequences",
            "reason": "flow rules judge calls the server runs: a tools/call needs an integer or string id",
        }
    assert h.session._flows.n == 0
    out = call(h, "deploy", rid=2)
    assert out.disposition == "blocked" and deny_payload(out)["rule"] == "tests-first"
    # a real request then opens the way
    assert call(h, "run_tests", rid="3").disposition == "forwarded"
    assert call(h, "deploy", rid=4).disposition == "forwarded"


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_tests", "arguments": [1]}},
            "the arguments of a tools/call must be an object",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_tests", "arguments": "x"}},
            "the arguments of a tools/call must be an object",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_tests", "arguments": None}},
            "the arguments of a tools/call must be an object",
        ),
        (
            {"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "run_tests"}},
            'a tools/call needs "jsonrpc": "2.0"',
        ),
        ({"id": 1, "method": "tools/call", "params": {"name": "run_tests"}}, 'a tools/call needs "jsonrpc": "2.0"'),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_tests", "_meta": "x"}},
            "the _meta of a tools/call must be an object",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [{"name": "run_tests"}]},
            "a tools/call needs params with a string name",
        ),
    ],
    ids=[
        "arguments-list",
        "arguments-string",
        "arguments-null",
        "jsonrpc-1.0",
        "no-jsonrpc",
        "meta-string",
        "params-list",
    ],
)
def test_a_call_the_sdks_refuse_unrun_cannot_satisfy_a_before_rule(frame, why):
    # the MCP SDKs answer these with an error and never run the tool; wrap counted run_tests
    h = session(BEFORE)
    out = h.handle(frame)
    assert out.disposition == "blocked" and out.forward is None
    assert deny_payload(out)["reason"] == "flow rules judge calls the server runs: " + why
    assert h.session._flows.n == 0
    assert deny_payload(call(h, "deploy", rid=2))["rule"] == "tests-first"


def test_a_require_and_a_sequence_are_not_met_by_notifications():
    h = session(
        b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
        b"sequences: [{type: require, tool: login, id: login-first},"
        b" {type: sequence, tools: [plan, apply], id: plan-then-apply}]\n"
    )
    assert call(h, "login", rid=...).disposition == "dropped"
    assert deny_payload(call(h, "read", rid=1))["rule"] == "login-first"
    assert call(h, "login", rid=2).disposition == "forwarded"
    assert call(h, "plan", rid=None).disposition == "blocked"
    assert deny_payload(call(h, "apply", rid=3))["rule"] == "plan-then-apply"


def test_a_dry_run_logs_the_notification_as_a_would_deny_and_keeps_it_out_of_the_history():
    from assay.session.effects import Sink

    h = Harness(load_policy(BEFORE), SessionOptions(dry_run=True, decision_sinks=(Sink.DECISION_LOG,)))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    out = call(h, "run_tests", rid=...)
    assert out.disposition == "forwarded"
    (record,) = [json.loads(r)["data"] for r in out.effects.records(Sink.DECISION_LOG)]
    assert (record["reason_code"], record["matched_rule"]) == ("P_SEQUENCE_VIOLATION", "sequences")
    assert h.session._flows.n == 0


# -- approvals: a held call is judged again when the person accepts, and enters once --------------

APPROVE = (
    'version: "2.0"\ntools:\n  allow: ["*"]\n  approval_required: ["deploy", "send_email"]\n'
    "enforcement: {unconstrained_tools: allow}\n"
    "limits: {tools: [{id: two-deploys, tools: [deploy], max_calls: 2, per: 60s}]}\n"
    "sequences:\n"
    "  - {type: max_calls, tool: deploy, max: 1, id: one-deploy}\n"
    "  - {type: never_after, trigger: read_secret, forbidden: send_email, id: no-exfil}\n"
)
TOKEN = "0123456789abcdef0123456789abcdef"


def line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def approving_session() -> Harness:
    h = Harness(load_policy(APPROVE.encode()), SessionOptions(), approval_token=TOKEN)
    h.client(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"elicitation": {}}}}))
    return h


def hold(h: Harness, rid: int, name: str) -> str:
    effects = h.client(
        line({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}}})
    )
    assert effects.to_server == b""
    (request,) = [json.loads(x) for x in effects.to_client.splitlines()]
    assert request["method"] == "elicitation/create"
    return request["id"]


def accept(h: Harness, approval_id: str, action: str = "accept"):
    return h.client(line({"jsonrpc": "2.0", "id": approval_id, "result": {"action": action}}))


def forwarded_ids(effects) -> list:
    return [json.loads(x)["id"] for x in effects.to_server.splitlines()]


def test_two_held_calls_that_a_flow_rule_admits_once_are_admitted_once():
    h = approving_session()
    first, second = hold(h, 1, "deploy"), hold(h, 2, "deploy")  # both fine while neither went
    assert forwarded_ids(accept(h, second)) == [2]
    effects = accept(h, first)
    assert effects.to_server == b""
    (reply,) = [json.loads(x) for x in effects.to_client.splitlines()]
    assert reply["id"] == 1 and reply["result"]["structuredContent"]["rule"] == "one-deploy"
    # a second answer to an approval already settled changes nothing
    assert accept(h, second).to_server == b"" and accept(h, first).to_server == b""
    assert h.session._flows.n == 1 and h.session._rates.counted("two-deploys", h.clock()) == 1


def test_a_held_send_is_denied_when_a_secret_was_read_while_the_person_thought():
    h = approving_session()
    held = hold(h, 1, "send_email")
    effects = h.client(line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_secret"}}))
    assert forwarded_ids(effects) == [2]
    effects = accept(h, held)
    assert effects.to_server == b""
    (reply,) = [json.loads(x) for x in effects.to_client.splitlines()]
    assert reply["result"]["structuredContent"]["rule"] == "no-exfil"
    assert h.session._flows.n == 1


def test_declined_cancelled_and_expired_held_calls_never_enter():
    h = approving_session()
    declined, cancelled, expired = hold(h, 1, "deploy"), hold(h, 2, "deploy"), hold(h, 3, "deploy")
    accept(h, declined, "decline")
    h.client(line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}))
    h.clock.advance(10_000)
    h.session.timer()
    assert h.session._flows.n == 0 and h.session._rates.counted("two-deploys", h.clock()) == 0
    for late in (declined, cancelled, expired):  # late accepts of settled calls are ignored
        assert accept(h, late).to_server == b""
    assert h.session._flows.n == 0
    # the one deploy the rule admits is still there
    assert forwarded_ids(accept(h, hold(h, 4, "deploy"))) == [4]


# -- frames: what the tracker sees is what the server will read -----------------------------------

NEVER_AFTER = (
    b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
    b"sequences: [{type: never_after, trigger: read_secret, forbidden: 'send_*', id: no-exfil}]\n"
)


@pytest.mark.parametrize(
    "send",
    [
        rb'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send\u005femail","arguments":{}}}',
        rb'{"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"\u0073end_email"}}',
        # a surrogate pair elsewhere sends the line down admission's careful path
        rb'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_\u0065mail","arguments":{"b":"\ud83d\ude00"}}}',
    ],
    ids=["escaped-underscore", "escaped-method-and-letter", "careful-path"],
)
def test_an_escaped_name_reaches_the_flow_rules_decoded(send):
    h = session(NEVER_AFTER)
    assert (
        h.handle(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_\\u0073ecret"}}').disposition
        == "forwarded"
    )
    out = h.handle(send)
    assert out.disposition == "blocked" and json.loads(out.reply)["result"]["structuredContent"]["rule"] == "no-exfil"


@pytest.mark.parametrize(
    "frame",
    [
        # a batch: the server would run both, the tracker would see neither
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_secret"}},'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_email"}}]',
        # a repeated name: wrap reading the first value and the server the last would differ
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"read_secret"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_secret","arguments":{"p":1,"p":2}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_secret","na\\u006de":"x"}}',
    ],
    ids=["batch", "duplicate-name", "duplicate-argument", "escaped-duplicate"],
)
def test_frames_the_tracker_and_the_server_could_read_differently_are_refused(frame):
    h = session(NEVER_AFTER)
    out = h.handle(frame)
    assert out.disposition == "rejected" and out.forward is None
    assert h.session._flows.n == 0


# -- any frame: nothing escapes the session, and the history is exactly the calls that went -------

FUZZ_POLICY = load_policy(
    (
        APPROVE
        + "  - {type: before, first: run_tests, then: deploy, id: tests-first}\n"
        + "  - {type: after, trigger: {tool: open, args_match: {p: '^/'}}, then: close, within: 2, id: close-it}\n"
    ).encode()
)
JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.floats(-2, 2),
        st.sampled_from(["", "/x", "\u00e9", "run_tests"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["p", "name", "id"]), inner, max_size=3)
    ),
    max_leaves=5,
)
TOOL = st.sampled_from(["deploy", "run_tests", "read_secret", "send_email", "open", "close", "echo", ""])
PARAMS = st.one_of(
    JSON,
    st.fixed_dictionaries({"name": TOOL}, optional={"arguments": JSON}),
    st.fixed_dictionaries({"name": st.one_of(TOOL, JSON)}, optional={"arguments": JSON, "_meta": JSON}),
)
RID = st.one_of(st.just(...), st.integers(0, 6), st.sampled_from(["1", "a", None, True, 1.5, [1], {}]))


@st.composite
def client_frames(draw):
    kind = draw(st.sampled_from(["call", "call", "call", "answer", "cancel", "tick"]))
    if kind == "call":
        frame = {"jsonrpc": "2.0", "method": "tools/call", "params": draw(PARAMS)}
        rid = draw(RID)
        if rid is not ...:
            frame["id"] = rid
        return kind, frame
    if kind == "answer":
        return kind, draw(st.sampled_from(["accept", "decline", "cancel"])), draw(st.integers(1, 8))
    if kind == "cancel":
        return kind, {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": draw(st.integers(0, 6))},
        }
    return kind, draw(st.floats(0, 100))


def called_name(msg: dict) -> str:
    """The name wrap judges a tools/call by ("" when params or its name is not readable)."""
    params = msg.get("params")
    return params["name"] if isinstance(params, dict) and isinstance(params.get("name"), str) else ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(client_frames(), max_size=25), st.booleans())
def test_no_frame_escapes_and_the_history_is_the_calls_that_went(steps, dry_run):
    h = Harness(FUZZ_POLICY, SessionOptions(dry_run=dry_run), approval_token=TOKEN)
    spy = EntrySpy()
    add_guard(h.session, spy)
    entered = spy.entered
    h.client(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"elicitation": {}}}}))
    went: list[object] = []
    for step in steps:
        if step[0] == "call":
            effects = h.client(line(step[1]))
        elif step[0] == "answer":
            effects = accept(h, f"assay-approval-{TOKEN}-{step[2]}", step[1])
        elif step[0] == "cancel":
            effects = h.client(line(step[1]))
        else:
            h.clock.advance(step[1])
            effects = h._run(h.session.timer())
        for fwd in effects.to_server.splitlines():
            msg = json.loads(fwd)
            if msg.get("method") == "tools/call":
                went.append(msg)
    flows = h.session._flows
    assert flows is not None and flows.n == len(entered)
    if not dry_run:  # enforcing: a call went exactly when it entered, once, and is one MCP servers run
        assert [called_name(m) for m in went] == [name for name, _ in entered]
        assert [FlowTracker.unrunnable(m) for m in went] == [None] * len(went)
    # the history never violates a rule, as the stateless evaluator reads it
    from assay.policy.sequence import evaluate_rules

    rules = [r.rule for r in FUZZ_POLICY.sequences]
    evaluations = evaluate_rules(rules, entered, FUZZ_POLICY.aliases, partial=True, patterns=True)
    assert [e.rule_id for e in evaluations if e.outcome == "violated"] == []


def test_a_two_round_call_enters_once_at_its_retry_and_a_replay_never():
    """2026-07-28-era approvals: the first round (answered input_required) does not enter; the
    accepted retry is judged by the flow rules again and enters once; replaying it enters nothing."""
    import copy

    from assay.session import approvals

    policy = load_policy(
        (
            'version: "2.0"\ntools:\n  allow: ["*"]\n  approval_required: ["deploy"]\n'
            "enforcement: {unconstrained_tools: allow}\n"
            "sequences: [{type: max_calls, tool: deploy, max: 1, id: one-deploy}]\n"
        ).encode()
    )
    h = Harness(policy, SessionOptions(), approval_key=b"k" * 32)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }

    def first_round(rid: int, n: int) -> tuple[dict, str]:
        frame = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "deploy", "arguments": {"n": n}, "_meta": meta},
        }
        effects = h.client(line(frame))
        assert effects.to_server == b""
        return frame, json.loads(effects.to_client)["result"]["requestState"]

    def retry(frame: dict, rid: int, state: str):
        again = copy.deepcopy(frame)
        again["id"] = rid
        again["params"]["inputResponses"] = {approvals.INPUT_KEY: {"action": "accept"}}
        again["params"]["requestState"] = state
        return h.handle(line(again))

    a, state_a = first_round(1, 1)
    b, state_b = first_round(2, 2)
    assert h.session._flows.n == 0  # asking is not calling
    assert retry(a, 3, state_a).forward is not None
    assert h.session._flows.n == 1
    for rid in (4, 5):  # the same accepted retry again
        assert retry(a, rid, state_a).forward is None
    out = retry(b, 6, state_b)  # approved too, but the rule's one deploy is used
    assert out.forward is None and json.loads(out.reply)["result"]["structuredContent"]["rule"] == "one-deploy"
    assert h.session._flows.n == 1


def escaped(text: str, mask: list[bool]) -> str:
    """``text`` as a JSON string body with the characters ``mask`` marks written as \\uXXXX
    (surrogate pairs outside the BMP), the others as they are."""
    out = []
    for ch, esc in zip(text, mask + [False] * len(text)):
        if esc or ch in '"\\':
            if ord(ch) > 0xFFFF:
                v = ord(ch) - 0x10000
                out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04x}")
            else:
                out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(categories=["L", "M", "N", "P", "S", "Zs"]), min_size=1, max_size=12),
    st.lists(st.booleans(), max_size=12),
    st.lists(st.booleans(), max_size=12),
    st.booleans(),
)
def test_any_spelling_of_a_name_on_the_wire_is_judged_as_its_decoded_name(suffix, mask_trigger, mask_sink, careful):
    trigger, sink = "read_" + suffix, "send_" + suffix
    policy = (
        'version: "2.0"\nenforcement: {unconstrained_tools: allow}\nsequences:\n'
        f"  - {{type: never_after, trigger: {json.dumps(trigger, ensure_ascii=False)}, forbidden: {json.dumps(sink, ensure_ascii=False)}, id: r}}\n"
    ).encode()
    h = session(policy)
    extra = ',"x":"\\ud83d\\ude00"' if careful else ""  # a surrogate pair: admission's careful path

    def frame(rid: int, name_text: str) -> bytes:
        return (
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{}%s}}'
            % (rid, name_text, extra)
        ).encode()

    assert h.handle(frame(1, escaped(sink, mask_sink))).disposition == "forwarded"
    assert h.handle(frame(2, escaped(trigger, mask_trigger))).disposition == "forwarded"
    out = h.handle(frame(3, escaped(sink, mask_sink[::-1])))
    assert out.disposition == "blocked" and json.loads(out.reply)["result"]["structuredContent"]["rule"] == "r"
