"""What a policy does with a tool by its name alone (docs/tools.md, "With a policy"): the
engine's name-level decision (the tool's compiled :class:`~assay.policy.plans.Plan`: deny and
allow lists, schema or unconstrained mode, approvals) and the rules that would judge its calls
(path confinement, per-tool rate limits, flow rules). Sans-IO; reuses
:mod:`assay.policy.explain`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.policy.decision import Outcome
from assay.policy.engine import DEFAULT_SERVER_ID
from assay.policy.explain import verdict
from assay.policy.explain_steps import flow_rules_for
from assay.policy.plans import compile_policy

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = ["ToolSummary", "tool_summary"]


@dataclass(frozen=True)
class ToolSummary:
    """What a policy does with a tool by its name alone (``assay mcp tools --policy``)."""

    verdict: str  # deny, needs approval, allow with warning, allow
    reason_code: str | None
    matched_rule: str | None
    schema: bool
    confined: tuple[str, ...] = field(default=())
    rate_rules: tuple[str, ...] = field(default=())
    flow_rules: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason_code": self.reason_code,
            "matched_rule": self.matched_rule,
            "schema": self.schema,
            "path_confined": list(self.confined),
            "rate_rules": list(self.rate_rules),
            "flow_rules": list(self.flow_rules),
        }


def tool_summary(policy: Policy, tool: str, *, server: str = DEFAULT_SERVER_ID) -> ToolSummary:
    """The engine's name-level decision of ``tool`` (its compiled plan: deny and allow lists,
    schema or unconstrained mode, approvals) and the rules that would judge its calls."""
    plan = compile_policy(policy).plan(tool)
    d = plan.decision
    confined = tuple(sorted({a for r in plan.paths for a in r.args}))
    rates: tuple[str, ...] = ()
    flows: tuple[str, ...] = ()
    if d.outcome is Outcome.DENY:  # denied by name: no later rule ever sees its calls
        return ToolSummary(verdict(d), d.reason_code, d.matched_rule, tool != "$defs" and tool in policy.schemas)
    if policy.limits is not None and policy.limits.tools:
        from assay.policy.rates import tracker_for

        tracker = tracker_for(policy)
        if tracker is not None:
            rates = tuple(r.id for r in tracker.rules_for(tool))
    if policy.sequences:
        flows = tuple(rule for rule, _ in flow_rules_for(policy, tool, server))
    return ToolSummary(
        verdict(d), d.reason_code, d.matched_rule, tool != "$defs" and tool in policy.schemas, confined, rates, flows
    )
