"""Reading ``assay.yaml`` into a :class:`~assay.policy.model.Policy` (docs/policy.md, 'Loading').

``load_policy(bytes) -> Policy``: decode, parse YAML 1.2 within the expansion budget
(:mod:`assay.policy.yamlio`), check the root, convert field by field into frozen values (class
``structure`` on any type mismatch), warn about unknown keys and about schema references that
can never resolve, merge legacy root ``allow``/``deny``, migrate v1 ``constraints`` into schemas,
validate pins, path confinement and kill-switch triggers (class ``validation``), and compute
``policy_digest`` over the JCS form of the normalized model. ``load_policy`` does no I/O;
:func:`read_policy_file` is the one file read, through :func:`assay.inputs.read_input_file`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, overload

from assay.inputs import policy_byte_limit, read_input_file
from assay.policy.engine import compile_policy
from assay.policy.errors import PolicyError
from assay.policy.model import (
    _PIN_FIELDS,
    _REDACT_FIELDS,
    _ROOT_KEYS,
    _SCOPE_FIELDS,
    _TOOLS_KEYS,
    _LIST_KEYS,
    _APPROVAL_KEYS,
    APPROVAL_FALLBACKS,
    UNCONSTRAINED_MODES,
    Limits,
    Policy,
    PathRule,
    RateRule,
    ToolPin,
    ToolRules,
)
from assay.policy.durations import DurationError, parse_duration
from assay.policy.paths import PathRefused, normalize_path
from assay.policy.yamlio import DEFAULT_BYTE_CEILING, YamlStructureError, YamlSyntaxError, parse_yaml, type_name

__all__ = [
    "load_policy",
    "read_policy_file",
    "V1_DEPRECATION_WARNING",
    "STRICT_V1_MESSAGE",
]

STRICT_V1_MESSAGE = "Strict mode: v1 policy format (constraints) is not allowed."
# The warning points to our docs, not to upstream's `assay policy migrate`.
V1_DEPRECATION_WARNING = (
    "v1 policy format (constraints) is deprecated; rewrite the constraints as schemas "
    "(see docs/policy.md, 'Migrating from v1')"
)
_U64_MAX = 2**64 - 1


# ----------------------------------------------------------------------------------------------
# typed conversion


class _Structure(Exception):
    """Internal: a type mismatch at ``path``; becomes PolicyError(kind="structure")."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


class _Reader:
    """Walks the parsed document, recording unknown keys."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    @overload
    def mapping(self, value: Any, path: str, *, optional: Literal[False] = False) -> dict: ...
    @overload
    def mapping(self, value: Any, path: str, *, optional: bool) -> dict | None: ...
    def mapping(self, value: Any, path: str, *, optional: bool = False) -> dict | None:
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise _Structure(path, f"expected a mapping, got {type_name(value)}")
        for key in value:
            if not isinstance(key, str):
                raise _Structure(path, f"mapping key {key!r} is not a string")
        return value

    def fields(self, value: dict, path: str, known: tuple[str, ...]) -> None:
        for key in value:
            if key not in known:
                self.unknown.append(_join(path, key))

    @overload
    def string(self, value: Any, path: str, *, optional: Literal[False] = False) -> str: ...
    @overload
    def string(self, value: Any, path: str, *, optional: bool) -> str | None: ...
    def string(self, value: Any, path: str, *, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
            raise _Structure(path, f"expected a string, got {type_name(value)}{hint}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise _Structure(path, f"expected a boolean, got {type_name(value)}")
        return value

    def u64(self, value: Any, path: str, *, optional: bool = True) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Structure(path, f"expected an unsigned integer, got {type_name(value)}")
        if value < 0 or value > _U64_MAX:
            raise _Structure(path, f"expected an unsigned integer, got {value}")
        return value

    def strings(self, value: Any, path: str, *, optional: bool = True) -> tuple[str, ...] | None:
        if value is None and optional:
            return None
        if not isinstance(value, list):
            raise _Structure(path, f"expected a list of strings, got {type_name(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise _Structure(f"{path}[{i}]", f"expected a string, got {type_name(item)}")
            out.append(item)
        return tuple(out)

    def enum(self, value: Any, path: str, choices: tuple[str, ...]) -> str:
        text = self.string(value, path)
        if text not in choices:
            raise _Structure(path, f"unknown value {json.dumps(text)} (expected one of {', '.join(choices)})")
        return text


def _json_value(value: Any, path: str) -> Any:
    """Check that a YAML value is plain JSON (string keys, finite numbers); iterative."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _Structure(where, "a non-finite number is not valid JSON")
            continue
        if isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            continue
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise _Structure(where, f"mapping key {k!r} is not a string")
                stack.append((v, _join(where, k)))
            continue
        raise _Structure(where, f"{type_name(item)} is not a JSON value")
    return value


