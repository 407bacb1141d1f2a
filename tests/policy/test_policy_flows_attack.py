"""A hostile client against the session trackers of flow rules and per-tool rate limits
(assay/policy/flows.py, assay/policy/rates.py; docs/policy.md, "Flow rules" and "Per-tool rate
limits"): what it sends is chosen to make them use memory without bound, or to judge a call on
a state that is not the history's."""

from __future__ import annotations

import gc
import math
import tracemalloc
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assay.policy import Decision, flows
from assay.policy.flows import FlowTracker, parse_flows
from assay.policy.model import RateRule
from assay.policy.patterns import pattern_matches
from assay.policy.rates import RateTracker
from assay.policy.sequence import SequenceCall, evaluate_rules
from tests.policy._flow_ends import oracle_part

ALLOW = Decision("allow", "t")
MIB = 1 << 20


def retained(step: Callable[[int], None], rounds: int) -> int:
    """Bytes still held after ``rounds`` calls of ``step`` (each gets a fresh 1 MiB tool name and
    drops it)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(rounds):
            step(i)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def long_name(i: int) -> str:
    return f"send_{i}_" + "x" * MIB


def test_long_tool_names_are_not_kept_by_the_flow_tracker():
    # a never_after armed, so send_* is checked on every call, and a require still waiting, so
    # the per-state order cache is used too
    rules, aliases = parse_flows(
        [
            {"type": "max_calls", "tool": "send_*", "max": 1000, "id": "m"},
            {"type": "require", "tool": "send_*", "id": "r"},
            {"type": "eventually", "tool": "never", "within": 1000, "id": "e"},
        ],
        None,
        [],
    )
    tracker = FlowTracker(rules, aliases)

    def step(i: int) -> None:
        name = long_name(i)
        assert tracker.check(name, {}, ALLOW) is None
        tracker.enter(name, {})

    # 24 names of 1 MiB: the old caches kept every one (24 MiB); now at most the last name
    assert retained(step, 24) < 3 * MIB
    assert tracker.n == 24
    # the long names were still counted (decided per call, not cached)
    assert tracker.violation("send_short", {}) is None
    assert tracker.rules[0].rule.max == 1000 and tracker._compiled[0].count == 24


def test_long_tool_names_are_not_kept_by_the_rate_tracker():
    tracker = RateTracker([RateRule("w", ("send_*",), 1000, 60.0), RateRule("s", ("send_*",), 1000, None)])

    def step(i: int) -> None:
        name = long_name(i)
        assert tracker.check(name, float(i)) is None
        tracker.enter(name, float(i))

    assert retained(step, 24) < 2 * MIB
    assert tracker.counted("w", 24.0) == 24 and tracker.counted("s", 24.0) == 24


def too_deep(depth: int = 100_000) -> list:
    """A value json.dumps cannot render (RecursionError): an argument no rule can read."""
    root: list = []
    cur = root
    for _ in range(depth):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    return root


SECRET_READ = {"tool": "read_file", "args_match": {"path": "secret"}}
UNREADABLE = "an argument named by args_match could not be read as text"


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "never_after", "trigger": SECRET_READ, "forbidden": "send_*"},
        {"type": "before", "first": SECRET_READ, "then": "deploy"},
        {"type": "after", "trigger": SECRET_READ, "then": "close", "within": 2},
    ],
    ids=lambda r: r["type"],
)
def test_a_call_whose_matched_argument_cannot_be_read_is_denied_not_entered_halfway(rule):
    # these rules do not read the selector's argument to decide the call, but entering it does:
    # the call used to be allowed and then enter no rule (a secret read that never armed
    # never_after, so the next send_email went through)
    rules, aliases = parse_flows([dict(rule, id="r")], None, [])
    tracker = FlowTracker(rules, aliases)
    args = {"path": ["/secrets/key", too_deep()]}
    assert tracker.violation("read_file", args) == (0, UNREADABLE)
    denied = tracker.check("read_file", args, ALLOW)
    assert denied is not None and denied.reason_code == "E_SEQUENCE_VIOLATION" and denied.matched_rule == "r"
    assert denied.reason == UNREADABLE
    # a readable call of the same tool, and other tools, are judged as before
    assert tracker.check("read_file", {"path": "/workspace/a"}, ALLOW) is None
    assert tracker.check("read_file", {"other": too_deep()}, ALLOW) is None  # an argument no rule names


# -- per-tool rate limits: the window as docs/policy.md defines it, in exact arithmetic ---------

PERS = [1e-12, 1e-9, 0.001, 0.1, 0.2, 1.0, 60.0, 3600.0, 1e7, None]
CLOCK = st.one_of(
    st.floats(0, 1e7, allow_nan=False),
    st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.30000000000000004, 16385.0, 1e6, 1e6 + 0.1, float("nan"), float("inf")]),
)
RATE_RULE = st.tuples(st.sampled_from([("a",), ("b",), ("a", "b"), ("*",)]), st.integers(0, 3), st.sampled_from(PERS))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(RATE_RULE, min_size=1, max_size=3),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), CLOCK, st.booleans()), max_size=30),
)
@example([(("a",), 1, 1e-12)], [("a", 16385.0, True), ("a", 16385.0, True)])  # a clock standing still
def test_the_rate_tracker_is_the_documented_window_in_exact_arithmetic(raw, steps):
    """A call at ``t`` is admitted when every rule matching it counts fewer than ``max_calls``
    entered calls in ``(t - per, t]`` (or in the session without ``per``); the clock is the
    latest finite time seen (backwards or non-finite reads stand still); a denied call uses up
    no rule. The old window edge ``now - per``, rounded, equalled ``now`` for a ``per`` below
    the clock's resolution, so a clock standing still admitted any number of calls."""
    rules = [RateRule(f"r{i}", tools, mx, per) for i, (tools, mx, per) in enumerate(raw)]
    tracker = RateTracker(rules)
    entered: list[list[float]] = [[] for _ in rules]
    clock: float | None = None
    for name, t, go in steps:
        if math.isfinite(t) and (clock is None or t > clock):
            clock = t
        now = 0.0 if clock is None else clock
        full = None
        for i, rule in enumerate(rules):
            if not any(pattern_matches(name, p) for p in rule.tools):
                continue
            times = entered[i]
            if rule.per is None:
                count = len(times)
            else:
                count = sum(1 for e in times if Fraction(now) - Fraction(rule.per) < Fraction(e) <= Fraction(now))
            if count >= rule.max_calls:
                full = rule
                break
        assert tracker.check(name, t) is full, (name, t, entered)
        if full is None and go:
            tracker.enter(name, t)
            for i, rule in enumerate(rules):
                if any(pattern_matches(name, p) for p in rule.tools):
                    entered[i].append(now)


