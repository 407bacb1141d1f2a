"""A hostile client against the session trackers of flow rules and per-tool rate limits
(assay/policy/flows.py, assay/policy/rates.py; docs/policy.md, "Flow rules" and "Per-tool rate
limits"): what it sends is chosen to make them use memory without bound, or to judge a call on
a state that is not the history's."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

from assay.policy import Decision
from assay.policy.flows import FlowTracker, parse_flows
from assay.policy.model import RateRule
from assay.policy.rates import RateTracker

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
