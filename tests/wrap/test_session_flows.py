"""Flow rules in the wrap session, in memory (docs/policy.md, "Flow rules"): the deny reply and
record of a call that would make a rule fail, the history of calls that went to the server, and
dry runs. The policy is the page's `flows` example, which is also examples/flows.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.policy import load_policy
from assay.session.effects import Sink
from assay.session.session import SessionOptions

from tests.docs_examples import policy_example
from tests.wrap._harness import Harness

REPO = Path(__file__).resolve().parent.parent.parent
FLOWS = load_policy(policy_example("flows").encode(), source="flows.yaml")
DENY_TEXT = "Content blocked by policy"


def session(policy=FLOWS, **options) -> Harness:
    h = Harness(
        policy, SessionOptions(decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t", **options)
    )
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    return h


class Calls:
    def __init__(self, h: Harness) -> None:
        self.h = h
        self.rid = 0

    def __call__(self, name: str, arguments: object = None, notify: bool = False):
        self.rid += 1
        frame: dict = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
        if not notify:
            frame["id"] = self.rid
        out = self.h.handle(frame)
        decisions = [json.loads(r)["data"] for r in out.effects.records(Sink.DECISION_LOG)]
        audits = [json.loads(r) for r in out.effects.records(Sink.AUDIT_LOG)]
        assert len(decisions) == 1 and len(audits) == 1
        return out, decisions[0], audits[0]


def payload(reply: bytes) -> dict:
    result = json.loads(reply)["result"]
    assert result["isError"] is True
    assert result["content"][0] == {"type": "text", "text": DENY_TEXT}
    body = json.loads(result["content"][1]["text"])
    assert result["structuredContent"] == body
    return body


def test_the_example_is_the_shipped_file():
    shipped = (REPO / "examples" / "flows.yaml").read_text()
    body = policy_example("flows").split("\n", 1)[1]
    assert shipped.endswith(body)
    assert load_policy(shipped.encode()).digest == FLOWS.digest


def test_a_network_call_after_a_secret_is_denied_with_the_rule_in_reply_and_record():
    call = Calls(session())
    out, d, _ = call("send_email", {"to": "a@b.c", "body": "hi"})
    assert out.disposition == "forwarded" and d["reason_code"] == "P_POLICY_ALLOW"
    assert call("read_secret", {"name": "api_key"})[0].disposition == "forwarded"
    out, d, a = call("send_email", {"to": "a@b.c", "body": "sk-demo"})
    assert out.disposition == "blocked" and out.forward is None
    assert payload(out.reply) == {
        "status": "deny",
        "error_code": "E_SEQUENCE_VIOLATION",
        "tool": "send_email",
        "rule": "no-exfiltration",
        "reason": "no network call after a secret was read in this session; it holds until this wrap ends "
        "(a `for:` in the rule would end it by itself)",
    }
    assert (d["decision"], d["reason_code"], d["matched_rule"]) == ("deny", "P_SEQUENCE_VIOLATION", "no-exfiltration")
    assert d["reason"] == payload(out.reply)["reason"]
    assert d["typed_decision"] == "deny" and d["policy_digest"] == FLOWS.digest
    assert (
        a["decision"] == "deny"
        and a["agentic"]["error_code"] == "E_SEQUENCE_VIOLATION"
        and a["agentic"]["rule"] == "no-exfiltration"
    )
    for name in ("http_post", "send_sms"):  # every network sink, by pattern; send_sms is not even allowed
        out, d, _ = call(name, {"url": "https://x"})
        assert out.disposition == "blocked"
    assert d["reason_code"] == "P_TOOL_NOT_ALLOWED"  # the engine decides first
    assert call("read_file", {"path": "/workspace/README.md"})[0].disposition == "forwarded"


def test_args_match_counts_a_secret_file_as_a_trigger():
    call = Calls(session())
    assert call("read_file", {"path": "/workspace/README.md"})[0].disposition == "forwarded"
    assert call("http_post", {"url": "https://x"})[0].disposition == "forwarded"
    assert call("read_file", {"path": "/secrets/token"})[0].disposition == "forwarded"
    out, d, _ = call("http_post", {"url": "https://x"})
    assert payload(out.reply)["rule"] == "no-exfiltration-of-secret-files"
    assert d["matched_rule"] == "no-exfiltration-of-secret-files"


@pytest.mark.parametrize(
    "path",
    [
        "/workspace/../secrets/token",
        "/secrets//token",
        "/secrets/./token",
        "/SECRETS/token",
        "/workspace/../SeCrEtS/token",
    ],
)
def test_the_example_cannot_be_walked_around_by_spelling_the_path_another_way(path):
    """Each of these either counts as reading a secret file or is refused outright: none lets a
    later network call through."""
    call = Calls(session())
    out, d, _ = call("read_file", {"path": path})
    if out.disposition == "forwarded":
        out, d, _ = call("send_email", {"to": "x@example.com", "body": "..."})
        assert payload(out.reply)["rule"] == "no-exfiltration-of-secret-files"
    else:
        assert d["reason_code"] in ("P_ARG_SCHEMA", "P_POLICY_DENY")


@pytest.mark.parametrize(
    "path",
    ["file:///secrets/token", "file:///%73ecrets/token", "~/../../secrets/token", "secrets/token", "/etc/passwd"],
)
def test_the_example_refuses_paths_it_could_not_classify(path):
    call = Calls(session())
    out, d, _ = call("read_file", {"path": path})
    assert out.disposition == "blocked"
    assert d["reason_code"] in ("P_ARG_SCHEMA", "P_POLICY_DENY")
    assert call("send_email", {"to": "x@example.com", "body": "..."})[0].disposition == "forwarded"


def test_deploy_only_after_run_tests_and_denied_calls_do_not_enter():
    call = Calls(session())
    out, d, _ = call("deploy", {"target": "prod"})
    assert out.disposition == "blocked"
    assert (
        payload(out.reply)["reason"]
        == "deploy only after run_tests in this session; it ends once 'run_tests' is called"
    )
    assert d["matched_rule"] == "tests-before-deploy"
    # had the denied deploy entered the history, run_tests would now come "after" it
    assert call("run_tests")[0].disposition == "forwarded"
    assert call("deploy", {"target": "prod"})[0].disposition == "forwarded"
    assert call.h.session._flows.n == 2  # run_tests and deploy; the denied deploy is not in


def test_a_call_the_engine_denies_does_not_enter():
    policy = load_policy(
        b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\ntools: {deny: [vault_dump]}\n'
        b"sequences: [{type: never_after, trigger: 'vault_*', forbidden: 'send_*', id: r}]\n"
    )
    call = Calls(session(policy))
    out, d, _ = call("vault_dump")
    assert out.disposition == "blocked" and d["reason_code"] == "P_TOOL_DENIED"
    assert call("send_email")[0].disposition == "forwarded"
    assert call("vault_read")[0].disposition == "forwarded"
    out, d, _ = call("send_email")
    assert out.disposition == "blocked" and d["matched_rule"] == "r"
    assert d["reason"] == (
        "tool 'send_*' at index 2 is forbidden after 'vault_*' (triggered at index 1); "
        "it holds until this wrap ends (a `for:` in the rule would end it by itself)"
    )


def test_a_flow_deny_says_how_it_ends_in_the_reply_and_the_log():
    # docs/policy.md, "How a deny ends": in a shared session, the command that clears it
    policy = load_policy(
        b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
        b"sequences:\n"
        b"  - {type: never_after, trigger: read_secret, forbidden: send_email, id: always}\n"
        b"  - {type: never_after, trigger: read_token, forbidden: post, for: 10m, id: windowed}\n"
        b"  - {type: max_calls, tool: ping, max: 0, id: none}\n"
    )
    call = Calls(session(policy, shared_session_key="client:4242:17"))
    assert call("read_secret")[0].disposition == "forwarded"
    out, d, audit = call("send_email")
    said = (
        "tool 'send_email' at index 1 is forbidden after 'read_secret' (triggered at index 0); it holds for the "
        "rest of the agent session (a `for:` in the rule would end it by itself); "
        "`assay mcp session reset client:4242:17` clears it"
    )
    assert payload(out.reply)["reason"] == said and d["reason"] == said
    assert said in json.dumps(audit)
    assert call("read_token")[0].disposition == "forwarded"
    call.h.clock.advance(125.5)
    out, d, _ = call("post")
    assert d["reason"].endswith(
        "; it ends in 7m 55s (10m after the latest 'read_token'), or at once with "
        "`assay mcp session reset client:4242:17`"
    )
    out, d, _ = call("ping")
    assert d["reason"] == (
        "tool 'ping' exceeded max calls (1 > 0); it holds for the rest of the agent session; "
        "`assay mcp session reset client:4242:17` clears it"
    )


def test_a_denied_notification_is_dropped_and_does_not_enter():
    # under flow rules a tools/call notification is denied (no server runs it, so it must not
    # stand in the history for a call that ran): dropped without a reply, logged, not entered
    policy = load_policy(
        b'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
        b"sequences: [{type: max_calls, tool: ping, max: 1}]\n"
    )
    call = Calls(session(policy))
    assert call("ping")[0].disposition == "forwarded"
    out, d, _ = call("ping", notify=True)
    assert out.disposition == "dropped" and out.reply is None and d["reason_code"] == "P_SEQUENCE_VIOLATION"
    assert d["matched_rule"] == "sequences"
    out, d, _ = call("ping")
    assert out.disposition == "blocked" and d["reason_code"] == "P_SEQUENCE_VIOLATION"
    assert d["matched_rule"] == "max_calls:ping<=1"
    assert d["reason"] == "tool 'ping' exceeded max calls (2 > 1); it holds until this wrap ends"
    assert call.h.session._flows.n == 1


def test_dry_run_forwards_logs_and_still_predicts():
    call = Calls(session(dry_run=True))
    out, d, a = call("deploy")
    assert out.disposition == "forwarded" and out.reply is None
    assert (d["decision"], d["reason_code"], d["matched_rule"]) == (
        "allow",
        "P_SEQUENCE_VIOLATION",
        "tests-before-deploy",
    )
    assert a["decision"] == "would_deny"
    # the forwarded deploy did not enter: run_tests and then deploy are what enforcing allows
    out, d, a = call("run_tests")
    assert d["reason_code"] == "P_POLICY_ALLOW" and a["decision"] == "allow"
    out, d, a = call("deploy")
    assert d["reason_code"] == "P_POLICY_ALLOW" and a["decision"] == "allow"
    call("read_secret", {"name": "api_key"})
    out, d, a = call("send_email", {"to": "x", "body": "y"})
    assert out.disposition == "forwarded" and a["decision"] == "would_deny" and d["matched_rule"] == "no-exfiltration"


def test_odd_arguments_never_crash_the_check():
    call = Calls(session())
    call("read_secret", {"name": "api_key"})
    for args in ([1, 2], "text", {"path": {"deep": [1, {"x": None}]}}, {"path": 5}):
        out, d, _ = call("read_file", args)
        assert d["reason_code"] in ("P_POLICY_ALLOW", "P_ARG_SCHEMA")
    out = call.h.handle({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": 5}})
    assert out.disposition == "blocked"


def test_a_policy_without_flow_rules_has_no_tracker():
    h = session(load_policy(b'version: "2.0"\ntools: {allow: [a]}\n'))
    assert h.session._flows is None
