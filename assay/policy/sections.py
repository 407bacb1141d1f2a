"""The sections of a policy, each read into its frozen value (docs/policy.md).

One function a section: ``tools``, v1 ``constraints`` (and the schema a rule becomes),
``discovery``, ``runtime_monitor``, ``kill_switch``, ``path_confinement`` and ``limits.tools``.
Each takes the :class:`~assay.policy.reader.Reader` of the walk and the raw value; a type
mismatch is :class:`~assay.policy.reader.Structure`, a value that breaks a rule is
``PolicyError("validation", ...)``.
"""

from __future__ import annotations

import json
from typing import Any

from assay.policy.durations import DurationError, parse_duration
from assay.policy.errors import PolicyError
from assay.policy.model import (
    _APPROVAL_KEYS,
    _LIST_KEYS,
    _REDACT_FIELDS,
    _SCOPE_FIELDS,
    _TOOLS_KEYS,
    APPROVAL_FALLBACKS,
    PathRule,
    RateRule,
    ToolRules,
)
from assay.policy.paths import PathRefused, normalize_path
from assay.policy.reader import Reader, Structure, join, type_name

__all__ = [
    "tools",
    "constraints",
    "constraint_schema",
    "discovery",
    "runtime_monitor",
    "kill_switch",
    "path_confinement",
    "rate_rules",
    "MAX_WINDOW_CALLS",
]


def _contract(r: Reader, value: Any, path: str, names: tuple[str, ...]) -> dict[str, str] | None:
    m = r.mapping(value, path, optional=True)
    if m is None:
        return None
    r.fields(m, path, names)
    out = {}
    for name in names:
        if name not in m:
            raise Structure(path, f"missing field {name}")
        out[name] = r.string(m[name], join(path, name))
    return out


def tools(r: Reader, value: Any) -> ToolRules:
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


def constraints(r: Reader, value: Any) -> list[tuple[str, dict[str, str | None]]]:
    """v1 ``constraints``: (tool, {param: regex or None}) in rule order, params sorted."""
    if isinstance(value, list):
        rules = []
        for i, item in enumerate(value):
            path = f"constraints[{i}]"
            m = r.mapping(item, path)
            r.fields(m, path, ("tool", "params"))
            if "tool" not in m:
                raise Structure(path, "missing field tool")
            if "params" not in m:
                raise Structure(path, "missing field params")
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
    raise Structure("constraints", f"expected a list or a mapping, got {type_name(value)}")


