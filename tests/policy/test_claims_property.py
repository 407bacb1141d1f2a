"""Policy by user, for random policies and claims (docs/policy.md, "Policy by user (serve)").

The oracle is the page's rules written out plainly: an entry applies when every claim it names
is a string equal to an accepted value, or a list with such an element; the user's policy allows
a tool only if the file or an applying entry allows it (or the file has no allowlist) and no deny
of the file or of an applying entry matches it; it asks for approval when any applying list
says so. The specialized policy, explain with the same claims and wrap's listing filter must all
say what the oracle says.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import evaluate, load_policy
from assay.policy.explain import explain
from assay.policy.patterns import pattern_matches
from assay.policy.users import applying, for_user
from assay.session.listing import denied_by_name

TOOLS = ["deploy", "deploy_prod", "read_a", "read_b", "rm", "x"]
PATTERNS = st.sampled_from(["deploy", "deploy_*", "read_*", "*_prod", "rm", "x", "*", "=x", "*a*"])
CLAIMS = ["groups", "sub", "roles", "a.b"]
VALUES = ["ops", "Ops", "ops ", "op", "dev", "alice", "caf\u00e9", "cafe\u0301", "1", ""]

pattern_lists = st.lists(PATTERNS, max_size=3)
condition = st.dictionaries(
    st.sampled_from(CLAIMS), st.lists(st.sampled_from(VALUES), min_size=1, max_size=3), min_size=1, max_size=2
)
entry = st.fixed_dictionaries(
    {"when": st.builds(lambda c: {"claims": c}, condition)},
    optional={"allow": pattern_lists, "deny": pattern_lists, "approval_required": pattern_lists},
)
claim_value = st.one_of(
    st.sampled_from(VALUES),
    st.lists(st.one_of(st.sampled_from(VALUES), st.integers(0, 2), st.none(), st.booleans()), max_size=3),
    st.integers(0, 2),
    st.none(),
    st.booleans(),
    st.builds(lambda v: {"v": v}, st.sampled_from(VALUES)),
)
claims_st = st.one_of(st.none(), st.dictionaries(st.sampled_from(CLAIMS), claim_value, max_size=3))


@st.composite
def policies(draw):
    tools: dict = {}
    allow = draw(st.one_of(st.none(), pattern_lists))
    if allow is not None:
        tools["allow"] = allow
    tools["deny"] = draw(pattern_lists)
    tools["approval_required"] = draw(pattern_lists)
    entries = []
    for e in draw(st.lists(entry, max_size=4)):
        entries.append({"when": e["when"], "tools": {k: v for k, v in e.items() if k != "when"}})
    doc = {"version": "2.0", "tools": tools, "enforcement": {"unconstrained_tools": "allow"}, "users": entries}
    return doc


def holds(value, accepted) -> bool:
    if type(value) is str:
        return any(value == a for a in accepted)
    if type(value) is list:
        return any(type(v) is str and any(v == a for a in accepted) for v in value)
    return False


def oracle(doc, claims, tool):
    """(allowed, needs approval, the indexes of the entries that apply)."""
    users = doc["users"]
    which = [
        i
        for i, e in enumerate(users)
        if claims and all(name in claims and holds(claims[name], acc) for name, acc in e["when"]["claims"].items())
    ]

    def any_of(key, lists):
        return any(pattern_matches(tool, p) for items in lists for p in items)

    t = doc["tools"]
    mine = [users[i]["tools"] for i in which]
    denied = any_of("deny", [t["deny"]] + [m.get("deny", []) for m in mine])
    if "allow" in t:
        allowed = any_of("allow", [t["allow"]] + [m.get("allow", []) for m in mine])
    else:
        allowed = True  # no allowlist: an entry's allow widens nothing
    ok = allowed and not denied
    approval = ok and any_of(
        "approval_required", [t["approval_required"]] + [m.get("approval_required", []) for m in mine]
    )
    return ok, approval, tuple(which)


@st.composite
def cases(draw):
    """A policy and claims that often meet its entries (a value an entry accepts, as a string or
    in a list) and often nearly do (another value, a near miss, a value of another type)."""
    doc = draw(policies())
    if draw(st.booleans()):
        return doc, draw(claims_st)
    claims = {}
    for e in doc["users"]:
        for name, accepted in e["when"]["claims"].items():
            if draw(st.integers(0, 3)) == 0:
                continue  # missing
            value = draw(st.sampled_from(accepted + VALUES[:3]))
            shape = draw(st.integers(0, 3))
            claims[name] = (
                value
                if shape == 0
                else [draw(st.sampled_from(VALUES)), value]
                if shape == 1
                else draw(claim_value)
                if shape == 2
                else [value]
            )
    return doc, claims


@settings(max_examples=500, deadline=None)
@given(case=cases())
def test_the_users_policy_is_what_the_rules_say(case):
    doc, claims = case
    policy = load_policy(json.dumps(doc).encode())
    mine = for_user(policy, claims)
    for tool in TOOLS:
        ok, approval, which = oracle(doc, claims, tool)
        assert applying(policy, claims) == which
        d = evaluate(mine, tool, None)
        assert (d.outcome != "deny") == ok, (tool, claims, d.reason_code)
        assert (d.approval_state == "required") == approval, (tool, claims)
        # wrap's --hide-denied-tools filter, given the user's policy, hides exactly what is denied
        assert denied_by_name(mine, tool) == (not ok)
        assert mine.digest == policy.digest
    if not which:
        assert mine is policy


@settings(max_examples=200, deadline=None)
@given(case=cases(), tool=st.sampled_from(TOOLS))
def test_explain_with_claims_gives_the_users_decision(case, tool):
    doc, claims = case
    policy = load_policy(json.dumps(doc).encode())
    got = explain(policy, tool, None, claims=claims)
    ok, approval, which = oracle(doc, claims, tool)
    assert got.agrees, got.to_dict()
    assert got.users == which
    assert got.verdict == ("deny" if not ok else "needs approval" if approval else "allow")
