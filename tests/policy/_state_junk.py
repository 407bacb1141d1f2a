"""The shared check of the trackers' exported state (docs/wrap.md, "Shared sessions"): a state
read back from the shared store may be anything, and restoring it raises ValueError or
TypeError, nothing else."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st


def restore_survives_junk(tracker: Any, *, slots: int, max_size: int, max_leaves: int) -> None:
    """``tracker.restore_state`` of junk, and of its own state with one of its first ``slots``
    members replaced by junk, raises nothing but ValueError or TypeError (300 examples)."""
    good = tracker.export_state()
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3))
    value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=max_size), max_leaves=max_leaves)

    @settings(max_examples=300, deadline=None)
    @given(value, st.integers(0, slots - 1))
    def run(junk: Any, i: int) -> None:
        bad = list(good)
        bad[i] = junk
        for state in (junk, bad):
            try:
                tracker.restore_state(state)
            except (ValueError, TypeError):
                continue

    run()
