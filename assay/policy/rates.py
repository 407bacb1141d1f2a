"""Per-tool rate limits (docs/policy.md, "Per-tool rate limits"): one session's counts, sans-IO.

A :class:`RateTracker` holds the ``limits.tools`` rules of a policy and what each has counted in
one session. The caller asks :meth:`RateTracker.check` before letting a call through and tells
:meth:`RateTracker.enter` when it did; only entered calls count, so a denied call (by any check)
never uses up a rule. Time is a float the caller passes in (wrap's session clock), never read
here.

The window of a rule with ``per`` is half-open: a call at time ``t`` is admitted when fewer than
``max_calls`` entered calls of the rule happened in ``(t - per, t]``. So a call exactly ``per``
seconds after the oldest call of a full window is admitted (that call has just left the window),
and any span of ``per`` seconds holds at most ``max_calls`` entered calls. A rule without
``per`` counts the whole session.

Bounds: a window keeps only its rule's ``max_calls`` most recent times (no more are ever needed
to decide; the loader allows at most 1,000,000 with ``per``), a session rule one integer, and
the cache of which rules match a tool name (names come from the client) at most
:data:`NAME_CACHE_MAX` names. A clock that goes backwards is read as standing still (the latest
time given to :meth:`RateTracker.check` or :meth:`RateTracker.enter`, for any name, is used), so
it can neither crash the tracker nor make calls leave a window early; a non-finite time is
ignored the same way.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from assay.policy.model import RateRule
from assay.policy.patterns import NameMatcher

if TYPE_CHECKING:
    from assay.policy.decision import Decision
    from assay.policy.model import Policy

__all__ = [
    "NAME_CACHE_MAX",
    "NAME_CACHE_MAX_LEN",
    "RateTracker",
    "duration_text",
    "limit_text",
    "rate_denied",
    "tracker_for",
]

NAME_CACHE_MAX = 4096  # tool names are client-controlled: bound the name -> rules cache
# ... and a name longer than this is never cached: names reach up to the frame limit, and 4,096 of
# megabytes each would hold gigabytes (MCP tool names are 1 to 128 characters)
NAME_CACHE_MAX_LEN = 256
_FORMAT = 1  # the version of export_state's layout


class RateTracker:
    """The ``limits.tools`` rules of one policy and their counts in one session."""

    __slots__ = ("rules", "_matchers", "_windows", "_counts", "_names", "_latest", "_shape")

    def __init__(self, rules: Iterable[RateRule]) -> None:
        self.rules: tuple[RateRule, ...] = tuple(rules)
        self._matchers = tuple(NameMatcher(rule.tools) for rule in self.rules)
        # per rule: the entered times still in its window (rules with ``per``), oldest first
        self._windows: tuple[deque[float], ...] = tuple(deque() for _ in self.rules)
        self._counts = [0] * len(self.rules)  # per rule: entered calls (rules without ``per``)
        self._names: dict[str, tuple[int, ...]] = {}
        self._latest: float | None = None
        shape = repr([(r.id, r.tools, r.max_calls, r.per) for r in self.rules])
        self._shape = hashlib.sha256(shape.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def rules_for(self, name: str) -> tuple[RateRule, ...]:
        """The rules that count calls of ``name``, in policy order."""
        return tuple(self.rules[i] for i in self._indexes(name))

    def _indexes(self, name: str) -> tuple[int, ...]:
        got = self._names.get(name)
        if got is None:
            got = tuple(i for i, matches in enumerate(self._matchers) if matches(name))
            if len(self._names) < NAME_CACHE_MAX and len(name) <= NAME_CACHE_MAX_LEN:
                self._names[name] = got
        return got

    def _time(self, now: float) -> float:
        """``now``, or the latest time seen when ``now`` is earlier (or not a finite number)."""
        latest = self._latest
        if isinstance(now, (int, float)) and math.isfinite(now) and (latest is None or now > latest):
            self._latest = latest = float(now)
        return 0.0 if latest is None else latest

    def _room(self, i: int, now: float) -> bool:
        rule = self.rules[i]
        if rule.per is None:
            return self._counts[i] < rule.max_calls
        window = self._windows[i]
        per = rule.per
        # a time has left the window when it is ``per`` or more before ``now``, in exact
        # arithmetic: ``now - per`` rounded could equal ``now`` (a ``per`` below the clock's
        # resolution), and a window standing still would then admit any number of calls
        while window:
            age = now - window[0]  # rounding never moves it across ``per``, only onto it
            if age < per:
                break
            if age == per:  # rare: fractions is loaded only here (wrap's start-up does without it)
                from fractions import Fraction

                if Fraction(now) - Fraction(window[0]) < Fraction(per):
                    break
            window.popleft()
        return len(window) < rule.max_calls

    def check(self, name: str, now: float) -> RateRule | None:
        """The first rule (policy order) that has no room for one more call of ``name`` at
        ``now``, or ``None`` when every rule that matches it has room. Counts nothing."""
        t = self._time(now)  # every call moves the tracker's clock, matched or not
        indexes = self._indexes(name)
        if not indexes:
            return None
        for i in indexes:
            if not self._room(i, t):
                return self.rules[i]
        return None

    def enter(self, name: str, now: float) -> None:
        """A call of ``name`` went through at ``now``: every rule that matches it counts it."""
        t = self._time(now)
        indexes = self._indexes(name)
        if not indexes:
            return
        for i in indexes:
            rule = self.rules[i]
            if rule.per is None:
                self._counts[i] += 1
                continue
            window = self._windows[i]
            window.append(t)
            self._room(i, t)  # drop what has left the window
            while len(window) > rule.max_calls:  # only the N most recent times decide
                window.popleft()

    def export_state(self) -> list[Any]:
        """The counts as plain values (docs/policy.md, "Per-tool rate limits"), for a session
        shared by several wraps: ``[format, rules digest, latest time, [per rule: its window's
        times, oldest first, or its session count]]``."""
        rules = [list(w) if r.per is not None else c for r, w, c in zip(self.rules, self._windows, self._counts)]
        return [_FORMAT, self._shape, self._latest, rules]

    def restore_state(self, state: list[Any] | None) -> None:
        """Take what :meth:`export_state` gave (here or in another wrap with the same rules);
        ``None`` is the fresh state. Raises ValueError or TypeError (and changes nothing) when
        ``state`` does not fit these rules."""
        windows: list[list[float]] = []
        counts: list[int] = []
        if state is None:
            latest, windows, counts = None, [[] for _ in self.rules], [0] * len(self.rules)
        else:
            if state.__class__ is not list or len(state) != 4:
                raise TypeError("a rate state is a list of 4 values")
            fmt, shape, latest, values = state
            if fmt != _FORMAT or shape != self._shape:
                raise ValueError("the rate state is of other rules (or another format)")
            latest = _finite(latest)
            if values.__class__ is not list or len(values) != len(self.rules):
                raise ValueError("the rate state holds another number of rules")
            for rule, v in zip(self.rules, values):
                if rule.per is None:
                    if v.__class__ is not int or v < 0:
                        raise ValueError(f"a rate count must be an integer, zero or more: {v!r}"[:200])
                    windows.append([])
                    counts.append(v)
                    continue
                if v.__class__ is not list or len(v) > rule.max_calls:
                    raise ValueError(f"a rate window is a list of at most {rule.max_calls} times")
                times: list[float] = []
                for t in v:
                    ft = _finite(t)
                    if ft is None or latest is None or ft > latest or (times and ft < times[-1]):
                        raise ValueError("a rate window's times must be in order and not after its latest time")
                    times.append(ft)
                windows.append(times)
                counts.append(0)
        self._latest = latest
        self._windows = tuple(deque(w) for w in windows)
        self._counts = counts

    def counted(self, rule_id: str, now: float) -> int:
        """How many entered calls rule ``rule_id`` counts at ``now`` (in its window, or in the
        session); for reports and tests."""
        for i, rule in enumerate(self.rules):
            if rule.id == rule_id:
                if rule.per is None:
                    return self._counts[i]
                self._room(i, self._time(now))
                return len(self._windows[i])
        raise KeyError(rule_id)


def _finite(value: Any) -> float | None:
    """A time of an exported state: ``None``, or a finite number (ValueError otherwise)."""
    if value is None:
        return None
    if value.__class__ not in (int, float):
        raise ValueError(f"a time must be a finite number: {value!r}"[:200])
    try:
        t = float(value)
    except OverflowError:
        raise ValueError("a time must be a finite number") from None
    if not math.isfinite(t):
        raise ValueError(f"a time must be a finite number: {value!r}")
    return t


def tracker_for(policy: "Policy") -> RateTracker | None:
    """A fresh tracker for one session of ``policy``, or ``None`` when it has no ``limits.tools``."""
    limits = policy.limits
    if limits is None or not limits.tools:
        return None
    return RateTracker(limits.tools)


def duration_text(seconds: float) -> str:
    """A window length as a policy would write it: ``1h``, ``5m``, ``60s``, ``90s``, ``1.5s``,
    ``250ms``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 120 and seconds % 60 == 0:  # a minute reads best as 60s
        return f"{int(seconds // 60)}m"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    if seconds < 1 and (seconds * 1000).is_integer():
        return f"{int(seconds * 1000)}ms"
    return f"{float(seconds)!r}s"


def limit_text(rule: RateRule) -> str:
    """The reason of a rate deny: which limit, for which tools, which rule."""
    calls = "call" if rule.max_calls == 1 else "calls"
    span = "per session" if rule.per is None else f"per {duration_text(rule.per)}"
    return f"Rate limit exceeded: at most {rule.max_calls} {calls} {span} for {', '.join(rule.tools)} (rule {rule.id})"


def rate_denied(decision: "Decision", tool: str, rule: RateRule) -> "Decision":
    """The deny of a call that ``rule`` has no room for (the allow ``decision`` it replaces)."""
    reason = limit_text(rule)
    contract = {"status": "deny", "error_code": "E_RATE_LIMIT", "tool": tool, "rule": rule.id, "reason": reason}
    return decision.denied("E_RATE_LIMIT", reason, contract, matched_rule=rule.id)
