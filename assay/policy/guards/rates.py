"""Per-tool rate limits (``limits.tools``, docs/policy.md, "Per-tool rate limits") as a guard:
a :class:`~assay.policy.rates.RateTracker`, its windows shared in a shared session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.policy.guards import Built, Part, Surface

if TYPE_CHECKING:
    from assay.policy.guards import GuardContext

NAME = "rates"


def build(ctx: GuardContext) -> Built | None:
    limits = ctx.policy.limits
    if ctx.surface is Surface.CHECK or limits is None or not limits.tools:
        return None
    from assay.policy.pipeline import RateGuard
    from assay.policy.rates import tracker_for

    tracker = tracker_for(ctx.policy)
    if tracker is None:
        return None
    return Built(RateGuard(tracker), Part(NAME, tracker.export_state, tracker.restore_state), tracker=tracker)
