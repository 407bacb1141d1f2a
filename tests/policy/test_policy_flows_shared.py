"""Flow rules across the servers of one session (docs/policy.md, "Flow rules"): the tracker
equals the oracle (``evaluate_rules(..., patterns=True)``) with server-qualified selectors and
alias members, array arguments and ``never_after`` with ``for``; and a tracker's state moved
through ``export_state``/``restore_state`` (and msgpack, as a shared session's store does)
decides exactly as one tracker over the merged history.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import Decision
from assay.policy.flows import FlowTracker, parse_flows
from assay.policy.sequence import SequenceCall, evaluate_rules

NAMES = ["a", "b", "read_secret", "read_file", "send_email", "http_post", "xpostx", "deploy"]
PATTERNS = ["a", "b", "read_secret", "deploy", "send_*", "http_*", "*post*", "read_*", "*"]
SERVERS = ["vault", "fs", "default-mcp-server"]
SERVER_PATTERNS = ["vault", "fs*", "*", "v*", "nope"]
ALIASES = ["SECRETS", "NET", "a"]
REGEXES = ["^x", "y", "1", "^$", "^\\[", "^\\{"]
ARGS: list[Any] = [
    None,
    {},
    {"p": "x"},
    {"p": "xy"},
    {"q": 1},
    {"q": "11"},
    {"p": ["x"]},
    {"p": ["a", "xy"]},
    {"p": []},
    {"p": [1, "z"]},
    {"p": [["x"]]},
    {"p": [{"k": 1}]},
    {"q": [0, 11]},
    {"p": ["y"], "q": ["1"]},
    {"p": [None, True]},
]
WINDOWS = ["1m", "60s", "90s", 0.5, "1h"]
STEPS = [0.0, 0.5, 1.0, 29.5, 30.0, 59.5, 60.0, 61.0, 3600.0, -5.0, -100.0, math.nan, math.inf]

ALLOW = Decision("allow", "t")

tool_name = st.sampled_from(PATTERNS + ALIASES)
server = st.sampled_from(SERVER_PATTERNS)
selector = st.one_of(
    tool_name,
    st.builds(lambda t, s: {"tool": t, "server": s}, tool_name, server),
    st.builds(
        lambda t, am, s: {"tool": t, "args_match": am} | ({} if s is None else {"server": s}),
        tool_name,
        st.dictionaries(st.sampled_from(["p", "q"]), st.sampled_from(REGEXES), min_size=1, max_size=2),
        st.one_of(st.none(), server),
    ),
)
rule = st.one_of(
    st.builds(lambda t: {"type": "require", "tool": t}, selector),
    st.builds(lambda t, w: {"type": "eventually", "tool": t, "within": w}, selector, st.integers(0, 4)),
    st.builds(lambda t, m: {"type": "max_calls", "tool": t, "max": m}, selector, st.integers(0, 3)),
    st.builds(lambda f, t: {"type": "before", "first": f, "then": t}, selector, selector),
    st.builds(
        lambda f, t, w: {"type": "after", "trigger": f, "then": t, "within": w}, selector, selector, st.integers(0, 3)
    ),
    st.builds(lambda f, t: {"type": "never_after", "trigger": f, "forbidden": t}, selector, selector),
    st.builds(
        lambda f, t, w: {"type": "never_after", "trigger": f, "forbidden": t, "for": w},
        selector,
        selector,
        st.sampled_from(WINDOWS),
    ),
    st.builds(
        lambda ts, s: {"type": "sequence", "tools": ts, "strict": s},
        st.lists(selector, min_size=1, max_size=3),
        st.booleans(),
    ),
    st.builds(lambda p: {"type": "blocklist", "pattern": p}, st.sampled_from(["sec", "post", "x"])),
)
member = st.one_of(
    st.sampled_from(PATTERNS), st.builds(lambda t, s: {"tool": t, "server": s}, st.sampled_from(PATTERNS), server)
)
aliases = st.dictionaries(st.sampled_from(ALIASES), st.lists(member, min_size=1, max_size=3), max_size=3)
# (name, args, server, step of the clock)
call = st.tuples(st.sampled_from(NAMES), st.sampled_from(ARGS), st.sampled_from(SERVERS), st.sampled_from(STEPS))


def _with_ids(rules: list[dict]) -> list[dict]:
    return [dict(r, id=f"r{i}") for i, r in enumerate(rules)]


def _timeline(trace):
    """The trace as oracle calls: each call's time is the previous one plus its step."""
    t, out = 1000.0, []
    for name, args, srv, step in trace:
        t = t + step if math.isfinite(step) else t
        out.append(SequenceCall(name, args, srv, step if not math.isfinite(step) else t))
    return out


def _oracle(rules, alias_map, history, candidate):
    evs = evaluate_rules([r.rule for r in rules], history + [candidate], alias_map, partial=True, patterns=True)
    return next(((i, e.reason) for i, e in enumerate(evs) if e.outcome == "violated"), None)


