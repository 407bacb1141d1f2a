"""Flow rules with servers, arrays and windows (docs/policy.md, "Flow rules"): reading them,
what each decides, the state a shared session moves between wraps, and hostile input."""

from __future__ import annotations

import time

import msgspec
import pytest

from assay.policy import Decision, PolicyError, load_policy
from assay.policy.engine import DEFAULT_SERVER_ID
from assay.policy.flows import FlowTracker, parse_flows
from assay.policy.sequence import SequenceCall, Selector, evaluate_rules
from assay.policy.sequence_rules import DEFAULT_SERVER

HEAD = 'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
ALLOW = Decision("allow", "t")

EXAMPLE = """
aliases:
  secret_reads: [{tool: "read_*", server: vault}, get_secret]
  network_sinks: ["send_*", "http_*", "*post*"]
sequences:
  - type: never_after
    id: no-exfiltration-for-1h
    trigger: secret_reads
    forbidden: network_sinks
    for: 1h
"""


def load(text: str):
    return load_policy((HEAD + text).encode(), source="pol.yaml")


def err(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        load(text)
    assert "\n" not in str(info.value)
    return str(info.value)


def tracker(text: str, server: str = DEFAULT_SERVER_ID) -> FlowTracker:
    t = FlowTracker.for_policy(load(text), server)
    assert t is not None
    return t


# --- reading -------------------------------------------------------------------------------------


def test_the_default_label_is_the_engines():
    assert DEFAULT_SERVER == DEFAULT_SERVER_ID
    assert SequenceCall("a").server == DEFAULT_SERVER_ID


def test_server_selectors_alias_members_and_for_are_read_with_readable_ids():
    p = load(
        EXAMPLE
        + "  - {type: before, first: {tool: run_tests, server: ci}, then: {tool: deploy, server: 'prod*', args_match: {env: x}}}\n"
        + "  - {type: never_after, trigger: a, forbidden: b, for: 90s}\n"
        + "  - {type: never_after, trigger: a, forbidden: b}\n"
    )
    assert [r.id for r in p.sequences] == [
        "no-exfiltration-for-1h",
        "before:ci/run_tests->prod*/deploy[env]",
        "never_after:a->b@90s",
        "never_after:a->b",
    ]
    assert p.aliases["secret_reads"] == (Selector("read_*", None, "vault"), "get_secret")
    assert p.sequences[0].rule.window == 3600.0
    d = p.to_dict()
    assert d["aliases"]["secret_reads"] == [{"tool": "read_*", "server": "vault"}, "get_secret"]
    assert d["sequences"][0]["for"] == 3600.0
    assert d["sequences"][1]["then"] == {"tool": "deploy", "server": "prod*", "args_match": {"env": "x"}}
    assert "for" not in d["sequences"][3]
    assert p.warnings == ()


def test_rules_without_the_new_keys_keep_their_ids_and_digest():
    text = (
        "sequences:\n  - {type: never_after, trigger: {tool: read_file, args_match: {path: s}}, forbidden: 'send_*'}\n"
    )
    p = load(text)
    assert p.sequences[0].id == "never_after:read_file[path]->send_*"
    assert "server" not in p.to_dict()["sequences"][0]["trigger"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "sequences: [{type: require, tool: {tool: a}}]",
            "sequences[0].tool: missing field args_match (write the bare name when no argument is matched)",
        ),
        ("sequences: [{type: require, tool: {server: a}}]", "sequences[0].tool: missing field tool"),
        (
            "sequences: [{type: require, tool: {tool: a, server: ''}}]",
            "sequences[0].tool.server: a server label or pattern must not be empty",
        ),
        (
            "sequences: [{type: require, tool: {tool: a, server: 1}}]",
            "sequences[0].tool.server: expected a string, got an integer",
        ),
        ("sequences: [{type: require, tool: {tool: a, host: x}}]", "sequences[0].tool.host: unknown selector key"),
        (
            "aliases: {s: [{tool: a}]}",
            "aliases.s[0]: missing field server (write the bare name for a tool on any server)",
        ),
        (
            "aliases: {s: [{tool: a, server: v, args_match: {p: x}}]}",
            "aliases.s[0].args_match: unknown alias member key",
        ),
        (
            "sequences: [{type: never_after, trigger: a, forbidden: b, for: 0s}]",
            "sequences[0].for: must be more than zero",
        ),
        (
            "sequences: [{type: never_after, trigger: a, forbidden: b, for: 1d}]",
            "sequences[0].for: expected a duration",
        ),
        (
            "sequences: [{type: never_after, trigger: a, forbidden: b, for: true}]",
            "sequences[0].for: expected a duration",
        ),
        (
            "sequences: [{type: never_after, trigger: a, forbidden: b, for: null}]",
            "sequences[0].for: expected a duration",
        ),
    ],
)
def test_bad_values_are_one_line_errors(text, message):
    assert message in err(text)


