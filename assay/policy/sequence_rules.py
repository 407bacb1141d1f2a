"""The rules of the sequence dialect (docs/server.md, "assay_check_sequence"; docs/policy.md,
"Flow rules"): the values (:class:`Selector`, :class:`Rule`, :class:`SequencePolicy`,
:class:`SequenceCall`, :class:`RuleEvaluation`) and reading a sequence document
(:func:`parse_sequence_policy`: a v1.1 mapping, a bare list of rules, or a legacy bare list of
tool names). Evaluating them is :mod:`assay.policy.sequence`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, NamedTuple

from assay.inputs import DEFAULT_POLICY_BYTES as DEFAULT_BYTE_CEILING

__all__ = [
    "SequencePolicyError",
    "SequencePolicy",
    "Selector",
    "Rule",
    "RuleEvaluation",
    "SequenceCall",
    "parse_sequence_policy",
    "parse_policy_mapping",
    "RULE_KINDS",
    "INVALID_FORMAT",
    "DEFAULT_SERVER",
    "Aliases",
    "inside_window",
    "clock_value",
    "window_text",
]

INVALID_FORMAT = "Invalid sequence policy format"
DEFAULT_SERVER = "default-mcp-server"  # wrap's default --label (assay.policy.engine.DEFAULT_SERVER_ID)
RULE_KINDS = ("require", "eventually", "max_calls", "before", "after", "never_after", "sequence", "blocklist")
_U32_MAX = 2**32 - 1


class SequencePolicyError(ValueError):
    """No accepted form fits. ``str(e)`` is the fixed server message; ``cause`` says why."""

    def __init__(self, cause: str) -> None:
        super().__init__(INVALID_FORMAT)
        self.cause = cause

    def server_error(self) -> dict[str, str]:
        return {"code": "E_POLICY_PARSE", "message": INVALID_FORMAT}


class _Bad(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Selector:
    """A tool name (resolved through aliases) or ``{tool, server, args_match}``. ``server`` (only
    in ``assay.yaml``, docs/policy.md, "Flow rules") is a tool-name pattern over wrap's
    ``--label``: ``None`` matches a call to any server. An alias member is a name or a selector
    with a ``server`` (never an ``args_match``)."""

    tool: str
    args_match: tuple[tuple[str, str], ...] | None = None  # sorted by argument name
    server: str | None = None
    # a response selector (only a never_after trigger in assay.yaml; docs/policy.md, "Flow
    # rules"): it matches what a result of the tool held (secrets, injection, findings), never a call
    response: str | None = None

    def __str__(self) -> str:  # server/tool[arg1,arg2]; server/tool{response:secrets}
        base = self.tool if self.server is None else f"{self.server}/{self.tool}"
        if self.response is not None:
            return f"{base}{{response:{self.response}}}"
        if self.args_match is None:
            return base
        return f"{base}[{','.join(k for k, _ in self.args_match)}]"


# an alias name -> its members: tool names or patterns, or selectors with a ``server``
Aliases = Mapping[str, tuple["str | Selector", ...]]


def inside_window(now: float, since: float, window: float) -> bool:
    """Whether ``now`` is less than ``window`` seconds after ``since``, in exact arithmetic
    (``now - since`` rounded could equal ``window`` when the exact difference is just below it;
    rounding never moves it across ``window``, only onto it)."""
    age = now - since
    if age != window:
        return age < window
    return Fraction(now) - Fraction(since) < Fraction(window)


def clock_value(value: Any) -> float | None:
    """A time as a float, or ``None`` when it is not a finite number (a boolean, NaN, an
    infinity, an integer too large for a float, anything else): such a time is ignored."""
    if value.__class__ not in (int, float):
        return None
    try:
        t = float(value)
    except OverflowError:
        return None
    return t if math.isfinite(t) else None


def window_text(seconds: float) -> str:
    """A window as a policy writes it (``1h``, ``30m``, ``90s``)."""
    from assay.policy.rates import duration_text  # a small module; kept off the server's start-up

    return duration_text(seconds)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule; unused fields stay ``None``."""

    kind: str
    tool: Selector | None = None
    first: Selector | None = None
    then: Selector | None = None
    trigger: Selector | None = None
    forbidden: Selector | None = None
    tools: tuple[Selector, ...] = ()
    within: int | None = None
    max: int | None = None
    strict: bool = False
    pattern: str | None = None
    window: float | None = None  # never_after's ``for`` (seconds; only in assay.yaml)

    @property
    def rule_id(self) -> str:
        """The rule's stable id (``kind:selectors``, e.g. ``before:a->b``), as :class:`RuleEvaluation` reports it."""
        k = self.kind
        if k == "require":
            return f"require:{self.tool}"
        if k == "blocklist":
            return f"blocklist:{self.pattern}"
        if k == "before":
            return f"before:{self.first}->{self.then}"
        if k == "never_after":
            span = "" if self.window is None else f"@{window_text(self.window)}"
            return f"never_after:{self.trigger}->{self.forbidden}{span}"
        if k == "max_calls":
            return f"max_calls:{self.tool}<={self.max}"
        if k == "eventually":
            return f"eventually:{self.tool}@{self.within}"
        if k == "after":
            return f"after:{self.trigger}->{self.then}@{self.within}"
        return f"sequence{':strict' if self.strict else ''}:" + ">".join(str(t) for t in self.tools)

    def sel(self, role: Literal["tool", "first", "then", "trigger", "forbidden"]) -> Selector:
        """The selector in field ``role``. The parser sets every field a rule's kind names
        (``tool`` of require, eventually and max_calls; ``first``/``then`` of before; ...)."""
        value: Selector | None = getattr(self, role)
        if value is None:
            raise ValueError(f"a {self.kind} rule has no {role}")
        return value

    def limit(self, role: Literal["within", "max"]) -> int:
        """``within`` of eventually and after (after defaults to 1), ``max`` of max_calls."""
        value: int | None = getattr(self, role)
        if value is None:
            raise ValueError(f"a {self.kind} rule has no {role}")
        return value

    def selectors(self) -> tuple[Selector, ...]:
        """Every selector the rule names, in field order (``tools`` members included)."""
        single = (self.tool, self.first, self.trigger, self.then, self.forbidden)
        return tuple(s for s in single if s is not None) + self.tools

    @property
    def coverage_id(self) -> str:
        """Lower-cased id of the coverage and explain tools (docs/server.md, "assay_check_coverage");
        selectors by tool name."""
        k = self.kind
        if k == "require":
            return f"require_{self.sel('tool').tool.lower()}"
        if k == "eventually":
            return f"eventually_{self.sel('tool').tool.lower()}_{self.within}"
        if k == "max_calls":
            return f"max_calls_{self.sel('tool').tool.lower()}_{self.max}"
        if k == "before":
            return f"before_{self.sel('first').tool.lower()}_then_{self.sel('then').tool.lower()}"
        if k == "after":
            return f"after_{self.sel('trigger').tool.lower()}_then_{self.sel('then').tool.lower()}"
        if k == "never_after":
            return f"never_after_{self.sel('trigger').tool.lower()}_forbidden_{self.sel('forbidden').tool.lower()}"
        if k == "sequence":
            return "sequence_" + "_".join(s.tool.lower() for s in self.tools)
        return f"blocklist_{(self.pattern or '').lower()}"


