"""Why a policy decides a call as it does: the checks of docs/policy.md, "Evaluation and reason
codes", one line each, in the pipeline's order (docs/policy-tools.md, "assay mcp policy explain").

The decision itself is never computed here: :func:`explain` runs the real
:class:`~assay.policy.pipeline.Pipeline` (the engine, then the guards of a fresh session, built
by the one registry every surface builds them from: :mod:`assay.policy.guards`) on a fresh
session, and takes its :class:`Decision`. The per-step lines come from
:mod:`assay.policy.explain_steps`, which reads the same compiled objects the pipeline uses (the
name's :class:`~assay.policy.plans.Plan` and its schema validator and path rules, a fresh
:class:`~assay.policy.rates.RateTracker` and :class:`~assay.policy.flows.FlowTracker`), and the
first step that fails must be the check that gave the decision's reason code:
:attr:`Explanation.agrees` says whether it is (tests/policy/test_policy_explain.py draws random
policies and calls and asserts it always is). So the trace cannot drift from the decision
unnoticed. This module holds the decision, its verdict and the printed lines.

:func:`assay.policy.toolview.tool_summary` is the name-level view (no arguments) that
``assay mcp tools --policy`` prints for each listed tool (docs/tools.md, "With a policy").

Sans-IO: values in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay.policy.decision import ApprovalState, Decision, Outcome
from assay.policy.engine import DEFAULT_SERVER_ID
from assay.policy.explain_steps import (
    FAIL,
    WARN,
    Step,
    Where,
    engine_steps,
    guard_steps,
    plain_where,
    reached,
    users_steps,
    users_where,
)
from assay.policy.guards import GuardContext, Guards, Surface, build_guards
from assay.policy.pipeline import Call, Pipeline
from assay.policy.users import applying, for_user

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = ["Explanation", "explain", "render", "verdict"]

# the step that decides each deny code (docs/policy.md, "Evaluation and reason codes")
_STEP_OF_CODE = {
    "E_TOOL_DRIFT": "pins",
    "E_RATE_LIMIT": "session limits",  # or "rate limits" (a limits.tools rule): see _deciding
    "E_TOOL_DENIED": "deny list",
    "E_TOOL_NOT_ALLOWED": "allow list",
    "E_SCHEMA_COMPILE": "schema",
    "E_ARG_SCHEMA": "schema",
    "E_TOOL_UNCONSTRAINED": "unconstrained mode",
    "E_PATH_CONFINEMENT": "path confinement",
    "E_TOOL_UNDECLARED": "declared baseline",
    "E_SEQUENCE_VIOLATION": "flow rules",
    "E_APPROVAL_DENIED": "approvals",
    "E_ARGUMENT_SECRET": "inspection",
    "E_TAINTED_ARGUMENT": "inspection",
    "E_TOOL_POISONED": "inspection",
}


@dataclass(frozen=True)
class Explanation:
    """The decision of one call (from the pipeline) and the steps that explain it."""

    tool: str
    server: str
    arguments: Any
    decision: Decision
    steps: tuple[Step, ...]
    #: the user's claims (``--claims``), None when not given; ``users`` the entries that applied
    claims: Mapping[str, Any] | None = None
    users: tuple[int, ...] = ()

    @property
    def verdict(self) -> str:
        return verdict(self.decision)

    @property
    def trace_verdict(self) -> tuple[str, str | None]:
        """The verdict and reason code the steps alone give: the first fail denies with its
        code; else an approval step that warns needs approval; else an unconstrained-mode warn
        allows with a warning; else allow."""
        for s in self.steps:
            if s.status == FAIL:
                return "deny", s.code
        warned = {s.name for s in self.steps if s.status == WARN}
        if "approvals" in warned:
            return "needs approval", "E_TOOL_UNCONSTRAINED" if "unconstrained mode" in warned else None
        if "unconstrained mode" in warned:
            return "allow with warning", "E_TOOL_UNCONSTRAINED"
        return "allow", None

    @property
    def agrees(self) -> bool:
        """Whether the steps give the pipeline's verdict and reason code, and a deny's first
        failing step is the check that decided it."""
        if self.trace_verdict != (self.verdict, self.decision.reason_code):
            return False
        if self.decision.outcome is not Outcome.DENY:
            return True
        first = next(s for s in self.steps if s.status == FAIL)
        return first.name == _deciding(self.decision)

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        return {
            "tool": self.tool,
            "server": self.server,
            "verdict": self.verdict,
            "outcome": str(d.outcome),
            "reason_code": d.reason_code,
            "reason": d.reason,
            "matched_rule": d.matched_rule,
            "approval_state": None if d.approval_state is None else str(d.approval_state),
            "agrees": self.agrees,
            "claims": None if self.claims is None else dict(self.claims),
            "users": list(self.users),
            "steps": [s.to_dict() for s in self.steps],
        }


def verdict(decision: Decision) -> str:
    """``deny``, ``needs approval``, ``allow with warning`` or ``allow``."""
    if decision.outcome is Outcome.DENY:
        return "deny"
    if decision.approval_state is ApprovalState.REQUIRED:
        return "needs approval"
    if decision.outcome is Outcome.ALLOW_WITH_WARNING:
        return "allow with warning"
    return "allow"


def _deciding(decision: Decision) -> str:
    code = decision.reason_code or ""
    if code == "E_RATE_LIMIT" and (decision.contract or {}).get("rule"):
        return "rate limits"
    return _STEP_OF_CODE.get(code, "?")


def _guards(policy: Policy, server: str) -> Guards:
    """The guards of a fresh session, built as every surface builds them (the registry,
    :func:`assay.policy.guards.build_guards`)."""
    return build_guards(GuardContext(policy, Surface.EXPLAIN, server))


def explain(
    policy: Policy,
    tool: str,
    arguments: Any = None,
    *,
    server: str = DEFAULT_SERVER_ID,
    claims: Mapping[str, Any] | None = None,
) -> Explanation:
    """The decision of the first call of a fresh session (no pins compared, no declared
    baseline, no person asked) and the steps that explain it. With ``claims``, the call of a
    user with those claims: the policy :func:`assay.policy.users.for_user` makes for them
    decides (docs/policy.md, "Policy by user (serve)")."""
    base = policy
    which = applying(base, claims)
    policy = for_user(base, claims)
    where: Where = users_where(base, which) if which else plain_where
    guards = _guards(policy, server)
    pipeline = Pipeline(policy, None, guards.checks, guards.approvals, clock=lambda: 0.0)
    decision = pipeline.decide(Call(tool, arguments, server), 0.0)
    fresh = _guards(policy, server)  # fresh trackers for the trace (the pipeline's are used)
    rates, flows = fresh.tracker("rates"), fresh.tracker("flows")
    steps = users_steps(base, claims, which)
    steps += engine_steps(policy, tool, arguments, server, where)
    steps += guard_steps(policy, tool, arguments, server, rates, flows, where)
    return Explanation(tool, server, arguments, decision, tuple(reached(steps)), claims, which)


def render(explanation: Explanation) -> list[str]:
    """The lines `assay mcp policy explain` prints (docs/policy-tools.md, "assay mcp policy
    explain"): the verdict, the reason code, the reason and the rule, then one line per step."""
    d = explanation.decision
    code = f" ({d.reason_code})" if d.reason_code else ""
    lines = [
        f"{json.dumps(explanation.tool, ensure_ascii=False)} on server {json.dumps(explanation.server, ensure_ascii=False)}: "
        f"{explanation.verdict}{code}",
        f"reason: {d.reason or '-'}",
        f"rule: {d.matched_rule or '-'}",
    ]
    if explanation.claims is not None:
        lines.append(f"claims: {json.dumps(dict(explanation.claims), ensure_ascii=False, separators=(',', ':'))}")
    width = max(len(s.name) for s in explanation.steps)
    for s in explanation.steps:
        status = s.status.upper() if s.status == FAIL else s.status
        lines.append(f"  {status:<11}  {s.name:<{width}}  {s.detail}")
    if not explanation.agrees:  # never seen (tests/policy/test_policy_explain.py); said, not hidden
        lines.append("  note: these steps do not give the decision above; the decision is the pipeline's")
    return lines
