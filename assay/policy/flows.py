"""Flow rules of ``assay.yaml`` (docs/policy.md, "Flow rules"): reading them, and deciding each
call against them incrementally.

The rules are the dialect of :mod:`assay.policy.sequence` (``require``, ``eventually``,
``max_calls``, ``before``, ``after``, ``never_after``, ``sequence``, ``blocklist``), with selector
tools and alias members read as tool-name patterns, an ``id`` and a ``message`` per rule.

:class:`FlowTracker` answers, for one session, whether a candidate call would make a rule
``violated``: exactly what ``evaluate_rules(history + [candidate], aliases, partial=True,
patterns=True)`` says, without walking the history again. Each rule keeps a small state that
:meth:`FlowTracker.enter` updates when a call goes to the server (a counter, a first index, a
cursor); a call a rule would violate is denied and never enters, so the history never violates
a rule. Which rules a tool name can touch is computed once per name (a bounded cache: names are
chosen by the client). A rule whose state makes every call matter (a ``require`` not yet met, an
``eventually`` still waiting, an ``after`` deadline running, a ``strict`` sequence under way) is
checked on every call; every other rule only on calls whose name it names.
"""

from __future__ import annotations

import json
from typing import Any

from assay.policy.argregex import ArgRegex, ArgRegexError, compile_arg_regex
from assay.policy.decision import Decision
from assay.policy.model import FlowRule
from assay.policy.patterns import NameMatcher
from assay.policy.sequence import RULE_KINDS, Rule, Selector
from assay.policy.yamlio import type_name

__all__ = ["FlowError", "FlowTracker", "parse_flows", "unrunnable", "SEQUENCE_VIOLATION", "NAME_CACHE_LIMIT", "NAME_CACHE_MAX_LEN"]

SEQUENCE_VIOLATION = "E_SEQUENCE_VIOLATION"
NAME_CACHE_LIMIT = 4096  # tool names whose rule hits are remembered; others are computed per call
# a longer name is never remembered: names come from the client, up to the frame limit, and 4,096
# remembered names of megabytes each would hold gigabytes (MCP tool names are 1 to 128 characters)
NAME_CACHE_MAX_LEN = 256
_U32_MAX = 2**32 - 1

# the fields of each rule type besides type, id and message; required unless optional
_FIELDS: dict[str, tuple[str, ...]] = {
    "require": ("tool",),
    "eventually": ("tool", "within"),
    "max_calls": ("tool", "max"),
    "before": ("first", "then"),
    "after": ("trigger", "then", "within"),
    "never_after": ("trigger", "forbidden"),
    "sequence": ("tools", "strict"),
    "blocklist": ("pattern",),
}
_OPTIONAL = {("after", "within"), ("sequence", "strict")}
_SELECTOR_FIELDS = ("tool", "first", "then", "trigger", "forbidden")


# ----------------------------------------------------------------------------------------------
# reading


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
        if key not in ("tool", "args_match"):
            raise FlowError("structure", f"{path}.{key}", "unknown selector key (a selector is a name or {tool, args_match})")
    if "tool" not in m:
        raise FlowError("structure", path, "missing field tool")
    if "args_match" not in m:
        raise FlowError("structure", path, "missing field args_match (write the bare name when no argument is matched)")
    tool = _name(m["tool"], f"{path}.tool")
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
    return Selector(tool, tuple(pairs))


def _u32(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise FlowError("structure", path, f"expected an unsigned 32-bit integer, got {type_name(value) if not isinstance(value, int) or isinstance(value, bool) else value}")
    return value


def _rule(value: Any, path: str, unknown: list[str]) -> tuple[Rule, str | None, str | None]:
    m = _mapping(value, path)
    if "type" not in m:
        raise FlowError("structure", path, "missing field type")
    kind = _string(m["type"], f"{path}.type")
    if kind not in RULE_KINDS:
        raise FlowError("validation", f"{path}.type", f"unknown rule type {kind!r} (expected one of {', '.join(RULE_KINDS)})")
    fields = _FIELDS[kind]
    for key in m:
        if key not in fields and key not in ("type", "id", "message"):
            unknown.append(f"{path}.{key}")
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
    if kind == "after" and "within" not in kw:
        kw["within"] = 1
    return Rule(kind, **kw), rule_id, message


def parse_flows(
    sequences: Any, aliases: Any, unknown: list[str]
) -> tuple[tuple[FlowRule, ...], dict[str, tuple[str, ...]]]:
    """The root ``sequences`` and ``aliases`` values (``None`` when absent) → the rules and the
    alias map. Unknown rule keys are appended to ``unknown`` as dotted paths; raises
    :class:`FlowError`."""
    alias_map: dict[str, tuple[str, ...]] = {}
    if aliases is not None:
        for key, members in _mapping(aliases, "aliases").items():
            where = f"aliases.{key}"
            if not key:
                raise FlowError("validation", "aliases", "an alias name must not be empty")
            if not isinstance(members, list):
                raise FlowError("structure", where, f"expected a list of tool names or patterns, got {type_name(members)}")
            if not members:
                raise FlowError("validation", where, "must list at least one tool name or pattern")
            alias_map[key] = tuple(_name(x, f"{where}[{i}]") for i, x in enumerate(members))
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


# ----------------------------------------------------------------------------------------------
# deciding


class _Unreadable(Exception):
    """An argument an ``args_match`` names could not be rendered as text."""


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError, OverflowError):
        raise _Unreadable from None