def _contract(r: _Reader, value: Any, path: str, names: tuple[str, ...]) -> dict[str, str] | None:
    m = r.mapping(value, path, optional=True)
    if m is None:
        return None
    r.fields(m, path, names)
    out = {}
    for name in names:
        if name not in m:
            raise _Structure(path, f"missing field {name}")
        out[name] = r.string(m[name], _join(path, name))
    return out


def _tools(r: _Reader, value: Any) -> ToolRules:
    m = r.mapping(value, "tools")
    r.fields(m, "tools", _TOOLS_KEYS + _APPROVAL_KEYS)
    kwargs: dict[str, Any] = {}
    for key in _LIST_KEYS:
        kwargs[key] = r.strings(m.get(key), f"tools.{key}")
    kwargs["restrict_scope_contract"] = _contract(
        r, m.get("restrict_scope_contract"), "tools.restrict_scope_contract", _SCOPE_FIELDS
    )
    kwargs["redact_args_contract"] = _contract(
        r, m.get("redact_args_contract"), "tools.redact_args_contract", _REDACT_FIELDS
    )
    # approvals that ask a person (docs/policy.md, "Approvals")
    if m.get("approval_fallback") is not None:
        kwargs["approval_fallback"] = r.enum(m["approval_fallback"], "tools.approval_fallback", APPROVAL_FALLBACKS)
    if m.get("approval_timeout") is not None:
        try:
            kwargs["approval_timeout"] = parse_duration(m["approval_timeout"])
        except DurationError as exc:
            raise PolicyError("validation", f"tools.approval_timeout: {exc}") from None
    return ToolRules(**kwargs)


def _constraints(r: _Reader, value: Any) -> list[tuple[str, dict[str, str | None]]]:
    """v1 ``constraints``: (tool, {param: regex or None}) in rule order, params sorted."""
    if isinstance(value, list):
        rules = []
        for i, item in enumerate(value):
            path = f"constraints[{i}]"
            m = r.mapping(item, path)
            r.fields(m, path, ("tool", "params"))
            if "tool" not in m:
                raise _Structure(path, "missing field tool")
            if "params" not in m:
                raise _Structure(path, "missing field params")
            tool = r.string(m["tool"], f"{path}.tool")
            params_m = r.mapping(m["params"], f"{path}.params")
            params: dict[str, str | None] = {}
            for pname in sorted(params_m):
                ppath = f"{path}.params.{pname}"
                pm = r.mapping(params_m[pname], ppath)
                r.fields(pm, ppath, ("matches",))
                params[pname] = r.string(pm.get("matches"), f"{ppath}.matches", optional=True)
            rules.append((tool, params))
        return rules
    if isinstance(value, dict):
        m = r.mapping(value, "constraints")
        rules = []
        for tool, pvalue in m.items():
            tpath = f"constraints.{tool}"
            params_m = r.mapping(pvalue, tpath)
            params = {}
            for pname in sorted(params_m):
                ppath = f"{tpath}.{pname}"
                pv = params_m[pname]
                if isinstance(pv, str):
                    params[pname] = pv
                    continue
                pm = r.mapping(pv, ppath)
                r.fields(pm, ppath, ("matches",))
                params[pname] = r.string(pm.get("matches"), f"{ppath}.matches", optional=True)
            rules.append((tool, params))
        return rules
    raise _Structure("constraints", f"expected a list or a mapping, got {type_name(value)}")