def constraint_schema(params: dict[str, str | None]) -> dict[str, Any]:
    """The permissive object schema a v1 rule becomes (no maxLength, extra args allowed)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, regex in params.items():
        if regex is None:
            continue
        properties[pname] = {"type": "string", "pattern": regex, "minLength": 1}
        required.append(pname)
    return {"type": "object", "additionalProperties": True, "properties": properties, "required": required}


def discovery(r: Reader, value: Any) -> dict[str, Any] | None:
    m = r.mapping(value, "discovery", optional=True)
    if m is None:
        return None
    r.fields(m, "discovery", ("enabled", "methods", "output", "on_findings"))
    methods_choice = ("config_files", "processes", "network", "dns", "well_known")
    methods = ["config_files", "processes"]
    if m.get("methods") is not None:
        methods = [
            r.enum(x, f"discovery.methods[{i}]", methods_choice)
            for i, x in enumerate(r.strings(m["methods"], "discovery.methods") or ())
        ]
    of = r.mapping(m.get("on_findings", {}), "discovery.on_findings") or {}
    r.fields(of, "discovery.on_findings", ("unmanaged_server", "no_auth"))
    levels = ("log", "warn", "fail")
    return {
        "enabled": r.boolean(m.get("enabled", False), "discovery.enabled"),
        "methods": methods,
        "output": r.string(m.get("output"), "discovery.output", optional=True),
        "on_findings": {
            "unmanaged_server": r.enum(
                of.get("unmanaged_server", "log"), "discovery.on_findings.unmanaged_server", levels
            ),
            "no_auth": r.enum(of.get("no_auth", "log"), "discovery.on_findings.no_auth", levels),
        },
    }


def _monitor_match(r: Reader, value: Any, path: str) -> dict[str, Any]:
    m = r.mapping(value, path)
    r.fields(m, path, ("path_globs", "dest_globs", "not"))
    return {
        "path_globs": list(r.strings(m.get("path_globs"), f"{path}.path_globs") or ()),
        "dest_globs": list(r.strings(m.get("dest_globs"), f"{path}.dest_globs") or ()),
        "not": None if m.get("not") is None else _monitor_match(r, m["not"], f"{path}.not"),
    }


def runtime_monitor(r: Reader, value: Any) -> dict[str, Any] | None:
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
        raise Structure(f"{p}.rules", f"expected a list, got {type_name(raw_rules)}")
    for i, item in enumerate(raw_rules):
        rp = f"{p}.rules[{i}]"
        rm = r.mapping(item, rp)
        r.fields(rm, rp, ("id", "type", "match", "severity", "action"))
        for req in ("id", "type", "match"):
            if req not in rm:
                raise Structure(rp, f"missing field {req}")
        rules.append(
            {
                "id": r.string(rm["id"], f"{rp}.id"),
                "type": r.enum(rm["type"], f"{rp}.type", ("file_open", "net_connect", "proc_exec")),
                "match": _monitor_match(r, rm["match"], f"{rp}.match"),
                "severity": r.enum(
                    rm.get("severity", "medium"), f"{rp}.severity", ("low", "medium", "high", "critical")
                ),
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


def kill_switch(r: Reader, value: Any) -> dict[str, Any] | None:
    m = r.mapping(value, "kill_switch", optional=True)
    if m is None:
        return None
    p = "kill_switch"
    r.fields(
        m,
        p,
        (
            "enabled",
            "mode",
            "kill_scope",
            "grace_period_ms",
            "kill_children",
            "capture_state",
            "output_dir",
            "triggers",
        ),
    )
    modes = ("graceful", "immediate")
    triggers = []
    raw = m.get("triggers", [])
    if not isinstance(raw, list):
        raise Structure(f"{p}.triggers", f"expected a list, got {type_name(raw)}")
    for i, item in enumerate(raw):
        tp = f"{p}.triggers[{i}]"
        tm = r.mapping(item, tp)
        r.fields(tm, tp, ("on_rule", "mode"))
        if "on_rule" not in tm:
            raise Structure(tp, "missing field on_rule")
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


_HOME_PREFIXES = ("~", "$HOME", "${HOME}")


def _home_expanded(value: str, path: str, home: str | None) -> str:
    """``value`` with a leading ``~``, ``$HOME`` or ``${HOME}`` (alone or before ``/``) replaced
    by ``home``, the home directory of the user loading the policy (docs/policy.md, "Path
    confinement"). Anything else is returned as it is."""
    for prefix in _HOME_PREFIXES:
        if value == prefix or value.startswith(prefix + "/"):
            if home is None or not home.startswith("/"):
                raise PolicyError(
                    "validation",
                    f"{path}: {json.dumps(value)} starts with {prefix}, but the home directory is not known "
                    "(HOME is unset or not absolute)",
                )
            return home + value[len(prefix) :]  # normalized by the caller
    if value.startswith("~"):
        raise PolicyError(
            "validation",
            f"{path} must be an absolute path, ~ or $HOME (~user is not expanded; got {json.dumps(value)})",
        )
    return value


def _directory(value: Any, path: str, home: str | None) -> str:
    """An absolute directory of a path rule, in lexical normal form (``~`` and ``$HOME``
    expanded to ``home``)."""
    if not isinstance(value, str):
        raise Structure(path, f"expected a string, got {type_name(value)}")
    value = _home_expanded(value, path, home)
    if not value.startswith("/"):
        raise PolicyError("validation", f"{path} must be an absolute path, ~ or $HOME (got {json.dumps(value)})")
    try:
        return normalize_path(value)
    except PathRefused as exc:
        raise PolicyError("validation", f"{path}: {exc}") from None


def _non_empty(r: Reader, value: Any, path: str) -> tuple[str, ...]:
    items = r.strings(value, path, optional=False) or ()
    if not items:
        raise PolicyError("validation", f"{path} must list at least one entry")
    return items


def path_confinement(r: Reader, value: Any, home: str | None = None) -> tuple[PathRule, ...]:
    """``path_confinement``: a list of rules (docs/policy.md, 'Path confinement'); ``home`` is
    what ``~`` and ``$HOME`` stand for in ``within`` and ``base``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Structure("path_confinement", f"expected a list of rules, got {type_name(value)}")
    rules = []
    for i, item in enumerate(value):
        p = f"path_confinement[{i}]"
        m = r.mapping(item, p)
        r.fields(m, p, _PATH_RULE_KEYS)
        for req in ("tools", "args", "within"):
            if req not in m:
                raise Structure(p, f"missing field {req}")
        tools = _non_empty(r, m["tools"], f"{p}.tools")
        args = _non_empty(r, m["args"], f"{p}.args")
        within_raw = m["within"]
        if not isinstance(within_raw, list):
            raise Structure(f"{p}.within", f"expected a list of directories, got {type_name(within_raw)}")
        within = tuple(_directory(d, f"{p}.within[{j}]", home) for j, d in enumerate(within_raw))
        if not within:
            raise PolicyError("validation", f"{p}.within must list at least one entry")
        base = None if m.get("base") is None else _directory(m["base"], f"{p}.base", home)
        resolve = r.boolean(m.get("resolve_symlinks", False), f"{p}.resolve_symlinks")
        rules.append(PathRule(tools=tools, args=args, within=within, base=base, resolve_symlinks=resolve))
    return tuple(rules)


_RATE_RULE_KEYS = ("id", "tools", "max_calls", "per")
MAX_WINDOW_CALLS = 1_000_000  # a window remembers up to this many call times


def rate_rules(r: Reader, value: Any) -> tuple[RateRule, ...]:
    """``limits.tools``: per-tool rate rules (docs/policy.md, "Per-tool rate limits")."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Structure("limits.tools", f"expected a list of rules, got {type_name(value)}")
    rules: list[RateRule] = []
    where: dict[str, str] = {}  # rule id -> the rule that has it
    for i, item in enumerate(value):
        p = f"limits.tools[{i}]"
        m = r.mapping(item, p)
        r.fields(m, p, _RATE_RULE_KEYS)
        for req in ("tools", "max_calls"):
            if req not in m:
                raise Structure(p, f"missing field {req}")
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