def _args_ok(am: tuple[tuple[str, ArgRegex], ...], args: Any) -> bool:
    if not isinstance(args, dict):
        return False
    for key, rx in am:
        if key not in args or not rx.search(_render(args[key])):
            return False
    return True


class _Compiled:
    """One rule: its selectors (name matchers and compiled ``args_match``) and its state.

    ``hits`` (per call) is the tuple of name matches of the rule's selectors, or ``None`` when
    the name matches none of them. Each kind below adds ``violation(hits, name, args, n)`` (the
    reason ``evaluate_rules`` gives when history + [this call, index ``n``] violates the rule, or
    ``None``) and ``enter(hits, name, args, n)``; ``sensitive`` says that calls the rule does not
    name can violate it in its current state, ``dead`` that no call can any more (a ``require``
    met, an ``eventually`` met in time, a ``before`` whose ``first`` came, a finished
    ``sequence``), so it is no longer checked."""

    __slots__ = ("names", "am", "any_am", "labels", "sensitive", "dead")

    def __init__(self, selectors: tuple[Selector, ...], aliases: dict[str, tuple[str, ...]]) -> None:
        self.names = tuple(NameMatcher(aliases.get(s.tool, (s.tool,))) for s in selectors)
        self.am = tuple(
            None if s.args_match is None else tuple((k, compile_arg_regex(v)) for k, v in s.args_match) for s in selectors
        )
        self.any_am = any(a is not None for a in self.am)
        self.labels = tuple(str(s) for s in selectors)
        self.sensitive = False
        self.dead = False  # settled: no call can violate the rule any more

    def name_hits(self, name: str) -> tuple[bool, ...] | None:
        hits = tuple(m(name) for m in self.names)
        return hits if any(hits) else None

    def hit(self, hits: tuple[bool, ...] | None, i: int, args: Any) -> bool:
        if hits is None or not hits[i]:
            return False
        am = self.am[i]
        return am is None or _args_ok(am, args)


class _Require(_Compiled):
    __slots__ = ("seen",)

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("tool"),), aliases)
        self.seen = False
        self.sensitive = True

    def violation(self, hits, name, args, n):
        if self.seen or self.hit(hits, 0, args):
            return None
        return f"required tool '{self.labels[0]}' not found in trace"

    def enter(self, hits, name, args, n):
        if not self.seen and self.hit(hits, 0, args):
            self.seen = True
            self.sensitive = False
            self.dead = True


class _Blocklist(_Compiled):
    __slots__ = ("pattern", "hit_name")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((), aliases)
        self.pattern = rule.pattern or ""
        self.hit_name: str | None = None  # a blocked call that entered anyway (never, when checked first)

    def name_hits(self, name):
        return (True,) if self.pattern in name else None

    def violation(self, hits, name, args, n):
        if self.hit_name is not None:
            return f"tool '{self.hit_name}' matches blocklist pattern '{self.pattern}'"
        if hits is not None:
            return f"tool '{name}' matches blocklist pattern '{self.pattern}'"
        return None

    def enter(self, hits, name, args, n):
        if hits is not None and self.hit_name is None:
            self.hit_name = name
            self.sensitive = True


