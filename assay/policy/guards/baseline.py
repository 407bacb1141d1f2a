"""The declared baseline (``assay mcp wrap --declared-manifest``, docs/wrap.md, "Declared
baseline") as a guard: wrap's :class:`~assay.session.baseline.Baseline` (what the client was
shown) judges each call. Only wrap has one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.policy.guards import Built

if TYPE_CHECKING:
    from assay.policy.decision import Decision
    from assay.policy.guards import GuardContext
    from assay.policy.pipeline import Call

NAME = "baseline"


class BaselineGuard:
    """The guard: ``baseline.check(name, decision)`` (a deny, or None)."""

    __slots__ = ("baseline",)

    def __init__(self, baseline: Any) -> None:
        self.baseline = baseline

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        got: Decision | None = self.baseline.check(call.name, decision)
        return got

    def enter(self, call: Call, now: float) -> None:
        pass


def build(ctx: GuardContext) -> Built | None:
    return None if ctx.baseline is None else Built(BaselineGuard(ctx.baseline), tracker=ctx.baseline)
