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
from typing import TYPE_CHECKING, Any

from assay.canonical import jcs_bytes
from assay.policy.decision import Decision, event_reason_code
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

DEFAULT_SERVER_ID = "default-mcp-server"  # wrap's default --label

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

# ----------------------------------------------------------------------------------------------
# identities and session state


class ToolIdentity(tuple):
    """``(server_id, tool_name, schema_hash, meta_hash)`` as observed or pinned (docs/policy.md, "Tool pins")."""

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


_FALLBACK_TAG = b"\x00assay-noncanonical\x00"  # never the start of a JCS text


def identity_bytes(value: Any) -> bytes:
    """Canonical bytes of a JSON value taken from a server: RFC 8785 (JCS) when the value has a
    JCS form, else a tagged fallback form. Never raises on parsed JSON content.

    Servers send what JCS cannot encode (lone surrogates such as ``"\\ud83d"``, integers above
    1e308, ``NaN``, nesting deeper than the recursion limit); the fallback is a deterministic,
    iterative encoding (sorted members, ASCII-escaped strings, exact integers) that starts with
    a tag no JCS text starts with, so the two forms never collide.
    """
    try:
        return jcs_bytes(value)
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, MemoryError):
        pass
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        cls = item.__class__
        if cls is _Verbatim:
            out.append(item.text)
        elif cls is str:
            out.append(_json.dumps(item))  # ASCII-escaped: lone surrogates become \\ud83d
        elif item is None or item is True or item is False:
            out.append("null" if item is None else "true" if item else "false")
        elif isinstance(item, int):
            out.append(_int_text(item))
        elif isinstance(item, float):
            out.append(repr(item))
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Verbatim("}"))
            keys = sorted(item, key=str)
            for n, key in enumerate(reversed(keys)):
                stack.append(item[key])
                stack.append(_Verbatim(_json.dumps(str(key)) + ":"))
                if n != len(keys) - 1:
                    stack.append(_Verbatim(","))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Verbatim("]"))
            for n, element in enumerate(reversed(item)):
                stack.append(element)
                if n != len(item) - 1:
                    stack.append(_Verbatim(","))
        else:  # a number too long for int() keeps its digits (json_number_text); else its repr
            text = getattr(item, "json_number_text", None)
            out.append(text if isinstance(text, str) else _json.dumps(repr(item)))
    return _FALLBACK_TAG + "".join(out).encode("ascii", "backslashreplace")


class _Verbatim:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _int_text(number: int) -> str:
    try:
        return str(number)
    except ValueError:  # beyond Python's decimal digit limit: hex is exact and unlimited
        return hex(number)


def tool_identity(tool: dict[str, Any]) -> tuple[str, str]:
    """``(schema_hash, meta_hash)`` of one ``tools/list`` entry (docs/wrap.md, "Tool pins").

    schema_hash = SHA-256 of JCS(``inputSchema``, else ``input_schema``; the bytes ``null`` when
    both are absent or null); meta_hash = SHA-256 of the ``description`` string as given
    (untrimmed), of ``""`` when absent or not a string. Values JCS cannot encode hash their
    :func:`identity_bytes` fallback form; this never raises on parsed JSON content.
    """
    schema = tool.get("inputSchema")
    if schema is None:
        schema = tool.get("input_schema")
    schema_hash = hashlib.sha256(identity_bytes(schema)).hexdigest()
    description = tool.get("description")
    if not isinstance(description, str):
        description = ""
    meta_hash = hashlib.sha256(description.encode("utf-8", "surrogatepass")).hexdigest()
    return schema_hash, meta_hash


PIN_UNKNOWN_REASONS = {
    "ambiguous": "Tool integrity failure: the pinned tool is defined more than once in one tools/list answer",
    "unreadable": "Tool integrity failure: a tools/list answer could not be read, so the pinned tool's identity is unknown",
    "not_listed": "Tool integrity failure: the pinned tool has not been seen in a tools/list answer yet",
}


