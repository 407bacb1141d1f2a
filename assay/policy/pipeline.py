"""One call's decision: the policy engine, then the session's guards, in one pipeline.

Every surface that judges a ``tools/call`` against ``assay.yaml`` goes through :class:`Pipeline`:
wrap's session (with its guards: the declared baseline, per-tool rate limits, flow rules,
approvals) and the server's ``assay_check_args`` (no session state, no guards). (The server's
``assay_policy_decide`` judges a name against its own blocklist dialect, docs/server.md,
"assay_policy_decide", not against the engine.) The order is the one docs/policy.md, "Evaluation
and reason codes", describes:

1. the policy engine (:func:`assay.policy.engine.evaluate`: pins, session limits, deny, allow,
   schemas, paths); it counts the call in the session's counters (the only place that does);
2. each guard in turn, each seeing only a decision every check before it let through;
3. the approval guard last (when the policy asks for approvals and a person can be asked): it
   settles a call that needs a person's approval but cannot be asked, or leaves
   ``approval_state`` ``required``; then :meth:`Pipeline.ask`, the asking step, asks (the
   effects that ask go to the caller's list) and holds the call.

The guards of each surface are built by one function, :func:`assay.policy.guards.build_guards`
(the registry: one module per guard).

A guard has one shape (:class:`Guard`): ``check`` looks at a call and the decision so far and
returns the decision to go on with (``None``: no objection); ``enter`` is told that a call went
to the server (its history, its rate windows). Guards hold their own state; the pipeline holds
the order. A new check (shared session state, response inspection) is a new guard, not a new
branch in the session.

Plain code over values: no I/O, and time is the ``now`` each call is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from assay.policy.decision import ApprovalState, Decision, Outcome
from assay.policy.engine import DEFAULT_SERVER_ID, SessionState, evaluate

if TYPE_CHECKING:
    from assay.policy.flows import FlowTracker
    from assay.policy.model import Policy
    from assay.policy.rates import RateTracker
    from assay.policy.shared import SharedSession

__all__ = ["Call", "FlowGuard", "Guard", "Pipeline", "RateGuard", "store_failed"]

_DENY = Outcome.DENY  # bound once: an enum's class attribute costs more than the compare
_REQUIRED = ApprovalState.REQUIRED


class Call(msgspec.Struct, gc=False, repr_omit_defaults=True):
    """One ``tools/call`` as the pipeline sees it: the tool's name, its arguments (``None`` when
    absent), the server it goes to (wrap's ``--label``) and, in wrap, the whole JSON-RPC frame
    (guards that judge the frame's shape read it; ``None`` elsewhere).

    A msgspec Struct: built in C, a third of what a plain class with ``__init__`` costs on every
    call's path. Not tracked by the garbage collector (it never takes part in a cycle: nothing
    it holds refers back to it)."""

    name: str
    arguments: Any
    server: str = DEFAULT_SERVER_ID
    frame: dict[str, Any] | None = None


class Guard(Protocol):
    """One check after the policy engine."""

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        """The decision to go on with when this guard objects or settles something, else None.
        Never called with a deny."""

    def enter(self, call: Call, now: float) -> None:
        """``call`` went to the server at ``now`` (after every check let it through)."""


class Pipeline:
    """The engine and the guards of one session (or of one stateless check).

    ``state`` is the session's :class:`SessionState` (counters, tool identities), or ``None`` for
    a check with no session (then limits bite only at 0, and pins are not compared). ``guards``
    run in order after the engine; ``approvals`` (or ``None``) runs last, and not on a re-check.
    ``clock`` gives the ``now`` of a call when the caller passes none; it is read only when
    some guard runs (``guarded``), so a session without guards never reads it.

    ``shared`` (or ``None``) is the wrap's side of a shared agent session
    (:class:`assay.policy.shared.SharedSession`, docs/wrap.md, "Shared sessions"): then the
    caller has loaded the session's state into the trackers and counters (the store's
    transaction is open) before :meth:`decide` or :meth:`recheck`, and saves it after
    :meth:`enter` (the wrap's call path: :mod:`assay.session.calls`); the pipeline itself never
    speaks to the store. ``problem`` (the store's failure to open) denies the call
    (``E_SESSION_STATE``); each new cause is put in :attr:`notices` once (:meth:`told`), for the
    caller's stderr line. The clock is then the wall clock (the session's windows are compared
    across processes).
    """

    __slots__ = ("policy", "state", "guards", "approvals", "clock", "guarded", "_all", "shared", "notices", "_said")

    def __init__(
        self,
        policy: Policy,
        state: SessionState | None = None,
        guards: Sequence[Guard] = (),
        approvals: Guard | None = None,
        clock: Callable[[], float] | None = None,
        shared: SharedSession | None = None,
    ) -> None:
        self.policy = policy
        self.state = state
        self.guards: tuple[Guard, ...] = tuple(guards)
        self.approvals = approvals
        self.clock = clock
        self._all: tuple[Guard, ...] = self.guards + ((approvals,) if approvals is not None else ())
        self.shared = shared
        self.notices: list[str] = []  # store failures not yet told (each cause once)
        self._said: str | None = None
        # whether decide and enter reach any guard (or the shared session's store)
        self.guarded = bool(self._all) or shared is not None

    def _now(self) -> float:
        clock = self.clock
        if clock is None:
            raise TypeError("Pipeline: a time is needed (no now given and no clock)")
        return clock()

    def decide(self, call: Call, now: float | None = None, problem: str | None = None) -> Decision:
        """Judge one call: the engine (which counts it), then every guard until one denies.
        ``problem``: the shared session's store could not be opened (the call is denied)."""
        if self.shared is not None:
            return self._shared_decide(call, self._now() if now is None else now, problem)
        decision = evaluate(self.policy, call.name, call.arguments, self.state, server_id=call.server)
        if decision.outcome is _DENY or not self.guarded:
            return decision
        return _through(self._all, call, decision, self._now() if now is None else now)

    def recheck(self, call: Call, held: Decision, now: float | None = None, problem: str | None = None) -> Decision:
        """A held call a person accepted, judged again at the moment of the answer: what the
        engine reads (pins, symlinks) and other calls may have changed meanwhile. The engine runs
        on a view of the state with its counters at zero (the call was counted when it was
        asked and keeps its place: neither counted twice nor denied for requests that came
        after it); then the guards, from ``held`` (the allow the call was held with). The
        approval guard does not run again. Nothing of the session's state changes here.
        ``problem``: as for :meth:`decide`."""
        state = self.state
        view = None if state is None else state.uncounted()
        fresh = evaluate(self.policy, call.name, call.arguments, view, server_id=call.server)
        if problem is not None:
            return store_failed(fresh, call.name, problem)
        if fresh.outcome is _DENY:
            return fresh
        if not self.guards:
            return held
        return _through(self.guards, call, held, self._now() if now is None else now)

    def ask(self, call: Call, decision: Decision, out: list[Any]) -> Decision | None:
        """The asking step after :meth:`decide`: a call the approval guard left ``required``
        is asked (the approval guard's ``ask``: the effects that ask are appended to ``out``).
        None: the call is held until the person answers (nothing entered, nothing recorded);
        else the decision to go on with (``decision`` itself when nobody is asked: no approval
        step, a deny, or an approval already settled)."""
        approvals = self.approvals
        if approvals is None or decision.approval_state is not _REQUIRED or decision.outcome is _DENY:
            return decision
        asking = getattr(approvals, "ask", None)
        if asking is None:
            return decision
        got: Decision | None = asking(call, decision, out)
        return got

    def enter(self, call: Call, now: float | None = None) -> None:
        """A call the pipeline let through goes to the server (in a dry run too: it then
        predicts what enforcing would do): every guard records it (a shared session's caller
        then saves the state)."""
        if not self._all:
            return
        if now is None:
            now = self._now()
        for guard in self._all:
            guard.enter(call, now)

    def told(self, problem: str | None) -> str | None:
        """``problem`` (the shared session's store's failure, or None), put in
        :attr:`notices` when it is a new cause."""
        if problem != self._said:
            self._said = problem
            if problem is not None:
                self.notices.append(problem)
        return problem

    def _shared_decide(self, call: Call, now: float, problem: str | None) -> Decision:
        decision = evaluate(self.policy, call.name, call.arguments, self.state, server_id=call.server)
        if problem is not None:
            return store_failed(decision, call.name, problem)
        if decision.outcome is _DENY or not self._all:
            return decision
        return _through(self._all, call, decision, now)

    def update(self, change: Callable[[float], bool], now: float | None = None) -> bool:
        """Change the session's state outside a call: when a result came back, ``change(now)``
        moves the trackers (flow rules with a response selector, the value taint) and says
        whether anything changed. A shared session's caller runs it inside the store's
        transaction (loading the session's state first, saving it after)."""
        return change(self._now() if now is None else now)

    def note_request(self) -> None:
        """A client request that is not ``tools/call`` (counted for ``limits.max_requests_total``)."""
        if self.state is not None:
            self.state.note_request()

    def defer(self) -> None:
        """The call just decided is asked in two rounds (a 2026-07-28-era approval): it counts
        once against ``limits.max_tool_calls_total``, at its retry; the first round stays a
        request for ``limits.max_requests_total``."""
        if self.state is not None:
            self.state.defer_call()


def store_failed(decision: Decision, tool: str, cause: str) -> Decision:
    """The deny of a call the shared session's store could not judge (``E_SESSION_STATE``):
    the guard fails closed."""
    from assay.policy.shared import SESSION_STATE

    reason = f"Shared session state unavailable: {cause}"
    contract = {"status": "deny", "error_code": SESSION_STATE, "tool": tool, "reason": reason}
    return decision.denied(SESSION_STATE, reason, contract, matched_rule="session")


def _through(guards: tuple[Guard, ...], call: Call, decision: Decision, now: float) -> Decision:
    """``decision`` after each guard in turn; the first deny ends the run."""
    for guard in guards:
        changed = guard.check(call, decision, now)
        if changed is not None:
            decision = changed
            if decision.outcome is _DENY:
                break
    return decision


class RateGuard:
    """Per-tool rate limits (``limits.tools``) as a guard: a :class:`RateTracker` of the session."""

    __slots__ = ("tracker",)

    def __init__(self, tracker: RateTracker) -> None:
        self.tracker = tracker

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        rule = self.tracker.check(call.name, now)
        if rule is None:
            return None
        from assay.policy.rates import rate_denied  # loaded with the tracker; kept off start-up

        return rate_denied(decision, call.name, rule)

    def enter(self, call: Call, now: float) -> None:
        self.tracker.enter(call.name, now)


class FlowGuard:
    """The flow rules (``sequences``) as a guard: a :class:`FlowTracker` of the session. A call
    whose frame the MCP SDKs would refuse without running it is denied: it must not enter the
    history, where it would stand for a call that ran."""

    __slots__ = ("tracker",)

    def __init__(self, tracker: FlowTracker) -> None:
        self.tracker = tracker

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        tracker = self.tracker
        if call.frame is not None:
            refused = tracker.unrunnable(call.frame)
            if refused is not None:
                return tracker.refuse(call.name, decision, refused)
        return tracker.check(call.name, call.arguments, decision, now)

    def enter(self, call: Call, now: float) -> None:
        self.tracker.enter(call.name, call.arguments, now)

    def respond(self, name: str, kinds: frozenset[str], now: float) -> bool:
        """A result of ``name`` held ``kinds``: the rules with a response selector move on."""
        return self.tracker.respond(name, kinds, now)
