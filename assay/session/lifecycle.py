"""The life of one wrap run as one transition table: (phase, event) -> (next phase, effects).

In the style of h11's ``_state.py``: every event the run's end depends on is a named
:class:`LifeEvent`, every state a :class:`~assay.session.effects.Phase`, and :data:`TABLE` says for
each (phase, event) pair what comes next and what the shell is asked to do, in order. A pair
that is not in the table changes nothing. The facts that refine an event (has the child
exited? has its stdout closed?) are named values too (:class:`Child`), read by :meth:`Lifecycle.
refine`, so no transition hides in an if-chain. docs/wrap.md, "Lifecycle", describes every path;
docs/wrap.md, "Exit status", the exit code. Sans-IO: time is the ``now`` each event is given.
"""

from __future__ import annotations

import enum
import signal as _signal
from typing import Final, NamedTuple

from assay.session.effects import CloseServerInput, Effect, Finish, Phase, SignalChild, StopCause, StopClient

__all__ = [
    "FATAL_FLUSH_S",
    "KILL_AFTER_TERM_S",
    "MIN_SILENCE_S",
    "SIGNAL_DRAIN_S",
    "TABLE",
    "Child",
    "Do",
    "LifeEvent",
    "Lifecycle",
    "Row",
    "exit_status",
]

KILL_AFTER_TERM_S: Final = 0.5  # SIGKILL this long after SIGTERM
SIGNAL_DRAIN_S: Final = 0.5  # after a signal, output already written gets this long to reach the client
FATAL_FLUSH_S: Final = 5.0  # after a failed record, the frames before it get this long to take effect
MIN_SILENCE_S: Final = 0.05  # the least silence after which a descendant holding stdout is killed


class LifeEvent(enum.Enum):
    """What happened, refined by the facts it depends on (:meth:`Lifecycle.refine`)."""

    CLIENT_EOF = "client_eof"  # the client closed and every line of it was judged
    CLIENT_LOST = "client_lost"  # writing to the client failed
    SERVER_INPUT_CLOSED = "server_input_closed"  # writing to the child failed
    CHILD_EXIT = "child_exit"  # the child exited; its stdout is still open
    CHILD_EXIT_AT_EOF = "child_exit_at_eof"  # the child exited; its stdout had closed
    SERVER_EOF = "server_eof"  # the child's stdout closed
    SIGNAL = "signal"  # wrap got a signal; the child runs
    SIGNAL_CHILD_GONE = "signal_child_gone"  # ... the child exited, its stdout is open
    SIGNAL_ALL_GONE = "signal_all_gone"  # ... the child exited, its stdout closed
    TIMER = "timer"  # the clock reached the phase's deadline
    OUTPUT_FAILED = "output_failed"  # a record or the one-run outputs could not be written


class Do(enum.Enum):
    """One step of a transition, in the order the shell gets them."""

    STOP_CLIENT = "stop_client"
    CLOSE_SERVER_INPUT = "close_server_input"
    TERM = "term"  # SIGTERM to the child
    KILL = "kill"  # SIGKILL to the child
    KILL_SILENT = "kill_silent"  # SIGKILL to a descendant that holds the exited child's stdout
    ABANDON = "abandon"  # held approvals are denied "cancelled" and their prompts closed (recorded)
    DISCARD = "discard"  # held approvals are dropped unrecorded (records cannot be written)
    FINISH = "finish"  # Finish(drain=True)
    FINISH_BY_DEADLINE = "finish_by_deadline"  # Finish(drain=True, deadline=the phase's deadline)
    FINISH_NOW = "finish_now"  # Finish(drain=False)


class Child(enum.Enum):
    """The child process as the lifecycle knows it."""

    RUNNING = "running"
    EXITED = "exited"
    SILENCED = "silenced"  # exited, and a silent descendant holding its stdout was killed


class Row(NamedTuple):
    """One transition: the next phase, the stop cause it names (the first one named wins),
    the steps, and the new deadline as an offset from now (None: unchanged)."""

    next: Phase
    cause: StopCause | None
    steps: tuple[Do, ...]
    deadline: float | None = None


_P = Phase
_E = LifeEvent
_LIVE = (_P.RUNNING, _P.DRAINING, _P.TERMINATING, _P.KILLED)  # the child has not exited
_NOT_SIGNALLED = (*_LIVE, _P.CHILD_EXITED)
_NOT_DONE = (*_NOT_SIGNALLED, _P.SIGNALLED, _P.SIGNAL_DRAIN)

