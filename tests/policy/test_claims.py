"""Policy by user: the ``users`` section and ``for_user`` (docs/policy.md, "Policy by user (serve)").

Each matching rule has its own test; the loader's errors and warnings, the digest, `policy
check`'s lint and explain's ``users`` step follow. tests/policy/test_claims_property.py draws
random policies and claims; tests/policy/test_claims_cli.py runs the commands as processes.
"""

from __future__ import annotations

import pytest

from assay.policy import PolicyError, evaluate, load_policy
from assay.policy.explain import explain, render
from assay.policy.lint import summary, users_lint
from assay.policy.users import applying, for_user

from tests.docs_examples import policy_example

OPS = """version: "2.0"
tools:
  allow: [read_*]
  deny: [drop_db]
users:
  - name: ops
    when: {claims: {groups: [ops, sre]}}
    tools: {allow: [deploy, restart]}
"""


def load(text: str, warnings: list[str] | None = None):
    return load_policy(text.encode(), warn=None if warnings is None else warnings.append)


def allowed(policy, tool: str) -> bool:
    return evaluate(policy, tool, None).outcome != "deny"


def user(claims) -> object:
    return for_user(load(OPS), claims)


# --- matching: a claim that is a list, a string claim, a missing claim -----------------------


def test_a_list_claim_matches_when_any_element_is_accepted():
    assert allowed(user({"groups": ["dev", "sre"]}), "deploy")
    assert not allowed(user({"groups": ["dev", "qa"]}), "deploy")
    assert not allowed(user({"groups": []}), "deploy")


def test_a_list_claim_ignores_elements_that_are_not_strings():
    assert not allowed(user({"groups": [["ops"], {"ops": 1}, 1, None, True]}), "deploy")
    assert allowed(user({"groups": [1, "ops"]}), "deploy")


def test_a_string_claim_must_equal_an_accepted_value_exactly():
    assert allowed(user({"groups": "ops"}), "deploy")
    # no substrings, no case folding, no trimming, no splitting on spaces
    for near in ("op", "ops ", " ops", "Ops", "OPS", "opsx", "ops sre", "ops,sre", ""):
        assert not allowed(user({"groups": near}), "deploy"), near


def test_a_string_claim_is_not_unicode_normalized():
    policy = load(OPS.replace("[ops, sre]", '["caf\\u00e9"]'))
    assert allowed(for_user(policy, {"groups": "caf\u00e9"}), "deploy")
    assert not allowed(for_user(policy, {"groups": "cafe\u0301"}), "deploy")  # NFD of the same text
    assert not allowed(for_user(policy, {"groups": "CAF\u00c9"}), "deploy")


def test_a_missing_claim_never_matches():
    assert not allowed(user({}), "deploy")
    assert not allowed(user({"group": ["ops"]}), "deploy")
    assert not allowed(user({"roles": ["ops"]}), "deploy")


def test_values_that_are_neither_a_string_nor_a_list_never_match():
    for value in (None, 1, 1.5, True, {"ops": True}):
        assert not allowed(user({"groups": value}), "deploy"), value
    policy = load(OPS.replace("[ops, sre]", '["1", "true"]'))
    assert not allowed(for_user(policy, {"groups": 1}), "deploy")
    assert not allowed(for_user(policy, {"groups": True}), "deploy")


def test_a_claim_name_with_a_dot_is_one_top_level_name():
    policy = load(OPS.replace("groups: [ops, sre]", "realm_access.roles: [ops]"))
    assert not allowed(for_user(policy, {"realm_access": {"roles": ["ops"]}}), "deploy")
    assert allowed(for_user(policy, {"realm_access.roles": ["ops"]}), "deploy")


# --- several conditions, several entries, deny wins -------------------------------------------


def test_every_condition_of_one_when_must_hold():
    policy = load(OPS.replace("groups: [ops, sre]", "groups: [ops], sub: [alice, bob]"))
    assert allowed(for_user(policy, {"groups": ["ops"], "sub": "alice"}), "deploy")
    assert not allowed(for_user(policy, {"groups": ["ops"], "sub": "carol"}), "deploy")
    assert not allowed(for_user(policy, {"groups": ["ops"]}), "deploy")
    assert not allowed(for_user(policy, {"sub": "alice"}), "deploy")


SEVERAL = """version: "2.0"
tools:
  allow: []
users:
  - when: {claims: {groups: [dev]}}
    tools: {allow: [read_*, write_*], approval_required: [write_*]}
  - when: {claims: {groups: [ops]}}
    tools: {allow: [deploy, write_*]}
  - when: {claims: {groups: [contractor]}}
    tools: {deny: [write_secrets, deploy]}
"""