def _constraint_schema(params: dict[str, str | None]) -> dict[str, Any]:
    """The permissive object schema a v1 rule becomes (no maxLength, extra args allowed)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, regex in params.items():
        if regex is None:
            continue
        properties[pname] = {"type": "string", "pattern": regex, "minLength": 1}
        required.append(pname)
    return {"type": "object", "additionalProperties": True, "properties": properties, "required": required}


def _discovery(r: _Reader, value: Any) -> dict[str, Any] | None:
    m = r.mapping(value, "discovery", optional=True)
    if m is None:
        return None
    r.fields(m, "discovery", ("enabled", "methods", "output", "on_findings"))
    methods_choice = ("config_files", "processes", "network", "dns", "well_known")
    methods = ["config_files", "processes"]
    if m.get("methods") is not None:
        methods = [r.enum(x, f"discovery.methods[{i}]", methods_choice) for i, x in enumerate(r.strings(m["methods"], "discovery.methods") or ())]
    of = r.mapping(m.get("on_findings", {}), "discovery.on_findings") or {}
    r.fields(of, "discovery.on_findings", ("unmanaged_server", "no_auth"))
    levels = ("log", "warn", "fail")
    return {
        "enabled": r.boolean(m.get("enabled", False), "discovery.enabled"),
        "methods": methods,
        "output": r.string(m.get("output"), "discovery.output", optional=True),
        "on_findings": {
            "unmanaged_server": r.enum(of.get("unmanaged_server", "log"), "discovery.on_findings.unmanaged_server", levels),
            "no_auth": r.enum(of.get("no_auth", "log"), "discovery.on_findings.no_auth", levels),
        },
    }


def _monitor_match(r: _Reader, value: Any, path: str) -> dict[str, Any]:
    m = r.mapping(value, path)
    r.fields(m, path, ("path_globs", "dest_globs", "not"))
    return {
        "path_globs": list(r.strings(m.get("path_globs"), f"{path}.path_globs") or ()),
        "dest_globs": list(r.strings(m.get("dest_globs"), f"{path}.dest_globs") or ()),
        "not": None if m.get("not") is None else _monitor_match(r, m["not"], f"{path}.not"),
    }


def _runtime_monitor(r: _Reader, value: Any) -> dict[str, Any] | None:
    m = r.mapping(value, "runtime_monitor", optional=True)
    if m is None:
        return None
    p = "runtime_monitor"
    r.fields(m, p, ("enabled", "provider", "scope", "rules"))
    scope_m = r.mapping(m.get("scope", {}), f"{p}.scope") or {}
    r.fields(scope_m, f"{p}.scope", ("mode", "cgroup"))
    cg = r.mapping(scope_m.get("cgroup", {}), f"{p}.scope.cgroup") or {}
    cgp = f"{p}.scope.cgroup"
    r.fields(cg, cgp, ("freeze_on_incident", "create_leaf", "name_prefix", "cleanup", "pids_max"))
    rules = []
    raw_rules = m.get("rules", [])
    if not isinstance(raw_rules, list):
        raise _Structure(f"{p}.rules", f"expected a list, got {type_name(raw_rules)}")
    for i, item in enumerate(raw_rules):
        rp = f"{p}.rules[{i}]"
        rm = r.mapping(item, rp)
        r.fields(rm, rp, ("id", "type", "match", "severity", "action"))
        for req in ("id", "type", "match"):
            if req not in rm:
                raise _Structure(rp, f"missing field {req}")
        rules.append(
            {
                "id": r.string(rm["id"], f"{rp}.id"),
                "type": r.enum(rm["type"], f"{rp}.type", ("file_open", "net_connect", "proc_exec")),
                "match": _monitor_match(r, rm["match"], f"{rp}.match"),
                "severity": r.enum(rm.get("severity", "medium"), f"{rp}.severity", ("low", "medium", "high", "critical")),
                "action": r.enum(rm.get("action", "log"), f"{rp}.action", ("log", "alert", "deny", "trigger_kill")),
            }
        )
    return {
        "enabled": r.boolean(m.get("enabled", False), f"{p}.enabled"),
        "provider": r.enum(m.get("provider", "ebpf"), f"{p}.provider", ("ebpf",)),
        "scope": {
            "mode": r.enum(scope_m.get("mode", "cgroup_v2"), f"{p}.scope.mode", ("cgroup_v2", "pid_set")),
            "cgroup": {
                "freeze_on_incident": r.boolean(cg.get("freeze_on_incident", True), f"{cgp}.freeze_on_incident"),
                "create_leaf": r.boolean(cg.get("create_leaf", True), f"{cgp}.create_leaf"),
                "name_prefix": r.string(cg.get("name_prefix", "assay"), f"{cgp}.name_prefix"),
                "cleanup": r.boolean(cg.get("cleanup", True), f"{cgp}.cleanup"),
                "pids_max": r.u64(cg.get("pids_max", 2048), f"{cgp}.pids_max", optional=False),
            },
        },
        "rules": rules,
    }


def _kill_switch(r: _Reader, value: Any) -> dict[str, Any] | None:
    m = r.mapping(value, "kill_switch", optional=True)
    if m is None:
        return None
    p = "kill_switch"
    r.fields(m, p, ("enabled", "mode", "kill_scope", "grace_period_ms", "kill_children", "capture_state", "output_dir", "triggers"))
    modes = ("graceful", "immediate")
    triggers = []
    raw = m.get("triggers", [])
    if not isinstance(raw, list):
        raise _Structure(f"{p}.triggers", f"expected a list, got {type_name(raw)}")
    for i, item in enumerate(raw):
        tp = f"{p}.triggers[{i}]"
        tm = r.mapping(item, tp)
        r.fields(tm, tp, ("on_rule", "mode"))
        if "on_rule" not in tm:
            raise _Structure(tp, "missing field on_rule")
        triggers.append(
            {
                "on_rule": r.string(tm["on_rule"], f"{tp}.on_rule"),
                "mode": None if tm.get("mode") is None else r.enum(tm["mode"], f"{tp}.mode", modes),
            }
        )
    return {
        "enabled": r.boolean(m.get("enabled", True), f"{p}.enabled"),
        "mode": r.enum(m.get("mode", "graceful"), f"{p}.mode", modes),
        "kill_scope": r.enum(m.get("kill_scope", "cgroup"), f"{p}.kill_scope", ("cgroup", "pid_fd", "legacy_pid")),
        "grace_period_ms": r.u64(m.get("grace_period_ms", 3000), f"{p}.grace_period_ms", optional=False),
        "kill_children": r.boolean(m.get("kill_children", True), f"{p}.kill_children"),
        "capture_state": r.boolean(m.get("capture_state", False), f"{p}.capture_state"),
        "output_dir": r.string(m.get("output_dir"), f"{p}.output_dir", optional=True),
        "triggers": triggers,
    }


_PATH_RULE_KEYS = ("tools", "args", "within", "base", "resolve_symlinks")


def _directory(value: Any, path: str) -> str:
    """An absolute directory of a path rule, in lexical normal form."""
    if not isinstance(value, str):
        raise _Structure(path, f"expected a string, got {type_name(value)}")
    if not value.startswith("/"):
        raise PolicyError("validation", f"{path} must be an absolute path (got {json.dumps(value)})")
    try:
        return normalize_path(value)
    except PathRefused as exc:
        raise PolicyError("validation", f"{path}: {exc}") from None


def _non_empty(r: _Reader, value: Any, path: str) -> tuple[str, ...]:
    items = r.strings(value, path, optional=False) or ()
    if not items:
        raise PolicyError("validation", f"{path} must list at least one entry")
    return items


def _path_confinement(r: _Reader, value: Any) -> tuple[PathRule, ...]:
    """``path_confinement``: a list of rules (docs/policy.md, 'Path confinement')."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Structure("path_confinement", f"expected a list of rules, got {type_name(value)}")
    rules = []
    for i, item in enumerate(value):
        p = f"path_confinement[{i}]"
        m = r.mapping(item, p)
        r.fields(m, p, _PATH_RULE_KEYS)
        for req in ("tools", "args", "within"):
            if req not in m:
                raise _Structure(p, f"missing field {req}")
        tools = _non_empty(r, m["tools"], f"{p}.tools")
        args = _non_empty(r, m["args"], f"{p}.args")
        within_raw = m["within"]
        if not isinstance(within_raw, list):
            raise _Structure(f"{p}.within", f"expected a list of directories, got {type_name(within_raw)}")
        within = tuple(_directory(d, f"{p}.within[{j}]") for j, d in enumerate(within_raw))
        if not within:
            raise PolicyError("validation", f"{p}.within must list at least one entry")
        base = None if m.get("base") is None else _directory(m["base"], f"{p}.base")
        resolve = r.boolean(m.get("resolve_symlinks", False), f"{p}.resolve_symlinks")
        rules.append(PathRule(tools=tools, args=args, within=within, base=base, resolve_symlinks=resolve))
    return tuple(rules)


