"""The call path's trips to the shared session's store (sans-IO; docs/wrap.md, "Shared
sessions"): a call, a held call's recheck or an answer's merge is queued as a :class:`Job`, one
transaction at a time; the job is decided at once on what the last transaction left and saved in
one round trip (:class:`~assay.session.effects.StoreAttempt`), or in a transaction opened first
(:class:`~assay.session.effects.StoreBegin`, then :class:`~assay.session.effects.StoreCommit`),
and the shell's answers (:meth:`StoreTrip.attempted`, :meth:`StoreTrip.begun`,
:meth:`StoreTrip.committed`) lead it to the post-decision path. A store that fails denies the
call ``E_SESSION_STATE`` and takes back what its decision counted.

:class:`StoreTrip` is the part of :class:`assay.session.calls.CallPath` that does this; the call
path (which imports this module) gives it the post-decision path (``_settled``, ``_done``) and
the asking step (``_asked``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from assay.policy import Decision
from assay.policy.decision import Outcome
from assay.policy.pipeline import Call, Pipeline, store_failed
from assay.policy.storeapi import Expect, Loaded, StoreError
from assay.session.effects import Effect, StoreAbort, StoreAttempt, StoreBegin, StoreCommit, Warn
from assay.session.jobs import _CALL, _MERGE, _RECHECK, Job, ToolCall

if TYPE_CHECKING:
    from assay.session.inspection import Inspector
    from assay.session.ledger import Ledger

__all__ = ["APPROVED", "StoreTrip"]

_DENY = Outcome.DENY
APPROVED = "approved"  # the approval_state of a held call a person accepted


class StoreTrip(ABC):
    """The jobs waiting for the store and the one in hand (see the module docstring)."""

    # set by the call path's __init__
    __slots__ = ("jobs", "busy", "parked_bytes", "_trailing", "on_idle")
    jobs: deque[Job]  # waiting for the store, in order
    busy: Job | None  # the job whose transaction is open or opening
    parked_bytes: int  # what the queued jobs hold: the shell stops reading the client past a bound
    _trailing: int  # client requests read since the last queued call (while jobs wait)
    on_idle: Callable[[list[Effect]], None] | None  # the session: the jobs are done

    # what the call path holds (its slots)
    pipeline: Pipeline
    ledger: Ledger
    label: str
    inspector: Inspector | None

    # what the call path does (its post-decision path and its asking step)
    @abstractmethod
    def _asked(self, call: ToolCall, decision: Decision, out: list[Effect]) -> Decision | None: ...

    @abstractmethod
    def _settled(self, job: Job, out: list[Effect]) -> None: ...

    @abstractmethod
    def _done(self, job: Job, out: list[Effect]) -> None: ...

    def _park(self, job: Job, out: list[Effect]) -> None:
        self.jobs.append(job)
        self.parked_bytes += job.size
        if self.busy is None:
            self._next(out)

    def _next(self, out: list[Effect]) -> None:
        """Open the store's transaction for the next job; when none waits, the requests read
        meanwhile are counted and the session is told (its client's end may be due)."""
        shared = self.pipeline.shared
        assert shared is not None
        if self.jobs:
            self.busy = busy = self.jobs.popleft()
            self.parked_bytes -= busy.size
            expect = (
                shared.expecting()
                if busy.kind != _RECHECK and not busy.cancelled and self.pipeline.approvals is None
                else None
            )
            if expect is not None:
                self._attempt(busy, expect, out)
            else:
                out.append(StoreBegin(shared.key, shared.part, shared.server, shared.clock()))
            return
        self.busy = None
        if self._trailing and self.pipeline.state is not None:
            self.pipeline.state.requests_count += self._trailing
        self._trailing = 0
        if self.on_idle is not None:
            self.on_idle(out)

    @property
    def waiting(self) -> bool:
        """Whether a call (fresh or held) waits for the store."""
        busy = self.busy
        return (busy is not None and busy.kind != _MERGE) or any(job.kind != _MERGE for job in self.jobs)

    def _attempt(self, job: Job, expect: Expect, out: list[Effect]) -> None:
        """Decide ``job`` now on what the last transaction left (no approval is asked: the
        policy asks for none) and save it in one round trip."""
        pipeline = self.pipeline
        shared = pipeline.shared
        state = pipeline.state
        assert shared is not None and state is not None
        if job.before:
            state.requests_count += job.before
            job.before = 0
        inspector = self.inspector
        job.undo = (
            state.requests_count,
            state.tool_calls_count,
            len(inspector.flagged) if inspector is not None else 0,
        )
        now = shared.clock()
        if job.kind == _MERGE:
            assert job.change is not None
            saved = shared.saving(False, save=job.change(now))
        else:
            call = job.call
            assert call is not None
            decision = pipeline.decide(call, now)
            job.decision = decision
            if decision.outcome is not _DENY:
                pipeline.enter(call, now)
                job.entered = True
            saved = shared.saving(job.entered)
        job.saved = saved
        job.attempting = True
        out.append(StoreAttempt(shared.key, shared.part, shared.server, expect, saved, now))

    def attempted(self, got: int | Loaded | StoreError, out: list[Effect]) -> None:
        """What the store's ``attempt`` of the job in hand gave: written (the version) or failed,
        as after :meth:`committed`; or the fresh state of another wrap's write, its transaction
        open: what the job's decision counted and entered is taken back, and the job is decided
        again on that state, as after :meth:`begun` (a call the client cancelled meanwhile is
        dropped instead, never sent)."""
        job = self.busy
        if job is None or not job.attempting:  # not reached: the shell answers only a StoreAttempt
            raise RuntimeError("store_attempted without a StoreAttempt")
        job.attempting = False
        if not isinstance(got, Loaded):
            self.committed(got, out)
            return
        pipeline = self.pipeline
        shared = pipeline.shared
        state = pipeline.state
        assert shared is not None and state is not None and job.undo is not None
        state.requests_count, state.tool_calls_count, flagged = job.undo
        inspector = self.inspector
        if inspector is not None:
            del inspector.flagged[flagged:]
        shared.conflicted()  # the trackers are read again from the fresh state
        job.decision, job.entered, job.saved, job.undo = None, False, None, None
        note = job.cancel_note
        if note is not None:  # cancelled during the trip: the cancellation is consumed with the call
            job.after.clear()
            if self.ledger.receipting:
                self.ledger.receipt(note[0], note[1], False, None, out, disposition="consumed")
        self.begun(got, out)

    def begun(self, got: Loaded | StoreError, out: list[Effect]) -> None:
        """The store's transaction for the job in hand is open (or failed): decide, then save."""
        job = self.busy
        if job is None:  # not reached: the shell answers only a StoreBegin
            raise RuntimeError("store_begun without a StoreBegin")
        pipeline = self.pipeline
        shared = pipeline.shared
        assert shared is not None
        state = pipeline.state
        if job.before and state is not None:
            state.requests_count += job.before
        problem = shared.loaded(got)
        if problem is not None and not isinstance(got, StoreError):
            out.append(StoreAbort())  # opened, but its state could not be read
        pipeline.told(problem)
        now = shared.clock()
        if job.kind == _MERGE:
            if problem is not None:
                out.append(Warn(f"assay: shared session: {problem}; what came back is not remembered"))
                self._done(job, out)
                return
            assert job.change is not None
            changed = job.change(now)
            self._commit(job, shared.saving(False, save=changed), now, out)
            return
        if job.cancelled:  # the client cancelled it while the store opened: never decided
            if shared.open:
                shared.aborting()
                out.append(StoreAbort())
            self._done(job, out)
            return
        if job.kind == _CALL:
            call = job.call
            assert call is not None
            if state is not None:
                job.undo = (state.requests_count, state.tool_calls_count, 0)
            decision = self._asked(call, pipeline.decide(call, now, problem), out)
            if problem is not None:
                self._uncount(job)
            if decision is None:  # held for a person: the counters are saved, nothing else
                if shared.open:
                    self._commit(job, shared.saving(False), now, out)
                else:
                    self._done(job, out)
                return
            called: Call = call
        else:
            held = job.held
            assert held is not None
            called = Call(held.name, held.arguments, self.label, held.frame)
            decision = pipeline.recheck(called, held.decision, now, problem).replace(approval_state=APPROVED)
        job.decision = decision
        if decision.outcome is not _DENY and shared.open:
            pipeline.enter(called, now)
            job.entered = True
        if shared.open:
            self._commit(job, shared.saving(job.entered), now, out)
        else:
            self._settled(job, out)

    def _commit(self, job: Job, saved: Any, now: float, out: list[Effect]) -> None:
        job.saved = saved
        out.append(StoreCommit(saved, now))

    def committed(self, got: int | StoreError, out: list[Effect]) -> None:
        """The store's commit of the job in hand is done (or failed): the post-decision path."""
        job = self.busy
        if job is None or job.saved is None:  # not reached: the shell answers only a StoreCommit
            raise RuntimeError("store_committed without a StoreCommit")
        shared = self.pipeline.shared
        assert shared is not None
        problem = self.pipeline.told(shared.committed(job.saved, got))
        if job.kind == _MERGE:
            if problem is not None:
                out.append(Warn(f"assay: shared session: {problem}; what came back is not remembered"))
            self._done(job, out)
            return
        if problem is not None and job.kind == _CALL and job.decision is not None:
            self._uncount(job)  # (a call held for a person keeps its count: it may go later)
        if job.decision is not None and job.entered and problem is not None:
            # the store failed to save it: not counted, so not sent
            job.decision = store_failed(job.decision, job.decision.tool, problem)
        self._settled(job, out)

    def _uncount(self, job: Job) -> None:
        """The store could not judge or save the call in hand: what its decision counted is
        taken back, so it is never added to the session's totals once the store is back (the
        denied call counts nothing; a save that did reach the store counted it there)."""
        state = self.pipeline.state
        undo = job.undo
        if state is not None and undo is not None:
            state.requests_count, state.tool_calls_count = undo[0], undo[1]
        job.undo = None
