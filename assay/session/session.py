"""One wrap run as plain code over bytes: client bytes, server bytes and events in, effects out.

:class:`WrapSession` is the whole protocol side of ``assay mcp wrap`` and does no I/O: it splits
and admits client lines, evaluates ``tools/call`` against the policy, starts the session, keeps
the pins, the pending-request table and the tools/list chains, reads server lines, and decides
when and how the run ends. The trio shell (:mod:`assay.shells.stdio.relay`) reads, calls one method,
and performs the effects it gets back (:mod:`assay.session.effects` says how).

=====================================  ===============================================
the shell saw                          it calls
=====================================  ===============================================
bytes from the client                  :meth:`receive_client_data`
the client's end of file               :meth:`client_closed`
the client stopped reading (EPIPE)     :meth:`client_lost`
the verdict of an :class:`AdmitLine`   :meth:`admitted`
what a :class:`StoreAttempt` gave      :meth:`store_attempted`
what a :class:`StoreBegin` gave        :meth:`store_begun`
what a :class:`StoreCommit` gave       :meth:`store_committed`
the answer to an :class:`AskApprover`   :meth:`approver_answered`
bytes from the child's stdout          :meth:`receive_server_data`
the child's stdout closed              :meth:`server_closed`
the child stopped reading (EPIPE)      :meth:`server_input_closed`
the child exited                       :meth:`child_exited`
SIGINT, SIGTERM or SIGHUP              :meth:`signal`
the clock reached :attr:`deadline`     :meth:`timer`
a record could not be written          :meth:`output_failed`
the one-run outputs could not be made  :meth:`start_failed`
=====================================  ===============================================

The work is done in rooms of one job each, and :class:`WrapSession` only routes its events to
them: :mod:`assay.session.client_side` (framing, admission, the client's stream),
:mod:`assay.session.calls` (the judge of a frame and the tools/call path),
:mod:`assay.session.approvals.room` (asking a person), :mod:`assay.session.server_side` and
:mod:`assay.session.toolbook` (server lines, pending requests, tools/list answers),
:mod:`assay.session.ledger` (records, receipts, counts) and :mod:`assay.session.lifecycle` (the phase,
as one transition table). :mod:`assay.session.assembly` builds them (but the lifecycle) from the
policy and the options.

Time comes from the ``clock`` given to the constructor (the shell passes trio's), so tests run
the lifecycle without sleeping. docs/wrap.md, "Lifecycle", describes every path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from assay.policy import Policy, SessionState
from assay.policy.pipeline import Pipeline
from assay.policy.storeapi import Loaded, SessionKey, Store, StoreError
from assay.session import approvals, records
from assay.session.admission import Admitted, Rejected
from assay.session.assembly import assemble
from assay.session.client_side import BIG_CLIENT_LINE as BIG_CLIENT_LINE
from assay.session.client_side import Start
from assay.session.effects import Effect, Phase, StopCause, Warn
from assay.session.lifecycle import FATAL_FLUSH_S as FATAL_FLUSH_S  # re-exported: the shell and tests read these here
from assay.session.lifecycle import KILL_AFTER_TERM_S as KILL_AFTER_TERM_S
from assay.session.lifecycle import MIN_SILENCE_S as MIN_SILENCE_S
from assay.session.lifecycle import SIGNAL_DRAIN_S as SIGNAL_DRAIN_S
from assay.session.lifecycle import Do, LifeEvent, Lifecycle, exit_status
from assay.session.listing import ListChain, tool_definition_digest
from assay.session.sessionoptions import SessionOptions as SessionOptions  # re-exported: the shells build it here

if TYPE_CHECKING:
    from assay.policy.flows import FlowTracker
    from assay.policy.rates import RateTracker

__all__ = ["SessionOptions", "WrapSession", "exit_status", "tool_definition_digest"]


class WrapSession:
    """One wrap run (one client stream): routes each event to the room that does its job."""

    def __init__(
        self,
        policy: Policy,
        options: SessionOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        new_event_id: Callable[[], str] | None = None,
        now: Callable[[], str] | None = None,
        approval_token: str | None = None,
        approval_key: bytes | None = None,
        shared: tuple[Store, SessionKey] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.options = options = options or SessionOptions()
        self.state = SessionState()
        self._clock = clock
        rooms = assemble(
            policy,
            options,
            self.state,
            clock,
            new_event_id=new_event_id,
            now=now,
            approval_token=approval_token,
            approval_key=approval_key,
            shared=shared,
            wall_clock=wall_clock,
        )
        self._ledger = rooms.ledger
        self._server = rooms.server
        self._room = rooms.room
        self._guards = rooms.guards
        self._calls = rooms.calls
        self._client = rooms.client
        self._life = Lifecycle(clock(), options.shutdown_grace)
        # a shared session's calls and merges wait for the store (docs/wrap.md, "Shared
        # sessions"): the client's end, and the server's, are taken once none waits
        self._eof_due = False
        self._server_eof_due = False
        if rooms.shared:
            self._calls.on_idle = self._store_idle

    # -- client -> server --------------------------------------------------------------------

    def receive_client_data(self, data: bytes) -> list[Effect]:
        """Bytes the client wrote: the effects of every line they complete."""
        if self._life.phase is not Phase.RUNNING or not data:
            return []
        out: list[Effect] = []
        self._client.receive(data, out)
        return out

    def admitted(self, verdict: Admitted | Rejected | None) -> list[Effect]:
        """The verdict on the line of the last :class:`AdmitLine`; the rest of the queue goes on."""
        out: list[Effect] = []
        if self._client.admitted(verdict, out, self._life.phase is Phase.RUNNING):
            self._end_of_client(out)
        return out

    def client_closed(self) -> list[Effect]:
        """The client's end of file: its last unterminated line still counts."""
        out: list[Effect] = []
        if self._life.phase is Phase.RUNNING and self._client.close(out):
            self._end_of_client(out)
        return out

    def _end_of_client(self, out: list[Effect]) -> None:
        if self._calls.waiting:  # a call waits for the store: it is sent (or denied) first
            self._eof_due = True
            return
        self._client.end(out)
        self._fire(LifeEvent.CLIENT_EOF, out)

    # -- the shared session's store (docs/wrap.md, "Shared sessions") ---------------------------

    @property
    def store(self) -> Store | None:
        """The shared session's store the shell performs :class:`StoreBegin` and the rest
        with (None: the session is not shared)."""
        shared = self._calls.pipeline.shared
        return None if shared is None else shared.store

    def store_begun(self, got: Loaded | StoreError) -> list[Effect]:
        """What the store's ``begin`` of the last :class:`StoreBegin` gave (the ``Loaded``, or
        the ``StoreError`` it raised). A call that waited is decided now unless the run
        stopped meanwhile (then it is never sent, nothing of it counted)."""
        out: list[Effect] = []
        if self._life.phase is not Phase.RUNNING:
            self._calls.drop_calls()
        self._calls.begun(got, out)
        return out

    def store_attempted(self, got: int | Loaded | StoreError) -> list[Effect]:
        """What the store's ``attempt`` of the last :class:`StoreAttempt` gave (the version, the
        fresh ``Loaded`` of another wrap's write with the transaction open, or the
        ``StoreError`` it raised): the call's forward or deny, or its decision again on the
        fresh state (unless the run stopped meanwhile: then it is never sent)."""
        out: list[Effect] = []
        if self._life.phase is not Phase.RUNNING:
            self._calls.drop_calls()
        self._calls.attempted(got, out)
        return out

    def store_committed(self, got: int | StoreError) -> list[Effect]:
        """What the store's ``commit`` of the last :class:`StoreCommit` gave (the version, or
        the ``StoreError`` it raised): the call's forward or deny, an answer's relay."""
        out: list[Effect] = []
        self._calls.committed(got, out)
        return out

    def _store_idle(self, out: list[Effect]) -> None:
        """Nothing waits for the store any more: an end that came meanwhile is taken now."""
        if self._eof_due and not self._calls.waiting:
            self._eof_due = False
            if self._life.phase is Phase.RUNNING:
                self._end_of_client(out)
        if self._server_eof_due and self._calls.busy is None:
            self._server_eof_due = False
            self._server_end(out)

    def approver_answered(self, approval_id: str, answer: str) -> list[Effect]:
        """The out-of-band approver's answer to :class:`AskApprover` ``approval_id``: ``accept``,
        ``decline``, ``cancel`` or ``failed`` (docs/serve.md, "Out-of-band approvers"). The held
        call is settled as a client's answer settles it; an id not held (unknown, settled by a
        timeout, a cancel or the end) is ignored."""
        out: list[Effect] = []
        self._room.approver_answered(approval_id, answer, out)
        return out

    def client_lost(self) -> list[Effect]:
        """Writing to the client failed: nobody reads replies any more. The run ends now.
        (Held approvals are recorded; their replies reach nobody: the shell drops them.)"""
        out: list[Effect] = []
        self._fire(LifeEvent.CLIENT_LOST, out)
        return out

    # -- server -> client --------------------------------------------------------------------

    def receive_server_data(self, data: bytes) -> list[Effect]:
        """Bytes the child wrote: whole lines go to the client (forged answers dropped); a
        partial line is held until its LF, up to the hold limit, then streamed through."""
        out: list[Effect] = []
        if data:
            self._life.output_seen(self._clock(), bool(self._server.pending))
            self._server.receive(data, out)
        return out

    def server_closed(self) -> list[Effect]:
        """The child's stdout reached end of file."""
        out: list[Effect] = []
        self._server.closed(out)
        if self._calls.busy is not None:  # an answer (or a call) waits for the store: it goes first
            self._server_eof_due = True
            return out
        self._server_end(out)
        return out

    def _server_end(self, out: list[Effect]) -> None:
        self._life.server_eof = True
        self._fire(LifeEvent.SERVER_EOF, out)

    def server_input_closed(self) -> list[Effect]:
        """Writing to the child failed (EPIPE): the child-exit path. The client is no longer
        read; if the child lingers, it gets the grace period like after a client EOF."""
        out: list[Effect] = []
        self._fire(LifeEvent.SERVER_INPUT_CLOSED, out)
        return out

    # -- lifecycle ---------------------------------------------------------------------------

    def _fire(self, event: LifeEvent, out: list[Effect]) -> bool:
        """One transition of the lifecycle table, its steps performed in order."""
        life = self._life
        steps = life.fire(event, self._clock())
        if steps is None:
            return False
        for step in steps:
            if step is Do.ABANDON:
                self._room.abandon(out)
            elif step is Do.DISCARD:
                self._room.discard()
            else:
                out.append(life.effect(step))
        return True

    def child_exited(self, returncode: int | None) -> list[Effect]:
        """The child exited (it is not reaped yet: its group cannot be reused). A stdio server
        that ended on its own, or badly, gets one stderr line (docs/wrap.md, "Lifecycle")."""
        out: list[Effect] = []
        tell, stopped = self._life.exit_news(returncode)
        if tell and self.options.announce_exit:
            out.append(
                Warn(records.server_exit_line(returncode, stopped=stopped, unanswered=len(self._server.pending)))
            )
        self._life.child_exited(returncode)
        self._fire(LifeEvent.CHILD_EXIT, out)
        return out

    def signal(self, signum: int) -> list[Effect]:
        """wrap got SIGINT, SIGTERM or SIGHUP: exit 128+N once the child is stopped."""
        out: list[Effect] = []
        wrap_signal = self._life.wrap_signal
        self._life.wrap_signal = signum
        if not self._fire(LifeEvent.SIGNAL, out):
            self._life.wrap_signal = wrap_signal
        return out

    @property
    def deadline(self) -> float | None:
        """The session-clock time at which :meth:`timer` is due, or None. While running: the
        earliest deadline of a held approval."""
        if self._life.phase is Phase.RUNNING:
            return self._room.deadline
        return self._life.deadline()

    def timer(self) -> list[Effect]:
        """The clock reached :attr:`deadline` (calling early does nothing)."""
        deadline = self.deadline
        now = self._clock()
        out: list[Effect] = []
        if deadline is None or now < deadline:
            return out
        if self._life.phase is Phase.RUNNING:
            self._room.expire(now, out)
        else:
            self._fire(LifeEvent.TIMER, out)
        return out

    def client_write(self, busy: bool) -> None:
        """The shell began (``busy``) or ended a write to the client: the server's silence is not
        counted while wrap waits for a client slow to read (docs/wrap.md, "Lifecycle"). No
        effects."""
        self._life.delivery(self._clock(), busy, bool(self._server.pending))

    def output_failed(self, message: str) -> list[Effect]:
        """A record could not be written whole: fatal (exit 2). What came before it still
        gets a few seconds to take effect."""
        out: list[Effect] = []
        if self._fire(LifeEvent.OUTPUT_FAILED, out):
            self._life.fatal = message
        return out

    def start_failed(self, message: str) -> list[Effect]:
        """The one-run outputs could not be created: fatal, and the run is no session (no
        stop record, no session-end reports)."""
        if self._client.start is Start.SESSION:
            self._client.start = Start.FAILED
        return self.output_failed(message)

    def exit_code(self, child_returncode: int | None) -> int:
        """The run's exit status once the child is reaped (docs/wrap.md, "Exit status")."""
        return self._life.exit_code(child_returncode)

    # -- what the shell and the reports read ---------------------------------------------------

    @property
    def is_session(self) -> bool:
        """Whether this run became a session whose end gets reports."""
        return self._client.start is Start.SESSION

    @property
    def started(self) -> bool:
        """Whether the run became a session (even if its outputs then failed)."""
        return self._client.started

    @property
    def phase(self) -> Phase:
        return self._life.phase

    @property
    def stop_cause(self) -> StopCause | None:
        return self._life.stop_cause

    @property
    def wrap_signal(self) -> int | None:
        return self._life.wrap_signal

    @property
    def fatal(self) -> str | None:
        return self._life.fatal

    @property
    def child_returncode(self) -> int | None:
        return self._life.child_returncode

    @property
    def last_output(self) -> float:
        """Session-clock time of the child's last output."""
        return self._life.last_output

    @property
    def counts(self) -> dict[str, int]:
        """Frames of the session: forwarded, blocked (denied calls answered), rejected, dropped
        (denied notifications)."""
        return self._ledger.counts

    @property
    def coverage(self) -> records.Coverage | None:
        """This run's coverage aggregate (docs/wrap-records.md, "Session reports"); None unless
        ``keep_events``."""
        return self._ledger.coverage

    @property
    def owes_answers(self) -> bool:
        """Whether a forwarded client request still awaits the server's answer."""
        return bool(self._server.pending)

    @property
    def held_bytes(self) -> int:
        """wrap's replies held behind a streamed server line, and the client's calls waiting for
        the shared session's store: the shell stops reading the client past its queue bound."""
        return self._server.held_bytes + self._calls.parked_bytes

    @property
    def dropped_responses(self) -> int:
        return self._server.dropped_responses

    @property
    def last_chain(self) -> ListChain | None:
        return self._server.tools.last_chain

    @property
    def can_elicit(self) -> bool:
        """Whether the client's last initialize declared form-mode elicitation."""
        return self._calls.can_elicit

    # -- the rooms' parts tests reach --------------------------------------------------------

    @property
    def _pipeline(self) -> Pipeline:
        return self._calls.pipeline

    @_pipeline.setter
    def _pipeline(self, pipeline: Pipeline) -> None:
        self._calls.pipeline = pipeline

    @property
    def _flows(self) -> FlowTracker | None:
        """The flow rules' tracker (None: the policy has none)."""
        flows: FlowTracker | None = self._guards.tracker("flows")
        return flows

    @property
    def _rates(self) -> RateTracker | None:
        """The per-tool rate limits' tracker (None: the policy has none)."""
        rates: RateTracker | None = self._guards.tracker("rates")
        return rates

    @property
    def _approvals(self) -> approvals.Approvals | None:
        return self._room.table

    @property
    def _offers(self) -> approvals.Offers | None:
        offers = self._room.offers
        return offers if isinstance(offers, approvals.Offers) else None