# -- the tracker against the oracle, with the caches full and calls that are checked, not entered --

NAMES = [
    "a",
    "b",
    "read_secret",
    "send_email",
    "http_post",
    "xpostx",
    "deploy",
    "",
    "*",
    "send_*",
    "sénd_email",
    "a" * 300,
]
PATTERNS = ["a", "read_secret", "deploy", "send_*", "*post*", "*", "*_email", "sénd_*"]
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(["x", "secret", "/secrets/k", "", "\u00e9", "\n", "\ud800", "1"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["p", "q"]), inner, max_size=2)
    ),
    max_leaves=6,
)
ARGS = st.one_of(
    st.none(), st.sampled_from(["p", [1]]), st.dictionaries(st.sampled_from(["p", "q", "r"]), VALUES, max_size=3)
)
REGEXES = ["^x", "secret", "1", "^$", "^\\[", "\\.", "(?i)SECRET", "^-?\\d+$", "true|null"]
SELECTOR = st.one_of(
    st.sampled_from(PATTERNS),
    st.builds(
        lambda tool, am: {"tool": tool, "args_match": am},
        st.sampled_from(PATTERNS),
        st.dictionaries(st.sampled_from(["p", "q"]), st.sampled_from(REGEXES), min_size=1, max_size=2),
    ),
)
SMALL = st.integers(0, 4)
FLOW_RULE = st.one_of(
    st.builds(lambda t: {"type": "require", "tool": t}, SELECTOR),
    st.builds(lambda t, w: {"type": "eventually", "tool": t, "within": w}, SELECTOR, SMALL),
    st.builds(lambda t, m: {"type": "max_calls", "tool": t, "max": m}, SELECTOR, st.integers(0, 3)),
    st.builds(lambda f, t: {"type": "before", "first": f, "then": t}, SELECTOR, SELECTOR),
    st.builds(lambda f, t, w: {"type": "after", "trigger": f, "then": t, "within": w}, SELECTOR, SELECTOR, SMALL),
    st.builds(lambda f, t: {"type": "never_after", "trigger": f, "forbidden": t}, SELECTOR, SELECTOR),
    st.builds(
        lambda ts, s: {"type": "sequence", "tools": ts, "strict": s},
        st.lists(SELECTOR, min_size=1, max_size=3),
        st.booleans(),
    ),
    st.builds(lambda p: {"type": "blocklist", "pattern": p}, st.sampled_from(["sec", "post", "é", "deploy"])),
)


