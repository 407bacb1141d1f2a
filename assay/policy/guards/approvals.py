"""Approvals (``tools.approval_required``, docs/wrap.md, "Approvals") as the pipeline's last
step, in enforce mode: a settling guard (a call that needs a person's approval but cannot be
asked is settled: the fallback, ``approval_timeout: 0``, a retry that carries its answer) and
the asking step after it (the effects that ask the person: :meth:`Pipeline.ask
<assay.policy.pipeline.Pipeline.ask>`). Both are wrap's approvals room (``ctx.asker``): only a
session with a person to ask has this step; ``policy explain`` and the server show
``needs approval``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.policy.decision import ApprovalState
from assay.policy.guards import Built, Part

if TYPE_CHECKING:
    from assay.policy.decision import Decision
    from assay.policy.guards import GuardContext
    from assay.policy.pipeline import Call

NAME = "approvals"

_REQUIRED = ApprovalState.REQUIRED


class ApprovalGuard:
    """The settling guard over an asker (``settle(call, decision)``, ``ask(call, decision,
    out)``): only a call still ``required`` reaches it."""

    __slots__ = ("asker",)

    def __init__(self, asker: Any) -> None:
        self.asker = asker

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        if decision.approval_state is not _REQUIRED:
            return None
        got: Decision | None = self.asker.settle(call, decision)
        return got

    def enter(self, call: Call, now: float) -> None:
        pass

    def ask(self, call: Call, decision: Decision, out: list[Any]) -> Decision | None:
        got: Decision | None = self.asker.ask(call, decision, out)
        return got


def build(ctx: GuardContext) -> Built | None:
    asker = ctx.asker
    if asker is None:
        return None
    # signed approvals (serve) keep their used nonces in the shared session (docs/serve.md, "Approvals")
    part: Part | None = asker.shared_part(NAME)
    return Built(ApprovalGuard(asker), part=part, settles=True, tracker=asker)
