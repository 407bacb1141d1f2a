"""The exact-name form of tool-name patterns (docs/policy.md, "Tool-name patterns"): ``=name`` is
the one tool ``name``, whatever it holds, in every place that reads a pattern; where it cannot
mean that, it is refused at load."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import NameMatcher, PolicyError, evaluate, load_policy, pattern_matches
from assay.policy.explain import explain
from assay.policy.pipeline import Call, Pipeline, RateGuard
from assay.policy.rates import tracker_for
from assay.policy.toolview import tool_summary
from assay.session.reports import declared_tools_of


def exact_pattern(name: str) -> str:
    from assay.policy import exact_pattern as written

    return written(name)


def exact_name(pattern: str) -> str | None:
    from assay.policy import exact_name as read

    return read(pattern)


def policy(doc: dict, warn=None):
    return load_policy(json.dumps({"version": "2.0", **doc}).encode(), warn=warn)


ODD = ["*", "x*", "*x", "**", "*x*", "=", "==", "=x", "", "read_*_file", "a b", "\u2028", "x\u0085y"]


@pytest.mark.parametrize("name", ODD)
def test_the_exact_form_matches_its_name_and_nothing_else(name):
    pattern = exact_pattern(name)
    assert exact_name(pattern) == name
    others = ["", "x", "xx", "ax", "xa", "*", "x*", "*x", "=", "=x", "read_a_file", name + "x", "x" + name, name[:-1]]
    for other in others:
        assert pattern_matches(other, pattern) is (other == name), (pattern, other)
        assert NameMatcher([pattern])(other) is (other == name), (pattern, other)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab*=_"), max_size=6), st.text(alphabet=st.sampled_from("ab*=_"), max_size=6))
def test_exact_pattern_of_any_name_matches_only_that_name(name, other):
    pattern = exact_pattern(name)
    assert pattern_matches(other, pattern) is (other == name)
    assert NameMatcher([pattern, "=" + other])(name)  # a list: any entry
    assert exact_name(pattern) == name


def test_engine_lists_read_the_exact_form():
    p = policy(
        {
            "tools": {"allow": ["=*", "=x*", "read_*"], "deny": ["=read_*x"], "approval_required": ["=*x"]},
            "enforcement": {"unconstrained_tools": "allow"},
        }
    )
    assert evaluate(p, "*", {}).outcome == "allow"
    assert evaluate(p, "x*", {}).outcome == "allow"
    for name in ("exec", "x", "xy", "ax", "=*", "=x*"):
        assert evaluate(p, name, {}).reason_code == "E_TOOL_NOT_ALLOWED", name
    assert evaluate(p, "read_*x", {}).reason_code == "E_TOOL_DENIED"  # allowed by read_*, denied exactly
    assert evaluate(p, "read_a", {}).outcome == "allow"
    p = policy(
        {"tools": {"allow": ["*"], "approval_required": ["=*x"]}, "enforcement": {"unconstrained_tools": "allow"}}
    )
    assert evaluate(p, "*x", {}).approval_state is not None
    assert evaluate(p, "ax", {}).approval_state is None


def test_rates_paths_flows_inspect_and_resources_read_the_exact_form():
    p = policy(
        {
            "tools": {"allow": ["*"]},
            "enforcement": {"unconstrained_tools": "allow"},
            "limits": {"tools": [{"id": "one", "tools": ["=x*"], "max_calls": 0}]},
            "path_confinement": [{"tools": ["=*"], "args": ["path"], "within": ["/ws"]}],
            "aliases": {"stars": ["=*", {"tool": "=y*", "server": "=s*"}]},
            "sequences": [{"type": "never_after", "trigger": "stars", "forbidden": "=send*", "id": "r"}],
            "inspect": {"tools": [{"tool": "=*", "server": "=*", "secrets": "mask"}]},
            "resources": {"allow": ["=file:///a*"]},
            "prompts": {"deny": ["=p*"]},
        }
    )
    tracker = tracker_for(p)
    assert tracker is not None
    assert [r.id for r in tracker.rules_for("x*")] == ["one"] and tracker.rules_for("xy") == ()
    assert evaluate(p, "*", {"path": "/etc/passwd"}).reason_code == "E_PATH_CONFINEMENT"
    assert evaluate(p, "anything", {"path": "/etc/passwd"}).outcome != "deny"
    pipeline = Pipeline(p, None, (RateGuard(tracker),), clock=lambda: 0.0)
    assert pipeline.decide(Call("x*", {})).reason_code == "E_RATE_LIMIT"
    assert pipeline.decide(Call("xyz", {})).outcome != "deny"
    assert p.inspect is not None
    assert p.inspect.settings("*", "*").secrets == "mask"
    assert p.inspect.settings("srv", "*").secrets == "off" and p.inspect.settings("*", "x").secrets == "off"
    assert p.resources is not None and p.prompts is not None
    assert p.resources.refusal("file:///a*") is None and p.resources.refusal("file:///ab") == "allow"
    assert p.prompts.refusal("p*") == "deny" and p.prompts.refusal("pq") is None
    # the flow rule: "*" (or "y*" on the server "s*") triggers, then only the tool "send*" is forbidden
    from assay.policy.flows import FlowTracker

    for trigger, server, hit in (
        ("*", "any", True),
        ("y*", "s*", True),
        ("y*", "sx", False),
        ("anything", "any", False),
    ):
        flows = FlowTracker.for_policy(p, server)
        assert flows is not None
        flows.enter(trigger, {})
        assert (flows.violation("send*", {}) is not None) is hit, (trigger, server)
        assert flows.violation("sendmail", {}) is None


def test_explain_and_the_tools_view_read_the_exact_form():
    p = policy(
        {"tools": {"allow": ["=*"], "approval_required": ["=*"]}, "enforcement": {"unconstrained_tools": "allow"}}
    )
    star = explain(p, "*", {})
    assert star.agrees and star.verdict == "needs approval"
    other = explain(p, "read_file", {})
    assert other.agrees and other.decision.reason_code == "E_TOOL_NOT_ALLOWED"
    assert tool_summary(p, "*").verdict == "needs approval"
    assert tool_summary(p, "read_file").verdict == "deny"


def test_coverage_counts_an_exact_name_as_declared():
    assert declared_tools_of(allow=["=x*", "read_*", "plain"], deny=["=*", "="]) == ["*", "plain", "x*"]


def test_where_the_form_cannot_mean_one_tool_it_is_refused_or_warned_about():
    with pytest.raises(PolicyError, match=r"aliases\.=x: an alias name must not start with '='"):
        policy({"aliases": {"=x": ["a"]}, "sequences": [{"type": "require", "tool": "=x"}]})
    with pytest.raises(PolicyError, match=r"sequences\[0\]\.pattern: a blocklist pattern is a plain substring"):
        policy({"sequences": [{"type": "blocklist", "pattern": "=exec"}]})
    said: list[str] = []
    p = policy({"schemas": {"=x": True, "*": True}, "tool_classes": {"=y": ["c"]}}, warn=said.append)
    assert "=x" in p.schemas and "*" in p.schemas  # keys are names as written
    assert any("schemas.=x: a key names one tool as it is written" in w for w in said)
    assert any("tool_classes.=y" in w for w in said) and not any("schemas.*" in w for w in said)


def test_a_selector_in_the_exact_form_is_the_tool_not_an_alias():
    p = policy(
        {
            "tools": {"allow": ["*"]},
            "enforcement": {"unconstrained_tools": "allow"},
            "aliases": {"net": ["send_*"]},
            "sequences": [{"type": "before", "first": "=net", "then": "deploy", "id": "b"}],
        }
    )
    from assay.policy.flows import FlowTracker

    flows = FlowTracker.for_policy(p, "s")
    assert flows is not None
    flows.enter("send_mail", {})  # a member of the alias "net": not the tool "net"
    assert flows.violation("deploy", {}) is not None
    flows.enter("net", {})
    assert flows.violation("deploy", {}) is None


def test_check_and_explain_accept_the_exact_form(tmp_path):
    """As a user runs them: `policy check` loads it without a warning, `policy explain` allows
    the tool named `*` and nothing else (docs/policy-tools.md)."""
    import os
    import subprocess

    from tests.conftest import ASSAY

    p = tmp_path / "assay.yaml"
    p.write_text('version: "2.0"\ntools:\n  allow: ["=*", "=x*"]\nenforcement: {unconstrained_tools: allow}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(ASSAY), "mcp", "policy", *args], capture_output=True, text=True, timeout=60, env=env)

    res = run("check", "--strict", str(p))
    assert res.returncode == 0 and res.stderr == "", res
    verdicts = {}
    for tool in ("*", "x*", "exec", "xy"):
        res = run("explain", str(p), "--tool", tool, "--json")
        verdicts[tool] = (res.returncode, json.loads(res.stdout)["verdict"])
    assert verdicts == {"*": (0, "allow"), "x*": (0, "allow"), "exec": (1, "deny"), "xy": (1, "deny")}