@dataclass(frozen=True)
class SequencePolicy:
    """A parsed sequence document: ``form`` is ``policy`` (v1.1 mapping), ``rules`` or ``legacy``.

    The ``tools`` section is unused by the sequence check but read by the coverage and explain
    tools: ``allow``/``deny`` stay ``None`` when absent, ``require_args`` holds
    its tool names."""

    form: str
    rules: tuple[Rule, ...] = ()
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    expected: tuple[str, ...] = ()  # legacy form only
    version: str | None = None
    name: str | None = None
    on_error: str = "block"
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    require_args: tuple[str, ...] = ()

    def resolve(self, name: str) -> tuple[str, ...]:
        """An alias stands for its members; any other name for itself."""
        return self.aliases.get(name, (name,))


class SequenceCall(NamedTuple):
    """One call of a trace; ``args`` is ``None`` when only names are known (the server case).
    ``server`` is the label of the server the call went to and ``time`` when (seconds; only a
    ``never_after`` with ``for`` reads it): what wrap's flow rules see (docs/policy.md, "Flow
    rules")."""

    name: str
    args: Any = None
    server: str = DEFAULT_SERVER
    time: float = 0.0


@dataclass(frozen=True, slots=True)
class RuleEvaluation:
    rule: Rule
    outcome: str  # held | violated | not_exercised
    spanned: tuple[int, ...] = ()
    reason: str | None = None

    @property
    def rule_id(self) -> str:
        return self.rule.rule_id


# ------------------------------------------------------------------------------- parsing


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise _Bad("expected a string")
    return v


