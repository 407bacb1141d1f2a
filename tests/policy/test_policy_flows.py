"""Flow rules in assay.yaml (docs/policy.md, "Flow rules"): reading `sequences` and `aliases`,
their load errors, the digest, and the deny a violated rule makes."""

from __future__ import annotations

import pytest

from assay.policy import PolicyError, evaluate, load_policy
from assay.policy.flows import FlowTracker
from assay.policy.sequence import check_sequence, parse_sequence_policy

HEAD = 'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'


def load(text: str):
    return load_policy((HEAD + text).encode(), source="pol.yaml")


def err(text: str) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load(text)
    e = info.value
    assert "\n" not in str(e) and str(e).startswith("pol.yaml: ")
    return e


def tracker(text: str) -> FlowTracker:
    t = FlowTracker.for_policy(load(text))
    assert t is not None
    return t


def run(t: FlowTracker, calls) -> list:
    """Check each call; enter it when allowed. The list of (rule index, reason) or None."""
    out = []
    for c in calls:
        name, args = (c, None) if isinstance(c, str) else c
        v = t.violation(name, args)
        out.append(v)
        if v is None:
            t.enter(name, args)
    return out


# --- reading -------------------------------------------------------------------------------------


def test_rules_ids_messages_and_aliases_are_read():
    p = load(
        "aliases: {secrets: [read_secret, 'get_*_token']}\n"
        "sequences:\n"
        "  - {type: never_after, trigger: secrets, forbidden: 'send_*', message: no exfiltration}\n"
        "  - {type: before, first: run_tests, then: deploy, id: tests-first}\n"
        "  - {type: after, trigger: open, then: close}\n"
    )
    assert [r.id for r in p.sequences] == ["never_after:secrets->send_*", "tests-first", "after:open->close@1"]
    assert [r.message for r in p.sequences] == ["no exfiltration", None, None]
    assert p.aliases == {"secrets": ("read_secret", "get_*_token")}
    assert p.warnings == ()
    d = p.to_dict()
    assert d["aliases"] == {"secrets": ["read_secret", "get_*_token"]}
    assert d["sequences"][1] == {
        "id": "tests-first",
        "type": "before",
        "first": "run_tests",
        "then": "deploy",
        "message": None,
    }
    assert d["sequences"][2]["within"] == 1


def test_a_policy_without_flow_rules_keeps_its_digest():
    """The digests of policies without the new keys are those computed before they existed."""
    p = load_policy(b'version: "2.0"\ntools: {allow: [a]}\n')
    assert "sequences" not in p.to_dict() and "aliases" not in p.to_dict()
    assert p.digest == "sha256:1fdc351696bffdb59bb3255f9646d40baa52814bee297cfa316055bbb5d94479"
    with_rules = load_policy(b'version: "2.0"\ntools: {allow: [a]}\nsequences: [{type: require, tool: a}]\n')
    assert with_rules.digest != p.digest
    with_message = load_policy(
        b'version: "2.0"\ntools: {allow: [a]}\nsequences: [{type: require, tool: a, message: m}]\n'
    )
    assert with_message.digest != with_rules.digest
    assert FlowTracker.for_policy(p) is None


