"""Evaluation (docs/policy.md, 'Evaluation and reason codes'): (policy, session state, tool
call) in, :class:`Decision` out.

Order, first match returns: pin drift → counters and limits → deny → allow → schema (compile,
then validation) → unconstrained mode ``deny`` → path confinement → allow (with the warning of
unconstrained mode ``warn``). Everything that depends only on the tool name (classes, deny/allow
matches, the schema to use, the path rules, obligations, the resulting decision) is computed once
per name and cached on the policy's compiled form (:func:`compile_policy`), so a call costs a
dict lookup plus, for a tool with a schema, one validator run and, for a confined tool, one
lexical normalization per path argument.
"""

from __future__ import annotations

import hashlib
import json as _json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from assay.canonical import jcs_bytes
from assay.policy.paths import confinement_violation
from assay.policy.patterns import NameMatcher
from assay.policy.schemas import CompiledSchema, SchemaPrepError, compile_schema, prepare_tool_schema

if TYPE_CHECKING:
    from assay.policy.model import PathRule, Policy

__all__ = [
    "Decision",
    "SessionState",
    "ToolIdentity",
    "evaluate",
    "tool_identity",
    "event_reason_code",
    "compile_policy",
    "schema_errors",
    "check_schemas",
    "DEFAULT_SERVER_ID",
    "REASONS",
]

DEFAULT_SERVER_ID = "default-mcp-server"  # D17

# §5.3 / §5.4 texts
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
    # D16: upstream's "(SOTA Moat)" suffix is dropped
    "drift_contract": "Tool metadata or schema has changed without policy update",
    "path_confinement": "Path argument {arg} is not confined: {why}",
}

_EVENT_CODES = {
    "E_TOOL_DENIED": "P_TOOL_DENIED",
    "E_TOOL_NOT_ALLOWED": "P_TOOL_NOT_ALLOWED",
    "E_ARG_SCHEMA": "P_ARG_SCHEMA",
    "E_RATE_LIMIT": "P_RATE_LIMIT",
    "E_TOOL_DRIFT": "P_TOOL_DRIFT",
}


def event_reason_code(outcome: str, reason_code: str | None) -> str:
    """The wrap decision-event ``reason_code`` (§5.3 last column, wrap.md §4.3).

    Allow → ``P_POLICY_ALLOW``; allow-with-warning → the raw code; deny → its ``P_*`` code, any
    unlisted deny code → ``P_POLICY_DENY`` (fail-closed catch-all).
    """
    if outcome == "allow":
        return "P_POLICY_ALLOW"
    if outcome == "allow_with_warning":
        return reason_code or "P_POLICY_ALLOW"
    return _EVENT_CODES.get(reason_code or "", "P_POLICY_DENY")


_FIELDS = (
    "outcome",
    "tool",
    "reason_code",
    "reason",
    "typed_decision",
    "tool_classes",
    "matched_tool_classes",
    "match_basis",
    "matched_rule",
    "policy_version",
    "policy_digest",
    "approval_state",
    "scope_type",
    "scope_value",
    "scope_match_mode",
    "redaction_target",
    "redaction_mode",
    "redaction_scope",
)