TABLE: Final[dict[tuple[Phase, LifeEvent], Row]] = {
    (_P.RUNNING, _E.CLIENT_EOF): Row(_P.DRAINING, StopCause.CLIENT_EOF, (Do.ABANDON, Do.CLOSE_SERVER_INPUT)),
    (_P.RUNNING, _E.SERVER_INPUT_CLOSED): Row(
        _P.DRAINING, StopCause.CHILD_EXIT, (Do.ABANDON, Do.STOP_CLIENT, Do.CLOSE_SERVER_INPUT)
    ),
    **{
        (p, _E.CLIENT_LOST): Row(_P.DONE, StopCause.CLIENT_EOF, (Do.ABANDON, Do.STOP_CLIENT, Do.FINISH_NOW))
        for p in _NOT_DONE
    },
    **{(p, _E.CHILD_EXIT): Row(_P.CHILD_EXITED, StopCause.CHILD_EXIT, (Do.ABANDON, Do.STOP_CLIENT)) for p in _LIVE},
    **{
        (p, _E.CHILD_EXIT_AT_EOF): Row(_P.DONE, StopCause.CHILD_EXIT, (Do.ABANDON, Do.STOP_CLIENT, Do.FINISH))
        for p in _LIVE
    },
    (_P.SIGNALLED, _E.CHILD_EXIT): Row(_P.SIGNAL_DRAIN, None, (), SIGNAL_DRAIN_S),
    (_P.SIGNALLED, _E.CHILD_EXIT_AT_EOF): Row(_P.DONE, None, (Do.FINISH_BY_DEADLINE,), SIGNAL_DRAIN_S),
    (_P.CHILD_EXITED, _E.SERVER_EOF): Row(_P.DONE, None, (Do.FINISH,)),
    (_P.SIGNAL_DRAIN, _E.SERVER_EOF): Row(_P.DONE, None, (Do.FINISH_BY_DEADLINE,)),
    **{
        (p, _E.SIGNAL): Row(_P.SIGNALLED, StopCause.SIGNAL, (Do.STOP_CLIENT, Do.TERM, Do.ABANDON), KILL_AFTER_TERM_S)
        for p in _NOT_SIGNALLED
    },
    **{
        (p, _E.SIGNAL_CHILD_GONE): Row(
            _P.SIGNAL_DRAIN, StopCause.SIGNAL, (Do.STOP_CLIENT, Do.TERM, Do.ABANDON), SIGNAL_DRAIN_S
        )
        for p in _NOT_SIGNALLED
    },
    **{
        (p, _E.SIGNAL_ALL_GONE): Row(
            _P.DONE, StopCause.SIGNAL, (Do.STOP_CLIENT, Do.TERM, Do.ABANDON, Do.FINISH_BY_DEADLINE), SIGNAL_DRAIN_S
        )
        for p in _NOT_SIGNALLED
    },
    (_P.DRAINING, _E.TIMER): Row(_P.TERMINATING, None, (Do.TERM,), KILL_AFTER_TERM_S),
    (_P.TERMINATING, _E.TIMER): Row(_P.KILLED, None, (Do.KILL,)),
    (_P.CHILD_EXITED, _E.TIMER): Row(_P.CHILD_EXITED, None, (Do.KILL_SILENT,)),
    (_P.SIGNALLED, _E.TIMER): Row(_P.SIGNAL_DRAIN, None, (Do.KILL,), SIGNAL_DRAIN_S),
    (_P.SIGNAL_DRAIN, _E.TIMER): Row(_P.DONE, None, (Do.FINISH_NOW,)),
    **{
        (p, _E.OUTPUT_FAILED): Row(
            _P.DONE, StopCause.OUTPUT_ERROR, (Do.DISCARD, Do.STOP_CLIENT, Do.FINISH_BY_DEADLINE), FATAL_FLUSH_S
        )
        for p in _NOT_DONE
    },
}
"""Every transition of a run. A (phase, event) pair not listed changes nothing."""


def exit_status(child_returncode: int | None, wrap_signal: int | None) -> int:
    """128+N if wrap got signal N; else the child's code, or 128+N if it died of signal N."""
    if wrap_signal is not None:
        return 128 + wrap_signal
    if child_returncode is None:
        return 2
    if child_returncode < 0:
        return 128 - child_returncode
    return child_returncode