_RATE_RULE_KEYS = ("id", "tools", "max_calls", "per")
MAX_WINDOW_CALLS = 1_000_000  # a window remembers up to this many call times


def _rate_rules(r: _Reader, value: Any) -> tuple[RateRule, ...]:
    """``limits.tools``: per-tool rate rules (docs/policy.md, "Per-tool rate limits")."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Structure("limits.tools", f"expected a list of rules, got {type_name(value)}")
    rules: list[RateRule] = []
    where: dict[str, str] = {}  # rule id -> the rule that has it
    for i, item in enumerate(value):
        p = f"limits.tools[{i}]"
        m = r.mapping(item, p)
        r.fields(m, p, _RATE_RULE_KEYS)
        for req in ("tools", "max_calls"):
            if req not in m:
                raise _Structure(p, f"missing field {req}")
        tools = _non_empty(r, m["tools"], f"{p}.tools")
        max_calls: int = r.u64(m["max_calls"], f"{p}.max_calls", optional=False)  # type: ignore[assignment]
        per = None
        if m.get("per") is not None:
            try:
                per = parse_duration(m["per"])
            except DurationError as exc:
                raise PolicyError("validation", f"{p}.per: {exc}") from None
            if per == 0:
                raise PolicyError("validation", f"{p}.per must be more than zero (a window of no time limits nothing)")
            if max_calls > MAX_WINDOW_CALLS:
                raise PolicyError(
                    "validation",
                    f"{p}.max_calls may be at most {MAX_WINDOW_CALLS} with per (every call in a window is remembered)",
                )
        if m.get("id") is None:
            rule_id = p
        else:
            rule_id = r.string(m["id"], f"{p}.id")
            if not rule_id.strip():
                raise PolicyError("validation", f"{p}.id must not be blank")
        if rule_id in where:
            what = f"{p}.id: rule id" if m.get("id") is not None else f"{p}: its default id"
            raise PolicyError("validation", f"{what} {json.dumps(rule_id)} is already used by {where[rule_id]}")
        where[rule_id] = p
        rules.append(RateRule(id=rule_id, tools=tools, max_calls=max_calls, per=per))
    return tuple(rules)


def _schema_objects(schemas: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object inside the schemas, once each (a YAML alias is walked once), with its
    dotted path (``schemas.read_file.properties.path``)."""
    stack: list[tuple[Any, str]] = [(v, f"schemas.{k}") for k, v in schemas.items()]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            yield item, where
            stack.extend((v, _join(where, k)) for k, v in item.items() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item) if isinstance(v, (dict, list)))


