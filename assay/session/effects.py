"""What the wrap session asks its shell to do: effects, sinks and the named states (sans-IO).

:class:`assay.session.session.WrapSession` takes bytes and events and returns a list of effects;
the trio shell (:mod:`assay.shells.stdio.relay`) performs them in order. The effects are plain value
types (equal only to an effect of the same kind with equal fields), so a test can compare
them; the states and stop causes are named values, so the whole
life of a run reads from one table (docs/wrap.md, "Lifecycle").

How the shell performs a list (docs/architecture.md, "One frame's way through wrap"):

- it gathers, in order, the :class:`Record` lines (per sink), the :class:`ToClient` and the
  :class:`ToServer` bytes, and writes them once per list, or at a barrier (:class:`StartSession`,
  :class:`AdmitLine`, :class:`CloseServerInput`): first the records, one write per sink, then
  the bytes for the client and the child, then the records to :data:`Sink.RECEIPTS` (a receipt
  describes a frame whose outcome is complete). So every frame's records are on disk before the
  frame has any effect;
- a record that cannot be written whole is reported with ``WrapSession.output_failed``, and
  nothing else gathered with it takes effect (fail closed);
- :class:`StartSession` creates the one-run outputs; when that fails the shell reports it with
  ``WrapSession.start_failed`` and performs nothing after it;
- :class:`StoreAttempt`, :class:`StoreBegin`, :class:`StoreCommit` and :class:`StoreAbort` go,
  in order, to the shell's one store task, which awaits the shared session's store and feeds
  what it gave back to the session as an event (``store_attempted``, ``store_begun``,
  ``store_committed``): the list goes on at once;
- :class:`AskApprover` starts a task of the shell's own that asks the out-of-band approver and
  hands its answer to ``WrapSession.approver_answered``; :class:`WithdrawApproval` cancels that
  task (docs/serve.md, "Out-of-band approvers"): the list goes on at once.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

__all__ = [
    "AdmitLine",
    "AskApprover",
    "CloseServerInput",
    "Effect",
    "Finish",
    "Record",
    "Phase",
    "SignalChild",
    "Sink",
    "StartSession",
    "StopCause",
    "StoreAbort",
    "StoreAttempt",
    "StoreBegin",
    "StoreCommit",
    "StopClient",
    "ToClient",
    "ToServer",
    "Warn",
    "WithdrawApproval",
]


class Sink(enum.Enum):
    """The outputs records go to. The value is the name used in error messages."""

    DECISION_LOG = "decision log"
    AUDIT_LOG = "audit log"
    DECISION_LOG_NEW = "--decision-log-new"
    RECEIPTS = "--request-receipts-out"
    SESSION_CONTEXT = "--session-context-out"
    SESSION_STOP = "--session-stop-out"


class StopCause(enum.Enum):
    """Why a run ended: the ``stop_cause`` of the session-stop record (docs/wrap-records.md).
    The first cause wins."""

    CHILD_EXIT = "child_exit"
    CLIENT_EOF = "client_eof"
    SIGNAL = "signal"
    OUTPUT_ERROR = "output_error"


class Phase(enum.Enum):
    """The run's life, one named value at a time (docs/wrap.md, "Lifecycle").

    RUNNING        both sides open
    DRAINING       the client closed (or the child stopped reading): the child's stdin is
                   closed and it gets the grace period, counted from its last output while it
                   still owes answers
    TERMINATING    SIGTERM sent after the grace; SIGKILL follows
    KILLED         SIGKILL sent; waiting for the child to exit
    CHILD_EXITED   the child exited: the client is no longer read; everything the child wrote
                   is delivered; a descendant that holds its stdout silent is killed
    SIGNALLED      wrap got SIGINT/SIGTERM/SIGHUP: SIGTERM to the child, SIGKILL after a while
    SIGNAL_DRAIN   after a signal, output already written gets a short time to reach the client
    DONE           :class:`Finish` was emitted (a failed record or output goes straight here:
                   exit 2; output already queued for the client still gets a few seconds)
    """

    RUNNING = "running"
    DRAINING = "draining"
    TERMINATING = "terminating"
    KILLED = "killed"
    CHILD_EXITED = "child_exited"
    SIGNALLED = "signalled"
    SIGNAL_DRAIN = "signal_drain"
    DONE = "done"


class _Effect(msgspec.Struct, frozen=True, gc=False):
    """The base of every effect type: a frozen msgspec Struct, built in C (a frozen dataclass
    costs several times as much to build, and a session returns one or more effects for every
    call it records); equal to an effect of the same kind with equal fields, hashable, never
    part of a reference cycle (so not tracked by the garbage collector)."""


class ToServer(_Effect, frozen=True, gc=False):
    """Write these bytes to the child's stdin."""

    data: bytes


