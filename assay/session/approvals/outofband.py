"""Approvals asked of an out-of-band approver instead of the client (sans-IO; docs/serve.md,
"Out-of-band approvers").

A headless client answers an elicitation itself, so a gateway can name an approver of its own (a
webhook, or the queue that ``assay mcp approvals`` answers). A session given one
(``SessionOptions.approver``) holds every call that needs approval exactly as a 2025-era call is
held (the same table, bounds and deadline), in both protocol eras, whatever the client declared,
and emits :class:`~assay.session.effects.AskApprover` instead of asking the client. The shell asks
the approver and hands the answer to :meth:`OutOfBand.answered`, which settles the held call on
the call path (records, then the deny reply or the forward), as a client's answer would. The
timeout, the client's cancel and the run's end settle it as before; the approver is then told to
stop (:class:`~assay.session.effects.WithdrawApproval`) instead of the client's prompt being
closed. An answer for an id that is unknown or settled already is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

from assay.policy.decision import ApprovalState, Decision
from assay.session.approvals.held import REASONS as CLIENT_REASONS
from assay.session.approvals.held import Approvals, AskedCall, HeldCall, timeout_reason
from assay.session.effects import AskApprover, Effect, ToServer, WithdrawApproval
from assay.session.pending import id_key

__all__ = ["ANSWERS", "REASONS", "OutOfBand"]

_S = ApprovalState

ANSWERS: Final = ("accept", "decline", "cancel", "failed")
"""What an approver can answer: ``accept`` lets the call run, every other word denies it."""

_WHICH: Final = {"decline": _S.DECLINED, "cancel": _S.CANCELLED}

REASONS: Final = {
    _S.DECLINED: "The approver declined the tool call",
    _S.CANCELLED: "The approver withdrew the approval request without answering",
    _S.FAILED: "The approver could not be asked, or its answer could not be read",
}
"""The deny payload's ``reason`` when the approver did not approve (fixed texts)."""


class Settling(Protocol):
    """What an answer needs of the call path (:class:`assay.session.calls.CallPath`)."""

    clock: Callable[[], float]
    released: list[bytes]

    def accepted(self, call: HeldCall, out: list[Effect]) -> None: ...
    def settle(self, call: HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None: ...


Denied = Callable[[Decision, ApprovalState, str], Decision]


class OutOfBand:
    """The out-of-band mode of one session's approvals room: ``table`` is the room's table of
    held calls (its timeout replaced by ``timeout`` when given), ``denied`` the room's deny of a
    call whose approval was not given."""

    __slots__ = ("approver", "table", "subject", "label", "denied", "calls")

    def __init__(
        self,
        approver: str,
        table: Approvals,
        denied: Denied,
        *,
        label: str,
        subject: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.approver = approver
        self.table = table
        self.denied = denied
        self.label = label
        self.subject = subject
        self.calls: Settling | None = None
        if timeout is not None:
            table.timeout = timeout

    def _calls(self) -> Settling:
        calls = self.calls
        if calls is None:
            raise RuntimeError("OutOfBand: no call path attached")
        return calls

    def settle(self, decision: Decision) -> Decision | None:
        """The settling guard's part: a timeout of 0 denies without asking; else None, the call
        is asked (:meth:`ask`), whatever its era and whatever the client declared."""
        if self.table.timeout <= 0:
            return self.denied(decision, _S.TIMED_OUT, timeout_reason(0))
        return None

    def ask(self, call: AskedCall, decision: Decision, out: list[Effect]) -> Decision | None:
        """Hold the call and ask the approver (None), or the deny to go on with (too many calls
        held, too many bytes)."""
        table = self.table
        raw = call.raw or b""
        if table.full:
            return self.denied(decision, _S.FAILED, CLIENT_REASONS["full"])
        if not table.fits(len(raw)):
            return self.denied(decision, _S.FAILED, CLIENT_REASONS["too_large"])
        frame = call.frame
        approval_id = table.next_id()
        deadline = self._calls().clock() + table.timeout
        table.hold(
            HeldCall(
                approval_id=approval_id,
                raw=raw,
                line=raw[:-1] if raw.endswith(b"\n") else raw,
                frame=frame,
                params=call.params,
                name=call.name,
                arguments=call.arguments,
                valid=call.valid,
                decision=decision,
                deadline=deadline,
                request_key=id_key(frame["id"]) if "id" in frame else None,
            )
        )
        out.append(AskApprover(approval_id, self.subject, self.label, call.name, call.arguments, deadline))
        return None

    def answered(self, approval_id: Any, answer: str, out: list[Effect]) -> None:
        """The approver's answer to :class:`AskApprover` ``approval_id``: ``accept`` judges the
        call again (as a person's accept does) and forwards it; ``decline``, ``cancel`` and
        anything else deny it. At or after the deadline it is denied ``timed_out`` whatever it
        says. An id that is not held (unknown, or settled already) is ignored."""
        table = self.table
        call = table.take(approval_id) if approval_id.__class__ is str else None
        if call is None:
            return
        calls = self._calls()
        if call.deadline <= calls.clock():
            decision = self.denied(call.decision, _S.TIMED_OUT, timeout_reason(table.timeout))
        elif answer == "accept":
            calls.accepted(call, out)  # judged again (in the store's transaction when shared)
            _flush(calls, out)
            return
        else:
            which = _WHICH.get(answer, _S.FAILED)
            decision = self.denied(call.decision, which, REASONS[which])
        calls.settle(call, decision, out)

    @staticmethod
    def withdraw(call: HeldCall, out: list[Effect]) -> None:
        """The held call was settled without the approver: it stops asking."""
        out.append(WithdrawApproval(call.approval_id))


def _flush(calls: Settling, out: list[Effect]) -> None:
    """An accepted call judged at once goes to the server now (no client frame is in hand to
    carry it, as a client's answer is); one that waits for the store goes when it is done."""
    if calls.released:
        out.append(ToServer(b"".join(line + b"\n" for line in calls.released)))
        calls.released.clear()