@pytest.mark.parametrize(
    "text, kind, message",
    [
        ("sequences: {a: 1}", "structure", "invalid policy: sequences: expected a list of rules, got a mapping"),
        ("sequences: [{tool: a}]", "structure", "invalid policy: sequences[0]: missing field type"),
        (
            "sequences: [{type: require, tool: a}, {type: require, tool: b}, {type: nope}]",
            "validation",
            "sequences[2].type: unknown rule type 'nope' (expected one of require, eventually, max_calls, "
            "before, after, never_after, sequence, blocklist)",
        ),
        ("sequences: [{type: before, first: a}]", "structure", "invalid policy: sequences[0]: missing field then"),
        (
            "sequences: [{type: require, tool: 5}]",
            "structure",
            "invalid policy: sequences[0].tool: expected a tool name or {tool, args_match}, got an integer",
        ),
        (
            "sequences: [{type: require, tool: ''}]",
            "validation",
            "sequences[0].tool: a tool name or pattern must not be empty",
        ),
        (
            "sequences: [{type: max_calls, tool: a, max: -1}]",
            "structure",
            "invalid policy: sequences[0].max: expected an unsigned 32-bit integer, got -1",
        ),
        (
            "sequences: [{type: eventually, tool: a, within: '3'}]",
            "structure",
            "invalid policy: sequences[0].within: expected an unsigned 32-bit integer, got a string",
        ),
        (
            "sequences: [{type: sequence, tools: []}]",
            "validation",
            "sequences[0].tools: must list at least one selector",
        ),
        (
            "sequences: [{type: sequence, tools: [a], strict: yes}]",
            "structure",
            "invalid policy: sequences[0].strict: expected a boolean, got a string",
        ),
        (
            "sequences: [{type: require, tool: {tool: a, args_match: {p: '('}}}]",
            "validation",
            "sequences[0].tool.args_match.p: invalid regular expression: missing ), unterminated subpattern at position 0",
        ),
        *[
            (
                f"sequences: [{{type: require, tool: {{tool: a, args_match: {{p: '{regex}'}}}}}}]",
                "validation",
                "sequences[0].tool.args_match.p: regular expression not supported (args_match runs in linear "
                "time, in the dialect of JSON Schema pattern: no lookaround, no backreferences, no \\Z; $ is the very end)",
            )
            for regex in ("^https?://(?!intranet)", "(?<=x)y", "(a)\\1", "secret\\Z")
        ],
        (
            "sequences: [{type: require, tool: {tool: a, args_match: {}}}]",
            "validation",
            "sequences[0].tool.args_match: must name at least one argument",
        ),
        (
            "sequences: [{type: require, tool: {tool: a}}]",
            "structure",
            "invalid policy: sequences[0].tool: missing field args_match (write the bare name when no argument is matched)",
        ),
        (
            "sequences: [{type: require, tool: a, id: 7}]",
            "structure",
            "invalid policy: sequences[0].id: expected a string, got an integer",
        ),
        (
            "sequences: [{type: require, tool: a, message: [x]}]",
            "structure",
            "invalid policy: sequences[0].message: expected a string, got a list",
        ),
        (
            "sequences: [{type: require, tool: a, id: x}, {type: require, tool: b, id: x}]",
            "validation",
            "sequences[1].id: duplicate rule id 'x' (sequences[0] has it; give one an id)",
        ),
        (
            "sequences: [{type: require, tool: a}, {type: require, tool: a}]",
            "validation",
            "sequences[1]: duplicate rule id 'require:a' (sequences[0] has it; give one an id)",
        ),
        (
            "sequences: [{type: blocklist, pattern: ''}]",
            "validation",
            "sequences[0].pattern: must not be empty (it would block every tool)",
        ),
        ("aliases: [a]", "structure", "invalid policy: aliases: expected a mapping, got a list"),
        ("aliases: {net: []}", "validation", "aliases.net: must list at least one tool name or pattern"),
        (
            "aliases: {net: send_*}",
            "structure",
            "invalid policy: aliases.net: expected a list of tool names or patterns, got a string",
        ),
        ("aliases: {net: [1]}", "structure", "invalid policy: aliases.net[0]: expected a string, got an integer"),
    ],
)
def test_bad_rules_are_one_line_naming_the_dotted_path(text, kind, message):
    e = err(text + "\n")
    assert e.kind == kind
    assert str(e) == f"pol.yaml: {message}"


def test_unknown_rule_keys_are_warned_not_fatal():
    p = load("sequences: [{type: require, tool: a, within: 3, note: x}]\n")
    assert p.warnings == ("unknown key ignored: sequences[0].within", "unknown key ignored: sequences[0].note")


# --- deciding ------------------------------------------------------------------------------------