def test_several_entries_apply_in_file_order_and_add_up():
    policy = load(SEVERAL)
    assert applying(policy, {"groups": ["ops", "dev"]}) == (0, 1)
    both = for_user(policy, {"groups": ["ops", "dev"]})
    assert both.tools.allow == ("read_*", "write_*", "deploy", "write_*")
    assert both.tools.approval_required == ("write_*",)
    assert all(allowed(both, t) for t in ("read_a", "write_a", "deploy"))
    assert evaluate(both, "write_a", None).approval_state == "required"
    # nobody's entries: an empty allowlist allows nothing
    assert not any(allowed(for_user(policy, {"groups": ["qa"]}), t) for t in ("read_a", "deploy"))


def test_a_deny_always_wins_over_an_allow_of_another_entry_or_the_policy():
    policy = load(SEVERAL)
    c = for_user(policy, {"groups": ["ops", "contractor"]})
    assert not allowed(c, "deploy")
    assert evaluate(c, "deploy", None).reason_code == "E_TOOL_DENIED"
    assert allowed(c, "write_a") and not allowed(c, "write_secrets")
    # order does not matter for a deny: an earlier deny also beats a later allow
    flipped = load(SEVERAL.replace("[contractor]", "[zz]").replace("groups: [dev]", "groups: [contractor]"))
    assert allowed(for_user(flipped, {"groups": ["contractor"]}), "write_a")
    # the policy's own deny beats an entry's allow
    ops = for_user(
        load(OPS + "  - when: {claims: {groups: [ops]}}\n    tools: {allow: [drop_db]}\n"), {"groups": "ops"}
    )
    assert evaluate(ops, "drop_db", None).reason_code == "E_TOOL_DENIED"


def test_an_entry_allow_without_an_allowlist_widens_nothing_and_the_loader_says_so():
    warnings: list[str] = []
    policy = load("tools: {deny: [rm]}\nusers:\n  - when: {claims: {g: [a]}}\n    tools: {allow: [x]}\n", warnings)
    assert [w for w in warnings if "users[0].tools.allow has no effect" in w]
    got = for_user(policy, {"g": "a"})
    assert not got.has_allowlist and allowed(got, "anything") and not allowed(got, "rm")


# --- without claims: the policy itself ---------------------------------------------------------


@pytest.mark.parametrize("claims", [None, {}])
def test_without_claims_no_entry_applies_and_the_policy_itself_comes_back(claims):
    policy = load(OPS)
    assert for_user(policy, claims) is policy
    assert not allowed(policy, "deploy")  # what wrap decides


def test_the_plain_policy_keeps_the_digest_and_is_shared_by_users_with_the_same_entries():
    policy = load(OPS)
    a, b = for_user(policy, {"groups": ["ops"]}), for_user(policy, {"groups": "sre", "sub": "x"})
    assert a is b and a is not policy
    assert a.users == () and a.digest == policy.digest
    assert a.tools.allow == ("read_*", "deploy", "restart") and a.tools.deny == ("drop_db",)
    assert for_user(policy, {"groups": "nope"}) is policy


def test_the_digest_covers_the_users_section():
    base = load(OPS).digest
    assert load(OPS.replace("restart", "reboot")).digest != base
    assert load(OPS.replace("sre", "oncall")).digest != base
    assert load(OPS.replace("name: ops", "name: ops2")).digest != base
    without = OPS.split("users:")[0]
    assert load(without).digest != base
    assert load(without).digest == load(without + "users: []\n").digest  # an empty section is none


# --- the loader ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ("users: {a: 1}", "users: expected a list of entries, got a mapping"),
        ("users: [1]", "users[0]: expected a mapping, got an integer"),
        ("users:\n  - tools: {allow: [a]}", "users[0]: missing field when"),
        ("users:\n  - when: {claims: {g: [a]}}", "users[0]: missing field tools"),
        ("users:\n  - {when: {}, tools: {}}", "users[0].when: missing field claims"),
        ("users:\n  - {when: [], tools: {}}", "users[0].when: expected a mapping, got a list"),
        ("users:\n  - {when: {claims: [g]}, tools: {}}", "users[0].when.claims: expected a mapping, got a list"),
        (
            "users:\n  - {when: {claims: {g: ops}}, tools: {}}",
            'users[0].when.claims.g: expected a list of accepted values, got a string (write ["ops"])',
        ),
        ("users:\n  - {when: {claims: {g: [1]}}, tools: {}}", "users[0].when.claims.g[0]: expected a string"),
        ("users:\n  - {when: {claims: {g: 3}}, tools: {}}", "users[0].when.claims.g: expected a list of strings"),
        ("users:\n  - {when: {claims: {g: [a]}}, tools: []}", "users[0].tools: expected a mapping, got a list"),
        ("users:\n  - {when: {claims: {g: [a]}}, tools: {deny: x}}", "users[0].tools.deny: expected a list"),
        ("users:\n  - {name: 3, when: {claims: {g: [a]}}, tools: {}}", "users[0].name: expected a string"),
        ("users:\n  - {}\n  - 5", "users[0]: missing field when"),
    ],
)
def test_wrong_types_are_a_structure_error_naming_the_path(users, message):
    with pytest.raises(PolicyError) as got:
        load('version: "2.0"\ntools: {allow: []}\n' + users + "\n")
    assert got.value.kind == "structure"
    assert message in str(got.value), str(got.value)
    assert "\n" not in str(got.value)


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ("users:\n  - {when: {claims: {}}, tools: {}}", "users[0].when.claims must name at least one claim"),
        ("users:\n  - {when: {claims: {g: []}}, tools: {}}", "users[0].when.claims.g must list at least one"),
    ],
)
def test_an_entry_that_can_never_apply_is_a_validation_error(users, message):
    with pytest.raises(PolicyError) as got:
        load("tools: {allow: []}\n" + users + "\n")
    assert got.value.kind == "validation" and message in str(got.value)


