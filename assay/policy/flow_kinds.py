"""The compiled flow rules, one class per rule kind (docs/policy.md, "Flow rules"): each keeps the
small state of its rule over one session's history and says whether a candidate call would
violate it, exactly as :func:`assay.policy.sequence.evaluate_rules` would over the whole history.
:class:`assay.policy.flows.FlowTracker` holds them and decides which to ask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from assay.policy.argregex import compile_arg_regex
from assay.policy.flow_values import (
    Check,
    Unreadable,
    args_ok,
    count_value,
    flag_value,
    index_value,
    names_for,
    readable,
    render,
    text_value,
    time_value,
)
from assay.policy.patterns import NameMatcher
from assay.policy.sequence_rules import Aliases, Rule, Selector, inside_window, window_text

__all__ = ["KINDS", "CompiledRule", "compile_rule", "Hits", "Unreadable", "readable", "render"]

Hits = tuple[bool, ...] | None  # the name matches of a rule's selectors for one call (None: none)


class CompiledRule(ABC):
    """One rule: its selectors (name matchers and compiled ``args_match``) and its state.

    ``hits`` (per call) is the tuple of name matches of the rule's selectors, or ``None`` when
    the name matches none of them. Each kind below adds ``violation(hits, name, args, n)`` (the
    reason ``evaluate_rules`` gives when history + [this call, index ``n``] violates the rule, or
    ``None``) and ``enter(hits, name, args, n)``; ``sensitive`` says that calls the rule does not
    name can violate it in its current state, ``dead`` that no call can any more (a ``require``
    met, an ``eventually`` met in time, a ``before`` whose ``first`` came, a finished
    ``sequence``), so it is no longer checked.

    A shared session moves the state between wraps (docs/policy.md, "Flow rules"): :meth:`dump`
    gives it as plain values (the fields ``STATE`` names), :meth:`parse` checks such values and
    :meth:`load` takes them, settling ``sensitive`` and ``dead`` from them."""

    __slots__ = ("names", "am", "any_am", "labels", "sensitive", "dead", "fresh", "replies")

    STATE: ClassVar[tuple[tuple[str, Check], ...]] = ()  # the fields an export holds, and their checks
    TIMED: ClassVar[bool] = False  # whether the rule reads the time (its ``now``, set by the tracker)

    def __init__(self, selectors: tuple[Selector, ...], aliases: Aliases, server: str) -> None:
        # a response selector matches no call; ``replies`` holds (its index, the tool names it
        # matches, the response kind) for :meth:`respond`
        self.names = tuple(
            NameMatcher(()) if s.response is not None else names_for(s, aliases, server) for s in selectors
        )
        self.replies = tuple(
            (i, names_for(s, aliases, server), s.response) for i, s in enumerate(selectors) if s.response is not None
        )
        self.am = tuple(
            None if s.args_match is None else tuple((k, compile_arg_regex(v)) for k, v in s.args_match)
            for s in selectors
        )
        self.any_am = any(a is not None for a in self.am)
        self.labels = tuple(str(s) for s in selectors)
        self.sensitive = False
        self.dead = False  # settled: no call can violate the rule any more
        self.fresh: list[Any] = []  # the initial state (compile_rule sets it)

    def name_hits(self, name: str) -> tuple[bool, ...] | None:
        hits = tuple(m(name) for m in self.names)
        return hits if any(hits) else None

    def hit(self, hits: tuple[bool, ...] | None, i: int, args: Any) -> bool:
        if hits is None or not hits[i]:
            return False
        am = self.am[i]
        return am is None or args_ok(am, args)

    def dump(self) -> list[Any]:
        """The rule's state as plain values (docs/policy.md, "Flow rules")."""
        return [getattr(self, f) for f, _ in self.STATE]

    def parse(self, values: Any, n: int) -> list[Any]:
        """The checked values of an exported state (``n`` calls entered); ValueError when they do
        not fit this rule."""
        if values.__class__ is not list or len(values) != len(self.STATE):
            raise ValueError(
                f"the state of a {type(self).__name__.strip('_').lower()} rule does not fit: {values!r}"[:200]
            )
        return [check(v, n) for (_f, check), v in zip(self.STATE, values)]

    def load(self, values: list[Any]) -> None:
        """Take a state :meth:`parse` checked, and settle ``sensitive`` and ``dead`` from it."""
        for (f, _check), v in zip(self.STATE, values):
            setattr(self, f, v)
        self.settle()

    @abstractmethod
    def settle(self) -> None:
        """``sensitive`` and ``dead`` as the state says (each kind says)."""

    def armed(self, now: float) -> bool:
        """Whether the state is no longer the initial one (``now``: the session's latest time)."""
        return bool(self.dump() != self.fresh)

    @abstractmethod
    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        """Why history + [this call] violates the rule, or None (each kind says)."""

    @abstractmethod
    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        """This call went to the server: the rule's state moves on (each kind says how)."""

    def replied(self, name: str, kinds: frozenset[str]) -> int | None:
        """The index of the response selector that a result of ``name`` holding ``kinds``
        matches, or None."""
        for i, names, kind in self.replies:
            if (kind in kinds or (kind == "findings" and kinds)) and names(name):
                return i
        return None

    def respond(self, name: str, kinds: frozenset[str], n: int) -> None:
        """A result of ``name`` came back holding ``kinds`` (``n`` calls entered, the last one
        at ``n - 1``): only a rule with a response selector moves on (each kind that has one)."""


