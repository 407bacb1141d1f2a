"""Approvals in a session: asking, the answer, a cancel, a timeout, the end (sans-IO).

A call the decision pipeline allows with ``approval_state`` ``required`` comes here (enforce
mode), in two steps of the pipeline (:mod:`assay.policy.guards.approvals`): :meth:`ApprovalRoom.settle`
is the settling guard (last in the pipeline: a call that cannot be asked gets the fallback, an
``approval_timeout`` of 0 denies, a 2026-07-28-era retry carries its answer), and
:meth:`ApprovalRoom.ask` the asking step (the effects that ask the person; the call is held).
2025-era clients are asked with wrap's own ``elicitation/create`` and the call is held
(:class:`~assay.session.approvals.held.Approvals`); 2026-07-28-era requests are answered with an
``input_required`` result and the retry carries the answer
(:class:`~assay.session.approvals.offers.Offers`). docs/wrap.md, "Approvals", describes both.
A held call's fate goes to ``settle`` (the call path: records, deny reply or forward).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from assay.policy import Decision, NameMatcher, Policy
from assay.policy.decision import ApprovalState
from assay.policy.pipeline import Call, Pipeline
from assay.policy.shared import Part
from assay.session import replies
from assay.session.approvals.held import (
    AskedCall,
    CANCEL_REASONS,
    DEFAULT_TIMEOUT_S,
    REASONS,
    WHICH,
    Approvals,
    HeldCall,
    can_elicit,
    cancel_notification,
    elicitation_request,
    read_answer,
    timeout_reason,
)
from assay.session.approvals.outofband import OutOfBand
from assay.session.approvals.offers import (
    CLIENT_CAPABILITIES_META,
    Offers,
    input_required_reply,
    read_input_response,
    rewrite_retry,
)
from assay.session.approvals.signed import SignedOffers
from assay.session.effects import Effect
from assay.session.ledger import Ledger
from assay.session.pending import id_key
from assay.session.server_side import ServerSide

__all__ = ["ApprovalRoom", "AskedCall", "CallSide", "OutOfBandSpec"]

OutOfBandSpec = tuple[str, str, str | None, float | None]
"""An out-of-band approver: its name, the server's label, the subject, the timeout (None: the
policy's ``approval_timeout``)."""

_S = ApprovalState


