"""What a call sends out (``inspect``'s argument checks and poisoned tools, docs/inspect.md)
as a guard: :class:`~assay.policy.outbound.OutboundGuard` over wrap's inspection room, or over
the policy alone (:class:`~assay.policy.outbound.PolicyOutbound`: the first call of a fresh
session) for ``policy explain``. First in the order: it judges the call as the server would
get it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.policy.guards import Built, Surface

if TYPE_CHECKING:
    from assay.policy.guards import GuardContext

NAME = "outbound"


def build(ctx: GuardContext) -> Built | None:
    if ctx.surface is Surface.WRAP:  # the inspection room, when it has calls to judge
        if ctx.outbound is None:
            return None
        from assay.policy.outbound import OutboundGuard

        return Built(OutboundGuard(ctx.outbound))
    if ctx.surface is Surface.EXPLAIN and ctx.policy.inspect is not None:
        from assay.policy.outbound import OutboundGuard, PolicyOutbound

        return Built(OutboundGuard(PolicyOutbound(ctx.policy, ctx.server)))
    return None
