"""THE list of the decision pipeline's guards, and the one function that builds them
(docs/architecture.md, "Adding a guard").

Every surface that judges a ``tools/call`` builds its guards here, from the policy and what the
surface knows (a :class:`GuardContext`): wrap's session (:mod:`assay.session.session`),
``assay mcp policy explain`` (:mod:`assay.policy.explain`) and the server's ``assay_check_args``
(:mod:`assay.server.tools.check_args`). :data:`REGISTRY` names one module per guard, in the
pipeline's order (docs/policy.md, "Evaluation and reason codes"); each module has

- ``NAME``: a stable name (the key of its shared state in a shared session's store: never
  rename one that keeps state);
- ``build(ctx) -> Built | None``: the guard for this policy and surface (``None``: the policy
  asks for nothing it checks, or the surface does not run it). A :class:`Built` holds the
  :class:`~assay.policy.pipeline.Guard`, the shared state the guard keeps (a :class:`Part`:
  export to a msgpack-able value, restore from one; docs/wrap.md, "Shared sessions"), whether it
  *settles* (the approval step: last, never on a re-check) and the object the surface may need
  (``tracker``: the flow tracker the inspection room moves, for instance).

A new guard is one module and one line in :data:`REGISTRY`. Modules are imported when a
pipeline is built (a guard module is small; what it builds is imported only when the policy uses
it). Plain code over values: no I/O.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from assay.policy.engine import DEFAULT_SERVER_ID
from assay.policy.shared import Part

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.policy.pipeline import Guard
    from assay.policy.state import SessionState

__all__ = ["REGISTRY", "Built", "GuardContext", "Guards", "Part", "Surface", "build_guards"]

# the guards after the policy engine, in order (one line each: the module that builds it)
REGISTRY: list[str] = [
    "assay.policy.guards.outbound",  # what a call sends out (docs/inspect.md)
    "assay.policy.guards.baseline",  # the declared baseline (docs/wrap.md, "Declared baseline")
    "assay.policy.guards.rates",  # per-tool rate limits (docs/policy.md, "Per-tool rate limits")
    "assay.policy.guards.flows",  # flow rules (docs/policy.md, "Flow rules")
    "assay.policy.guards.taint",  # the value taint: state only (docs/inspect.md, "Value taint")
    "assay.policy.guards.approvals",  # approvals that cannot be asked, settled (docs/wrap.md, "Approvals")
]


class Surface(enum.Enum):
    """Who builds the pipeline: wrap's session, ``policy explain`` (the first call of a fresh
    session) or the server's ``assay_check_args`` (one call, no session)."""

    WRAP = "wrap"
    EXPLAIN = "explain"
    CHECK = "check"


@dataclass(frozen=True, slots=True)
class GuardContext:
    """What a guard may be built from: the policy, the surface, the server's label, the
    session's counters and clock, and the objects only wrap's session has (each ``None``
    elsewhere): the shared session's key (how a flow deny ends), the declared baseline, the
    inspection room that judges what a call sends out, the value taint, and the approvals
    room (enforce mode, when the policy asks for approvals)."""

    policy: Policy
    surface: Surface
    server: str = DEFAULT_SERVER_ID
    state: SessionState | None = None
    clock: Callable[[], float] | None = None
    session_key: str | None = None
    baseline: Any = None
    outbound: Any = None
    taint: Any = None
    asker: Any = None


class Built(NamedTuple):
    """What one guard module built: the guard (or ``None``: it keeps state, checks nothing),
    its shared state, whether it settles (the approval step) and the object the surface may
    need (``tracker``)."""

    guard: Guard | None = None
    part: Part | None = None
    settles: bool = False
    tracker: Any = None


@dataclass(frozen=True, slots=True)
class Guards:
    """The guards of one pipeline, built: ``checks`` in order (the ones a re-check runs too),
    ``approvals`` (the settling step, or ``None``), the shared ``parts``, and each module's
    :class:`Built` by name."""

    checks: tuple[Guard, ...]
    approvals: Guard | None
    parts: tuple[Part, ...]
    built: dict[str, Built]

    def tracker(self, name: str) -> Any:
        """The ``tracker`` of guard ``name`` (``None`` when it was not built)."""
        got = self.built.get(name)
        return None if got is None else got.tracker


def build_guards(ctx: GuardContext) -> Guards:
    """Every guard of :data:`REGISTRY` that ``ctx`` asks for, in order."""
    checks: list[Guard] = []
    approvals: Guard | None = None
    parts: list[Part] = []
    built: dict[str, Built] = {}
    for module_name in REGISTRY:
        module = importlib.import_module(module_name)
        got: Built | None = module.build(ctx)
        if got is None:
            continue
        name: str = module.NAME
        if name in built:
            raise ValueError(f"two guards are named {name!r}")
        built[name] = got
        if got.part is not None:
            if got.part.name != name:
                raise ValueError(f"guard {name!r} keeps a state named {got.part.name!r}")
            parts.append(got.part)
        if got.guard is None:
            continue
        if got.settles:
            if approvals is not None:
                raise ValueError("two guards settle approvals")
            approvals = got.guard
        else:
            checks.append(got.guard)
    return Guards(tuple(checks), approvals, tuple(parts), built)
