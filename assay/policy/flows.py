"""Flow rules of ``assay.yaml`` (docs/policy.md, "Flow rules"): deciding each call of a session
against them incrementally. Reading them is :mod:`assay.policy.flow_rules` (``parse_flows`` and
``FlowError`` are re-exported here); the per-kind rule states are :mod:`assay.policy.flow_kinds`.

:class:`FlowTracker` answers, for one session, whether a candidate call would make a rule
``violated``: exactly what ``evaluate_rules(history + [candidate], aliases, partial=True,
patterns=True)`` says, without walking the history again. Each rule keeps a small state that
:meth:`FlowTracker.enter` updates when a call goes to the server (a counter, a first index, a
cursor); a call a rule would violate is denied and never enters, so the history never violates
a rule. Which rules a tool name can touch is computed once per name (a bounded cache: names are
chosen by the client). A rule whose state makes every call matter (a ``require`` not yet met, an
``eventually`` still waiting, an ``after`` deadline running, a ``strict`` sequence under way) is
checked on every call; every other rule only on calls whose name it names.

A tracker belongs to one wrap (its ``server`` label: selectors naming another server are
resolved away when the rules compile, so they cost nothing per call). The wraps of one agent
session share one history (docs/wrap.md, "Shared sessions") by moving the state between their
trackers: :meth:`FlowTracker.export_state` and :meth:`FlowTracker.restore_state`. Only a policy
with a ``never_after`` that has ``for`` reads the time of a call.
"""

from __future__ import annotations

import hashlib
from typing import Any

from assay.policy.decision import Decision
from assay.policy.engine import DEFAULT_SERVER_ID
from assay.policy.flow_ends import how_it_ends, reset_hint
from assay.policy.flow_kinds import CompiledRule, Hits, Unreadable, compile_rule, readable
from assay.policy.flow_values import time_value
from assay.policy.flow_rules import FlowError, parse_flows
from assay.policy.model import FlowRule
from assay.policy.sequence_rules import Aliases, clock_value

__all__ = [
    "FlowError",
    "FlowTracker",
    "parse_flows",
    "unrunnable",
    "SEQUENCE_VIOLATION",
    "NAME_CACHE_LIMIT",
    "NAME_CACHE_MAX_LEN",
]

SEQUENCE_VIOLATION = "E_SEQUENCE_VIOLATION"
NAME_CACHE_LIMIT = 4096  # tool names whose rule hits are remembered; others are computed per call
# a longer name is never remembered: names come from the client, up to the frame limit, and 4,096
# remembered names of megabytes each would hold gigabytes (MCP tool names are 1 to 128 characters)
NAME_CACHE_MAX_LEN = 256