def test_for_on_another_rule_is_an_unknown_key():
    p = load_policy((HEAD + "sequences: [{type: before, first: a, then: b, for: 1h}]\n").encode(), source="pol.yaml")
    assert any("sequences[0].for" in w for w in p.warnings)


# --- servers -------------------------------------------------------------------------------------


def test_the_docs_example_a_secret_read_on_vault_forbids_sinks_everywhere_for_an_hour():
    vault, fs, web = tracker(EXAMPLE, "vault"), tracker(EXAMPLE, "filesystem"), tracker(EXAMPLE, "web")
    blob = None

    def call(t: FlowTracker, name: str, now: float):
        nonlocal blob
        t.restore_state(None if blob is None else msgspec.msgpack.decode(blob))
        denied = t.check(name, {}, ALLOW, now)
        if denied is None:
            t.enter(name, {}, now)
            blob = msgspec.msgpack.encode(t.export_state())
        return denied

    assert call(fs, "read_file", 0.0) is None  # read_* on the filesystem server is no secret
    assert call(web, "http_get", 1.0) is None
    assert call(vault, "read_token", 10.0) is None  # the trigger, on vault
    assert vault.armed() == ("no-exfiltration-for-1h",)
    d = call(web, "send_email", 20.0)
    assert d is not None and d.matched_rule == "no-exfiltration-for-1h"
    assert d.reason == (
        "tool 'network_sinks' at index 3 is forbidden for 1h after 'secret_reads' (triggered at index 2); "
        "it ends in 59m 50s (1h after the latest 'secret_reads'), or at once with "
        "`assay mcp session reset KEY`"
    )
    assert call(fs, "xpostx", 3609.0) is not None  # still inside: 3,599 s after the trigger
    assert call(fs, "xpostx", 3610.0) is None  # exactly 1h after it: the window is over
    assert fs.armed() == ()
    assert call(fs, "get_secret", 3700.0) is None  # a bare member: a trigger on any server
    assert call(web, "http_post", 3701.0) is not None


def test_a_server_pattern_that_matches_no_label_never_matches_in_that_wrap():
    text = "sequences: [{type: max_calls, tool: {tool: 'send_*', server: 'mail*'}, max: 0}]\n"
    assert tracker(text, "mail-eu").violation("send_x", None) is not None
    assert tracker(text, "web").violation("send_x", None) is None
    assert tracker(text).violation("send_x", None) is None
    # the oracle agrees
    rules, aliases = parse_flows(
        [{"type": "max_calls", "tool": {"tool": "send_*", "server": "mail*"}, "max": 0}], None, []
    )
    evs = evaluate_rules([r.rule for r in rules], [SequenceCall("send_x", None, "web")], aliases, patterns=True)
    assert evs[0].outcome == "held"
    evs = evaluate_rules([r.rule for r in rules], [SequenceCall("send_x", None, "mail-eu")], aliases, patterns=True)
    assert evs[0].outcome == "violated"


# --- arrays --------------------------------------------------------------------------------------

ARRAYS = "sequences: [{type: max_calls, tool: {tool: fetch, args_match: {urls: '^https://evil'}}, max: 0}]\n"


@pytest.mark.parametrize(
    ("value", "denied"),
    [
        (["https://ok", "https://evil/x"], True),
        (["https://ok"], False),
        ([], False),
        ("https://evil", True),
        ([["https://evil"]], False),  # an element that is an array is read as JSON: '["https://evil"]'
        ([1, {"u": "https://evil"}], False),
        (["x"] * 10 + ["https://evil"], True),
    ],
)
def test_an_array_argument_matches_when_any_element_does(value, denied):
    assert (tracker(ARRAYS).violation("fetch", {"urls": value}) is not None) is denied


def test_a_long_array_is_read_in_linear_time():
    t = tracker(ARRAYS)
    for n in (10_000, 100_000):
        # CPU time of this process: the other test worker or another job on the machine does not count
        start = time.process_time()
        assert t.violation("fetch", {"urls": [{"k": i} for i in range(n)]}) is None
        assert t.violation("fetch", {"urls": ["x" * 10] * n + ["https://evil"]}) is not None
        took = time.process_time() - start
    assert took < 5.0


