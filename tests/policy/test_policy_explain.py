"""`assay.policy.explain` (docs/policy-tools.md, "assay mcp policy explain"): the steps always
give the decision the real pipeline gives, over random policies and calls."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.explain import explain
from assay.policy.explain_steps import FAIL, SKIPPED
from assay.policy.toolview import tool_summary
from assay.policy.pipeline import Call, FlowGuard, Pipeline, RateGuard
from assay.policy.flows import FlowTracker
from assay.policy.rates import tracker_for

NAMES = ["read_file", "write_file", "exec", "deploy", "run_tests", "send_email"]
PATTERNS = NAMES + ["read_*", "*_file", "*e*", "*", "=read_file", "=*"]  # "=*" names the tool "*" only
CLASSES = ["fs", "net", "danger"]

names = st.lists(st.sampled_from(PATTERNS), max_size=3, unique=True)
classes = st.lists(st.sampled_from(CLASSES), max_size=2, unique=True)
schema = st.sampled_from(
    [
        {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
        {"type": "object", "properties": {"path": {"type": "string", "maxLength": 8}}},
        {"type": "object", "properties": {"path": {"$ref": "https://example.com/s.json"}}},  # never compiles
        True,
    ]
)
flow = st.sampled_from(
    [
        {"type": "require", "tool": "run_tests"},
        {"type": "before", "first": "run_tests", "then": "deploy"},
        {"type": "blocklist", "pattern": "exec"},
        {"type": "eventually", "tool": "deploy", "within": 0},
        {"type": "never_after", "trigger": "read_file", "forbidden": "send_email"},
        {"type": "max_calls", "tool": "deploy", "max": 0},
    ]
)


@st.composite
def policies(draw):
    doc: dict = {"version": "2.0", "tools": {}}
    t = doc["tools"]
    if draw(st.booleans()):
        t["allow"] = draw(names) + ["*"] * draw(st.integers(0, 1))
    if draw(st.integers(0, 2)) == 2:
        t["deny"] = draw(names)
    if draw(st.booleans()):
        t["allow_classes"] = draw(classes)
    if draw(st.booleans()):
        t["deny_classes"] = draw(classes)
    if draw(st.booleans()):
        t["approval_required"] = draw(names)
    if draw(st.booleans()):
        doc["tool_classes"] = {
            n: draw(classes) for n in draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
        }
    doc["schemas"] = {n: draw(schema) for n in draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))}
    doc["enforcement"] = {"unconstrained_tools": draw(st.sampled_from(["warn", "deny", "allow"]))}
    limits: dict = {}
    for key in ("max_requests_total", "max_tool_calls_total"):
        if draw(st.integers(0, 5)) == 5:
            limits[key] = draw(st.sampled_from([0, 1, 5]))
    if draw(st.integers(0, 3)) == 3:
        limits["tools"] = [
            {
                "tools": draw(names) or ["*"],
                "max_calls": draw(st.sampled_from([0, 1, 3])),
                **({"per": "60s"} if draw(st.booleans()) else {}),
            }
        ]
    if limits:
        doc["limits"] = limits
    if draw(st.booleans()):
        doc["path_confinement"] = [{"tools": draw(names) or ["*"], "args": ["path"], "within": ["/w"]}]
    if draw(st.booleans()):
        doc["sequences"] = draw(st.lists(flow, max_size=3, unique_by=lambda r: repr(r)))
    return doc


arguments = st.sampled_from(
    [None, {}, {"path": "/w/a"}, {"path": "/etc/passwd"}, {"path": 5}, {"path": "/w/very/long/name"}, "text", [1]]
)


@settings(max_examples=600, deadline=None)
@given(doc=policies(), tool=st.sampled_from(NAMES + ["other"]), args=arguments)
def test_the_steps_give_the_pipelines_decision(doc, tool, args):
    policy = load_policy(yaml.safe_dump(doc).encode(), warn=lambda _line: None)
    got = explain(policy, tool, args, server="s1")
    # an independent pipeline, built as wrap builds its guards (assay.session.session)
    guards = []
    rates = tracker_for(policy)
    if rates is not None:
        guards.append(RateGuard(rates))
    if policy.sequences:
        guards.append(FlowGuard(FlowTracker(policy.sequences, policy.aliases, server="s1")))
    decision = Pipeline(policy, None, guards, clock=lambda: 0.0).decide(Call(tool, args, "s1"))
    assert got.decision == decision
    assert got.agrees, (got.to_dict(), doc)
    assert got.trace_verdict == (got.verdict, decision.reason_code)
    # after the first fail every step is "not reached"
    statuses = [s.status for s in got.steps]
    if FAIL in statuses:
        assert all(s == SKIPPED for s in statuses[statuses.index(FAIL) + 1 :])
    # the name-level summary is the engine's plan of the name
    summary = tool_summary(policy, tool, server="s1")
    if summary.verdict == "deny":
        assert decision.outcome == "deny"


def test_the_steps_are_in_the_pipeline_order():
    policy = load_policy(b'version: "2.0"\ntools: {allow: [a]}\n')
    got = explain(policy, "a", {})
    assert [s.name for s in got.steps] == [
        "pins",
        "session limits",
        "deny list",
        "allow list",
        "schema",
        "unconstrained mode",
        "path confinement",
        "declared baseline",
        "rate limits",
        "flow rules",
        "approvals",
    ]
    assert got.verdict == "allow with warning" and got.decision.reason_code == "E_TOOL_UNCONSTRAINED"


def test_needs_approval_and_flow_rules_that_apply_later():
    policy = load_policy(b"""version: "2.0"
tools: {allow: [deploy, run_tests], approval_required: ["deploy*"]}
enforcement: {unconstrained_tools: allow}
sequences:
  - {type: before, id: tests-first, first: run_tests, then: deploy}
  - {type: never_after, trigger: deploy, forbidden: run_tests}
""")
    first = explain(policy, "run_tests", {})
    assert first.verdict == "allow"
    flows = next(s for s in first.steps if s.name == "flow rules")
    assert "tests-first (names this tool)" in flows.detail and "never_after:deploy->run_tests" in flows.detail
    deploy = explain(policy, "deploy", {})
    assert deploy.verdict == "deny" and deploy.decision.matched_rule == "tests-first"
    assert tool_summary(policy, "deploy").verdict == "needs approval"
    alone = load_policy(b'version: "2.0"\ntools: {approval_required: [deploy]}\n')
    assert explain(alone, "deploy", {}).verdict == "needs approval"
