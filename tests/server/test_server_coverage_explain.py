"""`assay_check_coverage` and `assay_explain_trace` over real policy files (docs/server.md,
the sections of the two tools): both read the typed v1.1 policy through the sequence dialect's reader."""

from __future__ import annotations

import os

import pytest

from assay.policy.sequence import SequencePolicyError, parse_sequence_policy
from assay.server.config import ServerConfig
from assay.server.context import ToolContext
from assay.server.errors import ToolError
from assay.server.log import Logger
from assay.server.tools import coverage, explain

POLICY = (
    'version: "1.1"\n'
    "name: demo\n"
    "tools:\n"
    "  allow: [Search, Create, Read]\n"
    "  deny: [rm]\n"
    "  require_args: {Create: [title]}\n"
    "aliases:\n"
    "  Lookup: [Search, Read]\n"
    "sequences:\n"
    "  - {type: before, first: Lookup, then: Create}\n"
    "  - {type: never_after, trigger: Create, forbidden: rm}\n"
    "  - {type: require, tool: Create}\n"
    "  - {type: eventually, tool: Read, within: 2}\n"
    "  - {type: max_calls, tool: Search, max: 2}\n"
    "  - {type: after, trigger: Create, then: Read}\n"
    "  - {type: sequence, tools: [Search, Create, Read]}\n"
    "  - {type: blocklist, pattern: EXEC}\n"
    '  - {type: before, first: {tool: Auth, args_match: {user: "^a"}}, then: Create, id: x}\n'
)


def ctx_with(tmp_path, **files) -> ToolContext:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return ToolContext(os.path.realpath(tmp_path), ServerConfig(), Logger(None, "error"))


def test_V4_coverage_report(tmp_path):
    """V4: policy tools = allow, deny, require_args keys, rule tools, alias names and members;
    rule ids lower-cased; unknown triggered ids still count; high-risk gaps = unseen deny/forbidden."""
    ctx = ctx_with(tmp_path, **{"p.yaml": POLICY})
    traces = [{"tools": ["Search", "Create", "zzz"], "rules_triggered": ["require_create", "bogus"]}]
    report = coverage.run(ctx, {"policy": "p.yaml", "traces": traces, "threshold": 50})
    tc, rc = report["tool_coverage"], report["rule_coverage"]
    assert (tc["total_tools_in_policy"], tc["tools_seen_in_traces"]) == (6, 2)
    assert tc["unseen_tools"] == ["Auth", "Lookup", "Read", "rm"] and tc["unexpected_tools"] == ["zzz"]
    assert rc["total_rules"] == 9 and rc["rules_triggered"] == 2
    assert rc["untriggered_rules"] == [
        "after_create_then_read",
        "before_auth_then_create",
        "before_lookup_then_create",
        "blocklist_exec",
        "eventually_read_2",
        "max_calls_search_2",
        "never_after_create_forbidden_rm",
        "sequence_search_create_read",
    ]
    assert report["high_risk_gaps"] == [
        {"tool": "rm", "reason": "denied tool never exercised by a trace", "severity": "high"}
    ]
    assert report["overall_coverage_pct"] == pytest.approx((200 / 6 + 200 / 9) / 2)


def test_X2_explain_steps(tmp_path):
    """X2: deny and allow lists, per-rule state along the trace, end-of-trace checks on the last step."""
    ctx = ctx_with(tmp_path, **{"p.yaml": POLICY, "bare.yaml": 'version: "2"\n'})
    trace = [{"tool": t} for t in ["Create", "rm", "Search", "Search", "Search"]]
    ex = explain.run(ctx, {"policy": "p.yaml", "trace": trace})
    assert (ex["policy_name"], ex["policy_version"], ex["first_block_index"]) == ("demo", "1.1", 0)
    assert ex["blocking_rules"] == [
        "before_lookup_then_create",
        "deny_list",
        "eventually_read_2",
        "after_create_then_read",
    ]
    last = {r["rule_id"]: r["passed"] for r in ex["steps"][-1]["rules_evaluated"]}
    assert last["max_calls_search_2"] is False and last["before_auth_then_create"] is True
    assert ex["steps"][-1]["rules_evaluated"][-1]["explanation"] == (
        "'Create' at step 0 was never followed by 'Read' before the trace ended"
    )
    bare = explain.run(ctx, {"policy": "bare.yaml", "trace": [{"tool": "a"}]})
    assert bare["policy_name"] is None and bare["blocking_rules"] == []


@pytest.mark.parametrize(
    "text",
    [
        'version: "1.1"\nname: ~\n',
        'version: "1.1"\nmetadata: 5\n',
        'version: "1.1"\ntools: []\n',
        'version: "1.1"\ntools: {require_args: {x: true}}\n',
        'version: "1.1"\nsequences:\n',
        'version: "1.1"\naliases: {1: [a]}\n',
        'version: "1.1"\nsequences:\n  - {type: require, tool: {tool: X}}\n',
        'version: "1.1"\nsequences:\n  - {type: require, tool: {tool: X, args_match: {}, y: 1}}\n',
        'version: "1.1"\nsequences:\n  - {type: max_calls, tool: X, max: 5000000000}\n',
        "version: 1.1\n",
        'version: "1.1"\nsequences:\n  - {type: nope}\n',
    ],
)
def test_V3_X1_same_reader_as_check_sequence(tmp_path, text):
    """V3/X1: the policy is S2 form 1, so coverage and explain refuse exactly what check_sequence refuses."""
    ctx = ctx_with(tmp_path, **{"p.yaml": text})
    try:
        parse_sequence_policy(text.encode())
        refused = False
    except SequencePolicyError:
        refused = True
    for tool, args in ((coverage, {"traces": [{"tools": ["a"]}]}), (explain, {"trace": [{"tool": "a"}]})):
        if refused:
            with pytest.raises(ToolError) as info:
                tool.run(ctx, {"policy": "p.yaml", **args})
            assert (info.value.code, info.value.message) == ("E_POLICY_PARSE", "Policy structure is invalid")
        else:
            assert tool.run(ctx, {"policy": "p.yaml", **args})