def test_an_unreadable_element_fails_closed():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    t = tracker(ARRAYS)
    for value in (["https://evil", deep], [deep, "https://evil"], [10**5000], ["x", deep]):
        got = t.violation("fetch", {"urls": value})  # denied: by the rule, or as unreadable
        assert got is not None and ("could not be read" in got[1] or value[0] == "https://evil")
        assert t.check("fetch", {"urls": value}, ALLOW) is not None
    assert t.n == 0


def test_the_server_dialect_reads_an_array_as_one_value():
    rules, aliases = parse_flows(
        [{"type": "max_calls", "tool": {"tool": "f", "args_match": {"p": "^x"}}, "max": 0}], None, []
    )
    call = SequenceCall("f", {"p": ["x"]})
    assert evaluate_rules([r.rule for r in rules], [call], aliases)[0].outcome == "held"
    assert evaluate_rules([r.rule for r in rules], [call], aliases, patterns=True)[0].outcome == "violated"


# --- windows -------------------------------------------------------------------------------------

WINDOW = "sequences: [{type: never_after, trigger: t, forbidden: f, for: 60s}]\n"


def test_the_window_runs_from_the_latest_trigger():
    t = tracker(WINDOW)
    t.enter("t", None, 0.0)
    t.enter("t", None, 50.0)
    assert t.violation("f", None, 70.0) == (
        0,
        "tool 'f' at index 2 is forbidden for 60s after 't' (triggered at index 1)",
    )
    assert t.violation("f", None, 110.0) is None
    t.enter("f", None, 110.0)
    assert t.armed() == ()  # disarmed until the next trigger
    t.enter("t", None, 111.0)
    assert t.violation("f", None, 112.0) is not None
    evs = evaluate_rules(
        [r.rule for r in t.rules],
        [SequenceCall("t", time=0.0), SequenceCall("t", time=50.0), SequenceCall("f", time=70.0)],
        patterns=True,
    )
    assert evs[0].reason == "tool 'f' at index 2 is forbidden for 60s after 't' (triggered at index 1)"


@pytest.mark.parametrize("back", [-1.0, -1e9, float("nan"), float("inf"), float("-inf"), True, 10**400, "1"])
def test_a_clock_going_back_or_garbage_stands_still(back):
    t = tracker(WINDOW)
    t.enter("t", None, 100.0)
    assert t.violation("f", None, back) is not None  # standing still at 100: inside
    t.enter("b", None, back)
    assert t.violation("f", None, back) is not None
    assert t.violation("f", None, 160.0) is None
    assert t.export_state()[3] == 100.0


def test_the_window_edge_is_exact():
    t = tracker("sequences: [{type: never_after, trigger: t, forbidden: f, for: 0.1}]\n")
    since = 1e9 + 0.3
    t.enter("t", None, since)
    now = since + 0.1  # rounded: the exact difference may be just under 0.1
    inside = (now - since) < 0.1 or __import__("fractions").Fraction(now) - __import__("fractions").Fraction(
        since
    ) < __import__("fractions").Fraction(0.1)
    assert (t.violation("f", None, now) is not None) is inside


def test_rules_without_a_window_never_read_the_time():
    t = tracker("sequences: [{type: never_after, trigger: t, forbidden: f}]\n")
    t.enter("t", None, 0.0)
    assert t.violation("f", None, 1e12) is not None
    assert t.export_state()[3] is None


# --- state ---------------------------------------------------------------------------------------

STATEFUL = """
sequences:
  - {type: require, tool: login}
  - {type: sequence, tools: [a, b]}
  - {type: max_calls, tool: c, max: 1}
  - {type: never_after, trigger: t, forbidden: f, for: 1m}
"""


def test_armed_names_the_rules_under_way():
    t = tracker(STATEFUL)
    assert t.armed() == ()
    t.enter("login", None, 0.0)
    t.enter("a", None, 1.0)
    assert t.armed() == ("require:login", "sequence:a>b")
    t.enter("c", None, 2.0)
    t.enter("t", None, 3.0)
    assert t.armed() == ("require:login", "sequence:a>b", "max_calls:c<=1", "never_after:t->f@60s")
    t.enter("x", None, 63.0)
    assert "never_after:t->f@60s" not in t.armed()