def _unresolvable_refs(schemas: dict[str, Any]) -> list[str]:
    """Every ``$ref`` that is not a reference inside the schema (``#...``): remote, ``file:``
    and relative references are never fetched, so the tool's schema will not compile."""
    return sorted(
        f"{where}.$ref" for item, where in _schema_objects(schemas)
        if isinstance(item.get("$ref"), str) and not item["$ref"].startswith("#")
    )


_BACKTRACKING = re.compile(r"\(\?<?[=!]|\\[1-9]|\\k<")  # lookaround, a backreference


def _slow_patterns(schemas: dict[str, Any]) -> list[str]:
    """Schema regexes (``pattern`` values, ``patternProperties`` names) that need the
    backtracking engine (lookaround, backreferences) and are not anchored with ``^``: such a
    search can take seconds on a long argument (docs/policy.md, "Schemas")."""
    found: list[str] = []
    for item, where in _schema_objects(schemas):
        regexes = [(item["pattern"], f"{where}.pattern")] if isinstance(item.get("pattern"), str) else []
        props = item.get("patternProperties")
        if isinstance(props, dict):
            regexes += [(k, f"{where}.patternProperties") for k in props if isinstance(k, str)]
        found += [
            f"{at}: {json.dumps(rx, ensure_ascii=False)} uses lookaround or a backreference and is not "
            "anchored with ^: checking a long argument can take seconds while every frame waits"
            for rx, at in regexes if not rx.startswith("^") and _BACKTRACKING.search(rx)
        ]
    return sorted(found)


