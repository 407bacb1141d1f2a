"""The flow rules (``sequences``, docs/policy.md, "Flow rules") as a guard: a
:class:`~assay.policy.flows.FlowTracker` of the session, its history shared in a shared
session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.policy.guards import Built, Part, Surface

if TYPE_CHECKING:
    from assay.policy.guards import GuardContext

NAME = "flows"


def build(ctx: GuardContext) -> Built | None:
    policy = ctx.policy
    if ctx.surface is Surface.CHECK or not policy.sequences:
        return None
    from assay.policy.flow_ends import ALONE, reset_hint
    from assay.policy.flows import FlowTracker  # loaded only for a policy that uses it
    from assay.policy.pipeline import FlowGuard

    # how a deny ends (docs/policy.md, "How a deny ends"): a wrap knows whether it shares a
    # session; explain does not (the reset line names KEY)
    key = ctx.session_key
    reset = None if ctx.surface is not Surface.WRAP else ALONE if key is None else reset_hint(key)
    tracker = FlowTracker(policy.sequences, policy.aliases, server=ctx.server, reset=reset)
    part = Part(NAME, tracker.export_state, tracker.restore_state, tracker.armed)
    return Built(FlowGuard(tracker), part, tracker=tracker)
