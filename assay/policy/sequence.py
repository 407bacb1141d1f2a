"""The sequence-rule dialect of ``assay_check_sequence`` (docs/server.md, "assay_check_sequence").

A separate YAML dialect from ``assay.yaml``: a v1.1 mapping (``version``, ``sequences``,
``aliases``, ...), a bare list of rules, or a legacy bare list of tool names. Rules are checked
statelessly against a caller-supplied trace; every rule is evaluated (no short-circuit) and each
yields ``held``, ``violated`` or ``not_exercised`` with the call indices it read.

Server use::

    doc = parse_sequence_policy(file_bytes)          # SequencePolicyError -> E_POLICY_PARSE
    result = check_sequence(doc, history + [next_tool])   # partial trace by default
    # {"allowed": bool, "violations": [...], "suggested_fix": None}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from assay.policy.argregex import ArgRegex, ArgRegexError, compile_arg_regex
from assay.policy.patterns import NameMatcher
from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

__all__ = [
    "SequencePolicyError",
    "SequencePolicy",
    "Selector",
    "Rule",
    "RuleEvaluation",
    "SequenceCall",
    "parse_sequence_policy",
    "parse_policy_mapping",
    "evaluate_rules",
    "check_sequence",
    "RULE_KINDS",
    "INVALID_FORMAT",
]

INVALID_FORMAT = "Invalid sequence policy format"
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
    """A tool name (resolved through aliases) or ``{tool, args_match}``."""

    tool: str
    args_match: tuple[tuple[str, str], ...] | None = None  # sorted by argument name

    def __str__(self) -> str:  # tool[arg1,arg2]
        if self.args_match is None:
            return self.tool
        return f"{self.tool}[{','.join(k for k, _ in self.args_match)}]"


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
            return f"never_after:{self.trigger}->{self.forbidden}"
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
    """One call of a trace; ``args`` is ``None`` when only names are known (the server case)."""

    name: str
    args: Any = None


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


def _field(m: dict, name: str) -> Any:
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


def _policy_form(doc: dict) -> SequencePolicy:
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


def parse_sequence_policy(data: bytes) -> SequencePolicy:
    """Bytes → :class:`SequencePolicy`, trying the three forms (v1.1 mapping, bare list of rules,
    legacy list of names) in order."""
    try:
        doc = parse_yaml(bytes(data).decode("utf-8"))
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


# ------------------------------------------------------------------------------- evaluation


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Matcher:
    """Selector matching. With ``patterns`` (the ``sequences`` of ``assay.yaml``), a selector's
    tool and alias members are tool-name patterns as in ``tools.allow``; without it (the
    ``assay_check_sequence`` dialect) they are exact names."""

    def __init__(self, aliases: dict[str, tuple[str, ...]], patterns: bool = False) -> None:
        self.aliases = aliases
        self.patterns = patterns
        self.regex: dict[str, ArgRegex | None] = {}
        self.matchers: dict[str, NameMatcher] = {}

    def names(self, sel: Selector) -> tuple[str, ...]:
        return self.aliases.get(sel.tool, (sel.tool,))

    def name_matches(self, name: str, sel: Selector) -> bool:
        if not self.patterns:
            return name in self.names(sel)
        matcher = self.matchers.get(sel.tool)
        if matcher is None:
            matcher = self.matchers[sel.tool] = NameMatcher(self.names(sel))
        return matcher(name)

    def _re(self, pattern: str) -> ArgRegex | None:
        if pattern not in self.regex:
            try:
                self.regex[pattern] = compile_arg_regex(pattern)
            except ArgRegexError:
                self.regex[pattern] = None
        return self.regex[pattern]

    def match(self, call: SequenceCall, sel: Selector) -> bool:
        if not self.name_matches(call.name, sel):
            return False
        if sel.args_match is None:
            return True
        for key, pattern in sel.args_match:
            # a missing argument, non-object args or a bad regex fail the match (never skipped)
            if not isinstance(call.args, dict) or key not in call.args:
                return False
            rx = self._re(pattern)
            if rx is None or not rx.search(_render(call.args[key])):
                return False
        return True

    def indices(self, calls: Sequence[SequenceCall], sel: Selector) -> list[int]:
        return [i for i, c in enumerate(calls) if self.match(c, sel)]

    def first(self, calls: Sequence[SequenceCall], sel: Selector, start: int = 0) -> int | None:
        for i in range(start, len(calls)):
            if self.match(calls[i], sel):
                return i
        return None


def _eval(rule: Rule, calls: Sequence[SequenceCall], m: _Matcher, complete: bool) -> RuleEvaluation:
    k = rule.kind
    held = lambda span: RuleEvaluation(rule, "held", tuple(span))  # noqa: E731
    bad = lambda span, why: RuleEvaluation(rule, "violated", tuple(span), why)  # noqa: E731
    idle = lambda why: RuleEvaluation(rule, "not_exercised", (), why)  # noqa: E731
    n = len(calls)

    if k == "require":
        hits = m.indices(calls, rule.sel("tool"))
        return held(hits) if hits else bad([], f"required tool '{rule.tool}' not found in trace")

    if k == "blocklist":
        pat = rule.pattern or ""
        hits = [i for i, c in enumerate(calls) if pat in c.name]
        if hits:
            return bad(hits, f"tool '{calls[hits[0]].name}' matches blocklist pattern '{pat}'")
        return held(range(n))

    if k == "before":
        t = m.first(calls, rule.sel("then"))
        if t is None:
            return idle(f"'{rule.then}' never appeared, so the ordering was never constrained")
        f = m.first(calls, rule.sel("first"))
        if f is None:
            return bad([t], f"tool '{rule.then}' was found (index {t}) but required preceding tool '{rule.first}' was missing")
        if f > t:
            return bad(
                [f, t],
                f"tool '{rule.first}' appeared at index {f} but was required before tool '{rule.then}' (index {t})",
            )
        return held([f, t])

    if k == "never_after":
        trig = m.first(calls, rule.sel("trigger"))
        if trig is None:
            return idle(f"'{rule.trigger}' never appeared, so nothing was forbidden")
        hit = m.first(calls, rule.sel("forbidden"), trig + 1)
        if hit is not None:
            return bad(
                [trig, hit],
                f"tool '{rule.forbidden}' at index {hit} is forbidden after '{rule.trigger}' (triggered at index {trig})",
            )
        return held([trig])

    if k == "max_calls":
        hits = m.indices(calls, rule.sel("tool"))
        if len(hits) > (rule.max or 0):
            return bad(hits, f"tool '{rule.tool}' exceeded max calls ({len(hits)} > {rule.max})")
        return held(hits)

    if k == "eventually":
        within = rule.within or 0
        idx = m.first(calls, rule.sel("tool"))
        if idx is not None:
            if idx >= within:
                return bad([idx], f"tool '{rule.tool}' appeared at index {idx} but must appear within first {within} calls")
            return held([idx])
        if n >= within:
            return bad(range(n), f"tool '{rule.tool}' required within first {within} calls but not found (trace length: {n})")
        if complete:
            return bad(
                range(n),
                f"tool '{rule.tool}' required within the first {within} calls but the run ended after {n} without it",
            )
        return idle(f"'{rule.tool}' has not appeared and the trace is {n} call(s) long, still within the {within}-call deadline")

    if k == "after":
        within = rule.within if rule.within is not None else 1
        triggers, then = m.indices(calls, rule.sel("trigger")), rule.sel("then")
        if not triggers:
            return idle(f"'{rule.trigger}' never appeared, so no deadline started")
        # the first `then` call after each trigger, found in one pass from the end (walking each
        # trigger's window again was quadratic: 2,000 triggers and one late `then` took seconds)
        following: dict[int, int | None] = {}
        nxt: int | None = None
        for j in range(n - 1, triggers[0], -1):
            if m.match(calls[j], then):
                nxt = j
            following[j] = nxt
        spanned = set(triggers)
        for ti in triggers:
            deadline = ti + within
            answered = following.get(ti + 1)
            if answered is not None and answered > deadline:
                answered = None
            if answered is not None:
                spanned.add(answered)
                continue
            if complete or n > deadline:
                return bad(
                    sorted(spanned),
                    f"tool '{rule.then}' required within {within} calls after '{rule.trigger}' "
                    f"(triggered at index {ti}) and no call answered it by index {deadline}",
                )
            return idle(f"'{rule.trigger}' fired at index {ti} and the trace may still satisfy the {within}-call deadline")
        return held(sorted(spanned))

    # sequence
    tools = rule.tools
    if not tools:
        return idle("the rule names no tools")
    k_ = 0
    spanned_l: list[int] = []
    for idx, call in enumerate(calls):
        if k_ < len(tools) and m.match(call, tools[k_]):
            spanned_l.append(idx)
            k_ += 1
            continue
        if rule.strict and spanned_l and k_ < len(tools):
            return bad(
                spanned_l + [idx],
                f"strict sequence violated: expected '{tools[k_]}' at index {idx} but found '{call.name}'",
            )
        if not rule.strict and k_ < len(tools) and any(m.match(call, t) for t in tools[k_ + 1:]):
            return bad(
                spanned_l + [idx], f"sequence out of order: '{call.name}' at index {idx} appears before '{tools[k_]}'"
            )
    if spanned_l and k_ < len(tools) and complete:
        return bad(spanned_l, f"sequence reached '{tools[max(k_ - 1, 0)]}' and the run ended before '{tools[k_]}'")
    if not spanned_l:
        return idle("no tool named by the sequence appeared")
    return held(spanned_l)


def _calls(trace: Iterable[Any]) -> list[SequenceCall]:
    out = []
    for item in trace:
        if isinstance(item, SequenceCall):
            out.append(item)
        elif isinstance(item, str):
            out.append(SequenceCall(item))
        else:
            name, args = item
            out.append(SequenceCall(name, args))
    return out


def evaluate_rules(
    rules: Iterable[Rule],
    trace: Iterable[Any],
    aliases: dict[str, tuple[str, ...]] | None = None,
    *,
    partial: bool = True,
    patterns: bool = False,
) -> list[RuleEvaluation]:
    """One :class:`RuleEvaluation` per rule (no short-circuit). ``trace`` holds names or
    ``(name, args)`` pairs; ``partial`` means more calls may follow (open windows undecided);
    ``patterns`` reads selector tools and alias members as tool-name patterns (``*`` forms of
    docs/policy.md, "Tool-name patterns"), as wrap's flow rules do."""
    calls = _calls(trace)
    m = _Matcher(dict(aliases or {}), patterns)
    return [_eval(r, calls, m, not partial) for r in rules]


