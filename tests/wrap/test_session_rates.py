"""Per-tool rate limits in the wrap session (docs/policy.md, "Per-tool rate limits"): the rate
block in the decision pipeline's rate guard, counting at entry, on the harness's fake clock (no sleeps)."""

from __future__ import annotations

import json

import pytest

from assay.policy import load_policy
from assay.session.effects import Sink
from assay.session.session import SessionOptions

from tests.docs_examples import policy_example
from tests.wrap._harness import Harness

POLICY = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["web_*", "fetch", "read_file"]\n  deny: ["web_evil"]\n'
    b"enforcement: { unconstrained_tools: allow }\n"
    b"schemas:\n  fetch: { type: object, required: [url], properties: { url: { type: string } } }\n"
    b"limits:\n  tools:\n"
    b'    - { id: search-burst, tools: ["web_*", fetch], max_calls: 2, per: 60s }\n'
    b"    - { tools: [read_file], max_calls: 1 }\n"
)
REASON = "Rate limit exceeded: at most 2 calls per 60s for web_*, fetch (rule search-burst)"


def frame(rid, name, arguments=None) -> dict:
    out = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
    if rid is not None:
        out["id"] = rid
    return out


def harness(policy=POLICY, **options) -> Harness:
    h = Harness(policy, SessionOptions(event_source="assay://t", decision_sinks=(Sink.DECISION_LOG,), **options))
    assert h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}).disposition == "forwarded"
    return h


def events(outcome) -> list[dict]:
    return [json.loads(line)["data"] for line in outcome.effects.records(Sink.DECISION_LOG)]


def payload(outcome) -> dict:
    return json.loads(outcome.reply)["result"]["structuredContent"]


def test_the_call_past_the_limit_is_denied_naming_the_rule() -> None:
    h = harness()
    assert h.handle(frame(1, "web_search")).disposition == "forwarded"
    h.clock.advance(10)
    assert h.handle(frame(2, "fetch", {"url": "u"})).disposition == "forwarded"  # shares the count
    h.clock.advance(10)
    third = h.handle(frame(3, "web_get"))
    assert third.disposition == "blocked" and third.forward is None
    assert payload(third) == {
        "status": "deny",
        "error_code": "E_RATE_LIMIT",
        "tool": "web_get",
        "rule": "search-burst",
        "reason": REASON,
    }
    reply = json.loads(third.reply)
    assert reply["id"] == 3 and reply["result"]["isError"] is True
    assert json.loads(reply["result"]["content"][1]["text"]) == payload(third)
    (event,) = events(third)
    assert (event["decision"], event["reason_code"], event["matched_rule"], event["reason"]) == (
        "deny",
        "P_RATE_LIMIT",
        "search-burst",
        REASON,
    )
    assert event["typed_decision"] == "deny"
    assert h.counts == {"forwarded": 3, "blocked": 1, "rejected": 0, "dropped": 0}


def test_the_window_slides_on_the_session_clock() -> None:
    h = harness()
    h.handle(frame(1, "web_a"))  # t = 1000
    h.clock.advance(30)
    h.handle(frame(2, "web_a"))  # t = 1030
    h.clock.advance(29.5)
    assert h.handle(frame(3, "web_a")).disposition == "blocked"  # 1059.5: both in the window
    h.clock.advance(0.5)
    assert h.handle(frame(4, "web_a")).disposition == "forwarded"  # 1060: the call at 1000 left
    assert h.handle(frame(5, "web_a")).disposition == "blocked"  # 1030 and 1060
    h.clock.advance(30)
    assert h.handle(frame(6, "web_a")).disposition == "forwarded"  # 1090: 1030 left


def test_a_session_rule_has_no_window() -> None:
    h = harness()
    assert h.handle(frame(1, "read_file")).disposition == "forwarded"
    h.clock.advance(10**7)
    second = h.handle(frame(2, "read_file"))
    assert payload(second)["rule"] == "limits.tools[1]"
    assert payload(second)["reason"] == (
        "Rate limit exceeded: at most 1 call per session for read_file (rule limits.tools[1])"
    )


def test_denied_calls_do_not_count() -> None:
    """Calls denied by the policy (deny list, schema) or by the rule itself never enter the window:
    hammering them leaves the allowance of the other tools whole, and the window reopens on time."""
    h = harness()
    for i in range(20):
        assert h.handle(frame(100 + i, "web_evil")).disposition == "blocked"  # E_TOOL_DENIED
        assert h.handle(frame(200 + i, "fetch", {"url": 5})).disposition == "blocked"  # E_ARG_SCHEMA
    assert h.handle(frame(1, "web_a")).disposition == "forwarded"
    assert h.handle(frame(2, "web_b")).disposition == "forwarded"
    for i in range(20):
        h.clock.advance(1)
        assert payload(h.handle(frame(300 + i, "web_c")))["error_code"] == "E_RATE_LIMIT"
    h.clock.advance(40)  # 60 s after the two forwarded calls, whatever the retries did
    assert h.handle(frame(3, "web_c")).disposition == "forwarded"


def test_a_policy_deny_keeps_its_own_code_before_the_rate_check() -> None:
    h = harness()
    h.handle(frame(1, "web_a"))
    h.handle(frame(2, "web_a"))
    denied = h.handle(frame(3, "web_evil"))
    assert payload(denied)["error_code"] == "E_TOOL_DENIED"  # the engine decided first
    assert events(denied)[0]["matched_rule"] == "tools.deny"


