"""The state of per-tool rate limits moved between trackers (docs/policy.md, "Per-tool rate
limits"), as a session shared by several wraps does: ``export_state``/``restore_state``."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy.model import RateRule
from assay.policy.rates import RateTracker
from tests.policy._state_junk import restore_survives_junk
from tests.policy.test_policy_rates import Model, rule_strategy, step_strategy


def _call(tracker: RateTracker, name: str, now: float) -> RateRule | None:
    got = tracker.check(name, now)
    if got is None:
        tracker.enter(name, now)
    return got


def _moved(state: list) -> list:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(rule_strategy, min_size=1, max_size=4, unique_by=lambda r: r.id),
    st.lists(step_strategy, max_size=50),
    st.data(),
)
def test_a_tracker_restored_at_any_point_behaves_exactly_like_the_original(rules, steps, data):
    a, b = RateTracker(rules), RateTracker(rules)
    split = data.draw(st.integers(0, len(steps)))
    now = 1000.0
    for name, dt in steps[:split]:
        now += dt
        _call(a, name, now)
        _call(b, "web_search", now + 7)  # b's own history: it goes
    b.restore_state(_moved(a.export_state()))
    assert b.export_state() == a.export_state()
    for name, dt in steps[split:]:
        now += dt
        assert _call(b, name, now) is _call(a, name, now)
        assert b.export_state() == a.export_state()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(rule_strategy, min_size=1, max_size=4, unique_by=lambda r: r.id),
    st.lists(st.tuples(step_strategy, st.integers(0, 2)), max_size=50),
)
def test_trackers_passing_one_state_decide_like_the_model_over_the_merged_history(rules, steps):
    trackers = [RateTracker(rules) for _ in range(3)]
    model = Model(rules)
    blob = msgspec.msgpack.encode(None)
    now = 1000.0
    for (name, dt), which in steps:
        now += dt
        tracker = trackers[which]
        tracker.restore_state(msgspec.msgpack.decode(blob))
        expected = model.call(name, now)
        assert _call(tracker, name, now) is expected
        blob = msgspec.msgpack.encode(tracker.export_state())


def test_a_reset_is_the_fresh_state():
    rules = [RateRule(id="w", tools=("web_*",), max_calls=1, per=60.0), RateRule(id="s", tools=("x",), max_calls=1)]
    t = RateTracker(rules)
    _call(t, "web_a", 1.0)
    _call(t, "x", 2.0)
    assert t.check("web_a", 3.0) is rules[0] and t.check("x", 3.0) is rules[1]
    t.restore_state(None)
    assert t.export_state() == RateTracker(rules).export_state()
    assert t.check("web_a", 0.0) is None and t.check("x", 0.0) is None


def test_a_state_that_does_not_fit_is_refused_and_changes_nothing():
    rules = [RateRule(id="w", tools=("web_*",), max_calls=2, per=60.0), RateRule(id="s", tools=("x",), max_calls=1)]
    t = RateTracker(rules)
    _call(t, "web_a", 1.0)
    _call(t, "web_a", 2.0)
    _call(t, "x", 3.0)
    good = t.export_state()
    fmt, shape, latest, values = good
    target = RateTracker(rules)
    _call(target, "web_b", 0.5)
    before = target.export_state()
    bad_states = [
        "x",
        None.__class__,
        {},
        [],
        good[:3],
        [2, shape, latest, values],
        [fmt, "f" * 16, latest, values],
        [fmt, shape, math.nan, values],
        [fmt, shape, 10**400, values],
        [fmt, shape, "1", values],
        [fmt, shape, latest, values[:1]],
        [fmt, shape, latest, "v"],
        [fmt, shape, latest, [[1.0, 2.0, 2.5], 1]],  # more times than max_calls
        [fmt, shape, latest, [[2.0, 1.0], 1]],  # out of order
        [fmt, shape, latest, [[1.0, 99.0], 1]],  # after the latest time
        [fmt, shape, None, [[1.0], 1]],
        [fmt, shape, latest, [[1.0, math.inf], 1]],
        [fmt, shape, latest, [[1.0, True], 1]],
        [fmt, shape, latest, [[1.0], -1]],
        [fmt, shape, latest, [[1.0], True]],
        [fmt, shape, latest, [[1.0], 1.0]],
        [fmt, shape, latest, [1, [1.0]]],
    ]
    for bad in bad_states:
        with pytest.raises((ValueError, TypeError)):
            target.restore_state(bad)
        assert target.export_state() == before
    with pytest.raises(ValueError):
        RateTracker([rules[0]]).restore_state(good)
    with pytest.raises(ValueError):
        RateTracker([RateRule(id="w", tools=("web_*",), max_calls=3, per=60.0), rules[1]]).restore_state(good)
    target.restore_state(good)
    assert target.export_state() == good


def test_garbage_never_raises_anything_but_value_or_type_error():
    t = RateTracker(
        [RateRule(id="w", tools=("web_*",), max_calls=2, per=60.0), RateRule(id="s", tools=("x",), max_calls=1)]
    )
    restore_survives_junk(t, slots=4, max_size=4, max_leaves=16)
