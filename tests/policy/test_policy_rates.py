"""Per-tool rate limits (docs/policy.md, "Per-tool rate limits"): ``limits.tools`` in the loader
and the sans-IO tracker of assay/policy/rates.py, against a model of "calls in the last ``per``
seconds"."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import Decision, PolicyError, load_policy
from assay.policy.model import RateRule
from assay.policy.patterns import pattern_matches
from assay.policy.rates import (
    NAME_CACHE_MAX,
    RateTracker,
    duration_text,
    limit_text,
    rate_denied,
    tracker_for,
)
from tests.docs_examples import policy_example


def load(text: str, **kw):
    return load_policy(text.encode(), source="pol.yaml", **kw)


def err(text: str) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load(text)
    e = info.value
    assert "\n" not in str(e) and str(e).startswith("pol.yaml: ")
    return e


def rules_of(text: str) -> tuple[RateRule, ...]:
    policy = load(f'version: "2.0"\nlimits:\n  tools: {text}\n')
    assert policy.limits is not None
    return policy.limits.tools


# ----------------------------------------------------------------------------------------------
# loader


def test_rules_load_with_durations_and_default_ids() -> None:
    rules = rules_of('[{id: web, tools: ["web_*", fetch], max_calls: 10, per: 60s}, {tools: [deploy], max_calls: 1}]')
    assert rules == (
        RateRule(id="web", tools=("web_*", "fetch"), max_calls=10, per=60.0),
        RateRule(id="limits.tools[1]", tools=("deploy",), max_calls=1, per=None),
    )


def test_a_session_rule_may_count_to_any_unsigned_integer() -> None:
    assert (
        rules_of("[{tools: [a], max_calls: 18446744073709551615}, {tools: [b], max_calls: 1000000, per: 1s}]")[
            0
        ].max_calls
        == 2**64 - 1
    )


@pytest.mark.parametrize("per,seconds", [("250ms", 0.25), ("5m", 300.0), ("1h", 3600.0), (90, 90.0), (1.5, 1.5)])
def test_per_takes_every_duration_form(per, seconds) -> None:
    assert rules_of(f"[{{tools: [a], max_calls: 1, per: {per}}}]")[0].per == seconds


@pytest.mark.parametrize(
    "rules,kind,message",
    [
        ("{tools: [a]}", "structure", "limits.tools: expected a list of rules, got a mapping"),
        ("[5]", "structure", "limits.tools[0]: expected a mapping, got an integer"),
        ("[{max_calls: 1}]", "structure", "limits.tools[0]: missing field tools"),
        ("[{tools: [a]}]", "structure", "limits.tools[0]: missing field max_calls"),
        ("[{tools: [], max_calls: 1}]", "validation", "limits.tools[0].tools must list at least one entry"),
        ("[{tools: a, max_calls: 1}]", "structure", "limits.tools[0].tools: expected a list of strings, got a string"),
        ("[{tools: [1], max_calls: 1}]", "structure", "limits.tools[0].tools[0]: expected a string, got an integer"),
        (
            "[{tools: [a], max_calls: -1}]",
            "structure",
            "limits.tools[0].max_calls: expected an unsigned integer, got -1",
        ),
        (
            "[{tools: [a], max_calls: 1.5}]",
            "structure",
            "limits.tools[0].max_calls: expected an unsigned integer, got a float",
        ),
        (
            "[{tools: [a], max_calls: true}]",
            "structure",
            "limits.tools[0].max_calls: expected an unsigned integer, got a boolean",
        ),
        (
            "[{tools: [a], max_calls: '3'}]",
            "structure",
            "limits.tools[0].max_calls: expected an unsigned integer, got a string",
        ),
        (
            "[{tools: [a], max_calls: null}]",
            "structure",
            "limits.tools[0].max_calls: expected an unsigned integer, got null",
        ),
        ("[{tools: [a], max_calls: 1, per: 1d}]", "validation", "limits.tools[0].per: expected a duration such as"),
        ("[{tools: [a], max_calls: 1, per: -5}]", "validation", "limits.tools[0].per: a duration must be a finite"),
        ("[{tools: [a], max_calls: 1, per: true}]", "validation", "limits.tools[0].per: expected a duration"),
        ("[{tools: [a], max_calls: 1, per: 0}]", "validation", "limits.tools[0].per must be more than zero"),
        ("[{tools: [a], max_calls: 1, per: 0s}]", "validation", "limits.tools[0].per must be more than zero"),
        (
            "[{tools: [a], max_calls: 1000001, per: 1h}]",
            "validation",
            "limits.tools[0].max_calls may be at most 1000000 with per (every call in a window is remembered)",
        ),
        (
            "[{tools: [a], max_calls: 1, id: 7}]",
            "structure",
            "limits.tools[0].id: expected a string, got an integer (quote it)",
        ),
        ("[{tools: [a], max_calls: 1, id: ' '}]", "validation", "limits.tools[0].id must not be blank"),
        (
            "[{tools: [a], max_calls: 1, id: x}, {tools: [b], max_calls: 1, id: x}]",
            "validation",
            'limits.tools[1].id: rule id "x" is already used by limits.tools[0]',
        ),
        (
            "[{tools: [a], max_calls: 1, id: 'limits.tools[1]'}, {tools: [b], max_calls: 1}]",
            "validation",
            'limits.tools[1]: its default id "limits.tools[1]" is already used by limits.tools[0]',
        ),
    ],
)
def test_bad_rules_are_one_line_errors_naming_the_path(rules, kind, message) -> None:
    e = err(f'version: "2.0"\nlimits:\n  tools: {rules}\n')
    assert e.kind == kind, e
    assert message in str(e), e


def test_unknown_keys_of_a_rule_are_warned() -> None:
    warnings: list[str] = []
    load("limits: {tools: [{tools: [a], max_calls: 1, window: 5s}]}\n", warn=warnings.append)
    assert warnings == ["pol.yaml: unknown key ignored: limits.tools[0].window"]


def test_digest_of_a_policy_without_rate_rules_is_unchanged() -> None:
    text = 'version: "2.0"\ntools: {allow: [a]}\nlimits: {max_tool_calls_total: 5}\n'
    plain = load(text)
    assert plain.to_dict()["limits"] == {"max_requests_total": None, "max_tool_calls_total": 5}
    assert load(text.replace("}\n", ", tools: []}\n")).digest == plain.digest  # an empty list is no rule
    ruled = load(text.replace("}\n", ", tools: [{tools: [a], max_calls: 2, per: 1m}]}\n"))
    assert ruled.digest != plain.digest
    assert ruled.to_dict()["limits"]["tools"] == [
        {"id": "limits.tools[0]", "tools": ["a"], "max_calls": 2, "per": 60.0}
    ]
    assert tracker_for(plain) is None and tracker_for(load("version: '2.0'\n")) is None
    assert isinstance(tracker_for(ruled), RateTracker)


def test_digest_pinned_from_before_the_key_existed() -> None:
    # computed with the code of the commit before limits.tools (cdafd95): a change to how
    # policies without the key are normalized would change it
    text = 'version: "2.0"\ntools: {allow: [a]}\nlimits: {max_tool_calls_total: 5}\n'
    assert load(text).digest == PINNED_DIGEST


PINNED_DIGEST = "sha256:244e008d8418399ded4b8c0cdd27e5794338c396dcada9ecf5b6c1c7da27163f"


# ----------------------------------------------------------------------------------------------
# the tracker, example by example


def rule(tools, n, per=None, id=None) -> RateRule:
    return RateRule(id=id or f"r{n}", tools=tuple(tools), max_calls=n, per=per)


def call(tracker: RateTracker, name: str, now: float) -> RateRule | None:
    """What wrap does: check, and enter when admitted."""
    got = tracker.check(name, now)
    if got is None:
        tracker.enter(name, now)
    return got


def test_a_window_edge_is_exclusive_of_the_oldest_call() -> None:
    r = rule(["t"], 2, per=60.0)
    tr = RateTracker([r])
    assert call(tr, "t", 1000.0) is None
    assert call(tr, "t", 1010.0) is None
    assert tr.check("t", 1059.999) is r  # 1000 and 1010 are both in (999.999, 1059.999]
    assert call(tr, "t", 1060.0) is None  # exactly per after the oldest: it has left the window
    assert tr.check("t", 1069.5) is r  # 1010 and 1060
    assert call(tr, "t", 1070.0) is None
    assert tr.counted(r.id, 1070.0) == 2


def test_a_session_rule_never_forgets() -> None:
    r = rule(["deploy"], 2)
    tr = RateTracker([r])
    assert call(tr, "deploy", 0.0) is None and call(tr, "deploy", 1.0) is None
    assert tr.check("deploy", 1e9) is r
    assert tr.check("other", 1e9) is None


def test_max_calls_zero_denies_every_call() -> None:
    r = rule(["t"], 0, per=1.0)
    tr = RateTracker([r, rule(["u"], 0)])
    assert tr.check("t", 0.0) is r and tr.check("t", 1e6) is r
    assert tr.check("u", 0.0) is tr.rules[1]


def test_the_count_is_shared_by_every_tool_a_rule_matches() -> None:
    r = rule(["web_*", "fetch"], 2, per=10.0)
    tr = RateTracker([r])
    assert call(tr, "web_search", 0.0) is None
    assert call(tr, "fetch", 1.0) is None
    assert tr.check("web_get", 2.0) is r and tr.check("fetch", 2.0) is r
    assert tr.check("read_file", 2.0) is None


def test_a_tool_matched_by_several_rules_must_satisfy_all_and_the_first_is_named() -> None:
    wide = rule(["*"], 3, per=100.0, id="wide")
    narrow = rule(["web_*"], 1, per=10.0, id="narrow")
    tr = RateTracker([wide, narrow])
    assert call(tr, "web_a", 0.0) is None
    assert tr.check("web_a", 5.0) is narrow  # wide has room, narrow has not
    assert call(tr, "other", 5.0) is None and call(tr, "other", 6.0) is None
    assert tr.check("web_a", 20.0) is wide  # narrow has room again; wide is full
    assert tr.check("other", 20.0) is wide
    both_full = RateTracker([rule(["a"], 1, id="first"), rule(["a"], 1, id="second")])
    call(both_full, "a", 0.0)
    assert both_full.check("a", 1.0).id == "first"  # policy order


def test_denied_calls_do_not_count() -> None:
    # check alone counts nothing: a model hammering a full window does not extend it
    r = rule(["t"], 1, per=10.0)
    tr = RateTracker([r])
    assert call(tr, "t", 0.0) is None
    for i in range(1000):
        assert tr.check("t", 0.001 * i) is r
    assert tr.check("t", 10.0) is None


def test_a_clock_that_goes_backwards_admits_nothing_extra_and_does_not_crash() -> None:
    r = rule(["t"], 1, per=10.0)
    tr = RateTracker([r])
    assert call(tr, "t", 100.0) is None
    assert tr.check("t", 50.0) is r  # read as 100: still full
    assert tr.check("t", -1e300) is r
    for bad in (math.nan, math.inf, -math.inf):
        assert tr.check("t", bad) is r
        tr.enter("u", bad)
    assert tr.check("t", 109.9) is r
    assert tr.check("t", 110.0) is None
    # entered at a time before the latest: counted at the latest time instead
    assert call(tr, "t", 5.0) is None
    assert tr.check("t", 119.9) is r and tr.check("t", 120.0) is None


def test_a_non_finite_first_time_is_not_a_way_around_the_window() -> None:
    r = rule(["t"], 1, per=10.0)
    tr = RateTracker([r])
    assert call(tr, "t", math.nan) is None
    assert tr.check("t", math.nan) is r and tr.check("t", math.inf) is r


def test_memory_is_bounded_per_rule_and_per_name() -> None:
    r = rule(["*"], 3, per=3600.0)
    tr = RateTracker([r, rule(["x*"], 5)])
    for i in range(10_000):
        tr.enter(f"name-{i}", float(i))  # also without a check before it
    assert max(len(w) for w in tr._windows) <= 3
    assert len(tr._names) <= NAME_CACHE_MAX
    # names past the cache are still matched
    assert tr.rules_for("x-late") == tr.rules and tr.rules_for("late") == (r,)
    assert tr.check("x-late", 10_000.0) is r


def test_the_reason_says_the_limit() -> None:
    assert limit_text(rule(["web_*"], 10, per=60.0, id="search-burst")) == (
        "Rate limit exceeded: at most 10 calls per 60s for web_* (rule search-burst)"
    )
    assert limit_text(rule(["deploy", "release_*"], 1, id="limits.tools[2]")) == (
        "Rate limit exceeded: at most 1 call per session for deploy, release_* (rule limits.tools[2])"
    )
    assert [
        duration_text(s) for s in (3600.0, 7200.0, 300.0, 60.0, 120.0, 90.0, 1.5, 0.25, 1e-4, 86400.0, 1000001.0)
    ] == ["1h", "2h", "5m", "60s", "2m", "90s", "1.5s", "250ms", "0.0001s", "24h", "1000001s"]


def test_rate_denied_keeps_the_call_and_names_the_rule() -> None:
    allow = Decision(
        "allow",
        "web_a",
        policy_version="2.0",
        policy_digest="sha256:x",
        tool_classes=("net",),
        matched_rule="tools.allow",
    )
    r = rule(["web_*"], 2, per=5.0, id="w")
    d = rate_denied(allow, "web_a", r)
    reason = "Rate limit exceeded: at most 2 calls per 5s for web_* (rule w)"
    assert (d.outcome, d.reason_code, d.reason, d.matched_rule) == ("deny", "E_RATE_LIMIT", reason, "w")
    assert d.contract == {
        "status": "deny",
        "error_code": "E_RATE_LIMIT",
        "tool": "web_a",
        "rule": "w",
        "reason": reason,
    }
    assert d.event_reason_code == "P_RATE_LIMIT" and d.typed_decision == "deny"
    assert (d.policy_digest, d.tool_classes) == ("sha256:x", ("net",))


# ----------------------------------------------------------------------------------------------
# the tracker against a model


class Model:
    """Every entered call kept; "room" counted from scratch over the whole history."""

    def __init__(self, rules: list[RateRule]) -> None:
        self.rules = rules
        self.entered: list[tuple[str, float]] = []
        self.latest: float | None = None

    def time(self, now: float) -> float:
        if math.isfinite(now) and (self.latest is None or now > self.latest):
            self.latest = now
        return 0.0 if self.latest is None else self.latest

    def in_use(self, r: RateRule, now: float) -> int:
        return sum(
            1
            for name, t in self.entered
            if any(pattern_matches(name, p) for p in r.tools) and (r.per is None or t > now - r.per)
        )

    def call(self, name: str, now: float) -> RateRule | None:
        t = self.time(now)
        for r in self.rules:
            if any(pattern_matches(name, p) for p in r.tools) and self.in_use(r, t) >= r.max_calls:
                return r
        self.entered.append((name, t))
        return None


NAMES = ["web_search", "web_get", "fetch", "read_file", "deploy", "", "web_"]
PATTERNS = ["web_*", "fetch", "*", "*file", "*e*", "deploy", "nothing"]
rule_strategy = st.builds(
    lambda i, tools, n, per: RateRule(id=f"rule{i}", tools=tuple(tools), max_calls=n, per=per),
    st.integers(0, 10**6),
    st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3),
    st.integers(0, 4),
    st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.5, 3.0, 10.0]), st.floats(0.001, 20.0)),
)
# a step: the name called, and how far the clock moved (backwards too; half-seconds land
# exactly on window edges, arbitrary floats anywhere)
step_strategy = st.tuples(
    st.sampled_from(NAMES),
    st.one_of(st.integers(-2, 8).map(lambda k: k * 0.5), st.floats(-1.0, 5.0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(rule_strategy, min_size=1, max_size=4, unique_by=lambda r: r.id), st.lists(step_strategy, max_size=60))
def test_the_tracker_decides_like_the_model(rules, steps) -> None:
    tracker, model = RateTracker(rules), Model(rules)
    now = 1000.0
    for name, dt in steps:
        now += dt
        expected = model.call(name, now)
        assert call(tracker, name, now) is expected, (name, now)
    for r in rules:
        assert tracker.counted(r.id, now) == model.in_use(r, model.time(now))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4),
    st.sampled_from([1.0, 2.5, 4.0]),
    st.lists(st.integers(-4, 12).map(lambda k: k * 0.5), max_size=80),
)
def test_no_span_of_per_seconds_holds_more_than_max_calls(n, per, steps) -> None:
    """The property itself, without a model: any N+1 entered calls span at least ``per``."""
    tracker = RateTracker([rule(["*"], n, per=per)])
    now, latest, entered = 0.0, -math.inf, []
    for dt in steps:
        now += dt
        latest = max(latest, now)  # the tracker reads a clock going backwards as standing still
        if call(tracker, "t", now) is None:
            entered.append(latest)
    for i in range(len(entered) - n):
        assert entered[i + n] - entered[i] >= per, entered
    # and it is not stricter than it must be: a call is refused only when the window is full
    refused_at = max(latest, 0.0)
    if tracker.check("t", refused_at) is not None:
        assert sum(1 for t in entered if t > refused_at - per) >= n


# ----------------------------------------------------------------------------------------------
# the docs example


def test_the_docs_example_limits_reads_per_hour_and_list_dir_per_session() -> None:
    policy = load_policy(policy_example("rate-limits").encode())
    tracker = tracker_for(policy)
    assert tracker is not None
    ids = [r.id for r in tracker.rules]
    assert ids == ["search-burst", "reads-per-hour", "limits.tools[2]"]
    t = 0.0
    for i in range(10):
        assert call(tracker, "web_search" if i % 2 else "web_fetch", t + i) is None
    assert call(tracker, "web_search", 59.0).id == "search-burst"
    assert call(tracker, "web_search", 60.0) is None  # the call at 0 left the window
    assert call(tracker, "list_dir", 100.0) is None and call(tracker, "list_dir", 101.0) is None
    assert call(tracker, "list_dir", 102.0).id == "limits.tools[2]"  # two per session
    assert call(tracker, "read_file", 103.0) is None  # third of reads-per-hour (list_dir counted)
    assert call(tracker, "read_file", 3699.0).id == "reads-per-hour"
    assert call(tracker, "read_file", 3700.0) is None  # the list_dir at 100 left the hour
    assert call(tracker, "list_dir", 7200.0).id == "limits.tools[2]"  # the session rule still bites