def test_notifications_count_and_a_denied_one_is_dropped() -> None:
    h = harness()
    assert h.handle(frame(None, "web_a")).disposition == "forwarded"
    assert h.handle(frame(None, "web_a")).disposition == "forwarded"
    dropped = h.handle(frame(None, "web_a"))
    assert dropped.disposition == "dropped" and dropped.reply is None
    assert events(dropped)[0]["matched_rule"] == "search-burst"
    assert h.handle(frame(1, "web_a")).disposition == "blocked"


def test_a_dry_run_forwards_but_counts_only_what_enforcing_would_forward() -> None:
    h = harness(dry_run=True)
    outcomes = [h.handle(frame(i, "web_a")) for i in range(1, 5)]
    assert [o.disposition for o in outcomes] == ["forwarded"] * 4
    records = [events(o)[0] for o in outcomes]
    assert [r["reason_code"] for r in records] == ["P_POLICY_ALLOW", "P_POLICY_ALLOW", "P_RATE_LIMIT", "P_RATE_LIMIT"]
    assert records[2]["matched_rule"] == "search-burst"
    h.clock.advance(60)
    # the two predicted denies did not enter: the window reopened 60 s after the first two
    assert events(h.handle(frame(5, "web_a")))[0]["reason_code"] == "P_POLICY_ALLOW"


def test_a_fast_read_of_many_calls_is_judged_call_by_call() -> None:
    h = harness()
    lines = b"".join(json.dumps(frame(i, "web_a")).encode() + b"\n" for i in range(1, 6))
    effects = h.client(lines)
    assert effects.to_server.count(b"\n") == 2
    replies = [json.loads(line) for line in effects.to_client.splitlines()]
    assert [r["id"] for r in replies] == [3, 4, 5]
    assert {r["result"]["structuredContent"]["rule"] for r in replies} == {"search-burst"}


def test_a_clock_that_goes_backwards_does_not_reopen_the_window() -> None:
    h = harness()
    h.handle(frame(1, "web_a"))
    h.handle(frame(2, "web_a"))
    h.clock.advance(-3600)
    assert h.handle(frame(3, "web_a")).disposition == "blocked"
    h.clock.advance(3600 + 60)
    assert h.handle(frame(4, "web_a")).disposition == "forwarded"


def test_each_session_has_its_own_counts() -> None:
    first, second = harness(), harness()
    first.handle(frame(1, "read_file"))
    assert first.handle(frame(2, "read_file")).disposition == "blocked"
    assert second.handle(frame(1, "read_file")).disposition == "forwarded"


def test_a_policy_without_rate_rules_builds_no_tracker() -> None:
    plain = load_policy(b'version: "2.0"\ntools: {allow: [a]}\nlimits: {max_tool_calls_total: 2}\n')
    h = harness(plain)
    assert h.session._rates is None
    assert h.handle(frame(1, "a")).disposition == "forwarded"
    assert h.handle(frame(2, "a")).disposition == "forwarded"
    total = h.handle(frame(3, "a"))
    assert payload(total) == {"status": "deny", "error_code": "E_RATE_LIMIT"}  # the old payload
    assert "matched_rule" not in events(total)[0]


def test_the_session_totals_still_apply_with_rate_rules() -> None:
    policy = load_policy(
        b"limits:\n  max_tool_calls_total: 2\n  tools: [{tools: [x], max_calls: 10, per: 1h}]\n"
        b"enforcement: {unconstrained_tools: allow}\n"
    )
    h = harness(policy)
    assert [h.handle(frame(i, "x")).disposition for i in (1, 2)] == ["forwarded", "forwarded"]
    assert payload(h.handle(frame(3, "x"))) == {"status": "deny", "error_code": "E_RATE_LIMIT"}


@pytest.mark.parametrize("name", ["", "x" * 5000, "web_\u2028", "web_\x00"])
def test_odd_names_never_crash_the_rate_block(name) -> None:
    policy = load_policy(
        b'limits:\n  tools: [{tools: ["*"], max_calls: 1, per: 1s}]\nenforcement: {unconstrained_tools: allow}\n'
    )
    h = harness(policy)
    assert h.handle(frame(1, name)).disposition == "forwarded"
    assert payload(h.handle(frame(2, name)))["rule"] == "limits.tools[0]"


def test_the_docs_example_in_a_session() -> None:
    h = harness(load_policy(policy_example("rate-limits").encode()))
    # reads-per-hour: read_file and list_dir share 3; list_dir alone has 2 per session
    assert [h.handle(frame(i, n)).disposition for i, n in enumerate(["list_dir", "list_dir"], 1)] == ["forwarded"] * 2
    third_list = h.handle(frame(3, "list_dir"))
    assert payload(third_list)["rule"] == "limits.tools[2]"
    assert h.handle(frame(4, "read_file")).disposition == "forwarded"
    h.clock.advance(3599)
    late = h.handle(frame(5, "read_file"))
    assert payload(late)["rule"] == "reads-per-hour"
    assert payload(late)["reason"] == (
        "Rate limit exceeded: at most 3 calls per 1h for read_file, list_dir (rule reads-per-hour)"
    )
    assert events(late)[0]["matched_rule"] == "reads-per-hour"
    h.clock.advance(1)  # an hour after the first list_dir
    assert h.handle(frame(6, "read_file")).disposition == "forwarded"
    # search-burst: 10 per 60 s
    web = [h.handle(frame(100 + i, "web_search")).disposition for i in range(11)]
    assert web == ["forwarded"] * 10 + ["blocked"]
