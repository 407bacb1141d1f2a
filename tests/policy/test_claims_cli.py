"""Policy by user as a user runs it: `assay mcp policy explain --claims` and `policy check`
(docs/policy-tools.md), and `assay mcp wrap` over a policy with a ``users`` section (no claims:
no entry applies; docs/policy.md, "Policy by user (serve)"). Real processes."""

from __future__ import annotations

import json

import pytest

from tests.policy.test_policy_cli import run
from tests.wrap.conftest import Wrapper, call, request

POLICY = """version: "2.0"
tools:
  allow: [read_file]
  deny: [exec]
enforcement: {unconstrained_tools: allow}
users:
  - name: ops
    when: {claims: {groups: [ops]}}
    tools: {allow: [echo, exec], approval_required: [echo]}
  - when: {claims: {groups: [ops], sub: [mallory]}}
    tools: {deny: [echo]}
"""


@pytest.fixture
def policy(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text(POLICY)
    return p


def test_explain_claims_explains_the_call_of_that_user(policy):
    res = run("explain", str(policy), "--tool", "echo", "--claims", '{"groups": ["dev", "ops"]}')
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == '"echo" on server "default-mcp-server": needs approval'
    assert 'claims: {"groups":["dev","ops"]}' in lines
    assert any(
        line.split()
        == ["pass", "users", *'the claims meet users[0] ("ops"): their tools lists are added to the policy\'s'.split()]
        for line in lines
    )
    assert any('matched users[0] ("ops").tools.allow "echo"' in line for line in lines)


def test_explain_claims_a_deny_of_another_entry_wins(policy):
    res = run("explain", str(policy), "--tool", "echo", "--claims", '{"groups": "ops", "sub": "mallory"}', "--json")
    assert res.returncode == 1, res.stderr
    got = json.loads(res.stdout)
    assert (got["verdict"], got["reason_code"], got["users"], got["agrees"]) == ("deny", "E_TOOL_DENIED", [0, 1], True)
    assert got["claims"] == {"groups": "ops", "sub": "mallory"}
    deny = next(s for s in got["steps"] if s["check"] == "deny list")
    assert deny["detail"].endswith('users[1].tools.deny "echo"')


@pytest.mark.parametrize(
    "claims",
    [
        None,  # no --claims: as wrap decides
        "{}",
        '{"groups": "Ops"}',  # no case folding
        '{"groups": "ops "}',
        '{"group": ["ops"]}',  # missing claim
        '{"groups": [["ops"]]}',
    ],
)
def test_explain_without_matching_claims_is_the_file_alone(policy, claims):
    extra = [] if claims is None else ["--claims", claims]
    res = run("explain", str(policy), "--tool", "echo", *extra, "--json")
    assert res.returncode == 1, res.stderr
    got = json.loads(res.stdout)
    assert (got["reason_code"], got["users"]) == ("E_TOOL_NOT_ALLOWED", [])
    # the file's own deny holds for everyone
    assert run("explain", str(policy), "--tool", "exec", *extra).returncode == 1


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ('{"groups": ', "assay: error: --claims is not one JSON text: "),
        ('{"a": 1, "a": 2}', "assay: error: --claims is not one JSON text: "),
        ('["ops"]', "assay: error: --claims must be a JSON object (claim name -> value)"),
        ('"ops"', "assay: error: --claims must be a JSON object (claim name -> value)"),
    ],
)
def test_bad_claims_are_one_line_and_exit_2(policy, claims, message):
    res = run("explain", str(policy), "--tool", "echo", "--claims", claims)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith(message) and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr


def test_check_lints_the_users_section(tmp_path, policy):
    res = run("check", str(policy))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f'{policy}: users[0].tools.allow "exec": tools.deny "exec" denies it (a deny always wins), so this allows nothing',
        f"ok: {policy} loads with 1 warning: version 2.0, 1 tool pattern allowed, 1 deny pattern, 0 schemas, "
        "unconstrained tools: allow, 2 users entries",
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools: {allow: []}\nusers:\n  - when: {claims: {groups: ops}}\n    tools: {allow: [a]}\n")
    res = run("check", str(bad))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        f"fatal: {bad}: invalid policy: users[0].when.claims.groups: expected a list of accepted values, "
        'got a string (write ["ops"])\n'
    )


def test_wrap_loads_a_policy_with_users_and_applies_no_entry(tmp_path):
    w = Wrapper(tmp_path)
    w.policy.write_text(POLICY)
    frames = request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}) + b"".join(
        call(i, name, args) for i, name, args in ((1, "read_file", {"path": "/workspace/a"}), (2, "echo", {"x": 1}))
    )
    got = w.run(frames)
    assert got.returncode == 0, got.stderr
    replies = {r["id"]: r for r in got.replies()}
    assert "error" not in replies[1] and not replies[1]["result"].get("isError"), replies[1]
    denied = json.loads(replies[2]["result"]["content"][1]["text"])
    assert denied["error_code"] == "E_TOOL_NOT_ALLOWED"
    assert b"unknown key" not in got.stderr
