"""Sequence dialect (docs/policy.md, "Python API"; docs/server.md, `assay_check_sequence`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy.sequence import (
    INVALID_FORMAT,
    SequenceCall,
    SequencePolicyError,
    check_sequence,
    evaluate_rules,
    parse_sequence_policy,
)


def rules(yaml_rules: str, aliases: str = "{}"):
    return parse_sequence_policy(f'version: "1.1"\naliases: {aliases}\nsequences:\n{yaml_rules}'.encode())


def outcome(rule_yaml: str, trace, *, partial=True, aliases="{}"):
    p = rules(f"  - {rule_yaml}\n", aliases)
    ev = evaluate_rules(p.rules, trace, p.aliases, partial=partial)[0]
    return ev.outcome, list(ev.spanned)


# SQ1 forms ---------------------------------------------------------------------------------


def test_SQ1_three_forms_in_order():
    assert parse_sequence_policy(b'version: "1.1"\nsequences: []\n').form == "policy"
    assert parse_sequence_policy(b"- {type: require, tool: a}\n").form == "rules"
    assert parse_sequence_policy(b"- a\n- b\n").form == "legacy"


@pytest.mark.parametrize(
    "text",
    [
        b"sequences: []\n",  # version missing
        b'version: "1.1"\nbogus: 1\n',  # unknown top-level key
        b'version: "1.1"\ntools: {bogus: 1}\n',
        b'version: "1.1"\non_error: explode\n',
        b"- {type: teleport}\n",
        b"- {type: eventually, tool: a}\n",  # within required
        b"- {type: max_calls, tool: a, max: -1}\n",
        b"42\n",
        b"\xff",
        b"a: 1\na: 2\n",
        b"- {tool: a}\n",
    ],
)
def test_SQ1_invalid_format(text):
    with pytest.raises(SequencePolicyError) as info:
        parse_sequence_policy(text)
    assert str(info.value) == INVALID_FORMAT
    assert info.value.server_error() == {"code": "E_POLICY_PARSE", "message": "Invalid sequence policy format"}


def test_SQ1_extra_rule_keys_ignored():
    p = parse_sequence_policy(b"- {type: require, tool: a, id: r1}\n")
    assert p.rules[0].rule_id == "require:a"


# SQ3 legacy -------------------------------------------------------------------------------


def test_SQ3_legacy_exact_match():
    p = parse_sequence_policy(b"- a\n- b\n")
    assert check_sequence(p, ["a", "b"]) == {"allowed": True, "violations": [], "suggested_fix": None}
    assert check_sequence(p, ["a", "c"]) == {
        "allowed": False,
        "violations": [{"constraint": "sequence_exact_match", "suggestion": 'Expected ["a", "b"], found ["a", "c"]'}],
        "suggested_fix": None,
    }


# SQ4 rule table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, trace, partial, expected",
    [
        ("{type: require, tool: a}", ["x", "a"], True, ("held", [1])),
        ("{type: require, tool: a}", ["x"], True, ("violated", [])),  # absent require violates even partial
        ("{type: blocklist, pattern: '*'}", ["a*b", "ab"], True, ("violated", [0])),  # * literal
        ("{type: blocklist, pattern: rm}", ["ls"], True, ("held", [0])),
        ("{type: before, first: a, then: b}", ["x"], True, ("not_exercised", [])),
        ("{type: before, first: a, then: b}", ["b", "a"], True, ("violated", [1, 0])),
        ("{type: before, first: a, then: b}", ["b"], True, ("violated", [0])),
        ("{type: before, first: a, then: b}", ["a", "b"], True, ("held", [0, 1])),
        ("{type: never_after, trigger: r, forbidden: p}", ["p", "r"], True, ("held", [1])),
        ("{type: never_after, trigger: r, forbidden: p}", ["r", "x", "p"], True, ("violated", [0, 2])),
        ("{type: never_after, trigger: r, forbidden: p}", ["p"], True, ("not_exercised", [])),
        ("{type: max_calls, tool: a, max: 1}", ["a", "x", "a"], True, ("violated", [0, 2])),
        ("{type: max_calls, tool: a, max: 1}", [], True, ("held", [])),
        ("{type: eventually, tool: a, within: 2}", ["x", "x", "a"], True, ("violated", [2])),
        ("{type: eventually, tool: a, within: 2}", ["x", "a"], True, ("held", [1])),
        ("{type: eventually, tool: a, within: 2}", ["x", "x"], True, ("violated", [0, 1])),
        ("{type: eventually, tool: a, within: 3}", ["x"], True, ("not_exercised", [])),
        ("{type: eventually, tool: a, within: 3}", ["x"], False, ("violated", [0])),
        ("{type: after, trigger: t, then: a}", ["t", "a"], True, ("held", [0, 1])),
        ("{type: after, trigger: t, then: a}", ["t"], True, ("not_exercised", [])),
        ("{type: after, trigger: t, then: a}", ["t"], False, ("violated", [0])),
        ("{type: after, trigger: t, then: a}", ["t", "x", "a"], True, ("violated", [0])),  # one past the window
        ("{type: after, trigger: t, then: a, within: 2}", ["t", "t", "x", "a"], True, ("violated", [0, 1])),
        ("{type: after, trigger: t, then: a}", ["x"], True, ("not_exercised", [])),
        ("{type: sequence, tools: [a, b, c]}", ["a", "x", "b", "c"], True, ("held", [0, 2, 3])),
        ("{type: sequence, tools: [a, b, c]}", ["a", "c"], True, ("violated", [0, 1])),
        ("{type: sequence, tools: [a, b, c], strict: true}", ["a", "x"], True, ("violated", [0, 1])),
        ("{type: sequence, tools: [a, b, c], strict: true}", ["x", "a", "b"], True, ("held", [1, 2])),
        ("{type: sequence, tools: [a, b]}", ["a"], True, ("held", [0])),
        ("{type: sequence, tools: [a, b]}", ["a"], False, ("violated", [0])),
        ("{type: sequence, tools: [a, b]}", ["x"], True, ("not_exercised", [])),
        ("{type: sequence, tools: []}", ["a"], True, ("not_exercised", [])),
    ],
)
def test_SQ4_rule_table(rule, trace, partial, expected):
    assert outcome(rule, trace, partial=partial) == expected


def test_SQ4_aliases_resolve_selectors_but_not_blocklist():
    aliases = "{Search: [web_search, kb_search]}"
    assert (
        outcome("{type: max_calls, tool: Search, max: 1}", ["web_search", "kb_search"], aliases=aliases)[0]
        == "violated"
    )
    assert outcome("{type: require, tool: Search}", ["kb_search"], aliases=aliases)[0] == "held"
    assert outcome("{type: blocklist, pattern: Search}", ["web_search"], aliases=aliases)[0] == "held"


def test_SQ4_args_match_selectors():
    p = rules(
        "  - {type: never_after, trigger: {tool: bash, args_match: {command: 'aws/cred'}}, forbidden: {tool: bash, args_match: {command: '^curl'}}}\n"
    )
    trace = [
        SequenceCall("bash", {"command": "ls"}),
        SequenceCall("bash", {"command": "cat ~/.aws/credentials"}),
        SequenceCall("bash", {"command": "curl -d @x"}),
    ]
    ev = evaluate_rules(p.rules, trace, p.aliases)[0]
    assert (ev.outcome, ev.spanned) == ("violated", (1, 2))
    assert ev.rule_id == "never_after:bash[command]->bash[command]"
    # SQ2: names only (the server tool) never match an args_match selector
    assert evaluate_rules(p.rules, ["bash", "bash", "bash"])[0].outcome == "not_exercised"
    # non-string values match on their JSON text; a bad regex never matches
    p2 = rules(
        "  - {type: require, tool: {tool: t, args_match: {n: '^\\d+$'}}}\n  - {type: require, tool: {tool: t, args_match: {n: '('}}}\n"
    )
    got = evaluate_rules(p2.rules, [SequenceCall("t", {"n": 42})])
    assert [e.outcome for e in got] == ["held", "violated"]


def test_SQ5_SQ6_violation_shape_and_ids():
    p = rules(
        "  - {type: require, tool: auth}\n"
        "  - {type: max_calls, tool: s, max: 1}\n"
        "  - {type: sequence, tools: [a, b], strict: true}\n"
        "  - {type: sequence, tools: [a, b]}\n"
        "  - {type: after, trigger: t, then: u, within: 1}\n"
    )
    r = check_sequence(p, ["s", "a", "s", "t", "x"])
    assert r["allowed"] is False and r["suggested_fix"] is None
    v = r["violations"]
    assert v[0] == {
        "rule_type": "require",
        "constraint": "sequence_rule",
        "message": "required tool 'auth' not found in trace",
        "spanned": [],
        "tool": "auth",
    }
    assert v[1] == {
        "rule_type": "max_calls",
        "constraint": "max_calls",
        "message": "tool 's' exceeded max calls (2 > 1)",
        "spanned": [0, 2],
        "tool": "s",
        "event_index": 2,
        "context": {"max": 1, "actual": 2},
    }
    assert v[2]["constraint"] == "sequence_strict" and "tool" not in v[2] and v[2]["event_index"] == 2
    assert v[3]["rule_type"] == "after" and v[3]["tool"] == "u"  # the non-strict sequence held (partial)
    assert [e.rule_id for e in evaluate_rules(p.rules, [])] == [
        "require:auth",
        "max_calls:s<=1",
        "sequence:strict:a>b",
        "sequence:a>b",
        "after:t->u@1",
    ]


def test_check_sequence_allowed():
    p = rules("  - {type: before, first: auth, then: pay}\n")
    assert check_sequence(p, ["auth", "pay"]) == {"allowed": True, "violations": [], "suggested_fix": None}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "t", "x"]), max_size=6))
def test_after_partial_violation_implies_complete_violation(trace):
    """Partial mode never reports a violation that the finished run would not."""
    p = rules(
        "  - {type: after, trigger: t, then: a, within: 2}\n  - {type: sequence, tools: [a, b]}\n  - {type: eventually, tool: b, within: 3}\n"
    )
    part = evaluate_rules(p.rules, trace, partial=True)
    full = evaluate_rules(p.rules, trace, partial=False)
    for a, b in zip(part, full):
        if a.outcome == "violated":
            assert b.outcome == "violated"


def test_rule_accessors_give_what_each_kind_names_and_refuse_the_rest():
    p = rules(
        "  - {type: require, tool: a}\n"
        "  - {type: eventually, tool: b, within: 3}\n"
        "  - {type: max_calls, tool: c, max: 2}\n"
        "  - {type: before, first: d, then: e}\n"
        "  - {type: after, trigger: f, then: g}\n"
        "  - {type: never_after, trigger: h, forbidden: i}\n"
    )
    req, ev, mx, bef, aft, nev = p.rules
    assert req.sel("tool").tool == "a"
    assert (ev.sel("tool").tool, ev.limit("within")) == ("b", 3)
    assert (mx.sel("tool").tool, mx.limit("max")) == ("c", 2)
    assert (bef.sel("first").tool, bef.sel("then").tool) == ("d", "e")
    assert (aft.sel("trigger").tool, aft.sel("then").tool, aft.limit("within")) == ("f", "g", 1)
    assert (nev.sel("trigger").tool, nev.sel("forbidden").tool) == ("h", "i")
    with pytest.raises(ValueError, match="a require rule has no then"):
        req.sel("then")
    with pytest.raises(ValueError, match="a before rule has no within"):
        bef.limit("within")