def test_never_after_with_an_alias_of_patterns_and_a_message():
    t = tracker(
        "aliases: {secrets: [read_secret, 'vault_*']}\n"
        "sequences:\n"
        "  - {type: never_after, trigger: secrets, forbidden: 'send_*', id: no-exfil, message: secrets stay here}\n"
    )
    assert run(t, ["send_email", "vault_get", "read_file", "send_email", "send_sms", "http_post"]) == [
        None,
        None,
        None,
        (0, "tool 'send_*' at index 3 is forbidden after 'secrets' (triggered at index 1)"),
        (0, "tool 'send_*' at index 3 is forbidden after 'secrets' (triggered at index 1)"),
        None,
    ]
    decision = evaluate(load_policy((HEAD + "tools: {allow: ['*']}\n").encode()), "send_sms", {})
    denied = t.check("send_sms", {}, decision)
    assert denied is not None
    assert denied.outcome == "deny" and denied.reason_code == "E_SEQUENCE_VIOLATION"
    # the rule's message, then how the deny ends (docs/policy.md, "How a deny ends")
    said = (
        "secrets stay here; it holds for the rest of the agent session (a `for:` in the rule would end it by "
        "itself); `assay mcp session reset KEY` clears it"
    )
    assert denied.reason == said and denied.matched_rule == "no-exfil"
    assert denied.event_reason_code == "P_SEQUENCE_VIOLATION"
    assert denied.contract == {
        "status": "deny",
        "error_code": "E_SEQUENCE_VIOLATION",
        "tool": "send_sms",
        "rule": "no-exfil",
        "reason": said,
    }
    assert denied.policy_digest == decision.policy_digest
    assert t.check("read_file", {}, decision) is None


def test_the_reason_is_the_evaluators_when_the_rule_has_no_message():
    t = tracker("sequences: [{type: before, first: run_tests, then: deploy}]\n")
    decision = evaluate(load("sequences: [{type: require, tool: x}]\n"), "deploy", {})
    denied = t.check("deploy", {}, decision)
    assert denied is not None and denied.matched_rule == "before:run_tests->deploy"
    assert denied.reason == (
        "tool 'deploy' was found (index 0) but required preceding tool 'run_tests' was missing; "
        "it ends once 'run_tests' is called"
    )
    assert denied.contract["reason"] == denied.reason


def test_args_match_reads_the_arguments_of_the_call():
    t = tracker(
        "sequences:\n"
        "  - type: never_after\n"
        "    trigger: {tool: 'read_*', args_match: {path: '^/secrets/'}}\n"
        "    forbidden: {tool: '*post*', args_match: {url: '^https?://[^/]*\\.com(/|$)'}}\n"
    )
    calls = [
        ("read_file", {"path": "/tmp/a"}),
        ("http_post", {"url": "https://example.com"}),
        ("read_file", {"path": "/secrets/key"}),
        ("http_post", {"url": "https://intranet.corp/x"}),
        ("http_post", {"url": "https://example.com"}),
        ("http_post", {"body": "no url"}),
        ("http_post", None),
    ]
    rid = "never_after:read_*[path]->*post*[url]"
    assert [v if v is None else v[1] for v in run(t, calls)] == [
        None,
        None,
        None,
        None,
        "tool '*post*[url]' at index 4 is forbidden after 'read_*[path]' (triggered at index 2)",
        None,
        None,
    ]
    assert t.rules[0].id == rid