class _Before(_Compiled):
    __slots__ = ("f", "t")  # first indices of `first` and of `then`

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("first"), rule.sel("then")), aliases)
        self.f: int | None = None
        self.t: int | None = None

    def violation(self, hits, name, args, n):
        t = self.t
        if t is None:
            if not self.hit(hits, 1, args):
                return None
            t = n
        f = self.f
        if f is None and self.hit(hits, 0, args):
            f = n
        first, then = self.labels
        if f is None:
            return f"tool '{then}' was found (index {t}) but required preceding tool '{first}' was missing"
        if f > t:
            return f"tool '{first}' appeared at index {f} but was required before tool '{then}' (index {t})"
        return None

    def enter(self, hits, name, args, n):
        if self.f is None and self.hit(hits, 0, args):
            self.f = n
        if self.t is None and self.hit(hits, 1, args):
            self.t = n
        self.sensitive = self.t is not None and (self.f is None or self.f > self.t)
        self.dead = self.f is not None and not self.sensitive


class _NeverAfter(_Compiled):
    __slots__ = ("trig", "hit_at")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("trigger"), rule.sel("forbidden")), aliases)
        self.trig: int | None = None
        self.hit_at: int | None = None

    def violation(self, hits, name, args, n):
        trig = self.trig
        if trig is None:
            return None
        hit = self.hit_at
        if hit is None:
            if not self.hit(hits, 1, args):
                return None
            hit = n
        trigger, forbidden = self.labels
        return f"tool '{forbidden}' at index {hit} is forbidden after '{trigger}' (triggered at index {trig})"

    def enter(self, hits, name, args, n):
        if self.trig is None:
            if self.hit(hits, 0, args):
                self.trig = n
        elif self.hit_at is None and self.hit(hits, 1, args):
            self.hit_at = n
            self.sensitive = True


class _MaxCalls(_Compiled):
    __slots__ = ("count", "max")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("tool"),), aliases)
        self.count = 0
        self.max = rule.limit("max")

    def violation(self, hits, name, args, n):
        count = self.count + 1 if self.hit(hits, 0, args) else self.count
        if count > self.max:
            return f"tool '{self.labels[0]}' exceeded max calls ({count} > {self.max})"
        return None

    def enter(self, hits, name, args, n):
        if self.hit(hits, 0, args):
            self.count += 1
            self.sensitive = self.count > self.max


class _Eventually(_Compiled):
    __slots__ = ("first", "within")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("tool"),), aliases)
        self.first: int | None = None
        self.within = rule.limit("within")
        self.sensitive = True

    def violation(self, hits, name, args, n):
        idx = self.first
        if idx is None and self.hit(hits, 0, args):
            idx = n
        within, tool = self.within, self.labels[0]
        if idx is not None:
            if idx >= within:
                return f"tool '{tool}' appeared at index {idx} but must appear within first {within} calls"
            return None
        if n + 1 >= within:
            return f"tool '{tool}' required within first {within} calls but not found (trace length: {n + 1})"
        return None

    def enter(self, hits, name, args, n):
        if self.first is None and self.hit(hits, 0, args):
            self.first = n
            self.sensitive = n >= self.within
            self.dead = not self.sensitive


class _After(_Compiled):
    """``pending`` is the earliest trigger no call has answered yet. A call that answers it is
    inside the window of every later unanswered trigger too, so one index is the whole state."""

    __slots__ = ("pending", "within")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__((rule.sel("trigger"), rule.sel("then")), aliases)
        self.pending: int | None = None
        self.within = rule.limit("within")

    def _reason(self, ti: int) -> str:
        trigger, then = self.labels
        return (
            f"tool '{then}' required within {self.within} calls after '{trigger}' "
            f"(triggered at index {ti}) and no call answered it by index {ti + self.within}"
        )

    def violation(self, hits, name, args, n):
        e, within = self.pending, self.within
        if e is not None and not (n <= e + within and self.hit(hits, 1, args)):
            return self._reason(e) if n + 1 > e + within else None
        if within == 0 and self.hit(hits, 0, args):  # a trigger whose window is already over
            return self._reason(n)
        return None

    def enter(self, hits, name, args, n):
        e = self.pending
        if e is not None and n <= e + self.within and self.hit(hits, 1, args):
            e = None
        if e is None and self.hit(hits, 0, args):
            e = n
        self.pending = e
        self.sensitive = e is not None


