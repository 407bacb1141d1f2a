"""The judge of an admitted client frame, and the tools/call path: the decision pipeline, the
records, the deny reply or the forward, the counts (sans-IO).

Only ``tools/call`` is evaluated (docs/policy.md, "Evaluation and reason codes"); every other
frame goes through, noted where it matters (a request's id awaits its answer, an
``initialize`` says whether the client can be asked, answers and cancellations that concern
wrap's own approval requests stay with wrap: docs/wrap.md, "Approvals"). docs/wrap.md, "Deny
replies", says what a denied call gets back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.policy import Decision
from assay.policy.decision import Outcome
from assay.policy.pipeline import Call, Pipeline, store_failed
from assay.wrap import approvals, replies
from assay.wrap.effects import Effect, Warn
from assay.wrap.requests import JUDGED_METHODS
from assay.wrap.ledger import Ledger
from assay.wrap.server_side import ServerSide

if TYPE_CHECKING:
    from assay.wrap.records.clients import ClientNotes
    from assay.wrap.inspection import Inspector

__all__ = ["Asking", "CallPath", "ToolCall", "tool_call_of"]

_TOOLS_CALL = "tools/call"
_CANCELLED = "notifications/cancelled"
_DENY = Outcome.DENY


class ToolCall(Call, gc=False, repr_omit_defaults=True):
    """One ``tools/call`` frame, read once (:func:`tool_call_of`): what the decision pipeline
    judges (the tool's name and arguments, the server's label, the frame), plus the line as read
    (``raw``: its receipt's digest), its ``params``, and whether ``params`` has the shape of a
    call (a dict with a string ``name``; otherwise the name is ``""`` and the arguments
    ``None``)."""

    frame: dict[str, Any] = {}  # always the frame here (the default only satisfies the field order)
    raw: bytes | None = None
    params: Any = None
    valid: bool = False

    @property
    def has_id(self) -> bool:
        return "id" in self.frame


def tool_call_of(raw: bytes | None, frame: dict[str, Any], server: str) -> ToolCall:
    """The :class:`ToolCall` of an admitted ``tools/call`` frame."""
    params: Any = frame.get("params")
    if params.__class__ is dict and params.get("name").__class__ is str:
        return ToolCall(params["name"], params.get("arguments"), server, frame, raw, params, True)
    return ToolCall("", None, server, frame, raw, params, False)


class Asking(Protocol):
    """What the call path needs of the approvals room (:class:`assay.wrap.approvals.room.ApprovalRoom`;
    asking itself is the pipeline's step, :meth:`Pipeline.ask`): whether it asks, the answers
    and cancellations that concern its requests, and an approved retry to forward."""

    @property
    def asks(self) -> bool: ...
    def owns(self, request_id: Any) -> bool: ...
    def answer(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> None: ...
    def cancel(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool: ...
    def take_retry(self) -> bytes | None: ...


class CallPath:
    """Judges admitted frames in order; holds what a judgement needs."""

    __slots__ = (
        "pipeline", "ledger", "server", "label", "dry_run", "clock", "can_elicit", "released",
        "room", "_asking", "inspector",
    )

    def __init__(
        self, pipeline: Pipeline, ledger: Ledger, server: ServerSide, label: str, dry_run: bool, clock: Callable[[], float]
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
        elif method == _CANCELLED and self._asking is not None and self._asking.cancel(raw, frame, out):
            return False
        if "id" in frame:
            self.pipeline.note_request()
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
        and deny it or let it through."""
        notes = self.ledger.clients
        if notes is not None and call.valid and "_meta" in call.params and notes.open:
            self._declared(call, notes, out)
        pipeline = self.pipeline
        if pipeline.shared is None:
            return self._tool_call(call, pipeline.decide(call), out)
        # a shared session (docs/wrap.md, "Shared sessions"): the call is decided inside the
        # store's transaction, which entering the call or this release ends
        try:
            return self._tool_call(call, pipeline.decide(call), out)
        finally:
            pipeline.release()
            self.tell(out)

    def tell(self, out: list[Effect]) -> None:
        """The shared session store's new failures, one stderr line each."""
        notices = self.pipeline.notices
        if notices:
            out.extend(Warn(f"assay: shared session: {cause}; calls are denied (E_SESSION_STATE)") for cause in notices)
            notices.clear()

    def _tool_call(self, call: ToolCall, decision: Decision, out: list[Effect]) -> bool:
        frame = call.frame
        pipeline = self.pipeline
        asked = pipeline.ask(call, decision, out)  # the asking step (docs/wrap.md, "Approvals")
        if asked is None:  # held until the person answers: nothing recorded yet
            return False
        decision = asked
        retry = None if self._asking is None else self._asking.take_retry()
        if decision.outcome is not _DENY and pipeline.guarded:
            problem = pipeline.enter(call)
            if problem is not None:  # a shared session's store failed to save it: not counted
                decision = store_failed(decision, call.name, problem)
        ledger = self.ledger
        event_id = None
        if ledger.active:  # self.record, inlined: every recorded call's path
            valid = call.valid
            name = call.name
            binding = self.server.tools.bindings.get(name) if valid else None
            event_id = ledger.record(decision, frame, call.params, name, valid, binding, out)
        inspector = self.inspector
        if inspector is not None and inspector.flagged:
            self.flagged(out)
        if decision.outcome is _DENY and not self.dry_run:
            self.deny(call, decision, out)
            if ledger.receipting:
                ledger.receipt(call.raw, frame, False, event_id, out)
            return False
        if "id" in frame:
            self.server.pending.add(frame["id"], _TOOLS_CALL if inspector is None else inspector.watch(call.name, frame))
        ledger.forwarded += 1
        if ledger.receipting:
            ledger.receipt(call.raw, frame, True, event_id, out)
        if retry is not None:  # an approved 2026-07-28-era retry goes without wrap's members
            self.released.append(retry)
            return False
        return True

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
            self.ledger.inspected(out, method=_TOOLS_CALL, request_id=rid, target=name, action="flag",
                                  findings=findings, total=total)
        inspector.flagged.clear()

    def record(self, call: ToolCall | approvals.HeldCall, decision: Decision, out: list[Effect]) -> str | None:
        """The records of one evaluated call (:class:`Ledger`); the event id."""
        binding = self.server.tools.bindings.get(call.name) if call.valid else None
        return self.ledger.record(decision, call.frame, call.params, call.name, call.valid, binding, out)

    def deny(self, call: ToolCall | approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None:
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

    def settle(self, call: approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None:
        """A held call's fate is known: its records, then its deny reply (unless ``answer`` is
        False) or its forward (after the frame in hand, through ``released``)."""
        pipeline = self.pipeline
        if decision.outcome is not _DENY:
            problem = pipeline.enter(Call(call.name, call.arguments, self.label, call.frame))
            if problem is not None:  # a shared session's store failed to save it: not counted
                decision = store_failed(decision, call.name, problem)
        if pipeline.shared is not None:  # a re-check that denied: its transaction ends here
            pipeline.release()
            self.tell(out)
        ledger = self.ledger
        frame = call.frame
        event_id = None
        if ledger.active:
            event_id = self.record(call, decision, out)
        if decision.outcome is _DENY:
            self.deny(call, decision, out, answer=answer)
            if ledger.receipting:
                ledger.receipt(call.raw, frame, False, event_id, out)
            return
        if "id" in frame:
            inspector = self.inspector
            self.server.pending.add(frame["id"], _TOOLS_CALL if inspector is None else inspector.watch(call.name, frame))
        ledger.forwarded += 1
        if ledger.receipting:
            ledger.receipt(call.raw, frame, True, event_id, out)
        self.released.append(call.line)