class Lifecycle:
    """The phase of one run, its facts, its stop cause and its deadline (docs/wrap.md,
    "Lifecycle")."""

    __slots__ = (
        "phase",
        "stop_cause",
        "wrap_signal",
        "fatal",
        "child",
        "child_returncode",
        "server_eof",
        "last_output",
        "grace",
        "_eof_at",
        "_owed_output_at",
        "_writing",
        "_writing_owed",
        "_delivered_at",
        "_deadline",
    )

    def __init__(self, now: float, shutdown_grace: float) -> None:
        self.phase = Phase.RUNNING
        self.stop_cause: StopCause | None = None
        self.wrap_signal: int | None = None
        self.fatal: str | None = None
        self.child = Child.RUNNING
        self.child_returncode: int | None = None
        self.server_eof = False  # the child's stdout reached end of file
        self.last_output = now  # session-clock time of the child's last output
        self.grace = shutdown_grace
        self._eof_at = 0.0
        self._owed_output_at = 0.0  # the child's last output while it owed answers
        self._writing = False  # a write of wrap's to the client is under way
        self._writing_owed = False  # ... while the child owed answers
        self._delivered_at = 0.0  # when the last such write ended
        self._deadline: float | None = None

    def refine(self, event: LifeEvent) -> LifeEvent:
        """The event as the facts make it: a child exit or a signal after the child exited or
        its stdout closed."""
        if event is LifeEvent.CHILD_EXIT:
            return LifeEvent.CHILD_EXIT_AT_EOF if self.server_eof else event
        if event is LifeEvent.SIGNAL and self.child is not Child.RUNNING:
            return LifeEvent.SIGNAL_ALL_GONE if self.server_eof else LifeEvent.SIGNAL_CHILD_GONE
        return event

    def fire(self, event: LifeEvent, now: float) -> tuple[Do, ...] | None:
        """Take one transition; its steps, or None when the pair is not in :data:`TABLE`."""
        row = TABLE.get((self.phase, self.refine(event)))
        if row is None:
            return None
        if row.cause is not None and self.stop_cause is None:
            self.stop_cause = row.cause
        if row.deadline is not None:
            self._deadline = now + row.deadline
        if row.next is Phase.DRAINING and self.phase is not Phase.DRAINING:
            self._eof_at = now
        if Do.KILL_SILENT in row.steps:
            self.child = Child.SILENCED
        self.phase = row.next
        return row.steps

    def effect(self, step: Do) -> Effect:
        """The shell's effect for one step (not ABANDON or DISCARD: the approvals do those).
        Changes nothing."""
        if step is Do.STOP_CLIENT:
            return StopClient()
        if step is Do.CLOSE_SERVER_INPUT:
            return CloseServerInput()
        if step is Do.TERM:
            return SignalChild(_signal.SIGTERM)
        if step is Do.KILL:
            return SignalChild(_signal.SIGKILL)
        if step is Do.KILL_SILENT:
            return SignalChild(_signal.SIGKILL)
        if step is Do.FINISH:
            return Finish(drain=True)
        if step is Do.FINISH_BY_DEADLINE:
            return Finish(drain=True, deadline=self._deadline)
        if step is Do.FINISH_NOW:
            return Finish(drain=False)
        raise ValueError(f"{step} is not the shell's")

    # -- the facts --------------------------------------------------------------------------

    def output_seen(self, now: float, owes_answers: bool) -> None:
        """The child wrote something at ``now`` (``owes_answers``: while a forwarded request
        awaited its answer)."""
        self.last_output = now
        if owes_answers:
            self._owed_output_at = now

    def delivery(self, now: float, busy: bool, owes_answers: bool) -> None:
        """A write of wrap's to the client began (``busy``) or ended at ``now``. Wrap reads none
        of the child's output while such a write waits for a client slow to read, so the child's
        silence then is wrap's own: the grace after the client's end (while the child owes
        answers) and the wait for a child that exited to close its output do not run during
        the write, and count again from its end."""
        if busy:
            self._writing, self._writing_owed = True, owes_answers
            return
        self._writing = self._writing_owed = False
        self._delivered_at = now
        if owes_answers and now > self._owed_output_at:
            self._owed_output_at = now

    def child_exited(self, returncode: int | None) -> None:
        if self.child is Child.RUNNING:
            self.child = Child.EXITED
        self.child_returncode = returncode

    def exit_news(self, returncode: int | None) -> tuple[bool, bool]:
        """Is the child's exit, now, worth one stderr line (docs/wrap.md, "Lifecycle"), and did
        wrap stop it? Yes when it ended on its own while running, ended badly after the client's
        end (a status other than 0, a signal), or had to be stopped after the grace; no after a
        clean exit at the client's end, and when wrap got a signal (its own stop)."""
        phase = self.phase
        if phase is Phase.RUNNING:
            return True, False
        if phase is Phase.DRAINING:
            return returncode != 0, False
        if phase is Phase.TERMINATING or phase is Phase.KILLED:
            return True, True
        return False, False

    def deadline(self) -> float | None:
        """When the phase's timer is due (RUNNING: never here; the approvals' deadline is the
        session's)."""
        phase = self.phase
        if phase is Phase.DRAINING:
            # the grace counts from the client's EOF, or from the child's last output while it
            # owed answers to forwarded requests (or wrap's last write of it to the client),
            # whichever is later; not while such a write waits for the client
            if self._writing_owed:
                return None
            return max(self._eof_at, self._owed_output_at) + self.grace
        if phase is Phase.CHILD_EXITED:
            if self.server_eof or self.child is Child.SILENCED or self._writing:
                return None
            return max(self.last_output, self._delivered_at) + max(self.grace, MIN_SILENCE_S)
        if phase is Phase.TERMINATING or phase is Phase.SIGNALLED or phase is Phase.SIGNAL_DRAIN:
            return self._deadline
        return None

    def exit_code(self, child_returncode: int | None) -> int:
        """The run's exit status once the child is reaped (docs/wrap.md, "Exit status")."""
        if self.fatal is not None:
            return 2 if self.wrap_signal is None else 128 + self.wrap_signal
        return exit_status(child_returncode, self.wrap_signal)
