"""Evaluation (docs/policy.md, 'Evaluation and reason codes'): (policy, session state, tool
call) in, :class:`Decision` out.

Order, first match returns: pin drift → counters and limits → deny → allow → schema (compile,
then validation) → unconstrained mode ``deny`` → path confinement → allow (with the warning of
unconstrained mode ``warn``). Everything that depends only on the tool name (classes, deny/allow
matches, the schema to use, the path rules, obligations, the resulting decision) is computed once
per name and cached on the policy's compiled form (:mod:`assay.policy.plans`), so a call costs a
dict lookup plus, for a tool with a schema, one validator run and, for a confined tool, one
lexical normalization per path argument.
"""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Any

from assay.policy.decision import Decision, Outcome, TypedDecision, event_reason_code
from assay.policy.identity import ToolIdentity, identity_bytes, tool_identity
from assay.policy.paths import confinement_violation
from assay.policy.plans import REASONS, Compiled, Plan, check_schemas, compile_policy, schema_errors
from assay.policy.state import PIN_UNKNOWN_REASONS, SessionState

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = [
    "Decision",
    "SessionState",
    "ToolIdentity",
    "evaluate",
    "tool_identity",
    "identity_bytes",
    "event_reason_code",
    "compile_policy",
    "schema_errors",
    "check_schemas",
    "DEFAULT_SERVER_ID",
    "REASONS",
    "PIN_UNKNOWN_REASONS",
]

DEFAULT_SERVER_ID = "default-mcp-server"  # wrap's default --label

_DENY = Outcome.DENY  # bound once: built at call time, on the schema and path denies
_TD_DENY = TypedDecision.DENY


def _confined(plan: Plan, tool: str, arguments: Any) -> Decision | None:
    """The path-confinement deny of this call, or ``None`` when every path argument is inside."""
    if arguments is None:
        return None
    for rule in plan.paths:
        if not isinstance(arguments, dict):
            why, arg = "the arguments are not an object", "arguments"
        else:
            why = None
            for arg in rule.args:
                value = arguments.get(arg)
                if value is None:
                    continue  # absent: nothing to confine (a schema can require it)
                why = confinement_violation(
                    value, within=rule.within, base=rule.base, resolve_symlinks=rule.resolve_symlinks
                )
                if why is not None:
                    break
            if why is None:
                continue
        shown = _json.dumps(arg)
        reason = REASONS["path_confinement"].format(arg=shown, why=why)
        return Decision(
            _DENY,
            tool,
            reason_code="E_PATH_CONFINEMENT",
            reason=reason,
            contract={
                "status": "deny",
                "error_code": "E_PATH_CONFINEMENT",
                "tool": tool,
                "argument": arg,
                "reason": reason,
            },
            typed_decision=_TD_DENY,
            **{**(plan.arg_meta or {}), "matched_rule": "path_confinement"},
        )
    return None


def _rate_limited(engine: Compiled, tool: str, classes: tuple[str, ...], which: str) -> Decision:
    return Decision(
        _DENY,
        tool,  # the called tool, not upstream's "ALL" (docs/compatibility.md, "Policies")
        reason_code="E_RATE_LIMIT",
        reason=REASONS[which],
        contract={"status": "deny", "error_code": "E_RATE_LIMIT"},
        typed_decision=_TD_DENY,
        **engine.base(tool, classes),
    )


def evaluate(
    policy: "Policy",
    tool_name: str,
    arguments: Any,
    state: SessionState | None = None,
    *,
    server_id: str = DEFAULT_SERVER_ID,
) -> Decision:
    """Decide one ``tools/call`` (the order is in the module docstring).

    ``arguments`` is ``params.arguments`` (``None`` when absent). ``state`` is the session's
    :class:`SessionState`; ``None`` means fresh state for this call only (the ``assay_check_args``
    case: limits bite only at 0, no drift check). ``server_id`` is the relay's ``--label``:
    the runtime identity compared with a pin is ``(server_id, tool_name, observed hashes)``.
    """
    engine: Compiled = policy._engine or compile_policy(policy)
    if state is not None:
        # pins fail closed: every definition seen must equal the pin (docs/wrap.md, "Tool pins")
        pin = engine.pins.get(tool_name)
        if pin is not None:
            pinned = ToolIdentity(pin.server_id, pin.tool_name, pin.schema_hash, pin.meta_hash)
            problem = state.pin_problem(tool_name, pinned, server_id)
            if problem is not None:
                kind, runtime = problem
                if kind == "drifted" and runtime is not None:
                    reason = REASONS["drift"].format(runtime=runtime.fingerprint(), pinned=pinned.fingerprint())
                    told = REASONS["drift_contract"]
                else:  # the reply tells the model which case too
                    reason = told = PIN_UNKNOWN_REASONS[kind]
                return Decision(
                    _DENY,
                    tool_name,
                    reason_code="E_TOOL_DRIFT",
                    reason=reason,
                    contract={
                        "status": "deny",
                        "error_code": "E_TOOL_DRIFT",
                        "tool": tool_name,
                        "reason": told,
                    },
                    typed_decision=TypedDecision.DENY_WITH_ALERT,
                    obligations=[{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}],
                    **engine.base(tool_name, policy.classes_for(tool_name)),
                )
        # counters (always, before comparing): the one place a tools/call is counted
        state.requests_count += 1
        state.tool_calls_count += 1
        requests, calls = state.requests_count, state.tool_calls_count
    else:
        requests = calls = 1
    # limits
    limits = engine.limits
    if limits is not None:
        mr = limits.max_requests_total
        if mr is not None and requests > mr:
            return _rate_limited(engine, tool_name, policy.classes_for(tool_name), "rate_requests")
        mc = limits.max_tool_calls_total
        if mc is not None and calls > mc:
            return _rate_limited(engine, tool_name, policy.classes_for(tool_name), "rate_tool_calls")
    # the rest: the name-determined plan, plus the schema run
    plans = engine.plans
    plan = plans.get(tool_name) if tool_name.__class__ is str else None
    if plan is None:
        if not isinstance(tool_name, str):
            raise TypeError("tool_name must be a string")
        plan = engine.plan(tool_name)
    schema = plan.schema
    if schema is None:
        if not plan.paths:
            return plan.decision
        return _confined(plan, tool_name, arguments) or plan.decision
    try:
        if schema.is_valid(arguments):
            if not plan.paths:
                return plan.decision
            return _confined(plan, tool_name, arguments) or plan.decision
        violations = schema.violations(arguments)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # arguments the validator cannot even read: fail closed as a schema violation
        violations = [{"path": "", "message": f"arguments cannot be validated: {' '.join(str(exc).split())}"}]
    return Decision(
        _DENY,
        tool_name,
        reason_code="E_ARG_SCHEMA",
        reason=REASONS["arg_schema"],
        contract={"status": "deny", "error_code": "E_ARG_SCHEMA", "tool": tool_name, "violations": violations},
        typed_decision=_TD_DENY,
        **plan.arg_meta,  # type: ignore[arg-type]
    )
