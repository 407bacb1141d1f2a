"""Reading the flow rules of ``assay.yaml`` (docs/policy.md, "Flow rules"): the root ``sequences``
and ``aliases`` values into :class:`~assay.policy.model.FlowRule` values and the alias map.

The rules are the dialect of :mod:`assay.policy.sequence` (``require``, ``eventually``,
``max_calls``, ``before``, ``after``, ``never_after``, ``sequence``, ``blocklist``), with selector
tools and alias members read as tool-name patterns, selectors and alias members that may name a
``server`` (a pattern over wrap's ``--label``), a ``for`` window on ``never_after``, and an
``id`` and a ``message`` per rule.
"""

from __future__ import annotations

from typing import Any

from assay.policy.argregex import ArgRegexError, compile_arg_regex
from assay.policy.durations import DurationError, parse_duration
from assay.policy.model import FlowRule
from assay.policy.patterns import EXACT
from assay.policy.reader import type_name, unknown_key
from assay.policy.sequence_rules import RULE_KINDS, Rule, Selector

__all__ = ["FlowError", "RESPONSE_KINDS", "parse_flows"]

# what a response selector matches (docs/policy.md, "Flow rules"): a result in which wrap's
# inspection found a secret, an instruction aimed at the model, or either
RESPONSE_KINDS = ("secrets", "injection", "findings")

_U32_MAX = 2**32 - 1

# the fields of each rule type besides type, id and message; required unless optional
_FIELDS: dict[str, tuple[str, ...]] = {
    "require": ("tool",),
    "eventually": ("tool", "within"),
    "max_calls": ("tool", "max"),
    "before": ("first", "then"),
    "after": ("trigger", "then", "within"),
    "never_after": ("trigger", "forbidden", "for"),
    "sequence": ("tools", "strict"),
    "blocklist": ("pattern",),
}
_OPTIONAL = {("after", "within"), ("sequence", "strict"), ("never_after", "for")}
_SELECTOR_FIELDS = ("tool", "first", "then", "trigger", "forbidden")