class _Require(CompiledRule):
    __slots__ = ("seen",)
    STATE = (("seen", flag_value),)

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("tool"),), aliases, server)
        self.seen = False
        self.sensitive = True

    def settle(self) -> None:
        self.sensitive = not self.seen
        self.dead = self.seen

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        if self.seen or self.hit(hits, 0, args):
            return None
        return f"required tool '{self.labels[0]}' not found in trace"

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if not self.seen and self.hit(hits, 0, args):
            self.seen = True
            self.sensitive = False
            self.dead = True


class _Blocklist(CompiledRule):
    __slots__ = ("pattern", "hit_name")
    STATE = (("hit_name", text_value),)

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((), aliases, server)
        self.pattern = rule.pattern or ""
        self.hit_name: str | None = None  # a blocked call that entered anyway (never, when checked first)

    def settle(self) -> None:
        self.sensitive = self.hit_name is not None

    def name_hits(self, name: str) -> Hits:
        return (True,) if self.pattern in name else None

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        if self.hit_name is not None:
            return f"tool '{self.hit_name}' matches blocklist pattern '{self.pattern}'"
        if hits is not None:
            return f"tool '{name}' matches blocklist pattern '{self.pattern}'"
        return None

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if hits is not None and self.hit_name is None:
            self.hit_name = name
            self.sensitive = True


class _Before(CompiledRule):
    __slots__ = ("f", "t")  # first indices of `first` and of `then`
    STATE = (("f", index_value), ("t", index_value))

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("first"), rule.sel("then")), aliases, server)
        self.f: int | None = None
        self.t: int | None = None

    def settle(self) -> None:
        self.sensitive = self.t is not None and (self.f is None or self.f > self.t)
        self.dead = self.f is not None and not self.sensitive

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
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

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if self.f is None and self.hit(hits, 0, args):
            self.f = n
        if self.t is None and self.hit(hits, 1, args):
            self.t = n
        self.sensitive = self.t is not None and (self.f is None or self.f > self.t)
        self.dead = self.f is not None and not self.sensitive


class _NeverAfter(CompiledRule):
    __slots__ = ("trig", "hit_at")
    STATE = (("trig", index_value), ("hit_at", index_value))

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("trigger"), rule.sel("forbidden")), aliases, server)
        self.trig: int | None = None
        self.hit_at: int | None = None

    def settle(self) -> None:
        self.sensitive = self.hit_at is not None

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
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

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if self.trig is None:
            if self.hit(hits, 0, args):
                self.trig = n
        elif self.hit_at is None and self.hit(hits, 1, args):
            self.hit_at = n
            self.sensitive = True

    def respond(self, name: str, kinds: frozenset[str], n: int) -> None:
        if self.trig is None and n > 0 and self.replied(name, kinds) == 0:
            self.trig = n - 1  # the trigger stands at the latest call (the one answered)


class _NeverAfterFor(CompiledRule):
    """``never_after`` with ``for``: a ``forbidden`` call is denied while it comes less than
    ``window`` seconds after the latest ``trigger`` call (``last``, at ``since``). ``now`` is the
    time of the call being judged; the tracker sets it (only on these rules)."""

    __slots__ = ("last", "since", "hit_at", "hit_trig", "window", "now")
    TIMED = True
    STATE = (("last", index_value), ("since", time_value), ("hit_at", index_value), ("hit_trig", index_value))

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("trigger"), rule.sel("forbidden")), aliases, server)
        self.last: int | None = None
        self.since: float | None = None
        self.hit_at: int | None = None  # a forbidden call that entered anyway, and its trigger
        self.hit_trig: int | None = None
        self.window = rule.window or 0.0
        self.now = 0.0

    def parse(self, values: Any, n: int) -> list[Any]:
        last, since, hit_at, hit_trig = got = super().parse(values, n)
        if (last is None) is not (since is None) or (hit_at is None) is not (hit_trig is None):
            raise ValueError("the state of a never_after rule with for does not fit")
        return got

    def settle(self) -> None:
        self.sensitive = self.hit_at is not None

    def armed(self, now: float) -> bool:
        since = self.since
        return self.hit_at is not None or (since is not None and inside_window(now, since, self.window))

    def _reason(self, at: int, trig: int) -> str:
        trigger, forbidden = self.labels
        return (
            f"tool '{forbidden}' at index {at} is forbidden for {window_text(self.window)} after "
            f"'{trigger}' (triggered at index {trig})"
        )

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        if self.hit_at is not None and self.hit_trig is not None:
            return self._reason(self.hit_at, self.hit_trig)
        last, since = self.last, self.since
        if last is None or since is None or not self.hit(hits, 1, args):
            return None
        return self._reason(n, last) if inside_window(self.now, since, self.window) else None

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        last, since = self.last, self.since
        if (
            self.hit_at is None
            and last is not None
            and since is not None
            and self.hit(hits, 1, args)
            and inside_window(self.now, since, self.window)
        ):
            self.hit_at, self.hit_trig = n, last
            self.sensitive = True
        if self.hit(hits, 0, args):
            self.last, self.since = n, self.now

    def respond(self, name: str, kinds: frozenset[str], n: int) -> None:
        if n > 0 and self.replied(name, kinds) == 0:
            self.last, self.since = n - 1, self.now  # the window starts when the result came back


