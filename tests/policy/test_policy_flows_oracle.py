"""The incremental flow evaluator (assay/policy/flows.py) says exactly what the sequence
dialect's evaluator says when it walks the whole trace again (docs/policy.md, "Flow rules").

The oracle is ``evaluate_rules(history + [candidate], aliases, partial=True, patterns=True)``:
the first ``violated`` rule in file order, and its reason text. The history holds the calls the
tracker let through (a denied call does not enter), as in a wrap session.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import Decision
from assay.policy.flows import FlowTracker, parse_flows
from assay.policy.sequence import SequenceCall, evaluate_rules
from tests.policy._flow_ends import oracle_part

NAMES = [
    "a",
    "b",
    "c",
    "read_secret",
    "read_file",
    "send_email",
    "send_sms",
    "http_post",
    "xpostx",
    "run_tests",
    "deploy",
    "",
]
PATTERNS = [
    "a",
    "b",
    "c",
    "read_secret",
    "deploy",
    "run_tests",
    "send_*",
    "http_*",
    "*post*",
    "read_*",
    "*_file",
    "*",
    "nope",
]
ALIASES = ["SECRETS", "NET", "a"]  # "a" shadows the tool name a
KEYS = ["p", "q"]
REGEXES = ["^x", "y", "1", "^$", ".", "^\\[", "secret"]
ARGS: list[Any] = [
    None,
    {},
    {"p": "x"},
    {"p": "xy"},
    {"p": ""},
    {"q": 1},
    {"q": "11"},
    {"p": ["x"]},
    {"p": "y", "q": "y"},
    "p",
    [1],
]

ALLOW = Decision("allow", "t")

tool_name = st.sampled_from(PATTERNS + ALIASES)
selector = st.one_of(
    tool_name,
    st.builds(
        lambda tool, am: {"tool": tool, "args_match": am},
        tool_name,
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(REGEXES), min_size=1, max_size=2),
    ),
)
small = st.integers(0, 5)

rule = st.one_of(
    st.builds(lambda t: {"type": "require", "tool": t}, selector),
    st.builds(lambda t, w: {"type": "eventually", "tool": t, "within": w}, selector, small),
    st.builds(lambda t, m: {"type": "max_calls", "tool": t, "max": m}, selector, st.integers(0, 3)),
    st.builds(lambda f, t: {"type": "before", "first": f, "then": t}, selector, selector),
    st.builds(lambda f, t, w: {"type": "after", "trigger": f, "then": t, "within": w}, selector, selector, small),
    st.builds(lambda f, t: {"type": "after", "trigger": f, "then": t}, selector, selector),
    st.builds(lambda f, t: {"type": "never_after", "trigger": f, "forbidden": t}, selector, selector),
    st.builds(
        lambda ts, s: {"type": "sequence", "tools": ts, "strict": s},
        st.lists(selector, min_size=1, max_size=4),
        st.booleans(),
    ),
    st.builds(lambda p: {"type": "blocklist", "pattern": p}, st.sampled_from(["sec", "post", "_", "x", "deploy"])),
)
aliases = st.dictionaries(
    st.sampled_from(ALIASES), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3), max_size=3
)
call = st.tuples(st.sampled_from(NAMES), st.sampled_from(ARGS))


def _with_ids(rules: list[dict]) -> list[dict]:
    """Rules that would share a default id get one of their own."""
    return [dict(r, id=f"r{i}") for i, r in enumerate(rules)]


def _oracle(rules, alias_map, history, candidate) -> tuple[int, str] | None:
    trace = history + [candidate]
    for i, ev in enumerate(evaluate_rules([r.rule for r in rules], trace, alias_map, partial=True, patterns=True)):
        if ev.outcome == "violated":
            assert ev.reason is not None
            return i, ev.reason
    return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=6), aliases, st.lists(call, max_size=25))
def test_the_tracker_equals_the_oracle_call_by_call(raw_rules, raw_aliases, trace):
    rules, alias_map = parse_flows(_with_ids(raw_rules), raw_aliases, [])
    tracker = FlowTracker(rules, alias_map)
    history: list[SequenceCall] = []
    for name, args in trace:
        candidate = SequenceCall(name, args)
        expected = _oracle(rules, alias_map, history, candidate)
        assert tracker.violation(name, args) == expected, (history, candidate)
        denied = tracker.check(name, args, ALLOW)  # the session's path: the same answer as a deny
        if expected is None:
            assert denied is None
        else:
            assert denied is not None and denied.reason_code == "E_SEQUENCE_VIOLATION"
            assert (denied.matched_rule, oracle_part(denied.reason, expected[1])) == (
                rules[expected[0]].id,
                expected[1],
            )
        assert tracker.violation(name, args) == expected  # asking does not change the state
        if expected is None:
            tracker.enter(name, args)
            history.append(candidate)
    assert tracker.n == len(history)


# no array arguments: assay.yaml reads an array element by element, the server's dialect as one value
scalar_call = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from(
        [a for a in ARGS if not any(isinstance(v, list) for v in (a.values() if isinstance(a, dict) else ()))]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(rule, min_size=1, max_size=4), aliases, st.lists(scalar_call, max_size=20))
def test_the_tracker_equals_the_oracle_with_exact_patterns_off_the_pattern_forms(raw_rules, raw_aliases, trace):
    """Rules naming only exact tools and calls without array arguments: the pattern reading and
    the exact reading of the assay_check_sequence dialect agree, so the tracker also equals the
    server's evaluator."""

    def bare(name: str) -> str:
        return name.replace("*", "") or "z"

    def exact(sel):
        if isinstance(sel, str):
            return bare(sel)
        return dict(sel, tool=bare(sel["tool"]))

    fixed = []
    for r in raw_rules:
        r = dict(r)
        for key in ("tool", "first", "then", "trigger", "forbidden"):
            if key in r:
                r[key] = exact(r[key])
        if "tools" in r:
            r["tools"] = [exact(t) for t in r["tools"]]
        fixed.append(r)
    ex_aliases = {k: [bare(m) for m in v] for k, v in raw_aliases.items()}
    rules, alias_map = parse_flows(_with_ids(fixed), ex_aliases, [])
    tracker = FlowTracker(rules, alias_map)
    history: list[SequenceCall] = []
    for name, args in trace:
        candidate = SequenceCall(name, args)
        evs = evaluate_rules([r.rule for r in rules], history + [candidate], alias_map, partial=True)
        expected = next(((i, e.reason) for i, e in enumerate(evs) if e.outcome == "violated"), None)
        assert tracker.violation(name, args) == expected
        if expected is None:
            tracker.enter(name, args)
            history.append(candidate)


def test_many_names_do_not_grow_the_cache_past_its_bound():
    from assay.policy import flows

    rules, alias_map = parse_flows([{"type": "max_calls", "tool": "send_*", "max": 1000000}], None, [])
    tracker = FlowTracker(rules, alias_map)
    for i in range(flows.NAME_CACHE_LIMIT + 500):
        assert tracker.violation(f"send_{i}", None) is None
        tracker.enter(f"send_{i}", None)
    assert len(tracker._cache) == flows.NAME_CACHE_LIMIT
    # a name past the bound is still decided (computed per call)
    rules, alias_map = parse_flows([{"type": "max_calls", "tool": "send_*", "max": 1}], None, [])
    tracker = FlowTracker(rules, alias_map)
    tracker._cache.update({f"filler{i}": ((), {}) for i in range(flows.NAME_CACHE_LIMIT)})
    tracker.enter("send_new", None)
    assert tracker.violation("send_new", None) == (0, "tool 'send_*' exceeded max calls (2 > 1)")
