"""The steps of ``assay mcp policy explain``: one line per check of docs/policy.md, "Evaluation
and reason codes", in the pipeline's order (docs/policy-tools.md, "assay mcp policy explain").

Each builder reads the same compiled objects the pipeline uses (the name's
:class:`~assay.policy.plans.Plan`, its schema validator and path rules, the rate and flow trackers
of a fresh session, the outbound guard) and says what it would decide for the first call of a fresh
session. :mod:`assay.policy.explain` runs the real pipeline for the decision and puts these steps
beside it; it checks that the first failing step is the check that gave the decision's reason code.

Sans-IO: values in, values out (``resolve_symlinks`` path rules read the file system, as the
engine does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay.policy.decision import Outcome
from assay.policy.paths import confinement_violation
from assay.policy.patterns import pattern_matches
from assay.policy.pipeline import Call
from assay.policy.plans import Plan, compile_policy
from assay.policy.users import claim_holds, origins

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = [
    "PASS",
    "FAIL",
    "WARN",
    "NA",
    "SKIPPED",
    "Step",
    "Where",
    "plain_where",
    "users_where",
    "users_steps",
    "engine_steps",
    "guard_steps",
    "reached",
    "flow_rules_for",
]

PASS, FAIL, WARN, NA, SKIPPED = "pass", "fail", "warn", "n/a", "not reached"


@dataclass(frozen=True)
class Step:
    """One check: its name (as docs/policy.md names it), ``status`` (``pass``, ``fail``,
    ``warn``, ``n/a`` or ``not reached``), a one-line ``detail`` and the reason code of a fail."""

    name: str
    status: str
    detail: str
    code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status, "detail": self.detail, "code": self.code}


def _quoted(items: Any) -> str:
    return ", ".join(json.dumps(x, ensure_ascii=False) for x in items)


def _matching(patterns: Any, name: str) -> list[str]:
    return [p for p in (patterns or ()) if pattern_matches(name, p)]


#: the text naming the matching items of ``tools.<key>``: ``tools.deny "rm"`` (with a user's
#: claims, each item under the list it comes from: ``users[0] ("ops").tools.allow "deploy"``)
Where = Callable[[str, list[str]], list[str]]


def plain_where(key: str, items: list[str]) -> list[str]:
    return [f"tools.{key} {_quoted(items)}"] if items else []


def users_where(base: Policy, which: tuple[int, ...]) -> Where:
    def where(key: str, items: list[str]) -> list[str]:
        found = origins(base, which, key)
        groups: dict[str, list[str]] = {}
        for item in items:
            origin = found.get(item)
            groups.setdefault(f"tools.{key}" if origin is None else origin.text(key), []).append(item)
        return [f"{name} {_quoted(got)}" for name, got in groups.items()]

    return where


def _unmet(base: Policy, index: int, claims: Mapping[str, Any]) -> str:
    """Why ``users[index]`` does not apply: its first condition that does not hold."""
    entry = base.users[index]
    for name, accepted in entry.claims.items():
        if name not in claims:
            return f"users[{index}]: no {json.dumps(name, ensure_ascii=False)} claim"
        if not claim_holds(claims[name], accepted):
            got = json.dumps(claims[name], ensure_ascii=False)
            if len(got) > 80:
                got = got[:77] + "..."
            return f"users[{index}]: {json.dumps(name, ensure_ascii=False)} is {got}, not one of {_quoted(accepted)}"
    return f"users[{index}]: applies"  # never: only entries that do not apply are asked about


def users_steps(base: Policy, claims: Mapping[str, Any] | None, which: tuple[int, ...]) -> list[Step]:
    """The ``users`` step: only when the policy has a ``users`` section or claims are given (so
    the trace of every other policy is what it was)."""
    n = len(base.users)
    if claims is None:
        if not n:
            return []
        return [Step("users", NA, f"no claims given: none of the {n} users entries applies (wrap, a stdio user)")]
    if not n:
        return [Step("users", NA, "the policy has no users section: the claims change nothing")]
    if not which:
        why = "; ".join(_unmet(base, i, claims) for i in range(min(n, 5))) + ("; ..." if n > 5 else "")
        return [Step("users", NA, f"the claims meet no users entry ({why})")]
    named = ", ".join(
        f"users[{i}]" + (f" ({json.dumps(base.users[i].name, ensure_ascii=False)})" if base.users[i].name else "")
        for i in which
    )
    return [Step("users", PASS, f"the claims meet {named}: their tools lists are added to the policy's")]


def reached(steps: list[Step]) -> list[Step]:
    """Every step after the first fail is ``not reached`` (its detail kept: what it would say)."""
    out: list[Step] = []
    done = False
    for s in steps:
        if done:
            out.append(Step(s.name, SKIPPED, s.detail))
            continue
        out.append(s)
        done = s.status == FAIL
    return out


def engine_steps(policy: Policy, tool: str, arguments: Any, server: str, where: Where = plain_where) -> list[Step]:
    engine = compile_policy(policy)
    plan = engine.plan(tool)
    code = plan.decision.reason_code if plan.decision.outcome is Outcome.DENY else None
    classes = policy.classes_for(tool)
    steps: list[Step] = []
    # pins
    pin = policy.tool_pins.get(tool)
    if pin is None:
        steps.append(Step("pins", NA, "no tool_pins entry for this tool"))
    else:
        steps.append(
            Step(
                "pins",
                NA,
                f"pinned to server {json.dumps(pin.server_id)}: compared with the definitions "
                "a session lists (not checked: no session)",
            )
        )
    # session limits: a fresh session's first call
    limits = policy.limits
    bits, over = [], None
    for key in ("max_requests_total", "max_tool_calls_total"):
        value = None if limits is None else getattr(limits, key)
        if value is not None:
            bits.append(f"limits.{key} {value}")
            if value < 1 and over is None:
                over = f"limits.{key} is {value}: every call is denied"
    if over is not None:
        steps.append(Step("session limits", FAIL, over, "E_RATE_LIMIT"))
        return steps + _after_limits(policy, plan, tool, arguments, classes, None, where)
    steps.append(
        Step(
            "session limits",
            PASS if bits else NA,
            f"the first call of a session is within {', '.join(bits)}" if bits else "no session totals",
        )
    )
    return steps + _after_limits(policy, plan, tool, arguments, classes, code, where)


def _after_limits(
    policy: Policy,
    plan: Plan,
    tool: str,
    arguments: Any,
    classes: tuple[str, ...],
    code: str | None,
    where: Where = plain_where,
) -> list[Step]:
    t = policy.tools
    steps: list[Step] = []
    # deny list
    names = _matching(t.deny, tool)
    deny_cls = [c for c in classes if c in (t.deny_classes or ())]
    if code == "E_TOOL_DENIED":
        what = where("deny", names) + where("deny_classes", deny_cls)
        steps.append(Step("deny list", FAIL, f"{plan.decision.reason}: {'; '.join(what)}", code))
    else:
        steps.append(Step("deny list", PASS, "no tools.deny pattern or tools.deny_classes class matches"))
    # allow list
    if not policy.has_allowlist:
        steps.append(Step("allow list", NA, "no allowlist: every tool not denied passes"))
    elif code == "E_TOOL_NOT_ALLOWED":
        steps.append(Step("allow list", FAIL, "no tools.allow pattern or tools.allow_classes class matches", code))
    else:
        allow_names = _matching(t.allow, tool) if t.allow is not None else []
        allow_cls = [c for c in classes if c in (t.allow_classes or ())]
        what = where("allow", allow_names) + where("allow_classes", allow_cls)
        steps.append(
            Step("allow list", PASS, f"matched {'; '.join(what)}") if what else Step("allow list", NA, "not checked")
        )
    # schema
    has_schema = tool != "$defs" and tool in policy.schemas
    if code == "E_SCHEMA_COMPILE":
        steps.append(Step("schema", FAIL, plan.decision.reason or "", code))
    elif not has_schema:
        steps.append(Step("schema", NA, f"no schemas.{tool} entry"))
    elif plan.schema is None:
        steps.append(Step("schema", NA, f"schemas.{tool} (not reached)"))
    else:
        steps.append(_schema_step(plan, tool, arguments))
    # unconstrained mode
    mode = policy.enforcement
    if has_schema:
        steps.append(Step("unconstrained mode", NA, "the tool has a schema"))
    elif code == "E_TOOL_UNCONSTRAINED":
        steps.append(Step("unconstrained mode", FAIL, "no schema and enforcement.unconstrained_tools is deny", code))
    elif mode == "warn":
        steps.append(
            Step(
                "unconstrained mode",
                WARN,
                "no schema: allowed with the warning E_TOOL_UNCONSTRAINED (enforcement.unconstrained_tools: warn)",
            )
        )
    else:
        steps.append(Step("unconstrained mode", PASS, f"no schema; enforcement.unconstrained_tools is {mode}"))
    # path confinement
    steps.append(_paths_step(policy, plan, tool, arguments))
    return steps


def _schema_step(plan: Plan, tool: str, arguments: Any) -> Step:
    schema = plan.schema
    assert schema is not None
    try:
        if schema.is_valid(arguments):
            return Step("schema", PASS, f"the arguments match schemas.{tool}")
        violations = schema.violations(arguments)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        violations = [{"path": "", "message": f"arguments cannot be validated: {' '.join(str(exc).split())}"}]
    shown = "; ".join(f"{v.get('path') or '/'}: {v.get('message')}" for v in violations[:5])
    more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
    return Step("schema", FAIL, f"the arguments do not match schemas.{tool}: {shown}{more}", "E_ARG_SCHEMA")


def _paths_step(policy: Policy, plan: Plan, tool: str, arguments: Any) -> Step:
    rules = (
        plan.paths
        if plan.decision.outcome is not Outcome.DENY
        else tuple(r for r in policy.path_confinement if _matching(r.tools, tool))
    )
    if not rules:
        return Step("path confinement", NA, "no path_confinement rule covers this tool")
    for rule in rules:
        if arguments is None:
            continue
        if not isinstance(arguments, dict):
            return Step("path confinement", FAIL, "the arguments are not an object", "E_PATH_CONFINEMENT")
        for arg in rule.args:
            value = arguments.get(arg)
            if value is None:
                continue
            why = confinement_violation(
                value, within=rule.within, base=rule.base, resolve_symlinks=rule.resolve_symlinks
            )
            if why is not None:
                return Step("path confinement", FAIL, f"argument {json.dumps(arg)}: {why}", "E_PATH_CONFINEMENT")
    args = sorted({a for r in rules for a in r.args})
    within = sorted({w for r in rules for w in r.within})
    return Step("path confinement", PASS, f"arguments {_quoted(args)} (when present) are within {', '.join(within)}")


def guard_steps(
    policy: Policy, tool: str, arguments: Any, server: str, rates: Any, flows: Any, where: Where = plain_where
) -> list[Step]:
    steps = [_inspection_step(policy, tool, arguments, server)] if policy.inspect is not None else []
    steps.append(Step("declared baseline", NA, "wrap --declared-manifest only (not checked here)"))
    # per-tool rate limits
    if rates is None:
        steps.append(Step("rate limits", NA, "no limits.tools rules"))
    else:
        from assay.policy.rates import duration_text

        def limit_text(r: Any) -> str:
            span = "per session" if r.per is None else f"per {duration_text(r.per)}"
            return f"at most {r.max_calls} call{'' if r.max_calls == 1 else 's'} {span} for {', '.join(r.tools)}"

        mine = rates.rules_for(tool)
        full = rates.check(tool, 0.0)
        if full is not None:
            steps.append(Step("rate limits", FAIL, f"rule {full.id}: {limit_text(full)}", "E_RATE_LIMIT"))
        elif mine:
            steps.append(
                Step(
                    "rate limits",
                    PASS,
                    "; ".join(f"rule {r.id}: {limit_text(r)}" for r in mine) + " (a fresh session has room)",
                )
            )
        else:
            steps.append(Step("rate limits", NA, "no limits.tools rule counts this tool"))
    # flow rules
    if flows is None:
        steps.append(Step("flow rules", NA, "no sequences"))
    else:
        found = flows.violation(tool, arguments, 0.0)
        if found is not None:
            index, reason = found
            rule = policy.sequences[index]
            steps.append(Step("flow rules", FAIL, f"rule {rule.id}: {rule.message or reason}", "E_SEQUENCE_VIOLATION"))
        else:
            later = [f"{rule} ({why})" for rule, why in flow_rules_for(policy, tool, server)]
            steps.append(
                Step(
                    "flow rules",
                    PASS,
                    "a fresh session breaks no rule"
                    + (f"; later calls may be judged by: {'; '.join(later)}" if later else "; no rule names this tool"),
                )
            )
    # approvals
    t = policy.tools
    names = _matching(t.approval_required, tool)
    cls = [c for c in policy.classes_for(tool) if c in (t.approval_required_classes or ())]
    if names or cls:
        what = where("approval_required", names) + where("approval_required_classes", cls)
        steps.append(
            Step(
                "approvals",
                WARN,
                f"a person must approve the call ({'; '.join(what)}; fallback {t.approval_fallback or 'deny'})",
            )
        )
    else:
        steps.append(Step("approvals", NA, "no approval required"))
    return steps


def flow_rules_for(policy: Policy, tool: str, server: str) -> list[tuple[str, str]]:
    """The flow rules whose selectors name ``tool`` (on ``server``), and those that judge every
    call while armed (require, eventually, after, a strict sequence)."""
    from assay.policy.flow_kinds import compile_rule

    out = []
    for rule in policy.sequences:
        kind = rule.rule.kind
        hits = compile_rule(rule.rule, policy.aliases, server).name_hits(tool)
        if hits is not None:
            out.append((rule.id, "names this tool"))
        elif kind in ("require", "eventually", "after") or (kind == "sequence" and rule.rule.strict):
            out.append((rule.id, "judges every call"))
    return out


def _inspection_step(policy: Policy, tool: str, arguments: Any, server: str) -> Step:
    """``inspect``'s checks of what a call sends out, for the first call of a fresh session
    (nothing came back yet: no value is tainted, no definition poisoned)."""
    from assay.policy.decision import Decision
    from assay.policy.outbound import OutboundGuard, PolicyOutbound

    state = PolicyOutbound(policy, server)
    settings = state.settings(tool)
    got = OutboundGuard(state).check(Call(tool, arguments, server), Decision("allow", tool), 0.0)
    if got is not None and got.outcome is Outcome.DENY:
        return Step("inspection", FAIL, got.reason or "", got.reason_code)
    bits = []
    if settings.argument_secrets != "off":
        flagged = " (flagged: the arguments hold a secret)" if state.flagged else ""
        bits.append(f"inspect.arguments.secrets {settings.argument_secrets}{flagged}")
    if settings.argument_tainted != "off":
        bits.append(f"inspect.arguments.tainted {settings.argument_tainted} (a fresh session has nothing tainted)")
    if settings.results:
        bits.append(
            f"the results are read (secrets {settings.secrets}, injection {settings.injection}"
            + (", taint" if settings.taint else "")
            + ")"
        )
    if settings.descriptions != "off":
        bits.append(f"its definition is read (descriptions {settings.descriptions})")
    return Step("inspection", PASS if bits else NA, "; ".join(bits) if bits else "no inspect setting covers this tool")