class FlowError(ValueError):
    """A bad ``sequences`` or ``aliases`` value: ``kind`` is the loader's class (``structure``
    for a wrong type or shape, ``validation`` for a bad value), ``path`` the dotted path."""

    def __init__(self, kind: str, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.kind = kind
        self.path = path
        self.message = message


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise FlowError("structure", path, f"expected a string, got {type_name(value)}")
    return value


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FlowError("structure", path, f"expected a mapping, got {type_name(value)}")
    for key in value:
        if not isinstance(key, str):
            raise FlowError("structure", path, f"mapping key {key!r} is not a string")
    return value


def _name(value: Any, path: str) -> str:
    text = _string(value, path)
    if not text:
        raise FlowError("validation", path, "a tool name or pattern must not be empty")
    return text


def _selector(value: Any, path: str) -> Selector:
    if isinstance(value, str):
        return Selector(_name(value, path))
    if not isinstance(value, dict):
        raise FlowError("structure", path, f"expected a tool name or {{tool, args_match}}, got {type_name(value)}")
    m = _mapping(value, path)
    for key in m:
        if key not in ("tool", "server", "args_match", "response"):
            raise FlowError(
                "structure",
                f"{path}.{key}",
                "unknown selector key (a selector is a name or {tool, server, args_match} or {tool, server, response})",
            )
    if "tool" not in m:
        raise FlowError("structure", path, "missing field tool")
    if "response" in m:
        if "args_match" in m:
            raise FlowError("validation", path, "a response selector matches what came back: it takes no args_match")
        response = _string(m["response"], f"{path}.response")
        if response not in RESPONSE_KINDS:
            raise FlowError(
                "validation",
                f"{path}.response",
                f"unknown response kind {response!r} (expected one of {', '.join(RESPONSE_KINDS)})",
            )
        return Selector(_name(m["tool"], f"{path}.tool"), None, _server(m, path), response)
    if "args_match" not in m and "server" not in m:
        raise FlowError("structure", path, "missing field args_match (write the bare name when no argument is matched)")
    tool = _name(m["tool"], f"{path}.tool")
    server = _server(m, path)
    if "args_match" not in m:
        return Selector(tool, None, server)
    am = _mapping(m["args_match"], f"{path}.args_match")
    if not am:
        raise FlowError("validation", f"{path}.args_match", "must name at least one argument")
    pairs = []
    for key in sorted(am):
        where = f"{path}.args_match.{key}"
        regex = _string(am[key], where)
        try:
            compile_arg_regex(regex)
        except ArgRegexError as exc:
            raise FlowError("validation", where, str(exc)) from None
        pairs.append((key, regex))
    return Selector(tool, tuple(pairs), server)


def _server(m: dict[str, Any], path: str) -> str | None:
    if "server" not in m:
        return None
    server = _string(m["server"], f"{path}.server")
    if not server:
        raise FlowError("validation", f"{path}.server", "a server label or pattern must not be empty")
    return server


def _member(value: Any, path: str) -> str | Selector:
    """An alias member: a tool name or pattern, or ``{tool, server}``."""
    if not isinstance(value, dict):
        return _name(value, path)
    m = _mapping(value, path)
    for key in m:
        if key not in ("tool", "server"):
            raise FlowError(
                "structure", f"{path}.{key}", "unknown alias member key (a member is a name or {tool, server})"
            )
    if "tool" not in m:
        raise FlowError("structure", path, "missing field tool")
    if "server" not in m:
        raise FlowError("structure", path, "missing field server (write the bare name for a tool on any server)")
    return Selector(_name(m["tool"], f"{path}.tool"), None, _server(m, path))


def _window(value: Any, path: str) -> float:
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise FlowError("validation", path, str(exc)) from None
    if seconds == 0:
        raise FlowError("validation", path, "must be more than zero (a window of no time forbids nothing)")
    return seconds


def _u32(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise FlowError(
            "structure",
            path,
            f"expected an unsigned 32-bit integer, got {type_name(value) if not isinstance(value, int) or isinstance(value, bool) else value}",
        )
    return value


def _rule(value: Any, path: str, unknown: list[str]) -> tuple[Rule, str | None, str | None]:
    m = _mapping(value, path)
    if "type" not in m:
        raise FlowError("structure", path, "missing field type")
    kind = _string(m["type"], f"{path}.type")
    if kind not in RULE_KINDS:
        raise FlowError(
            "validation", f"{path}.type", f"unknown rule type {kind!r} (expected one of {', '.join(RULE_KINDS)})"
        )
    fields = _FIELDS[kind]
    for key in m:
        if key not in fields and key not in ("type", "id", "message"):
            unknown.append(unknown_key(path, str(key), (*fields, "type", "id", "message")))
    for f in fields:
        if f not in m and (kind, f) not in _OPTIONAL:
            raise FlowError("structure", path, f"missing field {f}")
    rule_id = None if m.get("id") is None else _string(m["id"], f"{path}.id")
    if rule_id == "":
        raise FlowError("validation", f"{path}.id", "must not be empty")
    message = None if m.get("message") is None else _string(m["message"], f"{path}.message")
    kw: dict[str, Any] = {}
    for f in fields:
        if f not in m:
            continue
        where = f"{path}.{f}"
        if f in _SELECTOR_FIELDS:
            kw[f] = _selector(m[f], where)
        elif f == "for":
            kw["window"] = _window(m[f], where)
        elif f in ("within", "max"):
            kw[f] = _u32(m[f], where)
        elif f == "strict":
            if not isinstance(m[f], bool):
                raise FlowError("structure", where, f"expected a boolean, got {type_name(m[f])}")
            kw[f] = m[f]
        elif f == "tools":
            items = m[f]
            if not isinstance(items, list):
                raise FlowError("structure", where, f"expected a list of selectors, got {type_name(items)}")
            if not items:
                raise FlowError("validation", where, "must list at least one selector")
            kw[f] = tuple(_selector(x, f"{where}[{i}]") for i, x in enumerate(items))
        else:  # blocklist pattern: a substring of the tool name
            kw[f] = _string(m[f], where)
            if not kw[f]:
                raise FlowError("validation", where, "must not be empty (it would block every tool)")
            if kw[f].startswith(EXACT):  # a substring, not a pattern: the exact form has no meaning here
                raise FlowError(
                    "validation",
                    where,
                    "a blocklist pattern is a plain substring, so the exact-name "
                    "form '=name' is refused here: deny one tool by name in tools.deny instead",
                )
    for f in _SELECTOR_FIELDS:
        sel = kw.get(f)
        if sel is not None and sel.response is not None and (kind, f) != ("never_after", "trigger"):
            raise FlowError("validation", f"{path}.{f}.response", "a response selector is only a never_after trigger")
    for sel in kw.get("tools", ()):
        if sel.response is not None:
            raise FlowError("validation", f"{path}.tools", "a response selector is only a never_after trigger")
    if kind == "after" and "within" not in kw:
        kw["within"] = 1
    return Rule(kind, **kw), rule_id, message


def parse_flows(
    sequences: Any, aliases: Any, unknown: list[str]
) -> tuple[tuple[FlowRule, ...], dict[str, tuple[str | Selector, ...]]]:
    """The root ``sequences`` and ``aliases`` values (``None`` when absent) → the rules and the
    alias map. Unknown rule keys are appended to ``unknown`` as dotted paths; raises
    :class:`FlowError`."""
    alias_map: dict[str, tuple[str | Selector, ...]] = {}
    if aliases is not None:
        for key, members in _mapping(aliases, "aliases").items():
            where = f"aliases.{key}"
            if not key:
                raise FlowError("validation", "aliases", "an alias name must not be empty")
            if key.startswith(EXACT):  # a selector "=x" is always the tool x, never an alias
                raise FlowError(
                    "validation",
                    where,
                    "an alias name must not start with '=' (a selector '=name' names the tool exactly, never an alias)",
                )
            if not isinstance(members, list):
                raise FlowError(
                    "structure", where, f"expected a list of tool names or patterns, got {type_name(members)}"
                )
            if not members:
                raise FlowError("validation", where, "must list at least one tool name or pattern")
            alias_map[key] = tuple(_member(x, f"{where}[{i}]") for i, x in enumerate(members))
    rules: list[FlowRule] = []
    if sequences is not None:
        if not isinstance(sequences, list):
            raise FlowError("structure", "sequences", f"expected a list of rules, got {type_name(sequences)}")
        seen: dict[str, int] = {}
        for i, item in enumerate(sequences):
            path = f"sequences[{i}]"
            rule, rule_id, message = _rule(item, path, unknown)
            rid = rule.rule_id if rule_id is None else rule_id
            if rid in seen:
                where = f"{path}.id" if rule_id is not None else path
                raise FlowError(
                    "validation", where, f"duplicate rule id {rid!r} (sequences[{seen[rid]}] has it; give one an id)"
                )
            seen[rid] = i
            rules.append(FlowRule(rule, rid, message))
    return tuple(rules), alias_map