def _decide(tracker: FlowTracker, c: SequenceCall):
    got = tracker.violation(c.name, c.args, now=c.time)
    denied = tracker.check(c.name, c.args, ALLOW, now=c.time)
    assert (denied is None) == (got is None)
    return got


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=5), aliases, st.lists(call, max_size=25), st.sampled_from(SERVERS))
def test_one_tracker_equals_the_oracle_with_servers_arrays_and_windows(raw_rules, raw_aliases, trace, label):
    rules, alias_map = parse_flows(_with_ids(raw_rules), raw_aliases, [])
    tracker = FlowTracker(rules, alias_map, server=label)
    history: list[SequenceCall] = []
    for c in _timeline(trace):
        c = c._replace(server=label)  # one wrap: every call goes to its server
        expected = _oracle(rules, alias_map, history, c)
        assert _decide(tracker, c) == expected, (history, c)
        if expected is None:
            tracker.enter(c.name, c.args, now=c.time)
            history.append(c)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=5), aliases, st.lists(call, max_size=25))
def test_trackers_of_several_servers_passing_one_state_equal_the_oracle_over_the_merged_history(
    raw_rules, raw_aliases, trace
):
    """What a shared session does: each call is decided in the wrap of its server, whose tracker
    first takes the state the last wrap saved (through msgpack, as the store keeps it)."""
    rules, alias_map = parse_flows(_with_ids(raw_rules), raw_aliases, [])
    trackers = {s: FlowTracker(rules, alias_map, server=s) for s in SERVERS}
    one = FlowTracker(rules, alias_map)  # only ever restored: must not matter what it held
    blob = msgspec.msgpack.encode(None)
    history: list[SequenceCall] = []
    for c in _timeline(trace):
        tracker = trackers[c.server]
        tracker.restore_state(msgspec.msgpack.decode(blob))
        expected = _oracle(rules, alias_map, history, c)
        assert _decide(tracker, c) == expected, (history, c)
        if expected is None:
            tracker.enter(c.name, c.args, now=c.time)
            history.append(c)
            blob = msgspec.msgpack.encode(tracker.export_state())
            one.restore_state(msgspec.msgpack.decode(blob))
            assert one.export_state() == tracker.export_state()
            assert one.armed() == tracker.armed()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=5), aliases, st.lists(call, max_size=25), st.data())
def test_a_tracker_restored_at_any_point_behaves_exactly_like_the_original(raw_rules, raw_aliases, trace, data):
    rules, alias_map = parse_flows(_with_ids(raw_rules), raw_aliases, [])
    a = FlowTracker(rules, alias_map, server="vault")
    calls = _timeline(trace)
    split = data.draw(st.integers(0, len(calls)))
    for c in calls[:split]:
        if a.violation(c.name, c.args, now=c.time) is None:
            a.enter(c.name, c.args, now=c.time)
    b = FlowTracker(rules, alias_map, server="vault")
    for c in calls[: data.draw(st.integers(0, len(calls)))]:  # b had a history of its own: it goes
        if b.violation(c.name, c.args, now=c.time) is None:
            b.enter(c.name, c.args, now=c.time)
    b.restore_state(msgspec.msgpack.decode(msgspec.msgpack.encode(a.export_state())))
    assert b.export_state() == a.export_state()
    for c in calls[split:]:
        got = a.violation(c.name, c.args, now=c.time)
        assert b.violation(c.name, c.args, now=c.time) == got
        assert (b.check(c.name, c.args, ALLOW, now=c.time) is None) == (got is None)
        if got is None:
            a.enter(c.name, c.args, now=c.time)
            b.enter(c.name, c.args, now=c.time)
        assert b.export_state() == a.export_state()
        assert b.armed() == a.armed()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=5), aliases, st.lists(call, max_size=20))
def test_a_reset_is_the_fresh_state(raw_rules, raw_aliases, trace):
    """After ``restore_state(None)`` a tracker decides like a new one (rules dead before, a met
    ``require``, a finished ``sequence``, are checked again)."""
    rules, alias_map = parse_flows(_with_ids(raw_rules), raw_aliases, [])
    used, fresh = FlowTracker(rules, alias_map), FlowTracker(rules, alias_map)
    calls = _timeline(trace)
    for c in calls:
        if used.violation(c.name, c.args, now=c.time) is None:
            used.enter(c.name, c.args, now=c.time)
    used.restore_state(None)
    assert used.export_state() == fresh.export_state() and used.armed() == ()
    for c in calls:
        got = fresh.violation(c.name, c.args, now=c.time)
        assert used.violation(c.name, c.args, now=c.time) == got
        if got is None:
            fresh.enter(c.name, c.args, now=c.time)
            used.enter(c.name, c.args, now=c.time)