class CallSide(Protocol):
    """What the room needs of the call path (:class:`assay.session.calls.CallPath`): the clock,
    whether the client can be asked, the server side (replies), the ledger (receipts), the
    pipeline (defer), the label, where an accepted held call is judged again, and where a held
    call's fate goes."""

    clock: Callable[[], float]
    can_elicit: bool
    server: ServerSide
    ledger: Ledger
    pipeline: Pipeline
    label: str
    released: list[bytes]

    def accepted(self, call: HeldCall, out: list[Effect]) -> None: ...
    def settle(self, call: HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None: ...


class ApprovalRoom:
    """The approvals of one session. ``table`` and ``offers`` are None when nobody is asked
    (the policy asks for no approval, or a dry run): then the pipeline has no approval step
    (:attr:`asks` is False). The call path is attached (:meth:`attach`) once it is built."""

    __slots__ = ("_calls", "table", "offers", "fallback", "names", "_retry", "_era", "outofband")

    def __init__(
        self,
        policy: Policy,
        *,
        dry_run: bool,
        token: str | None = None,
        key: bytes | None = None,
        signed: Callable[[float], SignedOffers] | None = None,
        era: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None,
        approver: OutOfBandSpec | None = None,
    ) -> None:
        self._calls: CallSide | None = None
        self.table: Approvals | None = None
        # 2026-07-28-era approvals asked, not answered (in memory), or signed ones whose state
        # carries what the retry needs (``signed``, given the approval timeout: serve)
        self.offers: Offers | SignedOffers | None = None
        # the client capabilities of a request the shell knows is of the 2026-07-28 era when its
        # frame does not say so (serve: a link is a 2025-era session); None: read from the frame
        self._era = era
        self.fallback = "deny"
        self.names = NameMatcher(())
        self._retry: bytes | None = None  # an approved retry, rewritten (without its LF)
        tools = policy.tools
        if tools.approval_required is not None or tools.approval_required_classes is not None:
            self.fallback = tools.approval_fallback or "deny"
            self.names = NameMatcher(tools.approval_required or ())
            if not dry_run:
                timeout = tools.approval_timeout
                ttl = DEFAULT_TIMEOUT_S if timeout is None else timeout
                self.table = Approvals(ttl, token=token)
                self.offers = Offers(key) if signed is None else signed(ttl)
        # an out-of-band approver asks instead of the client (docs/serve.md, "Out-of-band approvers")
        self.outofband: OutOfBand | None = None
        if approver is not None and self.table is not None:
            name, label, subject, timeout = approver
            self.outofband = OutOfBand(name, self.table, self.denied, label=label, subject=subject, timeout=timeout)

    @property
    def asks(self) -> bool:
        """Whether the room asks (and so is the pipeline's approval step)."""
        return self.table is not None

    def attach(self, calls: CallSide) -> None:
        self._calls = calls
        if self.outofband is not None:
            self.outofband.calls = calls

    @property
    def calls(self) -> CallSide:
        calls = self._calls
        if calls is None:
            raise RuntimeError("ApprovalRoom: no call path attached")
        return calls

    @property
    def prefix(self) -> str | None:
        return self.table.prefix if self.table is not None else None

    @property
    def deadline(self) -> float | None:
        return self.table.deadline if self.table else None

    def owns(self, request_id: Any) -> bool:
        # out of band, wrap sends the client no request: no answer of the client is wrap's
        return self.table is not None and self.outofband is None and self.table.owns(request_id)

    def take_retry(self) -> bytes | None:
        retry, self._retry = self._retry, None
        return retry

    # -- asking ------------------------------------------------------------------------------

    def settle(self, call: Call, decision: Decision) -> Decision | None:
        """The settling guard (enforce mode): an allowed call that needs a person's approval and
        cannot be asked gets its decision now: the fallback (a client that cannot be asked, a
        notification of the 2026-07-28 era), a deny (``approval_timeout: 0``), or, for a
        2026-07-28-era retry that carries the person's answer, that answer (an accepted retry
        is forwarded rewritten: :meth:`take_retry`). None: the call is to be asked (:meth:`ask`)."""
        table = self.table
        offers = self.offers
        if table is None or offers is None:  # not reached: the room is a step only when it asks
            return self._fallback(decision)
        if self.outofband is not None:
            return self.outofband.settle(decision)
        frame = call.frame or {}
        modern = self.modern(frame)
        if modern is None:
            if not self.calls.can_elicit:
                return self._fallback(decision)
            if table.timeout <= 0:  # approval_timeout: 0 denies without asking
                return self.denied(decision, _S.TIMED_OUT, timeout_reason(0))
            return None
        # 2026-07-28 era: no initialize and no requests of wrap's own; the call is answered with
        # an input_required result asking the person, and its retry carries the answer
        params: Any = frame.get("params")
        if offers.claims(params):  # a retry answering one of wrap's approvals
            offer = offers.redeem(params.get("requestState"), call.name, call.arguments)
            if offer is None:
                return self.denied(decision, _S.FAILED, REASONS["state"])
            if offers.expired(offer, self.calls.clock(), table.timeout):
                return self.denied(decision, _S.TIMED_OUT, timeout_reason(table.timeout))
            answer = read_input_response(params)
            if answer is None:
                return self.denied(decision, _S.FAILED, REASONS["no_answer"])
            if answer != "accept":
                which = WHICH[answer]
                return self.denied(decision, _S(which), REASONS[which])
            line = rewrite_retry(frame, offer.restore)
            if line is None:
                return self.denied(decision, _S.FAILED, REASONS["rewrite"])
            self._retry = line
            return decision.replace(approval_state=_S.APPROVED.value)
        if "id" not in frame or not can_elicit({"capabilities": modern}):
            return self._fallback(decision)  # a notification gets no reply to ask with
        if table.timeout <= 0:  # approval_timeout: 0 denies without asking
            return self.denied(decision, _S.TIMED_OUT, timeout_reason(0))
        return None

    def ask(self, call: AskedCall, decision: Decision, out: list[Effect]) -> Decision | None:
        """The asking step: a call :meth:`settle` left ``required``. None: the person is asked
        (the effects are in ``out``) and the call is held (2025 era: wrap's
        ``elicitation/create``) or answered (2026-07-28 era: an ``input_required`` result; its
        retry passes the pipeline again), nothing recorded yet. Otherwise the deny to go on with
        (too many approvals pending, a call too large to hold)."""
        table = self.table
        offers = self.offers
        if table is None or offers is None:  # not reached: the room is a step only when it asks
            return self._fallback(decision)
        if self.outofband is not None:
            return self.outofband.ask(call, decision, out)
        frame = call.frame
        calls = self.calls
        if self.modern(frame) is not None:
            name, arguments = call.name, call.arguments
            state = offers.issue(name, arguments, call.params, calls.clock())
            if state is None:
                return self.denied(decision, _S.FAILED, REASONS["too_large"])
            calls.server.reply(input_required_reply(frame["id"], name, arguments, state), out)
            # one call in two rounds counts once against limits.max_tool_calls_total: at its
            # retry (the first round stays a request for limits.max_requests_total)
            calls.pipeline.defer()
            ledger = calls.ledger
            if ledger.receipting:
                ledger.receipt(call.raw, frame, False, None, out, disposition="consumed")
            return None
        raw = call.raw or b""
        if table.full:
            return self.denied(decision, _S.FAILED, REASONS["full"])
        if not table.fits(len(raw)):
            return self.denied(decision, _S.FAILED, REASONS["too_large"])
        approval_id = table.next_id()
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
                deadline=calls.clock() + table.timeout,
                request_key=id_key(frame["id"]) if "id" in frame else None,
            )
        )
        calls.server.reply(elicitation_request(approval_id, call.name, call.arguments), out)
        return None

    def shared_part(self, name: str) -> Part | None:
        """The state a shared session keeps for this room (the used nonces of signed
        approvals), under the guard's ``name``; None when it keeps none (in-memory approvals)."""
        offers = self.offers
        if not isinstance(offers, SignedOffers):
            return None
        return Part(name, offers.export, offers.restore)

    def modern(self, frame: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The client capabilities of a 2026-07-28-era request (its ``_meta``'s, or the
        shell's word); None for a request of the 2025 era."""
        era = self._era
        if era is not None:
            told = era(frame)
            if told is not None:
                return told
        if not replies.is_modern_request(frame):
            return None
        meta = frame["params"]["_meta"]
        caps = meta.get(CLIENT_CAPABILITIES_META)
        return caps if isinstance(caps, Mapping) else {}

    def _fallback(self, decision: Decision) -> Decision:
        """``tools.approval_fallback`` for a call whose client cannot be asked."""
        if self.fallback == "allow":
            return decision.replace(approval_state=_S.NOT_ASKED.value)
        return self.denied(decision, _S.UNAVAILABLE, REASONS["unavailable"])

    def denied(self, decision: Decision, which: ApprovalState, reason: str) -> Decision:
        """The deny of a call whose approval was not given (``approval`` says why)."""
        tool = decision.tool
        rule = "tools.approval_required" if self.names(tool) else "tools.approval_required_classes"
        contract = {
            "status": "deny",
            "error_code": "E_APPROVAL_DENIED",
            "tool": tool,
            "approval": which.value,
            "reason": reason,
        }
        return decision.denied("E_APPROVAL_DENIED", reason, contract, matched_rule=rule).replace(
            approval_state=which.value
        )

    # -- what became of a held call -----------------------------------------------------------

    def answer(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> None:
        """The client answered one of wrap's requests: consumed here, never forwarded. A late
        answer (the call was settled by a timeout, a cancel or the end) is ignored; one read
        after the deadline, before the timer settled the call, denies it ``timed_out``."""
        calls = self.calls
        if calls.ledger.receipting:
            calls.ledger.receipt(raw, frame, False, None, out, disposition="consumed")
        table = self.table
        call = table.take(frame["id"]) if table is not None else None
        if call is None or table is None:
            return
        answer = read_answer(frame)
        now = calls.clock()
        if call.deadline <= now:  # too late, whatever it says (the prompt is closed)
            decision = self.denied(call.decision, _S.TIMED_OUT, timeout_reason(table.timeout))
        elif answer == "accept":
            # judged again (in the shared session's store when there is one), then settled
            calls.accepted(call, out)
            return
        else:
            which = WHICH[answer]
            decision = self.denied(call.decision, _S(which), REASONS["error" if "error" in frame else which])
        calls.settle(call, decision, out)

    def cancel(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool:
        """``notifications/cancelled`` from the client: held calls with that request id are
        dropped without a reply (the client asked for none) and wrap's prompt is closed. True
        when the notification is consumed (no forwarded request has that id)."""
        if not self.table or "id" in frame:  # a request, whatever its method: no SDK reads it as a cancellation
            return False
        params = frame.get("params")
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        if key is None:
            return False
        held = self.table.take_request(key)
        if not held:
            return False
        calls = self.calls
        for call in held:
            self._close(call, "client", out)
            decision = self.denied(call.decision, _S.CANCELLED, REASONS["client_cancelled"])
            calls.settle(call, decision, out, answer=False)
        if calls.server.owes(key):  # a forwarded request reuses the id: the server gets it too
            return False
        if calls.ledger.receipting:
            calls.ledger.receipt(raw, frame, False, None, out, disposition="consumed")
        return True

    def expire(self, now: float, out: list[Effect]) -> None:
        """Held calls whose approval timed out: denied, and the client's prompt closed."""
        if self.table is None:
            return
        for call in self.table.expired(now):
            self._close(call, "timed_out", out)
            reason = timeout_reason(self.table.timeout)
            self.calls.settle(call, self.denied(call.decision, _S.TIMED_OUT, reason), out)

    def abandon(self, out: list[Effect]) -> None:
        """The session stops taking client input (client EOF, the child gone, a signal): every
        held call is denied ``cancelled`` (the client may still read) and its prompt closed."""
        if not self.table:
            return
        for call in self.table.take_all():
            self._close(call, "ended", out)
            self.calls.settle(call, self.denied(call.decision, _S.CANCELLED, REASONS["ended"]), out)

    def _close(self, call: HeldCall, cause: str, out: list[Effect]) -> None:
        """A held call settled by ``cause``: the client's prompt is closed (or the out-of-band
        approver stops asking)."""
        if self.outofband is not None:
            self.outofband.withdraw(call, out)
        else:
            self.calls.server.reply(cancel_notification(call.approval_id, CANCEL_REASONS[cause]), out)

    def approver_answered(self, approval_id: Any, answer: str, out: list[Effect]) -> None:
        """The out-of-band approver's answer (:meth:`OutOfBand.answered`); ignored without one."""
        if self.outofband is not None:
            self.outofband.answered(approval_id, answer, out)

    def discard(self) -> None:
        """Records cannot be written: held calls are dropped, nothing more is said."""
        if self.table is not None:
            self.table.take_all()