def test_unknown_keys_are_warned_with_what_they_misspell():
    warnings: list[str] = []
    load(
        "tools: {allow: []}\nusers:\n  - nmae: x\n    when: {claims: {g: [a]}, claim: {}}\n"
        "    tools: {allow: [a], restrict_scope: [b], alow: [c]}\n",
        warnings,
    )
    unknown = [w.split("unknown key ignored: ")[1] for w in warnings if "unknown key ignored" in w]
    assert unknown == [
        "users[0].nmae (did you mean users[0].name?)",
        "users[0].when.claim (did you mean users[0].when.claims?)",
        "users[0].tools.restrict_scope",
        "users[0].tools.alow (did you mean users[0].tools.allow?)",
    ]


def test_policy_check_lints_an_allow_a_deny_always_beats_and_counts_the_entries():
    text = OPS + "  - when: {claims: {g: [a]}}\n    tools: {allow: [drop_db, other, 'x*'], deny: [oth*]}\n"
    policy = load(text)
    assert users_lint(policy, "p.yaml") == [
        'p.yaml: users[1].tools.allow "drop_db": tools.deny "drop_db" denies it (a deny always wins), so this allows nothing',
        'p.yaml: users[1].tools.allow "other": users[1].tools.deny "oth*" denies it (a deny always wins), so this allows nothing',
    ]
    assert users_lint(load(OPS), "p.yaml") == []
    assert summary(policy).endswith(", 2 users entries")


# --- explain with claims ------------------------------------------------------------------------


def test_explain_names_the_entries_that_apply_and_where_each_pattern_comes_from():
    policy = load(SEVERAL)
    got = explain(policy, "write_a", {}, claims={"groups": ["dev"]})
    assert got.verdict == "needs approval" and got.agrees and got.users == (0,)
    steps = {s.name: s for s in got.steps}
    assert steps["users"].status == "pass" and "users[0]" in steps["users"].detail
    assert steps["allow list"].detail == 'matched users[0].tools.allow "write_*"'
    assert 'users[0].tools.approval_required "write_*"' in steps["approvals"].detail
    assert got.to_dict()["claims"] == {"groups": ["dev"]} and got.to_dict()["users"] == [0]
    assert 'claims: {"groups":["dev"]}' in render(got)


def test_explain_says_why_no_entry_applies():
    got = explain(load(SEVERAL), "deploy", None, claims={"groups": "Ops"})
    assert got.verdict == "deny" and got.decision.reason_code == "E_TOOL_NOT_ALLOWED" and got.agrees
    detail = next(s for s in got.steps if s.name == "users").detail
    assert 'users[1]: "groups" is "Ops", not one of "ops"' in detail
    missing = explain(load(SEVERAL), "deploy", None, claims={"sub": "x"})
    assert 'users[0]: no "groups" claim' in next(s for s in missing.steps if s.name == "users").detail


def test_explain_without_claims_is_the_policy_of_wrap_and_unchanged_without_users():
    got = explain(load(SEVERAL), "deploy", None)
    assert got.verdict == "deny" and got.steps[0].name == "users" and got.steps[0].status == "n/a"
    plain = load(OPS.split("users:")[0])
    assert [s.name for s in explain(plain, "read_a").steps][0] == "pins"  # no users step
    assert explain(plain, "read_a", claims={"groups": "ops"}).steps[0].detail.startswith("the policy has no users")


def test_the_docs_example_reads_as_the_page_says():
    policy = load(policy_example("users"))
    alice = for_user(policy, {"sub": "alice", "groups": ["ops"]})
    bob = for_user(policy, {"sub": "bob", "groups": ["contractors", "ops"]})
    carol = for_user(policy, {"sub": "carol", "groups": ["dev"]})
    assert allowed(alice, "deploy_service") and evaluate(alice, "deploy_service", None).approval_state is None
    assert not allowed(bob, "deploy_service") and allowed(bob, "read_logs")
    assert not allowed(carol, "deploy_service") and allowed(carol, "read_logs")
    assert not allowed(policy, "deploy_service") and allowed(policy, "read_logs")
    assert not allowed(alice, "drop_database")