def _oracle(rules, aliases, history, candidate):
    for i, ev in enumerate(
        evaluate_rules([r.rule for r in rules], history + [candidate], aliases, partial=True, patterns=True)
    ):
        if ev.outcome == "violated":
            return i, ev.reason
    return None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(FLOW_RULE, min_size=1, max_size=5),
    st.lists(st.tuples(st.sampled_from(NAMES), ARGS, st.booleans()), max_size=25),
    st.sampled_from([0, 1, 3, 4096]),
)
def test_the_tracker_equals_the_oracle_with_full_caches_and_calls_denied_later(raw, trace, limit):
    """Odd names and JSON values, name caches that fill at once (``limit``), and calls the tracker
    allows that a later check (an approval declined) keeps from going (``go`` False): the
    tracker still says what walking the history says."""
    old = (flows.NAME_CACHE_LIMIT, flows._ORDER_CACHE_LIMIT)
    flows.NAME_CACHE_LIMIT = flows._ORDER_CACHE_LIMIT = limit
    try:
        rules, aliases = parse_flows([dict(r, id=f"r{i}") for i, r in enumerate(raw)], None, [])
        tracker = FlowTracker(rules, aliases)
        history: list[SequenceCall] = []
        for name, args, go in trace:
            candidate = SequenceCall(name, args)
            expected = _oracle(rules, aliases, history, candidate)
            denied = tracker.check(name, args, ALLOW)
            assert (
                None
                if denied is None
                else (denied.matched_rule, oracle_part(denied.reason, expected[1] if expected else ""))
            ) == (None if expected is None else (rules[expected[0]].id, expected[1])), (history, candidate)
            if expected is None and go:
                tracker.enter(name, args)
                history.append(candidate)
        assert tracker.n == len(history)
        assert len(tracker._cache) <= limit and len(tracker._orders) <= limit
    finally:
        flows.NAME_CACHE_LIMIT, flows._ORDER_CACHE_LIMIT = old


# -- the stateless evaluator (assay_check_sequence, and the oracle above) -------------------------


def test_an_after_rule_reads_each_call_a_bounded_number_of_times(monkeypatch):
    """assay_check_sequence takes the history from its caller (2,000 calls by default): 2,000
    triggers answered only by the last call made the evaluator walk every trigger's window again,
    about two million selector matches (seconds per request, more with a larger limit)."""
    from assay.policy import sequence

    matches = 0
    match = sequence._Matcher.match

    def counting(self, call, sel):
        nonlocal matches
        matches += 1
        return match(self, call, sel)

    monkeypatch.setattr(sequence._Matcher, "match", counting)
    rule = sequence.Rule("after", trigger=sequence.Selector("a"), then=sequence.Selector("b"), within=2**32 - 1)
    n = 2000
    (held,) = evaluate_rules([rule], ["a"] * n + ["b"])
    assert held.outcome == "held" and held.spanned == tuple(range(n + 1))
    assert matches <= 3 * (n + 1), matches
    # the same verdicts as before on a window that closes: the trigger at 0 is answered at 2,
    # the one at 3 is not answered within 1
    rule = sequence.Rule("after", trigger=sequence.Selector("a"), then=sequence.Selector("b"), within=2)
    (ev,) = evaluate_rules([rule], ["a", "x", "b", "a", "x", "x", "b"])
    assert ev.outcome == "violated" and ev.spanned == (0, 2, 3)
    assert "triggered at index 3" in (ev.reason or "")