_Item = tuple[int, CompiledRule, Hits]  # (rule index, compiled rule, name hits)
_UNREADABLE = "an argument named by args_match could not be read as text"
_ORDER_CACHE_LIMIT = 1024
_NOT_RUN = "flow rules judge calls the server runs: "
_FORMAT = 1  # the version of export_state's layout


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

    ``violation(name, args, now)`` is ``(rule index, reason)`` of the first rule (file order)
    that history + [this call] violates, or ``None``; :meth:`check` is the same as a deny
    decision; :meth:`enter` records a call that went to the server. ``server`` is the label of
    the wrap the tracker decides in: a selector (or alias member) whose ``server`` pattern does
    not match it never matches here. ``now`` is read only by a ``never_after`` with ``for``; a
    time earlier than the latest entered call's (or not a finite number) stands still at it.

    :meth:`export_state` and :meth:`restore_state` move the state between trackers of the same
    rules (a shared session's wraps, each with its own ``server``); :meth:`armed` names the
    rules whose state is no longer the initial one.
    """

    __slots__ = (
        "rules",
        "server",
        "_compiled",
        "_cache",
        "_orders",
        "_sensitive",
        "_last_name",
        "_last",
        "n",
        "_timed",
        "_latest",
        "_dead",
        "_shape",
        "_replying",
        "reset",
    )

    def __init__(
        self,
        rules: tuple[FlowRule, ...],
        aliases: Aliases,
        *,
        server: str = DEFAULT_SERVER_ID,
        reset: str | None = None,
    ) -> None:
        self.rules = rules
        self.server = server
        # how the session's flow state is cleared, for a deny's reason (assay.policy.flow_ends):
        # `assay mcp session reset <key>`, or ALONE for a wrap that shares no session
        self.reset = reset_hint(None) if reset is None else reset
        self._compiled: tuple[CompiledRule, ...] = tuple(compile_rule(r.rule, aliases, server) for r in rules)
        # name -> the rules its name touches, in file order
        self._cache: dict[str, tuple[_Item, ...]] = {}
        # (name, sensitive rules) -> what to check for that name in that state
        self._orders: dict[tuple[str, tuple[int, ...]], tuple[_Item, ...]] = {}
        self._sensitive = tuple(i for i, c in enumerate(self._compiled) if c.sensitive)
        self._last_name: str | None = None  # the name of the last check, and its entry
        self._last: tuple[_Item, ...] = ()
        self.n = 0  # calls entered
        self._timed = tuple(c for c in self._compiled if c.TIMED)  # the rules that read the time
        self._replying = tuple(c for c in self._compiled if c.replies)  # rules with a response selector
        self._latest: float | None = None  # the time of the latest entered call (timed rules only)
        self._dead: tuple[int, ...] = ()  # the dead rules the name cache was built without
        shape = repr(([(r.rule, r.id) for r in rules], sorted(aliases.items())))
        self._shape = hashlib.sha256(shape.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if self._timed:  # only these read the time: the others keep the plain path
            self.__class__ = _TimedFlowTracker

    @classmethod
    def for_policy(cls, policy: Any, server: str = DEFAULT_SERVER_ID) -> "FlowTracker | None":
        """A tracker for ``policy``'s ``sequences`` in the wrap labelled ``server``, or ``None``
        when it has none."""
        if not policy.sequences:
            return None
        return cls(policy.sequences, policy.aliases, server=server)

    def _time(self, now: float) -> float:
        """The time of a call at ``now``: the latest entered call's when ``now`` is earlier or
        not a finite number (a clock going back stands still)."""
        latest, t = self._latest, clock_value(now)
        if t is not None and (latest is None or t > latest):
            return t
        return 0.0 if latest is None else latest

    def _set_time(self, now: float) -> float:
        t = self._time(now)
        for rule in self._timed:
            rule.now = t  # type: ignore[attr-defined]  # only timed rules have it
        return t

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
                    if key in args and args[key].__class__ is not str:  # a string is read as it is
                        try:
                            readable(args[key])
                        except Unreadable:
                            return i
        return None

    def violation(self, name: str, args: Any, now: float = 0.0) -> tuple[int, str] | None:
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
        except Unreadable:
            return i, _UNREADABLE
        bad = self._unreadable(entry, args)
        return None if bad is None else (bad, _UNREADABLE)

    def check(self, name: str, args: Any, decision: Decision, now: float = 0.0) -> Decision | None:
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
        except Unreadable:
            reason = _UNREADABLE
        if reason is None:
            bad = self._unreadable(self._last, args)
            if bad is None:
                return None
            i, reason = bad, _UNREADABLE
        flow = self.rules[i]
        text = flow.message if flow.message is not None else reason
        if reason is not _UNREADABLE:  # docs/policy.md, "How a deny ends"
            ends = how_it_ends(self._compiled[i], self.reset)
            if ends is not None:
                text = f"{text}; {ends}"
        contract = {"status": "deny", "error_code": SEQUENCE_VIOLATION, "tool": name, "rule": flow.id, "reason": text}
        return decision.denied(SEQUENCE_VIOLATION, text, contract, matched_rule=flow.id)

    unrunnable = staticmethod(unrunnable)

    def refuse(self, name: str, decision: Decision, text: str) -> Decision:
        """The deny of a call that no server would run (:func:`unrunnable` says why, ``text``):
        it must not enter the history, where it could stand for a call that ran (``rule`` is
        ``sequences``)."""
        contract = {
            "status": "deny",
            "error_code": SEQUENCE_VIOLATION,
            "tool": name,
            "rule": "sequences",
            "reason": text,
        }
        return decision.denied(SEQUENCE_VIOLATION, text, contract, matched_rule="sequences")

    def enter(self, name: str, args: Any, now: float = 0.0) -> None:
        """``name(args)`` went to the server at ``now``: it is call number ``n`` of the history."""
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
        except Unreadable:
            changed = True  # not reached after check: a call whose arguments cannot be read is denied
        if changed or died:
            self._sensitive = tuple(i for i, c in enumerate(self._compiled) if c.sensitive)
        if died:  # at most once per rule: the names it touched forget it
            self._forget()
        self.n = n + 1

    def respond(self, name: str, kinds: frozenset[str], now: float = 0.0) -> bool:
        """A result of the tool ``name`` came back (to this wrap) and wrap's inspection found
        ``kinds`` in it (``secrets``, ``injection``): the rules whose ``never_after`` trigger is a
        response selector that matches it are triggered, as if by the call it answers (docs/
        policy.md, "Flow rules"). Whether some rule has a response selector."""
        replying = self._replying
        if not replying or not kinds:
            return bool(replying)
        if self._timed:  # the response's time is the session's latest (a window starts at it)
            self._latest = self._set_time(now)
        n = self.n
        for rule in replying:
            rule.respond(name, kinds, n)
        self._sensitive = tuple(i for i, c in enumerate(self._compiled) if c.sensitive)
        self._last_name = None
        return True

    def _forget(self) -> None:
        """The name caches are built anew (the set of dead rules changed)."""
        self._cache.clear()
        self._orders.clear()
        self._last_name = None
        self._dead = tuple(i for i, c in enumerate(self._compiled) if c.dead)

    # ------------------------------------------------------------------ a shared session's state

    def export_state(self) -> list[Any]:
        """The state as plain values (lists, ints, floats, strings, booleans, ``None``):
        ``[format, rules digest, calls entered, latest time, [each rule's state]]``."""
        return [_FORMAT, self._shape, self.n, self._latest, [c.dump() for c in self._compiled]]

    def restore_state(self, state: list[Any] | None) -> None:
        """Take a state :meth:`export_state` gave (here or in a tracker of the same rules in
        another wrap); ``None`` is the fresh state. Raises ValueError or TypeError (and changes
        nothing) when ``state`` does not fit these rules."""
        compiled = self._compiled
        if state is None:
            n, latest, values = 0, None, [list(c.fresh) for c in compiled]
        else:
            if state.__class__ is not list or len(state) != 5:
                raise TypeError("a flow state is a list of 5 values")
            fmt, shape, n, latest, rules = state
            if fmt != _FORMAT or shape != self._shape:
                raise ValueError("the flow state is of other rules (or another format)")
            if n.__class__ is not int or n < 0:
                raise ValueError(f"the flow state's call count is not a count: {n!r}"[:200])
            latest = time_value(latest, n)
            if latest is not None and not self._timed:
                raise ValueError("the flow state has a time and these rules read none")
            if rules.__class__ is not list or len(rules) != len(compiled):
                raise ValueError("the flow state holds another number of rules")
            values = [c.parse(v, n) for c, v in zip(compiled, rules)]
            for c, v in zip(compiled, values):
                if c.TIMED and v[1] is not None and (latest is None or v[1] > latest):
                    raise ValueError("the flow state has a trigger later than its latest call")
        for c, v in zip(compiled, values):
            c.load(v)
        self.n, self._latest = n, latest
        self._sensitive = tuple(i for i, c in enumerate(compiled) if c.sensitive)
        self._last_name = None
        if tuple(i for i, c in enumerate(compiled) if c.dead) != self._dead:
            self._forget()

    def armed(self) -> tuple[str, ...]:
        """The ids of the rules whose state is no longer the initial one (a ``never_after``
        triggered, with ``for``: inside its window; a ``max_calls`` counting; a ``before``,
        ``after`` or ``sequence`` under way ...), in file order."""
        latest = 0.0 if self._latest is None else self._latest
        return tuple(self.rules[i].id for i, c in enumerate(self._compiled) if c.armed(latest))


class _TimedFlowTracker(FlowTracker):
    """A :class:`FlowTracker` with a ``never_after`` that has ``for``: each call first sets the
    time on those rules (the tracker of a policy without one never reads it)."""

    __slots__ = ()

    def violation(self, name: str, args: Any, now: float = 0.0) -> tuple[int, str] | None:
        self._set_time(now)
        return super().violation(name, args, now)

    def check(self, name: str, args: Any, decision: Decision, now: float = 0.0) -> Decision | None:
        self._set_time(now)
        return super().check(name, args, decision, now)

    def enter(self, name: str, args: Any, now: float = 0.0) -> None:
        self._latest = self._set_time(now)
        super().enter(name, args, now)
