"""The parsed root mapping of a policy -> the keyword arguments of :class:`~assay.policy.model.Policy`
(docs/policy.md, "Loading" and "Migrating from v1").

Every section is read (:mod:`assay.policy.sections`), unknown keys become warnings, legacy root
``allow``/``deny`` are merged, v1 ``constraints`` become schemas (refused in strict mode), pins
and kill-switch triggers are validated, and the schema warnings are added
(:mod:`assay.policy.schemacheck`).
"""

from __future__ import annotations

from typing import Any

from assay.policy import sections as sec
from assay.policy.errors import PolicyError
from assay.policy.model import (
    _APPROVAL_KEYS,
    _PIN_FIELDS,
    _ROOT_KEYS,
    _TOOLS_KEYS,
    UNCONSTRAINED_MODES,
    Limits,
    ToolPin,
    ToolRules,
)
from assay.policy.patterns import EXACT
from assay.policy.reader import Reader, Structure, json_value
from assay.policy.schemacheck import slow_patterns, unresolvable_refs

__all__ = ["convert", "STRICT_V1_MESSAGE", "V1_DEPRECATION_WARNING", "UNKNOWN_KEY_WARNING"]

#: The start of the warning about an unknown key (its dotted path, and what it most likely
#: misspells, follow): `assay mcp policy check` reports these as errors (docs/policy-tools.md).
UNKNOWN_KEY_WARNING = "unknown key ignored: "

STRICT_V1_MESSAGE = "Strict mode: v1 policy format (constraints) is not allowed."
# The warning points to our docs, not to upstream's `assay policy migrate`.
V1_DEPRECATION_WARNING = (
    "v1 policy format (constraints) is deprecated; rewrite the constraints as schemas "
    "(see docs/policy.md, 'Migrating from v1')"
)


def _is_hex64(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def convert(
    doc: dict[Any, Any], source: str, strict_deprecations: bool, home: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Conversion and validation of the parsed root mapping; returns Policy kwargs and warnings.
    ``home`` is the home directory ``~`` and ``$HOME`` stand for in path rules."""
    r = Reader()
    warnings: list[str] = []
    for key in doc:
        if not isinstance(key, str):
            raise Structure("", f"top-level key {key!r} is not a string")
    r.fields(doc, "", _ROOT_KEYS)

    version = r.string(doc.get("version", ""), "version")
    name = r.string(doc.get("name", ""), "name")
    tools = sec.tools(r, doc.get("tools", {}))
    root_allow = r.strings(doc.get("allow"), "allow")
    root_deny = r.strings(doc.get("deny"), "deny")

    schemas_m = r.mapping(doc.get("schemas", {}), "schemas")
    schemas = {k: json_value(v, f"schemas.{k}") for k, v in schemas_m.items()}

    constraints = sec.constraints(r, doc["constraints"]) if "constraints" in doc else []

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
            sec.rate_rules(r, lm.get("tools")),
        )

    signatures = None
    sm = r.mapping(doc.get("signatures"), "signatures", optional=True)
    if sm is not None:
        r.fields(sm, "signatures", ("check_descriptions",))
        signatures = {
            "check_descriptions": r.boolean(sm.get("check_descriptions", False), "signatures.check_descriptions")
        }

    pins: dict[str, ToolPin] = {}
    pm = r.mapping(doc.get("tool_pins", {}), "tool_pins")
    for pin_name, pin_value in pm.items():
        path = f"tool_pins.{pin_name}"
        m = r.mapping(pin_value, path)
        r.fields(m, path, _PIN_FIELDS)
        values = []
        for f in _PIN_FIELDS:
            if f not in m:
                raise Structure(path, f"missing field {f}")
            values.append(r.string(m[f], f"{path}.{f}"))
        pins[pin_name] = ToolPin(*values)

    classes: dict[str, tuple[str, ...]] = {}
    cm = r.mapping(doc.get("tool_classes", {}), "tool_classes")
    for tool, value in cm.items():
        classes[tool] = tuple(sorted(set(r.strings(value, f"tool_classes.{tool}", optional=False) or ())))

    discovery = sec.discovery(r, doc.get("discovery"))
    runtime_monitor = sec.runtime_monitor(r, doc.get("runtime_monitor"))
    kill_switch = sec.kill_switch(r, doc.get("kill_switch"))
    path_rules = sec.path_confinement(r, doc.get("path_confinement"), home)
    flow_rules: tuple[Any, ...] = ()
    aliases: dict[str, tuple[Any, ...]] = {}
    if "sequences" in doc or "aliases" in doc:  # docs/policy.md, "Flow rules"
        # imported here: a policy without flow rules never loads them (nor the tracker a session keeps)
        from assay.policy.flow_rules import FlowError, parse_flows

        try:
            flow_rules, aliases = parse_flows(doc.get("sequences"), doc.get("aliases"), r.unknown)
        except FlowError as exc:
            if exc.kind == "structure":
                raise Structure(exc.path, exc.message) from None
            raise PolicyError("validation", str(exc), source=source) from None

    # docs/policy.md, "Inspecting what comes back" and "Resources and prompts"
    inspect = resources = prompts = None
    if "inspect" in doc or "resources" in doc or "prompts" in doc:
        from assay.policy.inspecting import check_patterns, read_inspect, read_list_rules

        try:
            inspect = read_inspect(r, doc.get("inspect"))
            resources = read_list_rules(r, doc.get("resources"), "resources")
            prompts = read_list_rules(r, doc.get("prompts"), "prompts")
            if inspect is not None and inspect.patterns:
                check_patterns(inspect.patterns)
        except ValueError as exc:
            raise PolicyError("validation", str(exc), source=source) from None

    users: tuple[Any, ...] = ()
    if "users" in doc:  # docs/policy.md, "Policy by user (serve)"
        from assay.policy.users import read_users

        users = read_users(r, doc["users"])

    for path in r.unknown:  # docs/policy.md, "Loading": ignored, with the key it most likely misspells
        warnings.append(UNKNOWN_KEY_WARNING + path)

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
            schemas[tool] = sec.constraint_schema(params)
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

    for where in unresolvable_refs(schemas):
        warnings.append(
            f"{where}: remote, file: and relative references are never fetched, so this schema "
            "will not compile and calls it covers are denied (E_SCHEMA_COMPILE)"
        )

    warnings.extend(slow_patterns(schemas))

    for section, named in (("schemas", schemas), ("tool_pins", pins), ("tool_classes", classes)):
        warnings.extend(
            f"{section}.{key}: a key names one tool as it is written, so this is the tool named {key!r} "
            f"(the exact-name form '=name' is for lists of patterns)"
            for key in named
            if key.startswith(EXACT)
        )

    if users:
        from assay.policy.users import users_warnings

        warnings.extend(users_warnings(users, tools))

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
        inspect=inspect,
        resources=resources,
        prompts=prompts,
        users=users,
        v1_format=v1,
        source=source,
        warnings=tuple(warnings),
    )
    return kwargs, warnings


def _replace(rules: ToolRules, **changes: Any) -> ToolRules:
    values = {k: getattr(rules, k) for k in _TOOLS_KEYS + _APPROVAL_KEYS}
    values.update(changes)
    return ToolRules(**values)