class _Sequence(_Compiled):
    __slots__ = ("k", "strict", "broken")

    def __init__(self, rule: Rule, aliases: dict[str, tuple[str, ...]]) -> None:
        super().__init__(rule.tools, aliases)
        self.k = 0
        self.strict = rule.strict
        self.broken: str | None = None  # the reason of a step that broke the sequence

    def _step(self, hits, name, args, n) -> tuple[bool, str | None]:
        k, size = self.k, len(self.names)
        if k >= size:
            return False, None
        if self.hit(hits, k, args):
            return True, None
        labels = self.labels
        if self.strict:
            if k > 0:
                return False, f"strict sequence violated: expected '{labels[k]}' at index {n} but found '{name}'"
            return False, None
        if hits is not None and any(self.hit(hits, j, args) for j in range(k + 1, size)):
            return False, f"sequence out of order: '{name}' at index {n} appears before '{labels[k]}'"
        return False, None

    def violation(self, hits, name, args, n):
        if self.broken is not None:
            return self.broken
        return self._step(hits, name, args, n)[1]

    def enter(self, hits, name, args, n):
        if self.broken is not None:
            return
        advanced, reason = self._step(hits, name, args, n)
        if reason is not None:
            self.broken = reason
        elif advanced:
            self.k += 1
        self.sensitive = self.broken is not None or (self.strict and 0 < self.k < len(self.names))
        self.dead = self.broken is None and self.k >= len(self.names)


_KINDS = {
    "require": _Require,
    "blocklist": _Blocklist,
    "before": _Before,
    "never_after": _NeverAfter,
    "max_calls": _MaxCalls,
    "eventually": _Eventually,
    "after": _After,
    "sequence": _Sequence,
}


_Item = tuple[int, Any, "tuple[bool, ...] | None"]  # (rule index, compiled rule, name hits)
_UNREADABLE = "an argument named by args_match could not be read as text"
_ORDER_CACHE_LIMIT = 1024
_NOT_RUN = "flow rules judge calls the server runs: "


def unrunnable(frame: dict[str, Any]) -> str | None:
    """Why the MCP SDKs would refuse the ``tools/call`` ``frame`` without running the tool (the
    deny's reason), or ``None`` when it is a call they run. Such a call must not enter the
    history, where it would stand for a call that ran: a ``run_tests`` sent as a notification,
    or with ``arguments: [1]``, would let ``deploy`` through ``before: run_tests -> deploy``."""
    if frame.get("jsonrpc") != "2.0":
        return _NOT_RUN + 'a tools/call needs "jsonrpc": "2.0"'
    if frame.get("id").__class__ not in (int, str):  # absent (a notification), null, a bool, 1.5
        return _NOT_RUN + "a tools/call needs an integer or string id"
    params = frame.get("params")
    if params.__class__ is not dict or params.get("name").__class__ is not str:
        return _NOT_RUN + "a tools/call needs params with a string name"
    if "arguments" in params and params["arguments"].__class__ is not dict:
        return _NOT_RUN + "the arguments of a tools/call must be an object"
    if "_meta" in params and params["_meta"].__class__ is not dict:
        return _NOT_RUN + "the _meta of a tools/call must be an object"
    return None


