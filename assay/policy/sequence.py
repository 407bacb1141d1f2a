"""The sequence-rule dialect of ``assay_check_sequence`` (docs/server.md, "assay_check_sequence"):
evaluating rules over a trace. The rule values and the parser are :mod:`assay.policy.sequence_rules`
(re-exported here).

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
from typing import Any

from assay.policy.argregex import ArgRegex, ArgRegexError, compile_arg_regex
from assay.policy.patterns import NameMatcher, pattern_matches
from assay.policy.sequence_rules import (
    INVALID_FORMAT,
    RULE_KINDS,
    Aliases,
    Rule,
    RuleEvaluation,
    Selector,
    SequenceCall,
    SequencePolicy,
    SequencePolicyError,
    parse_policy_mapping,
    parse_sequence_policy,
    clock_value,
    inside_window,
    window_text,
)


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


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Matcher:
    """Selector matching. With ``patterns`` (the ``sequences`` of ``assay.yaml``), a selector's
    tool and alias members are tool-name patterns as in ``tools.allow``, a selector or alias
    member with a ``server`` matches only calls to a server whose label that pattern matches, and
    an ``args_match`` argument that is an array matches when any element does; without it (the
    ``assay_check_sequence`` dialect) they are exact names and an argument is one value."""

    def __init__(self, aliases: Aliases, patterns: bool = False) -> None:
        self.aliases = aliases
        self.patterns = patterns
        self.regex: dict[str, ArgRegex | None] = {}
        self.matchers: dict[str, tuple[NameMatcher, tuple[tuple[NameMatcher, NameMatcher], ...]]] = {}

    def names(self, sel: Selector) -> tuple[str, ...]:
        return tuple(m if isinstance(m, str) else m.tool for m in self.aliases.get(sel.tool, (sel.tool,)))

    def name_matches(self, call: SequenceCall, sel: Selector) -> bool:
        name = call.name
        if sel.response is not None:  # a response selector matches what came back, never a call
            return False
        if sel.server is not None and not pattern_matches(call.server, sel.server):
            return False
        if not self.patterns:
            return name in self.names(sel)
        got = self.matchers.get(sel.tool)
        if got is None:
            members = self.aliases.get(sel.tool, (sel.tool,))
            plain = NameMatcher(m for m in members if isinstance(m, str))
            qualified = tuple(
                (NameMatcher((m.tool,)), NameMatcher(() if m.server is None else (m.server,)))
                for m in members
                if not isinstance(m, str)
            )
            got = self.matchers[sel.tool] = (plain, qualified)
        plain, qualified = got
        return plain(name) or any(tool(name) and server(call.server) for tool, server in qualified)

    def _re(self, pattern: str) -> ArgRegex | None:
        if pattern not in self.regex:
            try:
                self.regex[pattern] = compile_arg_regex(pattern)
            except ArgRegexError:
                self.regex[pattern] = None
        return self.regex[pattern]

    def match(self, call: SequenceCall, sel: Selector) -> bool:
        if not self.name_matches(call, sel):
            return False
        if sel.args_match is None:
            return True
        for key, pattern in sel.args_match:
            # a missing argument, non-object args or a bad regex fail the match (never skipped)
            if not isinstance(call.args, dict) or key not in call.args:
                return False
            rx = self._re(pattern)
            if rx is None:
                return False
            value = call.args[key]
            if self.patterns and value.__class__ is list:
                texts = [_render(v) for v in value]  # every element read: an unreadable one fails
                if not any(rx.search(t) for t in texts):
                    return False
            elif not rx.search(_render(value)):
                return False
        return True

    def indices(self, calls: Sequence[SequenceCall], sel: Selector) -> list[int]:
        return [i for i, c in enumerate(calls) if self.match(c, sel)]

    def first(self, calls: Sequence[SequenceCall], sel: Selector, start: int = 0) -> int | None:
        for i in range(start, len(calls)):
            if self.match(calls[i], sel):
                return i
        return None


def _times(calls: Sequence[SequenceCall]) -> list[float]:
    """The time of each call as wrap reads it: a clock that goes back (or a time that is not a
    finite number) stands still at the latest time before it (0.0 before any)."""
    out: list[float] = []
    latest: float | None = None
    for c in calls:
        t = clock_value(c.time)
        if t is not None and (latest is None or t > latest):
            latest = t
        out.append(0.0 if latest is None else latest)
    return out


def _never_after_for(rule: Rule, calls: Sequence[SequenceCall], m: _Matcher, window: float) -> RuleEvaluation:
    """``never_after`` with ``for``: a ``forbidden`` call less than ``window`` seconds after the
    latest ``trigger`` call before it."""
    times = _times(calls)
    trigger, forbidden = rule.sel("trigger"), rule.sel("forbidden")
    last: int | None = None
    spanned: list[int] = []
    for j, call in enumerate(calls):
        if last is not None and m.match(call, forbidden) and inside_window(times[j], times[last], window):
            return RuleEvaluation(
                rule,
                "violated",
                (last, j),
                f"tool '{rule.forbidden}' at index {j} is forbidden for {window_text(window)} after "
                f"'{rule.trigger}' (triggered at index {last})",
            )
        if m.match(call, trigger):
            last = j
            spanned.append(j)
    if last is None:
        return RuleEvaluation(rule, "not_exercised", (), f"'{rule.trigger}' never appeared, so nothing was forbidden")
    return RuleEvaluation(rule, "held", tuple(spanned))


def _eval(rule: Rule, calls: Sequence[SequenceCall], m: _Matcher, complete: bool) -> RuleEvaluation:
    k = rule.kind

    def held(span: Iterable[int]) -> RuleEvaluation:
        return RuleEvaluation(rule, "held", tuple(span))

    def bad(span: Iterable[int], why: str) -> RuleEvaluation:
        return RuleEvaluation(rule, "violated", tuple(span), why)

    def idle(why: str) -> RuleEvaluation:
        return RuleEvaluation(rule, "not_exercised", (), why)

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
            return bad(
                [t], f"tool '{rule.then}' was found (index {t}) but required preceding tool '{rule.first}' was missing"
            )
        if f > t:
            return bad(
                [f, t],
                f"tool '{rule.first}' appeared at index {f} but was required before tool '{rule.then}' (index {t})",
            )
        return held([f, t])

    if k == "never_after":
        if rule.window is not None:
            return _never_after_for(rule, calls, m, rule.window)
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
                return bad(
                    [idx], f"tool '{rule.tool}' appeared at index {idx} but must appear within first {within} calls"
                )
            return held([idx])
        if n >= within:
            return bad(
                range(n), f"tool '{rule.tool}' required within first {within} calls but not found (trace length: {n})"
            )
        if complete:
            return bad(
                range(n),
                f"tool '{rule.tool}' required within the first {within} calls but the run ended after {n} without it",
            )
        return idle(
            f"'{rule.tool}' has not appeared and the trace is {n} call(s) long, still within the {within}-call deadline"
        )

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
            return idle(
                f"'{rule.trigger}' fired at index {ti} and the trace may still satisfy the {within}-call deadline"
            )
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
        if not rule.strict and k_ < len(tools) and any(m.match(call, t) for t in tools[k_ + 1 :]):
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
    aliases: Aliases | None = None,
    *,
    partial: bool = True,
    patterns: bool = False,
) -> list[RuleEvaluation]:
    """One :class:`RuleEvaluation` per rule (no short-circuit). ``trace`` holds names or
    ``(name, args)`` pairs; ``partial`` means more calls may follow (open windows undecided);
    ``patterns`` reads selector tools and alias members as tool-name patterns (``*`` forms of
    docs/policy.md, "Tool-name patterns") and an array argument element by element, as wrap's
    flow rules do. A selector's ``server`` is matched against each call's ``server``, and a
    ``never_after`` with ``for`` reads each call's ``time`` (:class:`SequenceCall`)."""
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