class SessionState:
    """Per-session state for the relay (docs/policy.md; docs/wrap.md, "Enforcement" and "Tool pins").

    ``requests_count`` counts every client request (``note_request`` for non-``tools/call``
    requests, ``evaluate`` for ``tools/call``); ``tool_calls_count`` counts ``tools/call``.

    Pins fail closed (docs/wrap.md, "Tool pins"): a pinned tool is allowed only when every
    definition of it that reached the client was read and equals the pin. So the state keeps,
    per tool name, every distinct identity observed (not only the latest), the names defined
    more than once in one answer (ambiguous), and whether any ``tools/list`` answer could not be
    read (then every pinned tool's identity is unknown). All of it is sticky for the session.
    """

    __slots__ = ("requests_count", "tool_calls_count", "_identities", "_variants", "_ambiguous", "unreadable")

    MAX_VARIANTS = 16  # distinct identities kept per name; more only confirms the drift

    def __init__(self) -> None:
        self.requests_count = 0
        self.tool_calls_count = 0
        self._identities: dict[str, ToolIdentity] = {}  # latest per name (--verbose)
        self._variants: dict[str, list[ToolIdentity]] = {}  # every distinct identity per name
        self._ambiguous: set[str] = set()
        self.unreadable = False

    def note_request(self) -> None:
        """Count a client request that is not ``tools/call`` (never blocked by policy)."""
        self.requests_count += 1

    def mark_unreadable(self) -> None:
        """A ``tools/list`` answer reached the client that could not be read."""
        self.unreadable = True

    def observe_tools(self, server_id: str, tools: Any) -> list[tuple[str, str, str]]:
        """Record identities from one ``tools/list`` answer's ``tools`` array.

        Entries that are not objects or lack a non-blank string ``name`` are skipped. A name
        that occurs twice in the array is ambiguous from then on. Returns ``(name, schema_hash,
        meta_hash)`` for each tool not seen before or whose identity changed, in list order.
        """
        fresh: list[tuple[str, str, str]] = []
        if not isinstance(tools, list):
            return fresh
        here: set[str] = set()
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if not isinstance(name, str) or not name.strip():
                continue
            if name in here:
                self._ambiguous.add(name)
            here.add(name)
            schema_hash, meta_hash = tool_identity(tool)
            ident = ToolIdentity(server_id, name, schema_hash, meta_hash)
            variants = self._variants.setdefault(name, [])
            if ident not in variants and len(variants) < self.MAX_VARIANTS:
                variants.append(ident)
            if self._identities.get(name) != ident:
                self._identities[name] = ident
                fresh.append((name, schema_hash, meta_hash))
        return fresh

    def identity(self, tool_name: str) -> ToolIdentity | None:
        """The last observed identity of ``tool_name`` or ``None`` if never listed."""
        return self._identities.get(tool_name)

    def pin_problem(self, tool_name: str, pinned: ToolIdentity, server_id: str) -> tuple[str, ToolIdentity | None] | None:
        """Why a pinned tool may not run, or None when every definition seen equals the pin.

        Returns ``(kind, runtime)``: kind is ``drifted`` (``runtime`` is an observed identity
        that differs from the pin), ``ambiguous``, ``unreadable`` or ``not_listed``.
        """
        variants = self._variants.get(tool_name)
        if variants:
            for seen in variants:
                runtime = ToolIdentity(server_id, tool_name, seen[2], seen[3])
                if runtime != pinned:
                    return "drifted", runtime
        if tool_name in self._ambiguous:
            return "ambiguous", None
        if self.unreadable:
            return "unreadable", None
        if not variants:
            return "not_listed", None
        return None


# ----------------------------------------------------------------------------------------------
# per-policy compiled form


_PLAN_CACHE_MAX = 4096  # names are client-controlled: bound the cache
_PLAN_NAME_MAX_LEN = 256  # and never keep a longer name (a name may be megabytes long)


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

    def plan(self, tool: str) -> _Plan:
        plan = self.plans.get(tool)
        if plan is None:
            plan = self._make_plan(tool)
            if plan.decision.outcome != "deny":
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

    def _make_plan(self, tool: str) -> _Plan:
        policy = self.policy
        classes = policy.classes_for(tool)
        meta = self.base(tool, classes)

        # deny lists
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

        # allowlist
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

        # schema
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

        # unconstrained mode
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
        """Allow / AllowWithWarning with the obligations attached."""
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
        tool,  # the called tool, not upstream's "ALL" (docs/compatibility.md, "Policies")
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
    """Decide one ``tools/call`` (the order is in the module docstring).

    ``arguments`` is ``params.arguments`` (``None`` when absent). ``state`` is the session's
    :class:`SessionState`; ``None`` means fresh state for this call only (the ``assay_check_args``
    case: limits bite only at 0, no drift check). ``server_id`` is the relay's ``--label``:
    the runtime identity compared with a pin is ``(server_id, tool_name, observed hashes)``.
    """
    engine: _Compiled = policy._engine or compile_policy(policy)
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
                    "deny",
                    tool_name,
                    reason_code="E_TOOL_DRIFT",
                    reason=reason,
                    contract={
                        "status": "deny",
                        "error_code": "E_TOOL_DRIFT",
                        "tool": tool_name,
                        "reason": told,
                    },
                    typed_decision="deny_with_alert",
                    obligations=[{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}],
                    **engine.base(tool_name, policy.classes_for(tool_name)),
                )
        # counters (always, before comparing)
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
        "deny",
        tool_name,
        reason_code="E_ARG_SCHEMA",
        reason=REASONS["arg_schema"],
        contract={"status": "deny", "error_code": "E_ARG_SCHEMA", "tool": tool_name, "violations": violations},
        typed_decision="deny",
        **plan.arg_meta,  # type: ignore[arg-type]
    )