class Decision:
    """One evaluation result (§5.1, §5.5). Immutable; containers are handed out as copies.

    ``outcome`` ∈ ``allow`` | ``allow_with_warning`` | ``deny``; ``tool`` is the called tool
    (also for ``E_RATE_LIMIT``, D10); ``reason_code`` is the ``E_*`` code (``None`` for allow);
    ``contract`` is the structured deny payload (§5.4, upstream member order) or ``None``;
    ``typed_decision`` ∈ ``allow`` | ``allow_with_obligations`` | ``deny`` | ``deny_with_alert``.
    The approval/scope/redaction fields carry the policy's obligation contracts (§10.1), set
    only when an obligation applied.
    """

    __slots__ = _FIELDS + ("_contract", "_obligations")

    outcome: str
    tool: str
    reason_code: str | None
    reason: str | None
    typed_decision: str
    tool_classes: tuple[str, ...]
    matched_tool_classes: tuple[str, ...]
    match_basis: str | None
    matched_rule: str | None
    policy_version: str
    policy_digest: str
    approval_state: str | None
    scope_type: str | None
    scope_value: str | None
    scope_match_mode: str | None
    redaction_target: str | None
    redaction_mode: str | None
    redaction_scope: str | None

    def __init__(
        self,
        outcome: str,
        tool: str,
        *,
        reason_code: str | None = None,
        reason: str | None = None,
        contract: dict[str, Any] | None = None,
        typed_decision: str = "allow",
        obligations: Iterable[dict[str, Any]] = (),
        tool_classes: tuple[str, ...] = (),
        matched_tool_classes: tuple[str, ...] = (),
        match_basis: str | None = None,
        matched_rule: str | None = None,
        policy_version: str = "unspecified",
        policy_digest: str = "",
        approval_state: str | None = None,
        scope_type: str | None = None,
        scope_value: str | None = None,
        scope_match_mode: str | None = None,
        redaction_target: str | None = None,
        redaction_mode: str | None = None,
        redaction_scope: str | None = None,
    ) -> None:
        s = object.__setattr__
        s(self, "outcome", outcome)
        s(self, "tool", tool)
        s(self, "reason_code", reason_code)
        s(self, "reason", reason)
        s(self, "_contract", contract)
        s(self, "typed_decision", typed_decision)
        s(self, "_obligations", tuple(obligations))
        s(self, "tool_classes", tuple(tool_classes))
        s(self, "matched_tool_classes", tuple(matched_tool_classes))
        s(self, "match_basis", match_basis)
        s(self, "matched_rule", matched_rule)
        s(self, "policy_version", policy_version)
        s(self, "policy_digest", policy_digest)
        s(self, "approval_state", approval_state)
        s(self, "scope_type", scope_type)
        s(self, "scope_value", scope_value)
        s(self, "scope_match_mode", scope_match_mode)
        s(self, "redaction_target", redaction_target)
        s(self, "redaction_mode", redaction_mode)
        s(self, "redaction_scope", redaction_scope)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Decision is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Decision is immutable")

    # -- views -----------------------------------------------------------------------------

    @property
    def allowed(self) -> bool:
        return self.outcome != "deny"

    @property
    def contract(self) -> dict[str, Any] | None:
        """The structured deny payload (a fresh copy), ``None`` unless the outcome is deny."""
        c = self._contract
        if c is None:
            return None
        out = dict(c)
        if "violations" in out:
            out["violations"] = [dict(v) for v in out["violations"]]
        return out

    @property
    def obligations(self) -> list[dict[str, Any]]:
        """§5.5 T2 obligations (copies): typed-contract ones first, then approval/scope/redact."""
        return [_copy_obligation(o) for o in self._obligations]

    @property
    def event_reason_code(self) -> str:
        """``reason_code`` for the wrap decision event (§5.3 last column)."""
        return event_reason_code(self.outcome, self.reason_code)

    @property
    def metadata(self) -> dict[str, Any]:
        """§5.5 T3 metadata in event order, unset members omitted (empty lists omitted too)."""
        out: dict[str, Any] = {}
        if self.tool_classes:
            out["tool_classes"] = list(self.tool_classes)
        if self.matched_tool_classes:
            out["matched_tool_classes"] = list(self.matched_tool_classes)
        if self.match_basis is not None:
            out["match_basis"] = self.match_basis
        if self.matched_rule is not None:
            out["matched_rule"] = self.matched_rule
        out["typed_decision"] = self.typed_decision
        out["policy_version"] = self.policy_version
        out["policy_digest"] = self.policy_digest
        if self._obligations:
            out["obligations"] = self.obligations
        for name in _FIELDS[11:]:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def deny_result(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` a relay sends for a deny (wrap.md §4.4, policy.md W1)."""
        return {
            "content": [{"type": "text", "text": "Content blocked by policy"}],
            "isError": True,
            "structuredContent": self.contract,
        }

    def check_args_result(self) -> dict[str, Any]:
        """The ``assay_check_args`` payload (policy.md §6.2, server.md §8.2 A4)."""
        if self.outcome == "allow":
            return {"allowed": True, "violations": [], "suggested_fix": None}
        if self.outcome == "allow_with_warning":
            return {
                "allowed": True,
                "violations": [],
                "suggested_fix": None,
                "warning": {"code": self.reason_code, "reason": self.reason},
            }
        contract = self.contract or {}
        return {
            "allowed": False,
            "code": self.reason_code,
            "reason": self.reason,
            "violations": contract.get("violations", []),
            "suggested_fix": None,
            "contract": contract,
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field, for logging and comparisons."""
        out = {name: getattr(self, name) for name in _FIELDS}
        out["tool_classes"] = list(self.tool_classes)
        out["matched_tool_classes"] = list(self.matched_tool_classes)
        out["contract"] = self.contract
        out["obligations"] = self.obligations
        out["event_reason_code"] = self.event_reason_code
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Decision(outcome={self.outcome!r}, tool={self.tool!r}, reason_code={self.reason_code!r})"


def _copy_obligation(o: dict[str, Any]) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in o.items()}


# ----------------------------------------------------------------------------------------------
# identities and session state


class ToolIdentity(tuple):
    """``(server_id, tool_name, schema_hash, meta_hash)`` as observed or pinned (§3.6)."""

    __slots__ = ()

    def __new__(cls, server_id: str, tool_name: str, schema_hash: str, meta_hash: str) -> "ToolIdentity":
        return tuple.__new__(cls, (server_id, tool_name, schema_hash, meta_hash))

    server_id = property(lambda self: self[0])
    tool_name = property(lambda self: self[1])
    schema_hash = property(lambda self: self[2])
    meta_hash = property(lambda self: self[3])

    def fingerprint(self) -> str:
        return f"{self[0]}:{self[1]}:{self[2][:8]}"

    def to_dict(self) -> dict[str, str]:
        return {"server_id": self[0], "tool_name": self[1], "schema_hash": self[2], "meta_hash": self[3]}


def tool_identity(tool: dict[str, Any]) -> tuple[str, str]:
    """``(schema_hash, meta_hash)`` of one ``tools/list`` entry (§8 D2/D3, wrap.md §4.2).

    schema_hash = SHA-256 of JCS(``inputSchema``, else ``input_schema``; the bytes ``null`` when
    both are absent or null); meta_hash = SHA-256 of the ``description`` string as given
    (untrimmed), of ``""`` when absent or not a string.
    """
    schema = tool.get("inputSchema")
    if schema is None:
        schema = tool.get("input_schema")
    schema_hash = hashlib.sha256(jcs_bytes(schema)).hexdigest()
    description = tool.get("description")
    if not isinstance(description, str):
        description = ""
    meta_hash = hashlib.sha256(description.encode("utf-8", "surrogatepass")).hexdigest()
    return schema_hash, meta_hash


class SessionState:
    """Per-session state for the relay (§5.6, DECISIONS D10, D13, D16).

    ``requests_count`` counts every client request (``note_request`` for non-``tools/call``
    requests, ``evaluate`` for ``tools/call``); ``tool_calls_count`` counts ``tools/call``.
    Observed tool identities feed the pin check; the latest observation per name wins.
    """

    __slots__ = ("requests_count", "tool_calls_count", "_identities")

    def __init__(self) -> None:
        self.requests_count = 0
        self.tool_calls_count = 0
        self._identities: dict[str, ToolIdentity] = {}

    def note_request(self) -> None:
        """Count a client request that is not ``tools/call`` (never blocked by policy, D10)."""
        self.requests_count += 1

    def observe_tools(self, server_id: str, tools: Any) -> list[tuple[str, str, str]]:
        """Record identities from a ``tools/list`` result's ``tools`` array (wrap.md §4.2).

        Entries that are not objects or lack a non-blank string ``name`` are skipped. Returns
        ``(name, schema_hash, meta_hash)`` for each tool not seen before or whose identity
        changed, in list order — what ``--verbose`` prints (D13).
        """
        fresh: list[tuple[str, str, str]] = []
        if not isinstance(tools, list):
            return fresh
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if not isinstance(name, str) or not name.strip():
                continue
            try:
                schema_hash, meta_hash = tool_identity(tool)
            except (TypeError, ValueError):
                continue  # not JSON-encodable; cannot come from a parsed JSON line
            ident = ToolIdentity(server_id, name, schema_hash, meta_hash)
            if self._identities.get(name) != ident:
                self._identities[name] = ident
                fresh.append((name, schema_hash, meta_hash))
        return fresh

    def identity(self, tool_name: str) -> ToolIdentity | None:
        """The last observed identity of ``tool_name`` or ``None`` if never listed."""
        return self._identities.get(tool_name)


# ----------------------------------------------------------------------------------------------
# per-policy compiled form


_PLAN_CACHE_MAX = 4096  # names are client-controlled: bound the cache


class _Plan:
    __slots__ = ("decision", "schema", "arg_meta", "paths")

    def __init__(self, decision: Decision, schema: CompiledSchema | None = None, arg_meta: dict | None = None) -> None:
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


class _Compiled:
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
        self.plans: dict[str, _Plan] = {}
        self.schemas: dict[str, CompiledSchema | str] = {}  # tool → validator or error text

    def schema_for(self, tool: str) -> CompiledSchema | str:
        """Compile once per policy (L10): the validator, or the failure message."""
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

    def plan(self, tool: str) -> _Plan:
        plan = self.plans.get(tool)
        if plan is None:
            plan = self._make_plan(tool)
            if plan.decision.outcome != "deny":
                plan.paths = tuple(rule for matches, rule in self.path_rules if matches(tool))
                if plan.paths and plan.arg_meta is None:
                    plan.arg_meta = self._meta_of(plan.decision)
            if len(self.plans) < _PLAN_CACHE_MAX:
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

    def _make_plan(self, tool: str) -> _Plan:
        policy = self.policy
        classes = policy.classes_for(tool)
        meta = self.base(tool, classes)

        # E4 deny
        deny_name = self.deny(tool)
        deny_cls = tuple(c for c in classes if c in self.deny_classes)
        if deny_name or deny_cls:
            reason = REASONS["denied_both" if deny_name and deny_cls else "denied_name" if deny_name else "denied_class"]
            return _Plan(
                Decision(
                    "deny",
                    tool,
                    reason_code="E_TOOL_DENIED",
                    reason=reason,
                    contract={"status": "deny", "error_code": "E_TOOL_DENIED", "tool": tool, "reason": reason},
                    typed_decision="deny",
                    matched_tool_classes=deny_cls,
                    match_basis=_basis(deny_name, bool(deny_cls)),
                    matched_rule=_rule("deny", deny_name, bool(deny_cls)),
                    **meta,
                )
            )

        # E5 allow
        allow_name = self.allow(tool) if policy.tools.allow is not None else False
        allow_cls = tuple(c for c in classes if c in self.allow_classes)
        if self.has_allowlist and not allow_name and not allow_cls:
            return _Plan(
                Decision(
                    "deny",
                    tool,
                    reason_code="E_TOOL_NOT_ALLOWED",
                    reason=REASONS["not_allowed"],
                    contract={
                        "status": "deny",
                        "error_code": "E_TOOL_NOT_ALLOWED",
                        "tool": tool,
                        "reason": REASONS["not_allowed_contract"],
                    },
                    typed_decision="deny",
                    **meta,
                )
            )
        if allow_name or allow_cls:
            meta["matched_tool_classes"] = allow_cls
            meta["match_basis"] = _basis(allow_name, bool(allow_cls))
            meta["matched_rule"] = _rule("allow", allow_name, bool(allow_cls))

        # E6 schema
        if tool != "$defs" and tool in policy.schemas:
            compiled = self.schema_for(tool)
            if isinstance(compiled, str):
                text = REASONS["schema_compile"] + compiled
                return _Plan(
                    Decision(
                        "deny",
                        tool,
                        reason_code="E_SCHEMA_COMPILE",
                        reason=text,
                        contract={"status": "deny", "error_code": "E_SCHEMA_COMPILE", "tool": tool, "message": text},
                        typed_decision="deny",
                        **meta,
                    )
                )
            return _Plan(self._allowish("allow", tool, classes, meta), compiled, meta)

        # E7 unconstrained
        mode = policy.enforcement
        if mode == "deny":
            reason = REASONS["unconstrained_deny"]
            return _Plan(
                Decision(
                    "deny",
                    tool,
                    reason_code="E_TOOL_UNCONSTRAINED",
                    reason=reason,
                    contract={"status": "deny", "error_code": "E_TOOL_UNCONSTRAINED", "tool": tool, "reason": reason},
                    typed_decision="deny",
                    **meta,
                )
            )
        return _Plan(self._allowish("allow_with_warning" if mode == "warn" else "allow", tool, classes, meta))

    def _allowish(self, outcome: str, tool: str, classes: tuple[str, ...], meta: dict[str, Any]) -> Decision:
        """Allow / AllowWithWarning with the E8 obligations attached (§5.5 T1-T2, §10.1)."""
        obligations: list[dict[str, Any]] = []
        extra: dict[str, Any] = {}
        kwargs: dict[str, Any] = {}
        if outcome == "allow_with_warning":
            reason = REASONS["unconstrained_warn"]
            kwargs = {"reason_code": "E_TOOL_UNCONSTRAINED", "reason": reason, "typed_decision": "allow_with_obligations"}
            obligations.append({"type": "legacy_warning", "detail": f"E_TOOL_UNCONSTRAINED:{reason}"})
        t = self.policy.tools
        cls = set(classes)
        if (t.approval_required is not None and self.approval(tool)) or cls & self.approval_classes:
            obligations.append({"type": "approval_required", "detail": "runtime approval artifact required"})
            extra["approval_state"] = "required"
        if (t.restrict_scope is not None and self.scope(tool)) or cls & self.scope_classes:
            contract = t.restrict_scope_contract or {"scope_type": "resource", "scope_value": "*", "scope_match_mode": "exact"}
            obligations.append(
                {
                    "type": "restrict_scope",
                    "detail": "restrict_scope contract captured; runtime enforcement deferred",
                    "restrict_scope": dict(contract),
                }
            )
            extra.update(contract)
        if (t.redact_args is not None and self.redact(tool)) or cls & self.redact_classes:
            contract = t.redact_args_contract or {"redaction_target": "body", "redaction_mode": "mask", "redaction_scope": "request"}
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


def compile_policy(policy: "Policy") -> _Compiled:
    """The compiled form of ``policy`` (matchers, validators, plan cache), built on first use
    and kept on the policy. The loader calls it, so a loaded policy is compiled once."""
    engine = policy._engine
    if engine is None:
        engine = _Compiled(policy)
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


def _confined(plan: _Plan, tool: str, arguments: Any) -> Decision | None:
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
            "deny",
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
            typed_decision="deny",
            **plan.arg_meta,  # type: ignore[arg-type]
        )
    return None


# ----------------------------------------------------------------------------------------------
# evaluate


def _rate_limited(engine: _Compiled, tool: str, classes: tuple[str, ...], which: str) -> Decision:
    return Decision(
        "deny",
        tool,  # D10: the called tool, not upstream's "ALL"
        reason_code="E_RATE_LIMIT",
        reason=REASONS[which],
        contract={"status": "deny", "error_code": "E_RATE_LIMIT"},
        typed_decision="deny",
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
    """Decide one ``tools/call`` (§5.2 E0-E8).

    ``arguments`` is ``params.arguments`` (``None`` when absent, S6). ``state`` is the session's
    :class:`SessionState`; ``None`` means fresh state for this call only (the ``assay_check_args``
    case, ST3: limits bite only at 0, no drift check). ``server_id`` is the relay's ``--label``:
    the runtime identity compared with a pin is ``(server_id, tool_name, observed hashes)``.
    """
    engine: _Compiled = policy._engine or compile_policy(policy)
    if state is not None:
        # E1 drift: only once the tool was seen in a tools/list result (D16 parity)
        pin = engine.pins.get(tool_name)
        if pin is not None:
            seen = state._identities.get(tool_name)
            if seen is not None:
                runtime = ToolIdentity(server_id, tool_name, seen[2], seen[3])
                pinned = ToolIdentity(pin.server_id, pin.tool_name, pin.schema_hash, pin.meta_hash)
                if runtime != pinned:
                    reason = REASONS["drift"].format(runtime=runtime.fingerprint(), pinned=pinned.fingerprint())
                    return Decision(
                        "deny",
                        tool_name,
                        reason_code="E_TOOL_DRIFT",
                        reason=reason,
                        contract={
                            "status": "deny",
                            "error_code": "E_TOOL_DRIFT",
                            "tool": tool_name,
                            "reason": REASONS["drift_contract"],
                        },
                        typed_decision="deny_with_alert",
                        obligations=[{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}],
                        **engine.base(tool_name, policy.classes_for(tool_name)),
                    )
        # E2 counters (always, before comparing)
        state.requests_count += 1
        state.tool_calls_count += 1
        requests, calls = state.requests_count, state.tool_calls_count
    else:
        requests = calls = 1
    # E3 limits
    limits = engine.limits
    if limits is not None:
        mr = limits.max_requests_total
        if mr is not None and requests > mr:
            return _rate_limited(engine, tool_name, policy.classes_for(tool_name), "rate_requests")
        mc = limits.max_tool_calls_total
        if mc is not None and calls > mc:
            return _rate_limited(engine, tool_name, policy.classes_for(tool_name), "rate_tool_calls")
    # E4-E8: name-determined plan, plus the schema run
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
        "deny",
        tool_name,
        reason_code="E_ARG_SCHEMA",
        reason=REASONS["arg_schema"],
        contract={"status": "deny", "error_code": "E_ARG_SCHEMA", "tool": tool_name, "violations": violations},
        typed_decision="deny",
        **plan.arg_meta,  # type: ignore[arg-type]
    )