class _MaxCalls(CompiledRule):
    __slots__ = ("count", "max")
    STATE = (("count", count_value),)

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("tool"),), aliases, server)
        self.count = 0
        self.max = rule.limit("max")

    def settle(self) -> None:
        self.sensitive = self.count > self.max

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        count = self.count + 1 if self.hit(hits, 0, args) else self.count
        if count > self.max:
            return f"tool '{self.labels[0]}' exceeded max calls ({count} > {self.max})"
        return None

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if self.hit(hits, 0, args):
            self.count += 1
            self.sensitive = self.count > self.max


class _Eventually(CompiledRule):
    __slots__ = ("first", "within")
    STATE = (("first", index_value),)

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("tool"),), aliases, server)
        self.first: int | None = None
        self.within = rule.limit("within")
        self.sensitive = True

    def settle(self) -> None:
        self.sensitive = self.first is None or self.first >= self.within
        self.dead = not self.sensitive

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
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

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if self.first is None and self.hit(hits, 0, args):
            self.first = n
            self.sensitive = n >= self.within
            self.dead = not self.sensitive


class _After(CompiledRule):
    """``pending`` is the earliest trigger no call has answered yet. A call that answers it is
    inside the window of every later unanswered trigger too, so one index is the whole state."""

    __slots__ = ("pending", "within")
    STATE = (("pending", index_value),)

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__((rule.sel("trigger"), rule.sel("then")), aliases, server)
        self.pending: int | None = None
        self.within = rule.limit("within")

    def settle(self) -> None:
        self.sensitive = self.pending is not None

    def _reason(self, ti: int) -> str:
        trigger, then = self.labels
        return (
            f"tool '{then}' required within {self.within} calls after '{trigger}' "
            f"(triggered at index {ti}) and no call answered it by index {ti + self.within}"
        )

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        e, within = self.pending, self.within
        if e is not None and not (n <= e + within and self.hit(hits, 1, args)):
            return self._reason(e) if n + 1 > e + within else None
        if within == 0 and self.hit(hits, 0, args):  # a trigger whose window is already over
            return self._reason(n)
        return None

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        e = self.pending
        if e is not None and n <= e + self.within and self.hit(hits, 1, args):
            e = None
        if e is None and self.hit(hits, 0, args):
            e = n
        self.pending = e
        self.sensitive = e is not None


class _Sequence(CompiledRule):
    __slots__ = ("k", "strict", "broken")
    STATE = (("k", count_value), ("broken", text_value))

    def __init__(self, rule: Rule, aliases: Aliases, server: str) -> None:
        super().__init__(rule.tools, aliases, server)
        self.k = 0
        self.strict = rule.strict
        self.broken: str | None = None  # the reason of a step that broke the sequence

    def settle(self) -> None:
        size = len(self.names)
        self.sensitive = self.broken is not None or (self.strict and 0 < self.k < size)
        self.dead = self.broken is None and self.k >= size

    def _step(self, hits: Hits, name: str, args: Any, n: int) -> tuple[bool, str | None]:
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

    def violation(self, hits: Hits, name: str, args: Any, n: int) -> str | None:
        if self.broken is not None:
            return self.broken
        return self._step(hits, name, args, n)[1]

    def enter(self, hits: Hits, name: str, args: Any, n: int) -> None:
        if self.broken is not None:
            return
        advanced, reason = self._step(hits, name, args, n)
        if reason is not None:
            self.broken = reason
        elif advanced:
            self.k += 1
        self.sensitive = self.broken is not None or (self.strict and 0 < self.k < len(self.names))
        self.dead = self.broken is None and self.k >= len(self.names)


KINDS: dict[str, Callable[[Rule, Aliases, str], CompiledRule]] = {  # kind -> its constructor
    "require": _Require,
    "blocklist": _Blocklist,
    "before": _Before,
    "never_after": _NeverAfter,
    "max_calls": _MaxCalls,
    "eventually": _Eventually,
    "after": _After,
    "sequence": _Sequence,
}


def compile_rule(rule: Rule, aliases: Aliases, server: str) -> CompiledRule:
    """``rule`` compiled for a wrap whose label is ``server``, in its initial state."""
    kind = _NeverAfterFor if rule.kind == "never_after" and rule.window is not None else KINDS[rule.kind]
    compiled = kind(rule, aliases, server)
    compiled.fresh = compiled.dump()
    return compiled
