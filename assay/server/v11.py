"""The typed v1.1 sequence policy as the coverage and explain tools read it (server.md V3, X1).

Shape (policy.md SQ1 form a): a mapping with a required string `version` and optional `name`,
`metadata`, `tools` (`allow`, `deny`, `require_args`, `arg_constraints`), `sequences` (rules
tagged by `type`), `aliases` (name -> list of names) and `on_error`; unknown top-level keys are
refused. Any mismatch raises :class:`ValueError`, which the tools report as
`Policy structure is invalid`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Rule", "SeqPolicy", "ArgsSelector", "parse_v11", "parse_rule", "load_v11", "RULE_FIELDS"]

_TOP = {"version", "name", "metadata", "tools", "sequences", "aliases", "on_error"}
_TOOLS_KEYS = {"allow", "deny", "require_args", "arg_constraints"}

# type -> ((field, kind, required, default), ...); kind: sel (selector), sels, str, int, bool
RULE_FIELDS: dict[str, tuple[tuple[str, str, bool, Any], ...]] = {
    "require": (("tool", "sel", True, None),),
    "eventually": (("tool", "sel", True, None), ("within", "int", True, None)),
    "max_calls": (("tool", "sel", True, None), ("max", "int", True, None)),
    "before": (("first", "sel", True, None), ("then", "sel", True, None)),
    "after": (("trigger", "sel", True, None), ("then", "sel", True, None), ("within", "int", False, 1)),
    "never_after": (("trigger", "sel", True, None), ("forbidden", "sel", True, None)),
    "sequence": (("tools", "sels", True, None), ("strict", "bool", False, False)),
    "blocklist": (("pattern", "str", True, None),),
}


@dataclass(frozen=True)
class Rule:
    type: str
    fields: dict[str, Any]  # selectors reduced to their tool names (the trace holds names only)

    def rule_id(self) -> str:
        """Stable lower-case id shared by coverage and explain (server.md V4)."""
        f = self.fields
        t = self.type
        if t == "require":
            return f"require_{f['tool'].lower()}"
        if t == "eventually":
            return f"eventually_{f['tool'].lower()}_{f['within']}"
        if t == "max_calls":
            return f"max_calls_{f['tool'].lower()}_{f['max']}"
        if t == "before":
            return f"before_{f['first'].lower()}_then_{f['then'].lower()}"
        if t == "after":
            return f"after_{f['trigger'].lower()}_then_{f['then'].lower()}"
        if t == "never_after":
            return f"never_after_{f['trigger'].lower()}_forbidden_{f['forbidden'].lower()}"
        if t == "sequence":
            return "sequence_" + "_".join(name.lower() for name in f["tools"])
        return f"blocklist_{f['pattern'].lower()}"

    def tool_names(self) -> list[str]:
        names: list[str] = []
        for name, kind, _req, _default in RULE_FIELDS[self.type]:
            if kind == "sel":
                names.append(self.fields[name])
            elif kind == "sels":
                names.extend(self.fields[name])
        return names


@dataclass(frozen=True)
class SeqPolicy:
    version: str
    name: str | None
    allow: tuple[str, ...] | None
    deny: tuple[str, ...] | None
    require_args: tuple[str, ...]
    rules: tuple[Rule, ...]
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def resolve(self, name: str) -> tuple[str, ...]:
        """An alias stands for its members; any other name for itself."""
        return self.aliases.get(name, (name,))


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


class ArgsSelector(str):
    """A `{tool, args_match}` selector, reduced to its tool name. Traces that hold names only
    cannot satisfy its argument half: the sequence check never matches it (server.md S4), the
    explanation view treats it as its tool name."""


def _selector(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("tool"), str):
        extra = set(value) - {"tool", "args_match"}
        matcher = value.get("args_match", {})
        if extra or not isinstance(matcher, dict) or not all(isinstance(v, str) for v in matcher.values()):
            raise ValueError("bad selector")
        return ArgsSelector(value["tool"]) if matcher else value["tool"]
    raise ValueError("bad selector")


def parse_rule(value: Any) -> Rule:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ValueError("a rule must be a mapping with a string type")
    spec = RULE_FIELDS.get(value["type"])
    if spec is None:
        raise ValueError("unknown rule type")
    out: dict[str, Any] = {}
    for name, kind, required, default in spec:
        if name not in value:
            if required:
                raise ValueError(f"missing {name}")
            out[name] = default
            continue
        raw = value[name]
        if kind == "sel":
            out[name] = _selector(raw)
        elif kind == "sels":
            if not isinstance(raw, list):
                raise ValueError(f"{name} must be a list")
            out[name] = [_selector(item) for item in raw]
        elif kind == "str":
            if not isinstance(raw, str):
                raise ValueError(f"{name} must be a string")
            out[name] = raw
        elif kind == "int":
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
                raise ValueError(f"{name} must be a non-negative integer")
            out[name] = raw
        else:
            if not isinstance(raw, bool):
                raise ValueError(f"{name} must be a boolean")
            out[name] = raw
    return Rule(value["type"], out)


def parse_v11(doc: dict[str, Any]) -> SeqPolicy:
    unknown = set(doc) - _TOP
    if unknown:
        raise ValueError("unknown top-level key")
    version = doc.get("version")
    if not isinstance(version, str):
        raise ValueError("version must be a string")
    name = doc.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError("name must be a string")
    if doc.get("metadata") is not None and not isinstance(doc["metadata"], dict):
        raise ValueError("metadata must be a mapping")
    if "on_error" in doc and doc["on_error"] not in ("block", "allow"):
        raise ValueError("on_error must be block or allow")
    tools = doc.get("tools") or {}
    if not isinstance(tools, dict) or set(tools) - _TOOLS_KEYS:
        raise ValueError("tools must be a mapping of allow/deny/require_args/arg_constraints")
    allow = None if tools.get("allow") is None else _str_list(tools["allow"], "tools.allow")
    deny = None if tools.get("deny") is None else _str_list(tools["deny"], "tools.deny")
    require_args = tools.get("require_args") or {}
    if not isinstance(require_args, dict):
        raise ValueError("tools.require_args must be a mapping")
    sequences = doc.get("sequences") or []
    if not isinstance(sequences, list):
        raise ValueError("sequences must be a list")
    aliases_raw = doc.get("aliases") or {}
    if not isinstance(aliases_raw, dict):
        raise ValueError("aliases must be a mapping")
    aliases = {str(k): _str_list(v, "aliases") for k, v in aliases_raw.items()}
    return SeqPolicy(
        version=version,
        name=name,
        allow=allow,
        deny=deny,
        require_args=tuple(str(k) for k in require_args),
        rules=tuple(parse_rule(item) for item in sequences),
        aliases=aliases,
    )


def load_v11(data: bytes) -> SeqPolicy:
    """Bytes -> SeqPolicy with the E2 taxonomy (mapping stage first, then the typed shape)."""
    from assay.server.yamldoc import parse_mapping, structure_error

    doc = parse_mapping(data)
    try:
        return parse_v11(doc)
    except (ValueError, TypeError, AttributeError):
        raise structure_error() from None