def test_a_rule_dead_in_the_restored_state_is_not_checked_and_alive_again_after_a_reset():
    t = tracker(STATEFUL)
    other = tracker(STATEFUL, "elsewhere")
    assert t.violation("x", None) is not None  # require: login first
    other.enter("login", None)
    other.enter("a", None)
    other.enter("b", None)  # the sequence is done: dead
    t.restore_state(other.export_state())
    assert t.violation("x", None) is None
    assert t.violation("b", None) is None
    assert t._cache["b"] == ()  # the name cache no longer holds the dead rules
    t.restore_state(None)
    assert t.violation("x", None) is not None
    assert t.violation("b", None) is not None  # the sequence is alive again: b before a


def _bad_states(good: list) -> list:
    fmt, shape, n, latest, rules = good
    return [
        None.__class__,  # not even a list
        "garbage",
        b"\x00",
        {},
        [],
        good[:4],
        [2, shape, n, latest, rules],
        [fmt, "0" * 16, n, latest, rules],
        [fmt, shape, -1, latest, rules],
        [fmt, shape, True, latest, rules],
        [fmt, shape, 1.5, latest, rules],
        [fmt, shape, n, float("nan"), rules],
        [fmt, shape, n, "now", rules],
        [fmt, shape, n, 10**400, rules],
        [fmt, shape, n, latest, rules[:-1]],
        [fmt, shape, n, latest, rules + [[]]],
        [fmt, shape, n, latest, "rules"],
        [fmt, shape, n, latest, [["x"], *rules[1:]]],
        [fmt, shape, n, latest, [[True, 1], *rules[1:]]],
        [fmt, shape, n, latest, [rules[0], [n + 1, None], *rules[2:]]],
        [fmt, shape, n, latest, [rules[0], [0, 7], *rules[2:]]],
        [fmt, shape, n, latest, [*rules[:2], [-1], rules[3]]],
        [fmt, shape, n, latest, [*rules[:3], [n, latest, None, None]]],  # an index past the calls
        [fmt, shape, n, latest, [*rules[:3], [0, None, None, None]]],  # a trigger without a time
        [fmt, shape, n, latest, [*rules[:3], [0, latest + 1, None, None]]],  # after the latest call
        [fmt, shape, n, latest, [*rules[:3], [0, latest, 1, None]]],
    ]


def test_a_state_that_does_not_fit_is_refused_with_value_or_type_error_and_changes_nothing():
    t = tracker(STATEFUL)
    for name, now in (("login", 1.0), ("a", 2.0), ("t", 3.0)):
        t.enter(name, None, now)
    good = t.export_state()
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(good)) == good
    target = tracker(STATEFUL, "other")
    target.enter("login", None, 0.5)
    before = target.export_state()
    for bad in _bad_states(good):
        with pytest.raises((ValueError, TypeError)):
            target.restore_state(bad)
        assert target.export_state() == before
    # other rules: the same shape, another digest
    with pytest.raises(ValueError):
        tracker(STATEFUL.replace("max: 1", "max: 2")).restore_state(good)
    target.restore_state(good)
    assert target.export_state() == good


def test_garbage_of_every_kind_never_raises_anything_but_value_or_type_error():
    from tests.policy._state_junk import restore_survives_junk

    restore_survives_junk(tracker(STATEFUL), slots=5, max_size=5, max_leaves=20)


def test_the_flow_guard_passes_the_time_it_is_given():
    from assay.policy.pipeline import Call, FlowGuard, Pipeline

    policy = load(EXAMPLE)
    guard = FlowGuard(FlowTracker.for_policy(policy, "vault"))
    pipe = Pipeline(policy, None, [guard])
    pipe.enter(Call("read_token", {}, "vault"), now=100.0)
    assert pipe.decide(Call("send_x", {}, "vault"), now=3699.0).reason_code == "E_SEQUENCE_VIOLATION"
    assert pipe.decide(Call("send_x", {}, "vault"), now=3700.0).outcome == "allow"


def test_the_docs_example_does_what_the_page_says():
    from tests.docs_examples import policy_example

    policy = load_policy(policy_example("flows-servers").encode())
    vault, mail, fs = (FlowTracker.for_policy(policy, s) for s in ("vault", "mail", "filesystem"))
    assert fs.check("read_file", {}, ALLOW, 0.0) is None
    vault.enter("read_token", {}, 0.0)
    mail.restore_state(vault.export_state())
    denied = mail.check("send_email", {}, ALLOW, 10.0)
    assert denied is not None and denied.reason == (
        "tool 'network_sinks' at index 1 is forbidden for 1h after 'secret_reads' (triggered at index 0); "
        "it ends in 59m 50s (1h after the latest 'secret_reads'), or at once with `assay mcp session reset KEY`"
    )
    assert mail.check("send_email", {}, ALLOW, 3600.0) is None
