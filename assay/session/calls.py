"""The judge of an admitted client frame, and the tools/call path: the decision pipeline, the
records, the deny reply or the forward, the counts (sans-IO).

Only ``tools/call`` is evaluated (docs/policy.md, "Evaluation and reason codes"); every other
frame goes through, noted where it matters (a request's id awaits its answer, an
``initialize`` says whether the client can be asked, answers and cancellations that concern
wrap's own approval requests stay with wrap: docs/wrap.md, "Approvals"). docs/wrap.md, "Deny
replies", says what a denied call gets back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.policy import Decision
from assay.policy.decision import Outcome
from assay.policy.pipeline import Call, Pipeline
from assay.session import approvals, replies
from assay.session.effects import Effect, ToServer, Warn
from assay.session.pending import id_key
from assay.session.requests import JUDGED_METHODS
from assay.session.jobs import _CALL, _MERGE, _RECHECK, Job, ToolCall, tool_call_of
from assay.session.ledger import Ledger
from assay.session.server_side import ServerSide
from assay.session.storetrip import APPROVED, StoreTrip

if TYPE_CHECKING:
    from assay.session.records.clients import ClientNotes
    from assay.session.inspection import Inspector

__all__ = ["Asking", "CallPath"]

_TOOLS_CALL = "tools/call"
_CANCELLED = "notifications/cancelled"
_DENY = Outcome.DENY


class Asking(Protocol):
    """What the call path needs of the approvals room (:class:`assay.session.approvals.room.ApprovalRoom`;
    asking itself is the pipeline's step, :meth:`Pipeline.ask`): whether it asks, the answers
    and cancellations that concern its requests, and an approved retry to forward."""

    @property
    def asks(self) -> bool: ...
    def owns(self, request_id: Any) -> bool: ...
    def answer(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> None: ...
    def cancel(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool: ...
    def take_retry(self) -> bytes | None: ...


class CallPath(StoreTrip):
    """Judges admitted frames in order; holds what a judgement needs.

    With a shared session (docs/wrap.md, "Shared sessions") the decision needs the store, which
    this sans-IO code never calls: a call is parked as a :class:`Job` and the session emits
    :class:`~assay.session.effects.StoreBegin`; the shell answers with :meth:`begun` (decide, then
    :class:`~assay.session.effects.StoreCommit`) and :meth:`committed` (the post-decision path,
    the forward or the deny). One transaction at a time: the jobs queue in order, and every
    frame that is not a call flows meanwhile.

    Once a transaction was saved, the next job is done in one round trip (optimistic
    concurrency): decided at once on what that transaction left, and sent as
    :class:`~assay.session.effects.StoreAttempt`, which the store writes only if no other wrap
    wrote since; the shell answers with :meth:`attempted`. When another wrap wrote, the store
    hands over the fresh state with its transaction open, and the job is decided again on it as
    after :meth:`begun` (once: that transaction holds the lock). A session whose policy asks
    for approvals always opens the transaction first (asking cannot be taken back)."""

    __slots__ = (
        "pipeline",
        "ledger",
        "server",
        "label",
        "dry_run",
        "clock",
        "can_elicit",
        "released",
        "room",
        "_asking",
        "inspector",
    )

    def __init__(
        self,
        pipeline: Pipeline,
        ledger: Ledger,
        server: ServerSide,
        label: str,
        dry_run: bool,
        clock: Callable[[], float],
    ) -> None:
        self.pipeline = pipeline
        self.ledger = ledger
        self.server = server
        self.label = label
        self.dry_run = dry_run
        self.clock = clock
        self.can_elicit = False  # the client's last initialize declared form-mode elicitation
        self.released: list[bytes] = []  # accepted held calls to forward now (lines without LF)
        self.room: Asking | None = None  # approvals (the policy asks for some)
        self._asking: Asking | None = None  # the same, when it asks (not a dry run)
        self.inspector: Inspector | None = None  # the inspection room (the policy asks for one)
        self.jobs: deque[Job] = deque()  # waiting for the store, in order (a shared session)
        self.busy: Job | None = None  # the job whose transaction is open or opening
        self.parked_bytes = 0  # what the queued jobs hold: the shell stops reading the client past a bound
        self._trailing = 0  # client requests read since the last queued call (while jobs wait)
        self.on_idle: Callable[[list[Effect]], None] | None = None  # the session: the jobs are done

    def attach(self, room: Asking) -> None:
        self.room = room
        self._asking = room if room.asks else None

    def judge(self, frame: dict[str, Any], out: list[Effect], raw: bytes | None) -> bool:
        """One admitted frame: True when it is to be forwarded. ``raw`` (the line as read,
        with or without its terminator) is needed only for receipts."""
        method = frame.get("method")
        if method == _TOOLS_CALL:
            return self.tool_call(tool_call_of(raw, frame, self.label), out)
        ledger = self.ledger
        if method is None:  # a client response to a server request (or to wrap's own)
            asking = self._asking
            if asking is not None and asking.owns(frame.get("id")):
                asking.answer(raw, frame, out)
                return False
            ledger.forwarded += 1
            if ledger.receipting:
                ledger.receipt(raw, frame, True, None, out)
            return True
        if method == "initialize" and "id" in frame:  # a later initialize replaces what it said
            params = frame.get("params")
            caps = params.get("capabilities") if isinstance(params, dict) else None
            mode = approvals.elicitation_mode(caps)
            self.can_elicit = mode == "form"
            notes = ledger.clients
            if notes is not None:  # docs/wrap-records.md, "The client"
                ledger.client(notes.initialize(params, mode), out)
        elif method == _CANCELLED and (
            self.busy is not None
            and self._cancel_parked(raw, frame, out)
            or self._asking is not None
            and self._asking.cancel(raw, frame, out)
        ):
            return False
        if "id" in frame:
            if self.busy is None:
                self.pipeline.note_request()
            else:  # counted after the calls that wait for the store (they came first)
                self._trailing += 1
            entry: Any = method
            inspector = self.inspector
            if inspector is not None and method in JUDGED_METHODS:
                entry = inspector.request(frame, out)  # resources and prompts under the policy
                if entry is None:  # denied: its reply and records are in out
                    return False
            self.server.request(frame["id"], entry, frame.get("params"))
        ledger.forwarded += 1
        if ledger.receipting:
            ledger.receipt(raw, frame, True, None, out)
        return True

    def tool_call(self, call: ToolCall, out: list[Effect]) -> bool:
        """Decide one call (a call that needs a person's approval is asked first), record it,
        and deny it or let it through. With a shared session it waits for the store (False:
        its forward or deny comes with :meth:`committed`)."""
        notes = self.ledger.clients
        if notes is not None and call.valid and "_meta" in call.params and notes.open:
            self._declared(call, notes, out)
        pipeline = self.pipeline
        if pipeline.shared is None:
            decision = pipeline.decide(call)
            if decision.approval_state is not None:  # most calls need no approval: no call to _asked
                asked = self._asked(call, decision, out)
                if asked is None:
                    return False
                decision = asked
            if pipeline.guarded and decision.outcome is not _DENY:  # no guard: nothing to enter
                pipeline.enter(call)
            return self._after(call, decision, out)
        self._park(Job(_CALL, call=call, before=self._trailing), out)
        self._trailing = 0
        return False

    def tell(self, out: list[Effect]) -> None:
        """The shared session store's new failures, one stderr line each."""
        notices = self.pipeline.notices
        if notices:
            out.extend(Warn(f"assay: shared session: {cause}; calls are denied (E_SESSION_STATE)") for cause in notices)
            notices.clear()

    def _asked(self, call: ToolCall, decision: Decision, out: list[Effect]) -> Decision | None:
        """A fresh call that needs a person's approval is asked first, by the pipeline's asking
        step (docs/wrap.md, "Approvals"): None when it is held until the person answers
        (nothing recorded yet), else the decision to go on with."""
        return self.pipeline.ask(call, decision, out)

    def _after(
        self, call: ToolCall | approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True
    ) -> bool:
        """The post-decision path of every call, fresh or held, once it entered (or not) and
        was saved: its records, then its deny reply (unless ``answer`` is False: the client
        cancelled it) or its forward (pending answer, count, receipt). True when the frame is
        to be forwarded as it is; an approved 2026-07-28-era retry goes through ``released``
        instead (rewritten, without wrap's members)."""
        room = self.room
        retry = room.take_retry() if room is not None and call.__class__ is ToolCall else None
        ledger = self.ledger
        frame = call.frame
        event_id = None
        if ledger.active:  # self.record, inlined: every recorded call's path
            binding = self.server.tools.bindings.get(call.name) if call.valid else None
            event_id = ledger.record(decision, frame, call.params, call.name, call.valid, binding, out)
        inspector = self.inspector
        if inspector is not None and inspector.flagged:
            self.flagged(out)
        if decision.outcome is _DENY and not self.dry_run:
            self.deny(call, decision, out, answer=answer)
            if ledger.receipting:
                ledger.receipt(call.raw, frame, False, event_id, out)
            return False
        if "id" in frame:
            self.server.pending.add(
                frame["id"], _TOOLS_CALL if inspector is None else inspector.watch(call.name, frame)
            )
        ledger.forwarded += 1
        if ledger.receipting:
            ledger.receipt(call.raw, frame, True, event_id, out)
        if retry is not None:
            self.released.append(retry)
            return False
        return True

    def settle(self, call: approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None:
        """A held call's fate is known: its records, then its deny reply (unless ``answer`` is
        False) or its forward (after the frame in hand, through ``released``)."""
        if decision.outcome is not _DENY:
            self.pipeline.enter(Call(call.name, call.arguments, self.label, call.frame))
        if self._after(call, decision, out, answer=answer):
            self.released.append(call.line)

    def accepted(self, call: approvals.HeldCall, out: list[Effect]) -> None:
        """A person accepted a held call: what the engine reads (pins, symlinks) and other calls
        may have changed meanwhile, so the engine and the session's checks run again (in the
        store's transaction when the session is shared), then :meth:`settle`."""
        pipeline = self.pipeline
        if pipeline.shared is None:
            again = Call(call.name, call.arguments, self.label, call.frame)
            self.settle(call, pipeline.recheck(again, call.decision).replace(approval_state=APPROVED), out)
            return
        self._park(Job(_RECHECK, held=call, before=self._trailing), out)
        self._trailing = 0

    def merge(self, change: Callable[[float], bool], out: list[Effect]) -> Job | None:
        """What an answer brought back changes the session's state (``change(now)`` moves the
        trackers, says whether anything changed): at once without a shared session (None), else
        in the store's transaction, queued behind the calls waiting for it (the job: the
        answer's line waits in its ``relay``)."""
        pipeline = self.pipeline
        if pipeline.shared is None:
            pipeline.update(change)
            return None
        job = Job(_MERGE, change=change)
        self._park(job, out)
        return job

    def _settled(self, job: Job, out: list[Effect]) -> None:
        decision = job.decision
        if decision is not None:
            if job.kind == _CALL:
                call = job.call
                assert call is not None
                if self._after(call, decision, out):
                    out.append(ToServer(_line(call.raw, call.frame)))
            else:
                held = job.held
                assert held is not None
                if self._after(held, decision, out):
                    self.released.append(held.line)
            if self.released:  # an approved retry, or an accepted held call
                out.append(ToServer(b"".join(line + b"\n" for line in self.released)))
                self.released.clear()
        if job.after:
            out.append(ToServer(b"".join(job.after)))
        self._done(job, out)

    def _done(self, job: Job, out: list[Effect]) -> None:
        if job.relay is not None:  # an answer that waited for its merge
            self.server.reply(job.relay + b"\n", out)
        self.tell(out)
        self._next(out)

    def drop_calls(self) -> None:
        """The run stopped (a signal, the child gone): the calls that wait for the store are
        never sent, nothing of them counted or recorded."""
        for job in (self.busy, *self.jobs):
            if job is not None and job.kind != _MERGE and (job.saved is None or job.attempting):
                job.cancelled = True  # an attempting call is dropped if the store did not write it

    def _cancel_parked(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool:
        """``notifications/cancelled`` for a call that waits for the store: it is never sent and
        nothing of it is counted or recorded; the notification is consumed (True). A call
        being saved (its decision made) goes on, and the notification follows it to the
        server."""
        if "id" in frame:
            return False
        params = frame.get("params")
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        if key is None:
            return False
        for job in (self.busy, *self.jobs):
            call = job.call if job is not None else None
            if (
                job is None
                or call is None
                or job.cancelled
                or "id" not in call.frame
                or id_key(call.frame["id"]) != key
            ):
                continue
            if job.saved is not None:  # decided, being saved: the cancellation follows the call
                job.after.append(_line(raw, frame))
                if job.attempting:  # unless the store did not write it: then the call is dropped
                    job.cancelled = True
                    job.cancel_note = (raw, frame)
                return True
            job.cancelled = True
            if job is not self.busy:
                self.jobs.remove(job)
                self.parked_bytes -= job.size
                if self.jobs:
                    self.jobs[0].before += job.before
                else:
                    self._trailing += job.before
            ledger = self.ledger
            if ledger.receipting:
                ledger.receipt(raw, frame, False, None, out, disposition="consumed")
            return True
        return False

    def _declared(self, call: ToolCall, notes: ClientNotes, out: list[Effect]) -> None:
        """What a 2026-07-28-era call declares about its client in its own ``_meta`` (that era
        has no ``initialize``), recorded when it differs from what the last one declared."""
        meta = call.params["_meta"]
        if isinstance(meta, dict) and replies.is_modern_request(call.frame):
            mode = approvals.elicitation_mode(meta.get(approvals.CLIENT_CAPABILITIES_META))
            self.ledger.client(notes.request(meta, mode), out)

    def flagged(self, out: list[Effect]) -> None:
        """The findings the inspection guard flagged in the arguments of the call just decided
        (docs/wrap-records.md, "Inspection findings")."""
        inspector = self.inspector
        assert inspector is not None
        for name, frame, findings, total in inspector.flagged:
            rid = frame.get("id") if frame is not None else None
            self.ledger.inspected(
                out, method=_TOOLS_CALL, request_id=rid, target=name, action="flag", findings=findings, total=total
            )
        inspector.flagged.clear()

    def record(self, call: ToolCall | approvals.HeldCall, decision: Decision, out: list[Effect]) -> str | None:
        """The records of one evaluated call (:class:`Ledger`); the event id."""
        binding = self.server.tools.bindings.get(call.name) if call.valid else None
        return self.ledger.record(decision, call.frame, call.params, call.name, call.valid, binding, out)

    def deny(
        self, call: ToolCall | approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True
    ) -> None:
        """A denied call: a request gets the deny reply (unless ``answer`` is False: the client
        cancelled it), a notification nothing (dropped)."""
        frame = call.frame
        if "id" in frame and answer:
            self.server.reply(
                replies.deny_reply(
                    frame["id"],
                    decision.contract or {},
                    modern=replies.is_modern_request(frame),
                    structured=not self.server.tools.may_have_output_schema(call.name),
                ),
                out,
            )
            self.ledger.blocked += 1
        else:
            self.ledger.dropped += 1


def _line(raw: bytes | None, frame: dict[str, Any]) -> bytes:
    """The line to forward for a frame read as ``raw`` (with its LF)."""
    if raw is None:  # not reached from the client's side, which always has the line
        import msgspec

        return msgspec.json.encode(frame) + b"\n"
    return raw if raw.endswith(b"\n") else raw + b"\n"
