"""What waits for a server's answer when inspection reads it, and the session's value taint as
the shared session moves it (sans-IO; docs/policy.md, "Inspecting what comes back").

:class:`Watch` takes the place of a forwarded request's method in the pending table
(:mod:`assay.session.pending`) when its answer must be read before it is relayed
(:mod:`assay.session.inspection`); :func:`needs_inspector` says whether a policy asks for the
inspection room at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from assay.inspect.taint import Prepared, TaintSet
    from assay.policy.inspecting import Settings
    from assay.policy.model import Policy

__all__ = [
    "ANSWER_TAINT_BYTES",
    "ANSWER_TAINT_ENTRIES",
    "TaintState",
    "Watch",
    "flow_response_kinds",
    "needs_inspector",
]

# what one answer (or server message) adds to the value taint at most (docs/inspect.md, "Value
# taint"): its fingerprints are computed before the shared session's transaction, and merging
# them is then quick whatever the answer holds
ANSWER_TAINT_BYTES = 1 << 20  # bytes of secret values and tainted text fingerprinted
ANSWER_TAINT_ENTRIES = 8192  # fingerprints


class Watch(msgspec.Struct, gc=False):
    """A forwarded request whose answer is read before it is relayed: the method, the tool
    name (or resource URI), the settings, whether the request is of the 2026-07-28 era, and
    its id as the client sent it (wrap's own answer in place of the server's carries it, so
    every client matches it, whatever id spelling the server used); ``quiet``: the line gate
    the server side asks first about an answer that is a plain result (None: it reads every
    answer the long way; :meth:`assay.session.inspection.Inspector.watch`).

    A msgspec struct (made in C, and not tracked by the garbage collector: nothing it holds
    refers back to it): one is made for every call whose answer is read."""

    method: str
    target: str
    settings: Settings
    modern: bool
    request_id: Any = None
    quiet: Callable[[bytes], bool] | None = None


def needs_inspector(policy: Policy) -> bool:
    """Whether ``policy`` asks wrap to read answers or requests beyond ``tools/call``: an
    ``inspect``, ``resources`` or ``prompts`` section, or a flow rule with a response selector."""
    return (
        policy.inspect is not None
        or policy.resources is not None
        or policy.prompts is not None
        or bool(flow_response_kinds(policy))
    )


def flow_response_kinds(policy: Policy) -> frozenset[str]:
    kinds: set[str] = set()
    for flow in policy.sequences:
        trigger = getattr(flow.rule, "trigger", None)
        response = getattr(trigger, "response", None)
        if response is not None:
            kinds.add(response)
    return frozenset(kinds)


class TaintState:
    """The session's value taint (a :class:`~assay.inspect.taint.TaintSet`) as the shared
    session moves it: ``export_state`` and ``restore_state`` (docs/inspect.md, "Value taint")."""

    __slots__ = ("set", "key", "_export")

    def __init__(self, key: bytes) -> None:
        from assay.inspect.taint import TaintSet

        self.key = key
        self.set: TaintSet = TaintSet(key=key)
        self._export: bytes | None = None

    def changed(self) -> None:
        self._export = None

    def prepare(self, values: list[str], texts: list[str]) -> list[Prepared]:
        """The fingerprints of one answer's secret ``values``, then its tainted ``texts``, in
        that order, computed now (outside any transaction), at most :data:`ANSWER_TAINT_BYTES`
        bytes and :data:`ANSWER_TAINT_ENTRIES` fingerprints of them (the rest is not remembered)."""
        out: list[Prepared] = []
        budget, entries = ANSWER_TAINT_BYTES, ANSWER_TAINT_ENTRIES
        taint = self.set
        for text, is_value in [*((v, True) for v in values), *((t, False) for t in texts)]:
            if budget <= 0 or entries <= 0:
                break
            if not text:
                continue
            if len(text) > budget:
                text = text[:budget]
            budget -= len(text)
            got = taint.prepare_value(text) if is_value else taint.prepare_text(text, entries)
            if got.pres:
                if len(got.pres) > entries:
                    got = got._replace(pres=got.pres[:entries], fps=got.fps[:entries], lengths=got.lengths[:entries])
                entries -= len(got.pres)
                out.append(got)
        return out

    def add(self, prepared: list[Prepared], source: str) -> int:
        """Add what :meth:`prepare` computed (to the set as the store has it now)."""
        added = 0
        for got in prepared:
            added += self.set.add_prepared(got, source)
        if added:
            self._export = None
        return added

    def export_state(self) -> bytes:
        if self._export is None:
            self._export = self.set.export()
        return self._export

    def restore_state(self, data: bytes | None) -> None:
        from assay.inspect.taint import TaintSet

        if data is None:
            if len(self.set):
                self.set = TaintSet(key=self.key)
            self._export = None
            return
        if data == self.export_state():  # the flow or rate state changed, the taint did not: kept
            return
        self.set = TaintSet.restore(data, key=self.key)
        self._export = data