def _violation(ev: RuleEvaluation) -> dict[str, Any]:
    r = ev.rule
    if r.kind == "require":
        constraint = "sequence_rule"
    elif r.kind == "sequence":
        constraint = "sequence_strict" if r.strict else "sequence_order"
    else:
        constraint = r.kind
    out: dict[str, Any] = {
        "rule_type": r.kind,
        "constraint": constraint,
        "message": ev.reason,
        "spanned": list(ev.spanned),
    }
    tool = {
        "require": r.tool,
        "eventually": r.tool,
        "max_calls": r.tool,
        "before": r.then,
        "after": r.then,
        "never_after": r.forbidden,
    }.get(r.kind)
    if tool is not None:
        out["tool"] = str(tool)
    if ev.spanned:
        out["event_index"] = ev.spanned[-1]
    if r.kind == "max_calls":
        out["context"] = {"max": r.max, "actual": len(ev.spanned)}
    return out


def check_sequence(policy: SequencePolicy, trace: Iterable[Any], *, partial: bool = True) -> dict[str, Any]:
    """The ``assay_check_sequence`` result for ``trace`` (history + [next_tool]).

    Legacy lists pass only on an exact match; otherwise every rule is evaluated and each
    ``violated`` one becomes a violation entry.
    """
    calls = _calls(trace)
    if policy.form == "legacy":
        names = [c.name for c in calls]
        if names == list(policy.expected):
            return {"allowed": True, "violations": [], "suggested_fix": None}
        suggestion = (
            f"Expected {json.dumps(list(policy.expected), ensure_ascii=False)}, "
            f"found {json.dumps(names, ensure_ascii=False)}"
        )
        return {
            "allowed": False,
            "violations": [{"constraint": "sequence_exact_match", "suggestion": suggestion}],
            "suggested_fix": None,
        }
    evaluations = evaluate_rules(policy.rules, calls, policy.aliases, partial=partial)
    violations = [_violation(ev) for ev in evaluations if ev.outcome == "violated"]
    return {"allowed": not violations, "violations": violations, "suggested_fix": None}