def _u32(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _U32_MAX:
        raise _Bad("expected an unsigned 32-bit integer")
    return v


def _strings(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _Bad("expected a list of strings")
    return tuple(_str(x) for x in v)


def _selector(v: Any) -> Selector:
    if isinstance(v, str):
        return Selector(v)
    if isinstance(v, dict) and "tool" in v and "args_match" in v:
        am = v["args_match"]
        if not isinstance(am, dict):
            raise _Bad("args_match must be a mapping")
        pairs = tuple(sorted((_str(k), _str(x)) for k, x in am.items()))
        return Selector(_str(v["tool"]), pairs)
    raise _Bad("a selector is a tool name or {tool, args_match}")


def _field(m: dict[str, Any], name: str) -> Any:
    if name not in m:
        raise _Bad(f"missing field {name}")
    return m[name]


def _rule(v: Any) -> Rule:
    if not isinstance(v, dict) or "type" not in v:
        raise _Bad("a rule is a mapping with a type")
    kind = v["type"]
    if kind not in RULE_KINDS:
        raise _Bad(f"unknown rule type {kind!r}")
    if kind == "require":
        return Rule(kind, tool=_selector(_field(v, "tool")))
    if kind == "eventually":
        return Rule(kind, tool=_selector(_field(v, "tool")), within=_u32(_field(v, "within")))
    if kind == "max_calls":
        return Rule(kind, tool=_selector(_field(v, "tool")), max=_u32(_field(v, "max")))
    if kind == "before":
        return Rule(kind, first=_selector(_field(v, "first")), then=_selector(_field(v, "then")))
    if kind == "after":
        within = _u32(v["within"]) if "within" in v else 1
        return Rule(kind, trigger=_selector(_field(v, "trigger")), then=_selector(_field(v, "then")), within=within)
    if kind == "never_after":
        return Rule(kind, trigger=_selector(_field(v, "trigger")), forbidden=_selector(_field(v, "forbidden")))
    if kind == "sequence":
        tools = _field(v, "tools")
        if not isinstance(tools, list):
            raise _Bad("tools must be a list")
        strict = v.get("strict", False)
        if not isinstance(strict, bool):
            raise _Bad("strict must be a boolean")
        return Rule(kind, tools=tuple(_selector(t) for t in tools), strict=strict)
    return Rule(kind, pattern=_str(_field(v, "pattern")))


_POLICY_KEYS = ("version", "name", "metadata", "tools", "sequences", "aliases", "on_error")
_TOOLS_KEYS = ("allow", "deny", "require_args", "arg_constraints")


def _policy_form(doc: dict[str, Any]) -> SequencePolicy:
    for k in doc:
        if k not in _POLICY_KEYS:
            raise _Bad(f"unknown key {k!r}")
    version = _str(_field(doc, "version"))
    name = _str(doc["name"]) if "name" in doc else None
    tools = doc.get("tools")
    lists: dict[str, Any] = {}
    if tools is not None:
        if not isinstance(tools, dict):
            raise _Bad("tools must be a mapping")
        for k, v in tools.items():
            if k not in _TOOLS_KEYS:
                raise _Bad(f"unknown key tools.{k}")
            if v is None:
                continue
            if k in ("allow", "deny"):
                lists[k] = _strings(v)
            elif not isinstance(v, dict) or not all(isinstance(x, str) for x in v):
                raise _Bad(f"tools.{k} must be a mapping")
            elif k == "require_args":
                for x in v.values():
                    _strings(x)
                lists[k] = tuple(v)
            else:
                for x in v.values():
                    if not isinstance(x, dict) or not all(isinstance(y, str) for y in x):
                        raise _Bad("tools.arg_constraints entries must be mappings")
    seqs = doc.get("sequences", [])
    if not isinstance(seqs, list):
        raise _Bad("sequences must be a list")
    aliases_raw = doc.get("aliases", {})
    if not isinstance(aliases_raw, dict):
        raise _Bad("aliases must be a mapping")
    aliases = {_str(k): _strings(v) for k, v in aliases_raw.items()}
    on_error = doc.get("on_error", "block")
    if on_error not in ("block", "allow"):
        raise _Bad("on_error must be block or allow")
    return SequencePolicy(
        "policy",
        tuple(_rule(r) for r in seqs),
        aliases,
        version=version,
        name=name,
        on_error=on_error,
        allow=lists.get("allow"),
        deny=lists.get("deny"),
        require_args=lists.get("require_args", ()),
    )


def parse_policy_mapping(doc: dict[str, Any]) -> SequencePolicy:
    """An already-parsed YAML mapping → the v1.1 policy form alone (what the coverage and explain
    tools read)."""
    try:
        return _policy_form(doc)
    except _Bad as exc:
        raise SequencePolicyError(str(exc)) from None


def parse_sequence_policy(data: bytes, *, byte_ceiling: int = DEFAULT_BYTE_CEILING) -> SequencePolicy:
    """Bytes → :class:`SequencePolicy`, trying the three forms (v1.1 mapping, bare list of rules,
    legacy list of names) in order. The YAML expansion budget derives from ``byte_ceiling``, the
    ceiling the bytes were read under (docs/policy.md, "File ceilings")."""
    from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml  # a policy file loads without it

    try:
        doc = parse_yaml(bytes(data).decode("utf-8"), byte_ceiling=byte_ceiling)
    except (UnicodeDecodeError, YamlSyntaxError, YamlStructureError) as exc:
        raise SequencePolicyError(str(exc)) from None
    errors = []
    if isinstance(doc, dict):
        try:
            return _policy_form(doc)
        except _Bad as exc:
            errors.append(str(exc))
    if isinstance(doc, list):
        try:
            return SequencePolicy("rules", tuple(_rule(r) for r in doc))
        except _Bad as exc:
            errors.append(str(exc))
        if all(isinstance(x, str) for x in doc):
            return SequencePolicy("legacy", expected=tuple(doc))
    raise SequencePolicyError("; ".join(errors) or "not a mapping or a list")