def _is_hex64(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _convert(doc: dict, source: str, strict_deprecations: bool) -> tuple[dict[str, Any], list[str]]:
    """Conversion and validation of the parsed root mapping; returns Policy kwargs and warnings."""
    r = _Reader()
    warnings: list[str] = []
    for key in doc:
        if not isinstance(key, str):
            raise _Structure("", f"top-level key {key!r} is not a string")
    r.fields(doc, "", _ROOT_KEYS)

    version = r.string(doc.get("version", ""), "version")
    name = r.string(doc.get("name", ""), "name")
    tools = _tools(r, doc.get("tools", {}))
    root_allow = r.strings(doc.get("allow"), "allow")
    root_deny = r.strings(doc.get("deny"), "deny")

    schemas_m = r.mapping(doc.get("schemas", {}), "schemas")
    schemas = {k: _json_value(v, f"schemas.{k}") for k, v in schemas_m.items()}

    constraints = _constraints(r, doc["constraints"]) if "constraints" in doc else []

    enf = r.mapping(doc.get("enforcement", {}), "enforcement")
    r.fields(enf, "enforcement", ("unconstrained_tools",))
    mode = r.enum(enf.get("unconstrained_tools", "warn"), "enforcement.unconstrained_tools", UNCONSTRAINED_MODES)

    limits = None
    lm = r.mapping(doc.get("limits"), "limits", optional=True)
    if lm is not None:
        r.fields(lm, "limits", ("max_requests_total", "max_tool_calls_total", "tools"))
        limits = Limits(
            r.u64(lm.get("max_requests_total"), "limits.max_requests_total"),
            r.u64(lm.get("max_tool_calls_total"), "limits.max_tool_calls_total"),
            _rate_rules(r, lm.get("tools")),
        )

    signatures = None
    sm = r.mapping(doc.get("signatures"), "signatures", optional=True)
    if sm is not None:
        r.fields(sm, "signatures", ("check_descriptions",))
        signatures = {"check_descriptions": r.boolean(sm.get("check_descriptions", False), "signatures.check_descriptions")}

    pins: dict[str, ToolPin] = {}
    pm = r.mapping(doc.get("tool_pins", {}), "tool_pins")
    for pin_name, pin_value in pm.items():
        path = f"tool_pins.{pin_name}"
        m = r.mapping(pin_value, path)
        r.fields(m, path, _PIN_FIELDS)
        values = []
        for f in _PIN_FIELDS:
            if f not in m:
                raise _Structure(path, f"missing field {f}")
            values.append(r.string(m[f], f"{path}.{f}"))
        pins[pin_name] = ToolPin(*values)

    classes: dict[str, tuple[str, ...]] = {}
    cm = r.mapping(doc.get("tool_classes", {}), "tool_classes")
    for tool, value in cm.items():
        classes[tool] = tuple(sorted(set(r.strings(value, f"tool_classes.{tool}", optional=False) or ())))

    discovery = _discovery(r, doc.get("discovery"))
    runtime_monitor = _runtime_monitor(r, doc.get("runtime_monitor"))
    kill_switch = _kill_switch(r, doc.get("kill_switch"))
    path_rules = _path_confinement(r, doc.get("path_confinement"))
    flow_rules: tuple = ()
    aliases: dict[str, tuple[str, ...]] = {}
    if "sequences" in doc or "aliases" in doc:  # docs/policy.md, "Flow rules"
        # imported here: a policy without flow rules never loads the sequence dialect
        from assay.policy.flows import FlowError, parse_flows

        try:
            flow_rules, aliases = parse_flows(doc.get("sequences"), doc.get("aliases"), r.unknown)
        except FlowError as exc:
            if exc.kind == "structure":
                raise _Structure(exc.path, exc.message) from None
            raise PolicyError("validation", str(exc), source=source) from None

    for path in r.unknown:
        warnings.append(f"unknown key ignored: {path}")

    # v1 detection before normalization
    v1 = bool(constraints) or version == "1.0"
    if v1:
        if strict_deprecations:
            raise PolicyError("structure", STRICT_V1_MESSAGE, source=source)
        warnings.append(V1_DEPRECATION_WARNING)

    # root allow/deny appended after tools.allow/deny
    if root_allow is not None:
        tools = _replace(tools, allow=(tools.allow or ()) + root_allow)
    if root_deny is not None:
        tools = _replace(tools, deny=(tools.deny or ()) + root_deny)

    # constraints overwrite schemas of the same tool, later rules win
    if constraints:
        schemas = dict(schemas)
        for tool, params in constraints:
            schemas[tool] = _constraint_schema(params)
        if version in ("", "1.0"):
            version = "2.0"

    # validation
    for pin_name in sorted(pins):
        pin = pins[pin_name]
        for f in ("schema_hash", "meta_hash"):
            if not _is_hex64(getattr(pin, f)):
                raise PolicyError(
                    "validation",
                    f"tool_pins.{pin_name}.{f} must be exactly 64 lowercase hexadecimal characters",
                    source=source,
                )
    if runtime_monitor is not None and kill_switch is not None:
        ids = {rule["id"] for rule in runtime_monitor["rules"]}
        for trig in kill_switch["triggers"]:
            if trig["on_rule"] not in ids:
                raise PolicyError(
                    "validation", f"kill_switch.triggers references unknown rule id: {trig['on_rule']}", source=source
                )

    for where in _unresolvable_refs(schemas):
        warnings.append(
            f"{where}: remote, file: and relative references are never fetched, so this schema "
            "will not compile and calls it covers are denied (E_SCHEMA_COMPILE)"
        )

    warnings.extend(_slow_patterns(schemas))

    if signatures is not None and signatures["check_descriptions"]:
        warnings.append("signatures.check_descriptions has no effect (descriptions are not verified at runtime)")

    kwargs = dict(
        version=version,
        name=name,
        tools=tools,
        schemas=schemas,
        enforcement=mode,
        limits=limits,
        signatures=signatures,
        tool_pins=pins,
        tool_classes=classes,
        discovery=discovery,
        runtime_monitor=runtime_monitor,
        kill_switch=kill_switch,
        path_confinement=path_rules,
        sequences=flow_rules,
        aliases=aliases,
        v1_format=v1,
        source=source,
        warnings=tuple(warnings),
    )
    return kwargs, warnings


def _replace(rules: ToolRules, **changes: Any) -> ToolRules:
    values = {k: getattr(rules, k) for k in _TOOLS_KEYS + _APPROVAL_KEYS}
    values.update(changes)
    return ToolRules(**values)


def load_policy(
    data: bytes,
    *,
    source: str = "assay.yaml",
    strict_deprecations: bool = False,
    warn: Callable[[str], object] | None = None,
    byte_ceiling: int = DEFAULT_BYTE_CEILING,
) -> Policy:
    """Bytes of an ``assay.yaml`` → :class:`Policy`, or :class:`PolicyError`.

    ``source`` names the file in messages. ``byte_ceiling`` is the policy byte ceiling the
    bytes were read under; alias expansion is budgeted from it (:func:`parse_yaml`). ``strict_deprecations`` is the strict mode
    (``--deny-deprecations`` / ``ASSAY_STRICT_DEPRECATIONS=1``; the caller reads the environment).
    ``warn`` receives each warning line (unknown keys, v1 deprecation, no-effect keys), prefixed
    with the source; the same lines stay on ``Policy.warnings`` without the prefix.
    """
    if isinstance(data, str):
        raise TypeError("load_policy takes bytes")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError("syntax", f"invalid UTF-8 at byte {exc.start}", source=source) from None
    try:
        doc = parse_yaml(text, byte_ceiling=byte_ceiling)
    except YamlSyntaxError as exc:
        raise PolicyError(
            "syntax", f"invalid YAML: {exc}", source=source, line=exc.line, column=exc.column
        ) from None
    except YamlStructureError as exc:
        raise PolicyError("structure", str(exc), source=source) from None
    if not isinstance(doc, dict):
        what = "empty document" if doc is None else type_name(doc)
        raise PolicyError("root_not_mapping", f"policy root is not a mapping ({what})", source=source)
    try:
        kwargs, warnings = _convert(doc, source, strict_deprecations)
        policy = Policy(**kwargs)
        compile_policy(policy)
    except PolicyError as exc:
        if exc.source != source:
            raise PolicyError(exc.kind, exc.detail, source=source) from None
        raise
    except _Structure as exc:
        raise PolicyError("structure", f"invalid policy: {exc}", source=source) from None
    except RecursionError:
        raise PolicyError("structure", "invalid policy: nested too deeply", source=source) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. JCS refusing a value
        raise PolicyError("structure", f"invalid policy: {exc}", source=source) from None
    if warn is not None:
        for line in warnings:
            warn(f"{source}: {line}")
    return policy


def read_policy_file(path: str, *, limit: int | None = None) -> bytes:
    """The bytes of the policy file ``path``: a regular file of at most ``limit`` bytes
    (default: ``ASSAY_MCP_MAX_POLICY_BYTES``, 1,000,000). Raises
    :class:`assay.inputs.InputFileError` (an ``OSError``; ``strerror`` is the short reason)."""
    return read_input_file(path, limit=policy_byte_limit() if limit is None else limit, what="policy")


def load_policy_file(
    path: str,
    *,
    strict_deprecations: bool = False,
    warn: Callable[[str], object] | None = None,
    limit: int | None = None,
) -> Policy:
    """:func:`read_policy_file` then :func:`load_policy` with the same ceiling; raises
    :class:`assay.inputs.InputFileError` or :class:`PolicyError`."""
    ceiling = policy_byte_limit() if limit is None else limit
    data = read_policy_file(path, limit=ceiling)
    return load_policy(
        data, source=path, strict_deprecations=strict_deprecations, warn=warn, byte_ceiling=ceiling
    )