def test_args_match_takes_linear_time_on_any_argument():
    """A model can send an argument of many MB. Python's re needs hours for `.*token` on 4 MB
    and exponential time for `^(a+)+$`; wrap would stall every frame meanwhile. args_match runs
    on a linear-time engine (docs/policy.md, "Flow rules")."""
    import time

    t = tracker(
        "sequences:\n"
        "  - type: never_after\n"
        "    trigger: {tool: read_file, args_match: {path: '.*token', mode: '^(a+)+$'}}\n"
        "    forbidden: send_email\n"
    )
    path = "x" * 300_000  # Python's re: about 100 s for .*token (quadratic), hours at 4 MB
    mode = "a" * 28 + "!"  # Python's re: seconds for ^(a+)+$, doubling with each "a"
    started = time.process_time()
    assert t.violation("read_file", {"path": path, "mode": mode}) is None
    t.enter("read_file", {"path": path + "token", "mode": mode})  # mode does not match: no trigger
    t.enter("read_file", {"path": path, "mode": "a" * 28})  # path does not match: no trigger
    assert t.violation("send_email", {}) is None
    t.enter("read_file", {"path": path + "token", "mode": "a" * 28})
    assert t.violation("send_email", {}) is not None
    assert time.process_time() - started < 10  # a few milliseconds here


@pytest.mark.parametrize(
    ("regex", "value", "matches"),
    [
        ("secret$", "/x/secret", True),
        ("secret$", "/x/secret\n", False),  # $ is the very end (Python's re would match before the \n)
        ("(?i)secret", "/x/SeCrEt/y", True),
        ("^/secrets/", "/workspace/../secrets/token", False),
        ("\\d", "\u0661", False),  # ASCII digits, as in JSON Schema pattern
        ("\\d", "7", True),
        ("^a.c$", "a\nc", False),
        ("token", "x\ud800token", True),  # a lone surrogate is a character like any other
        ('"limit":5', 5, False),  # a number is matched as its JSON text: "5"
        ("^5$", 5, True),
        ('^\\{"a":\\[1\\]\\}$', {"a": [1]}, True),
    ],
)
def test_args_match_dialect(regex, value, matches):
    yaml_regex = regex.replace("'", "''")
    text = f"sequences: [{{type: never_after, id: r, trigger: {{tool: t, args_match: {{p: '{yaml_regex}'}}}}, forbidden: f}}]\n"
    t = tracker(text)
    t.enter("t", {"p": value})
    assert (t.violation("f", {}) is not None) is matches


def test_first_violated_rule_in_file_order_decides():
    t = tracker(
        "sequences:\n"
        "  - {type: max_calls, tool: deploy, max: 0, id: no-deploys}\n"
        "  - {type: before, first: run_tests, then: deploy, id: tests-first}\n"
    )
    assert run(t, ["deploy"]) == [(0, "tool 'deploy' exceeded max calls (1 > 0)")]


def test_denied_calls_do_not_enter_the_history():
    t = tracker("sequences: [{type: max_calls, tool: 'send_*', max: 2}, {type: blocklist, pattern: drop}]\n")
    got = run(t, ["send_a", "drop_table", "send_b", "drop_x", "send_c"])
    assert got[:4] == [
        None,
        (1, "tool 'drop_table' matches blocklist pattern 'drop'"),
        None,
        (1, "tool 'drop_x' matches blocklist pattern 'drop'"),
    ]
    assert got[4] == (0, "tool 'send_*' exceeded max calls (3 > 2)")
    assert t.n == 2  # the blocklisted calls and the third send never entered


def test_the_server_dialect_keeps_exact_names():
    """assay_check_sequence reads selector tools as exact names: `send_*` matches only itself."""
    doc = parse_sequence_policy(b"version: '1.1'\nsequences: [{type: never_after, trigger: a, forbidden: 'send_*'}]\n")
    assert check_sequence(doc, ["a", "send_email"])["allowed"] is True
    assert check_sequence(doc, ["a", "send_*"])["allowed"] is False


def test_an_argument_that_cannot_be_read_as_text_denies_the_call():
    """Fail closed: a value args_match cannot render (not JSON; never from the wire) denies the
    call under the rule that asked, instead of raising."""
    t = tracker("sequences: [{type: max_calls, tool: {tool: read_file, args_match: {path: x}}, max: 5, id: r}]\n")
    assert t.violation("read_file", {"path": {1, 2}}) == (
        0,
        "an argument named by args_match could not be read as text",
    )
    assert t.violation("read_file", {"path": "x"}) is None
    t.enter("read_file", {"path": {1, 2}})  # entering anyway does not raise