class ToClient(_Effect, frozen=True, gc=False):
    """Write these bytes to the client: whole server lines and wrap's own replies, in order."""

    data: bytes


class Record(_Effect, frozen=True, gc=False):
    """Append this record (one or more whole lines, or a whole document) to ``sink``."""

    sink: Sink
    data: bytes


class Warn(_Effect, frozen=True, gc=False):
    """One line for wrap's stderr (without its newline)."""

    text: str


class StartSession(_Effect, frozen=True, gc=False):
    """The run becomes a session: create the one-run outputs now (docs/wrap.md, "One-run
    outputs and session reports")."""


class AdmitLine(_Effect, frozen=True, gc=False):
    """Judge this long client line off the event loop (``assay.session.admission.admit``) and
    hand the verdict to ``WrapSession.admitted``; until then the session takes no client
    data."""

    line: bytes


class StoreBegin(_Effect, frozen=True, gc=False):
    """Open the shared session's store transaction (``Store.begin(key, part, server, now)``) off
    the event loop and hand what it gave (a ``Loaded`` or the ``StoreError``) to
    ``WrapSession.store_begun``. The session goes on meanwhile: every other frame flows; the
    calls of this wrap queue behind it (docs/wrap.md, "Shared sessions")."""

    key: Any  # the SessionKey
    part: str
    server: str
    now: float


class StoreAttempt(_Effect, frozen=True, gc=False):
    """Write a decision made on what the last transaction left, in one round trip
    (``Store.attempt(key, part, server, expect, saved, now)``), and hand what it gave (the
    version, the fresh ``Loaded`` of a transaction left open because another wrap wrote
    meanwhile, or the ``StoreError``) to ``WrapSession.store_attempted`` (docs/wrap.md,
    "Shared sessions")."""

    key: Any  # the SessionKey
    part: str
    server: str
    expect: Any  # the Expect
    saved: Any  # the Saved
    now: float


class StoreCommit(_Effect, frozen=True, gc=False):
    """Commit the open transaction (``Store.commit(saved, now)``) and hand what it gave (the
    version or the ``StoreError``) to ``WrapSession.store_committed``."""

    saved: Any  # the Saved
    now: float


class StoreAbort(_Effect, frozen=True, gc=False):
    """End the open transaction without writing (``Store.abort()``); nothing is handed back."""


class AskApprover(_Effect, frozen=True, gc=False):
    """Ask the out-of-band approver whether the held call ``approval_id`` may run (docs/serve.md,
    "Out-of-band approvers") and hand its answer (``accept``, ``decline``, ``cancel`` or
    ``failed``) to ``WrapSession.approver_answered``. Nothing waits for it: the call stays held,
    and at ``deadline`` (a session-clock time) the session's timer denies it ``timed_out``."""

    approval_id: str
    subject: str | None  # the user whose call it is (serve), None in wrap
    server: str  # the server's label
    tool: str
    arguments: Any
    deadline: float


class WithdrawApproval(_Effect, frozen=True, gc=False):
    """The held call ``approval_id`` was settled without the approver (it timed out, the client
    cancelled it, the run ended): stop asking (an answer that comes anyway is ignored)."""

    approval_id: str


class CloseServerInput(_Effect, frozen=True, gc=False):
    """Close the child's stdin."""


class StopClient(_Effect, frozen=True, gc=False):
    """Stop reading the client."""


class SignalChild(_Effect, frozen=True, gc=False):
    """Send ``signum`` to the child's process group and every descendant (the keeper's)."""

    signum: int


class Finish(_Effect, frozen=True, gc=False):
    """End the run. With ``drain``, first let the client output queued so far be written,
    until ``deadline`` (a session-clock time) when there is one; then stop the child and
    reap it."""

    drain: bool = True
    deadline: float | None = None


Effect = (
    ToServer
    | ToClient
    | Record
    | Warn
    | StartSession
    | AdmitLine
    | StoreAttempt
    | StoreBegin
    | StoreCommit
    | StoreAbort
    | AskApprover
    | WithdrawApproval
    | CloseServerInput
    | StopClient
    | SignalChild
    | Finish
)
