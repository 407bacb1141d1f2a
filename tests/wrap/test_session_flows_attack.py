"""A hostile client against wrap's flow rules and per-tool rate limits, in memory
(docs/policy.md, "Flow rules", "Per-tool rate limits"; docs/wrap.md, "Approvals"): frames chosen
to bypass a rule, to make the session judge a call on the wrong state, or to use memory without
bound. No frame may raise out of the session."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from assay.policy import load_policy
from assay.wrap.session import SessionOptions

from tests.wrap._harness import Harness

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
    from assay.wrap.effects import Sink

    h = Harness(load_policy(BEFORE), SessionOptions(dry_run=True, decision_sinks=(Sink.DECISION_LOG,)))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    out = call(h, "run_tests", rid=...)
    assert out.disposition == "forwarded"
    (record,) = [json.loads(r)["data"] for r in out.effects.records(Sink.DECISION_LOG)]
    assert (record["reason_code"], record["matched_rule"]) == ("P_SEQUENCE_VIOLATION", "sequences")
    assert h.session._flows.n == 0