class FlowTracker:
    """The flow-rule state of one session.

    ``violation(name, args)`` is ``(rule index, reason)`` of the first rule (file order) that
    history + [this call] violates, or ``None``; :meth:`check` is the same as a deny decision;
    :meth:`enter` records a call that went to the server.
    """

    __slots__ = ("rules", "_compiled", "_cache", "_orders", "_sensitive", "_last_name", "_last", "n")

    def __init__(self, rules: tuple[FlowRule, ...], aliases: dict[str, tuple[str, ...]]) -> None:
        self.rules = rules
        self._compiled: tuple[Any, ...] = tuple(_KINDS[r.rule.kind](r.rule, aliases) for r in rules)
        # name -> the rules its name touches, in file order
        self._cache: dict[str, tuple[_Item, ...]] = {}
        # (name, sensitive rules) -> what to check for that name in that state
        self._orders: dict[tuple[str, tuple[int, ...]], tuple[_Item, ...]] = {}
        self._sensitive = tuple(i for i, c in enumerate(self._compiled) if c.sensitive)
        self._last_name: str | None = None  # the name of the last check, and its entry
        self._last: tuple[_Item, ...] = ()
        self.n = 0  # calls entered

    @classmethod
    def for_policy(cls, policy: Any) -> "FlowTracker | None":
        """A tracker for ``policy``'s ``sequences``, or ``None`` when it has none."""
        if not policy.sequences:
            return None
        return cls(policy.sequences, policy.aliases)

    def _touch(self, name: str) -> tuple[_Item, ...]:
        entry = self._cache.get(name)
        if entry is None:
            items = []
            for i, c in enumerate(self._compiled):
                if c.dead:
                    continue
                h = c.name_hits(name)
                if h is not None:
                    items.append((i, c, h))
            entry = tuple(items)
            if len(self._cache) < NAME_CACHE_LIMIT and len(name) <= NAME_CACHE_MAX_LEN:
                self._cache[name] = entry
        return entry

    def _order(self, name: str, entry: tuple[_Item, ...]) -> tuple[_Item, ...]:
        """The touched rules and the rules every call matters to, in file order."""
        sensitive = self._sensitive
        key = (name, sensitive)
        order = self._orders.get(key)
        if order is None:
            items: dict[int, _Item] = {j: (j, self._compiled[j], None) for j in sensitive}
            items.update((item[0], item) for item in entry)
            order = tuple(items[i] for i in sorted(items))
            if len(self._orders) < _ORDER_CACHE_LIMIT and len(name) <= NAME_CACHE_MAX_LEN:
                self._orders[key] = order
        return order

    @staticmethod
    def _unreadable(entry: tuple[_Item, ...], args: Any) -> int | None:
        """The first rule in ``entry`` that :meth:`enter` would fail to read ``args`` for: an
        ``args_match`` argument of a selector the name matches that cannot be rendered (a
        rule's ``violation`` may not have looked at it). Such a call is denied, never entered
        halfway."""
        if args.__class__ is not dict:
            return None
        for i, rule, hits in entry:
            if hits is None or not rule.any_am:
                continue
            for j, am in enumerate(rule.am):
                if am is None or not hits[j]:
                    continue
                for key, _rx in am:
                    if key in args:
                        try:
                            _render(args[key])
                        except _Unreadable:
                            return i
        return None

    def violation(self, name: str, args: Any) -> tuple[int, str] | None:
        entry = self._cache.get(name)
        if entry is None:
            entry = self._touch(name)
        self._last_name, self._last = name, entry
        order = self._order(name, entry) if self._sensitive else entry
        n = self.n
        try:
            for i, rule, hits in order:
                reason = rule.violation(hits, name, args, n)
                if reason is not None:
                    return i, reason
        except _Unreadable:
            return i, _UNREADABLE
        bad = self._unreadable(entry, args)
        return None if bad is None else (bad, _UNREADABLE)

    def check(self, name: str, args: Any, decision: Decision) -> Decision | None:
        """The deny of a call that would violate a rule (``E_SEQUENCE_VIOLATION``, the rule id in
        ``matched_rule`` and the payload), or ``None`` when every rule still holds."""
        entry = self._cache.get(name)
        if entry is None:
            entry = self._touch(name)
        self._last_name, self._last = name, entry
        if self._sensitive:
            entry = self._order(name, entry)
        elif not entry:  # the usual call: no rule can object
            return None
        n = self.n
        reason = None
        try:
            for i, rule, hits in entry:  # violation(), inlined: this is every call's path
                reason = rule.violation(hits, name, args, n)
                if reason is not None:
                    break
        except _Unreadable:
            reason = _UNREADABLE
        if reason is None:
            bad = self._unreadable(self._last, args)
            if bad is None:
                return None
            i, reason = bad, _UNREADABLE
        rule = self.rules[i]
        text = rule.message if rule.message is not None else reason
        contract = {"status": "deny", "error_code": SEQUENCE_VIOLATION, "tool": name, "rule": rule.id, "reason": text}
        return decision.denied(SEQUENCE_VIOLATION, text, contract, matched_rule=rule.id)

    unrunnable = staticmethod(unrunnable)

    def refuse(self, name: str, decision: Decision, text: str) -> Decision:
        """The deny of a call that no server would run (:func:`unrunnable` says why, ``text``):
        it must not enter the history, where it could stand for a call that ran (``rule`` is
        ``sequences``)."""
        contract = {"status": "deny", "error_code": SEQUENCE_VIOLATION, "tool": name, "rule": "sequences", "reason": text}
        return decision.denied(SEQUENCE_VIOLATION, text, contract, matched_rule="sequences")

    def enter(self, name: str, args: Any) -> None:
        """``name(args)`` went to the server: it is call number ``n`` of the history."""
        entry = self._last if name == self._last_name else self._touch(name)
        n = self.n
        changed = died = False
        try:
            for _i, rule, hits in entry:
                before = rule.sensitive
                rule.enter(hits, name, args, n)
                if rule.sensitive is not before:
                    changed = True
                if rule.dead:
                    died = True
        except _Unreadable:
            changed = True  # not reached after check: a call whose arguments cannot be read is denied
        if changed or died:
            self._sensitive = tuple(i for i, c in enumerate(self._compiled) if c.sensitive)
        if died:  # at most once per rule: the names it touched forget it
            self._cache.clear()
            self._orders.clear()
            self._last_name = None
        self.n = n + 1
