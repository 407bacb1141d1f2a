"""The compiled form of a policy (docs/policy.md, "Evaluation and reason codes"): everything that
depends only on the tool name (classes, deny/allow matches, the schema validator, the path rules,
obligations, the resulting decision), computed once per name and cached on the policy, so that
:func:`assay.policy.engine.evaluate` costs a dict lookup plus the argument checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.policy.decision import ApprovalState, Decision, Outcome, TypedDecision
from assay.policy.patterns import NameMatcher
from assay.policy.schemas import CompiledSchema, SchemaPrepError, compile_schema, prepare_tool_schema

if TYPE_CHECKING:
    from assay.policy.model import PathRule, Policy

__all__ = ["REASONS", "Compiled", "Plan", "check_schemas", "compile_policy", "schema_errors"]

# reason texts (docs/policy.md, 'Evaluation and reason codes')
REASONS = {
    "denied_name": "Tool is explicitly denylisted by name",
    "denied_class": "Tool is explicitly denylisted by class",
    "denied_both": "Tool is explicitly denylisted by name and class",
    "not_allowed": "Tool is not in the allowlist",
    "not_allowed_contract": "Tool is not in allowlist",
    "arg_schema": "JSON Schema validation failed",
    "unconstrained_deny": "Tool has no schema (enforcement: deny)",
    "unconstrained_warn": "Tool allowed but has no schema",
    "rate_requests": "Rate limit exceeded (total requests)",
    "rate_tool_calls": "Rate limit exceeded (tool calls)",
    "schema_compile": "Declared schema failed to prepare or compile: ",
    "drift": "Tool integrity failure: identity drifted from pinned version. (Runtime: {runtime}, Pinned: {pinned})",
    # upstream's "(SOTA Moat)" suffix is dropped
    "drift_contract": "Tool metadata or schema has changed without policy update",
    "path_confinement": "Path argument {arg} is not confined: {why}",
}

_PLAN_CACHE_MAX = 4096  # names are client-controlled: bound the cache
_PLAN_NAME_MAX_LEN = 256  # and never keep a longer name (a name may be megabytes long)


class Plan:
    __slots__ = ("decision", "schema", "arg_meta", "paths")

    def __init__(
        self, decision: Decision, schema: CompiledSchema | None = None, arg_meta: dict[str, Any] | None = None
    ) -> None:
        self.decision = decision
        self.schema = schema
        self.arg_meta = arg_meta
        self.paths: tuple[PathRule, ...] = ()  # the path rules of this tool (allow plans only)


def _basis(name: bool, cls: bool) -> str | None:
    if name and cls:
        return "name+class"
    if name:
        return "name"
    if cls:
        return "class"
    return None


def _rule(prefix: str, name: bool, cls: bool) -> str | None:
    if name and cls:
        return f"tools.{prefix}+tools.{prefix}_classes"
    if name:
        return f"tools.{prefix}"
    if cls:
        return f"tools.{prefix}_classes"
    return None


class Compiled:
    """Matchers, schema validators and the per-name plan cache of one :class:`Policy`."""

    def __init__(self, policy: "Policy") -> None:
        t = policy.tools
        self.policy = policy
        self.version = policy.version_label
        self.digest = policy.digest
        self.deny = NameMatcher(t.deny or ())
        self.allow = NameMatcher(t.allow or ())
        self.has_allowlist = policy.has_allowlist
        self.deny_classes = frozenset(t.deny_classes or ())
        self.allow_classes = frozenset(t.allow_classes or ())
        self.approval = NameMatcher(t.approval_required or ())
        self.approval_classes = frozenset(t.approval_required_classes or ())
        self.scope = NameMatcher(t.restrict_scope or ())
        self.scope_classes = frozenset(t.restrict_scope_classes or ())
        self.redact = NameMatcher(t.redact_args or ())
        self.redact_classes = frozenset(t.redact_args_classes or ())
        self.limits = policy.limits
        self.pins = policy.tool_pins
        self.path_rules = tuple((NameMatcher(rule.tools), rule) for rule in policy.path_confinement)
        self.plans: dict[str, Plan] = {}
        self.schemas: dict[str, CompiledSchema | str] = {}  # tool → validator or error text

    def schema_for(self, tool: str) -> CompiledSchema | str:
        """Compile once per policy: the validator, or the failure message."""
        got = self.schemas.get(tool)
        if got is None:
            try:
                got = CompiledSchema(compile_schema(prepare_tool_schema(self.policy.schemas, tool)))
            except SchemaPrepError as exc:
                got = str(exc)
            except RecursionError:
                got = "schema nested too deeply"
            self.schemas[tool] = got
        return got

    def schema_errors(self) -> dict[str, str]:
        out = {}
        for tool in self.policy.schemas:
            if tool == "$defs":
                continue
            got = self.schema_for(tool)
            if isinstance(got, str):
                out[tool] = got
        return out

    def base(self, tool: str, classes: tuple[str, ...]) -> dict[str, Any]:
        return {"tool_classes": classes, "policy_version": self.version, "policy_digest": self.digest}

    def plan(self, tool: str) -> Plan:
        plan = self.plans.get(tool)
        if plan is None:
            plan = self._make_plan(tool)
            if plan.decision.outcome is not Outcome.DENY:
                plan.paths = tuple(rule for matches, rule in self.path_rules if matches(tool))
                if plan.paths and plan.arg_meta is None:
                    plan.arg_meta = self._meta_of(plan.decision)
            if len(self.plans) < _PLAN_CACHE_MAX and len(tool) <= _PLAN_NAME_MAX_LEN:
                self.plans[tool] = plan
        return plan

    @staticmethod
    def _meta_of(decision: Decision) -> dict[str, Any]:
        return {
            "tool_classes": decision.tool_classes,
            "matched_tool_classes": decision.matched_tool_classes,
            "match_basis": decision.match_basis,
            "matched_rule": decision.matched_rule,
            "policy_version": decision.policy_version,
            "policy_digest": decision.policy_digest,
        }

    def _make_plan(self, tool: str) -> Plan:
        policy = self.policy
        classes = policy.classes_for(tool)
        meta = self.base(tool, classes)

        # deny lists
        deny_name = self.deny(tool)
        deny_cls = tuple(c for c in classes if c in self.deny_classes)
        if deny_name or deny_cls:
            reason = REASONS[
                "denied_both" if deny_name and deny_cls else "denied_name" if deny_name else "denied_class"
            ]
            return Plan(
                Decision(
                    Outcome.DENY,
                    tool,
                    reason_code="E_TOOL_DENIED",
                    reason=reason,
                    contract={"status": "deny", "error_code": "E_TOOL_DENIED", "tool": tool, "reason": reason},
                    typed_decision=TypedDecision.DENY,
                    matched_tool_classes=deny_cls,
                    match_basis=_basis(deny_name, bool(deny_cls)),
                    matched_rule=_rule("deny", deny_name, bool(deny_cls)),
                    **meta,
                )
            )

        # allowlist
        allow_name = self.allow(tool) if policy.tools.allow is not None else False
        allow_cls = tuple(c for c in classes if c in self.allow_classes)
        if self.has_allowlist and not allow_name and not allow_cls:
            return Plan(
                Decision(
                    Outcome.DENY,
                    tool,
                    reason_code="E_TOOL_NOT_ALLOWED",
                    reason=REASONS["not_allowed"],
                    contract={
                        "status": "deny",
                        "error_code": "E_TOOL_NOT_ALLOWED",
                        "tool": tool,
                        "reason": REASONS["not_allowed_contract"],
                    },
                    typed_decision=TypedDecision.DENY,
                    **meta,
                )
            )
        if allow_name or allow_cls:
            meta["matched_tool_classes"] = allow_cls
            meta["match_basis"] = _basis(allow_name, bool(allow_cls))
            meta["matched_rule"] = _rule("allow", allow_name, bool(allow_cls))

        # schema
        if tool != "$defs" and tool in policy.schemas:
            compiled = self.schema_for(tool)
            if isinstance(compiled, str):
                text = REASONS["schema_compile"] + compiled
                return Plan(
                    Decision(
                        Outcome.DENY,
                        tool,
                        reason_code="E_SCHEMA_COMPILE",
                        reason=text,
                        contract={"status": "deny", "error_code": "E_SCHEMA_COMPILE", "tool": tool, "message": text},
                        typed_decision=TypedDecision.DENY,
                        **meta,
                    )
                )
            return Plan(self._allowish(Outcome.ALLOW, tool, classes, meta), compiled, meta)

        # unconstrained mode
        mode = policy.enforcement
        if mode == "deny":
            reason = REASONS["unconstrained_deny"]
            return Plan(
                Decision(
                    Outcome.DENY,
                    tool,
                    reason_code="E_TOOL_UNCONSTRAINED",
                    reason=reason,
                    contract={"status": "deny", "error_code": "E_TOOL_UNCONSTRAINED", "tool": tool, "reason": reason},
                    typed_decision=TypedDecision.DENY,
                    **meta,
                )
            )
        return Plan(
            self._allowish(Outcome.ALLOW_WITH_WARNING if mode == "warn" else Outcome.ALLOW, tool, classes, meta)
        )

    def _allowish(self, outcome: Outcome, tool: str, classes: tuple[str, ...], meta: dict[str, Any]) -> Decision:
        """Allow / AllowWithWarning with the obligations attached."""
        obligations: list[dict[str, Any]] = []
        extra: dict[str, Any] = {}
        kwargs: dict[str, Any] = {}
        if outcome == Outcome.ALLOW_WITH_WARNING:
            reason = REASONS["unconstrained_warn"]
            kwargs = {
                "reason_code": "E_TOOL_UNCONSTRAINED",
                "reason": reason,
                "typed_decision": TypedDecision.ALLOW_WITH_OBLIGATIONS,
            }
            obligations.append({"type": "legacy_warning", "detail": f"E_TOOL_UNCONSTRAINED:{reason}"})
        t = self.policy.tools
        cls = set(classes)
        if (t.approval_required is not None and self.approval(tool)) or cls & self.approval_classes:
            obligations.append({"type": "approval_required", "detail": "runtime approval artifact required"})
            extra["approval_state"] = ApprovalState.REQUIRED
        if (t.restrict_scope is not None and self.scope(tool)) or cls & self.scope_classes:
            contract = t.restrict_scope_contract or {
                "scope_type": "resource",
                "scope_value": "*",
                "scope_match_mode": "exact",
            }
            obligations.append(
                {
                    "type": "restrict_scope",
                    "detail": "restrict_scope contract captured; runtime enforcement deferred",
                    "restrict_scope": dict(contract),
                }
            )
            extra.update(contract)
        if (t.redact_args is not None and self.redact(tool)) or cls & self.redact_classes:
            contract = t.redact_args_contract or {
                "redaction_target": "body",
                "redaction_mode": "mask",
                "redaction_scope": "request",
            }
            obligations.append(
                {
                    "type": "redact_args",
                    "detail": "redact_args contract captured; runtime redaction deferred",
                    "redact_args": dict(contract),
                }
            )
            extra.update(contract)
        unique: list[dict[str, Any]] = []
        for o in obligations:
            if o not in unique:
                unique.append(o)
        return Decision(outcome, tool, obligations=unique, **kwargs, **extra, **meta)


def compile_policy(policy: "Policy") -> Compiled:
    """The compiled form of ``policy`` (matchers, validators, plan cache), built on first use
    and kept on the policy. The loader calls it, so a loaded policy is compiled once."""
    engine: Compiled | None = policy._engine
    if engine is None:
        engine = Compiled(policy)
        object.__setattr__(policy, "_engine", engine)
    return engine


def schema_errors(policy: "Policy") -> dict[str, str]:
    """Every tool whose schema fails to prepare or compile, tool name → error."""
    return compile_policy(policy).schema_errors()


def check_schemas(policy: "Policy") -> str | None:
    """The authoring-command check: ``None`` when every schema compiles, else the message
    ``tool '<name>': <error>`` per broken tool, sorted, joined by ``; ``."""
    errors = schema_errors(policy)
    if not errors:
        return None
    return "; ".join(sorted(f"tool '{k}': {v}" for k, v in errors.items()))
