"""One wrap run as plain code over bytes: client bytes, server bytes and events in, effects out.

:class:`WrapSession` is the whole protocol side of ``assay mcp wrap`` and does no I/O: it splits
and admits client lines, evaluates ``tools/call`` against the policy, starts the session, keeps
the pins, the pending-request table and the tools/list chains, reads server lines, and decides
when and how the run ends. The trio shell (:mod:`assay.wrap.relay`) reads, calls one method,
and performs the effects it gets back (:mod:`assay.wrap.effects` says how).

=====================================  ===============================================
the shell saw                          it calls
=====================================  ===============================================
bytes from the client                  :meth:`receive_client_data`
the client's end of file               :meth:`client_closed`
the client stopped reading (EPIPE)     :meth:`client_lost`
the verdict of an :class:`AdmitLine`   :meth:`admitted`
bytes from the child's stdout          :meth:`receive_server_data`
the child's stdout closed              :meth:`server_closed`
the child stopped reading (EPIPE)      :meth:`server_input_closed`
the child exited                       :meth:`child_exited`
SIGINT, SIGTERM or SIGHUP              :meth:`signal`
the clock reached :attr:`deadline`     :meth:`timer`
a record could not be written          :meth:`output_failed`
the one-run outputs could not be made  :meth:`start_failed`
=====================================  ===============================================

Time comes from the ``clock`` given to the constructor (the shell passes trio's), so tests run
the lifecycle without sleeping. docs/wrap.md, "Lifecycle", describes every path.
"""

from __future__ import annotations

import signal as _signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from assay.policy import Decision, NameMatcher, Policy, SessionState
from assay.policy.pipeline import Call, FlowGuard, Guard, Pipeline, RateGuard
from assay.policy.rates import tracker_for
from assay.wrap import approvals, records, replies, serverlines
from assay.wrap.admission import (
    DEFAULT_MAX_FRAME_BYTES,
    Admitted,
    LineSplitter,
    Rejected,
    admit,
    admit_region,
    frame_digest,
)
from assay.wrap.effects import (
    AdmitLine,
    CloseServerInput,
    Effect,
    Finish,
    Phase,
    Record,
    SignalChild,
    Sink,
    StartSession,
    StopCause,
    StopClient,
    ToClient,
    ToServer,
    Warn,
)
from assay.wrap.listing import ListChain, denied_by_name, hide_tools, tool_definition_digest
from assay.wrap.pending import Key, PendingTable, id_key

if TYPE_CHECKING:
    from assay.policy.flows import FlowTracker
    from assay.wrap.baseline import Baseline

__all__ = ["SessionOptions", "WrapSession", "exit_status", "tool_definition_digest"]

SERVER_HOLD_LIMIT = 64 << 20  # a server line is held whole (and read) up to this size
BIG_CLIENT_LINE = 1 << 20  # client lines at least this long are admitted off the event loop
KILL_AFTER_TERM_S = 0.5  # SIGKILL this long after SIGTERM
SIGNAL_DRAIN_S = 0.5  # after a signal, output already written gets this long to reach the client
FATAL_FLUSH_S = 5.0  # after a failed record, the frames before it get this long to take effect
MIN_SILENCE_S = 0.05  # the least silence after which a descendant holding stdout is killed

_TOOLS_LIST = "tools/list"
_TOOLS_CALL = "tools/call"
_CANCELLED = "notifications/cancelled"
_UNSET: Any = msgspec.UNSET


class _Head(msgspec.Struct):
    """The members of a server line that decide whether it is relayed."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_read_head = msgspec.json.Decoder(_Head).decode


@dataclass
class SessionOptions:
    """What one run asks for (the wrap options that shape the session)."""

    dry_run: bool = False
    verbose: bool = False
    label: str = "default-mcp-server"
    event_source: str | None = None
    decision_sinks: tuple[Sink, ...] = ()  # sinks that take decision events
    audit: bool = False
    keep_events: bool = False  # keep this run's coverage aggregate (bounded; for --coverage-out)
    receipts: bool = False  # build request receipts
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    shutdown_grace: float = 1.0
    server_hold_limit: int = SERVER_HOLD_LIMIT
    # --declared-manifest: the document assay.manifest.declared.parse_declared returned
    declared_manifest: dict[str, Any] | None = None
    hide_denied_tools: bool = False  # --hide-denied-tools (never in a dry run)


def exit_status(child_returncode: int | None, wrap_signal: int | None) -> int:
    """128+N if wrap got signal N; else the child's code, or 128+N if it died of signal N."""
    if wrap_signal is not None:
        return 128 + wrap_signal
    if child_returncode is None:
        return 2
    if child_returncode < 0:
        return 128 - child_returncode
    return child_returncode


class WrapSession:
    """Policy state, bookkeeping and the lifecycle of one wrap run (one client stream)."""

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
    ) -> None:
        self.policy = policy
        self.options = options = options or SessionOptions()
        self.state = SessionState()
        self._clock = clock
        # the decision pipeline's guards after the engine, in order (docs/policy.md, "Evaluation
        # and reason codes"): the declared baseline, per-tool rate limits, flow rules
        guards: list[Guard] = []
        self._recorder = records.Recorder(
            source=options.event_source or "",
            label=options.label,
            dry_run=options.dry_run,
            decision_log=bool(options.decision_sinks),
            audit_log=options.audit,
            keep_events=options.keep_events,
            verbose=options.verbose,
            new_event_id=new_event_id,
            now=now,
        )
        self._records_on = self._recorder.active
        # -- the declared baseline (docs/wrap.md, "Declared baseline") and hidden tools
        declared = options.declared_manifest
        self._baseline: Baseline | None = None
        if declared is not None:  # assay.manifest is loaded only when a run asks for it
            from assay.wrap.baseline import Baseline, BaselineGuard

            self._baseline = Baseline(declared)
            guards.append(BaselineGuard(self._baseline))
        self._rates = tracker_for(policy)  # limits.tools; None: no per-tool rate rules
        if self._rates is not None:
            guards.append(RateGuard(self._rates))
        self._flows: FlowTracker | None = None  # set when the policy has flow rules
        if policy.sequences:
            from assay.policy.flows import FlowTracker  # loaded only for a policy that uses it

            self._flows = FlowTracker(policy.sequences, policy.aliases)
            guards.append(FlowGuard(self._flows))
        self._pipeline = Pipeline(policy, self.state, guards)
        self._hide = options.hide_denied_tools and not options.dry_run
        # -- client side
        self._splitter = LineSplitter(options.max_frame_bytes)
        self._fast_limit = min(BIG_CLIENT_LINE - 1, options.max_frame_bytes)
        self._queue: deque[bytes | Rejected] = deque()  # split, not yet judged (behind an AdmitLine)
        self._admitting = False
        self._eof_waiting = False  # the client closed while a long line was being admitted
        self._fwd: list[bytes] = []  # judged frames to forward, not yet emitted
        self.started = False  # the run became a session
        self.seen_nonblank = False
        self.forwarded = self.blocked = self.rejected = self.dropped = 0  # frames of the session
        self._receipt_seq = 0
        # -- server side
        self._pending = PendingTable()
        self._pending_tools_list: set[Key] = set()
        self._chains: dict[Key, ListChain] = {}
        self.last_chain: ListChain | None = None
        self._output_schema_tools: set[str] = set()  # tools listed with an outputSchema
        self._bindings: dict[str, str] = {}  # tool name -> tool-definition digest
        self.dropped_responses = 0
        self._tail = bytearray()  # a server line not yet ended
        self._streaming = False  # a server line longer than SERVER_HOLD_LIMIT is being relayed
        self._held: list[bytes] = []  # wrap's replies waiting for that line to end
        self.held_bytes = 0  # their size: the shell stops reading the client past its queue bound
        # -- lifecycle
        self.phase = Phase.RUNNING
        self.stop_cause: StopCause | None = None
        self.wrap_signal: int | None = None
        self.fatal: str | None = None
        self.start_failed_ = False
        self.child_returncode: int | None = None
        self.child_gone = False
        self.server_eof = False
        self.last_output = clock()  # session-clock time of the child's last output
        self._eof_at = 0.0
        self._owed_output_at = 0.0  # the child's last output while it owed answers
        self._deadline: float | None = None
        self._silence_killed = False
        # -- approvals that ask a person (docs/wrap.md, "Approvals"); None: the policy asks none,
        # or a dry run (which never asks)
        self.can_elicit = False  # the client's last initialize declared form-mode elicitation
        self._approvals: approvals.Approvals | None = None
        self._offers: approvals.Offers | None = None  # 2026-07-28-era approvals asked, not answered
        self._retry_line: bytes | None = None  # an approved retry, rewritten (without its LF)
        self._approval_fallback = "deny"
        self._approval_names = NameMatcher(())
        self._released: list[bytes] = []  # accepted held calls to forward now (lines without LF)
        tools = policy.tools
        if tools.approval_required is not None or tools.approval_required_classes is not None:
            self._approval_fallback = tools.approval_fallback or "deny"
            self._approval_names = NameMatcher(tools.approval_required or ())
            if not options.dry_run:
                timeout = tools.approval_timeout
                self._approvals = approvals.Approvals(
                    approvals.DEFAULT_TIMEOUT_S if timeout is None else timeout, token=approval_token
                )
                self._offers = approvals.Offers(approval_key)

    # ------------------------------------------------------------------------------------------
    # client -> server
    # ------------------------------------------------------------------------------------------

    def receive_client_data(self, data: bytes) -> list[Effect]:
        """Bytes the client wrote: the effects of every line they complete."""
        if self.phase is not Phase.RUNNING or not data:
            return []
        if self._admitting:
            raise RuntimeError("receive_client_data while a line is being admitted")
        out: list[Effect] = []
        if self.started and not self._queue:
            if self._splitter.holding:  # the line a previous read began: finish it first
                nl = data.find(b"\n") + 1
                if not nl:
                    self._queue.extend(self._splitter.feed(data))
                    self._process(out)
                    return out
                self._queue.extend(self._splitter.feed(data[:nl]))
                self._process(out)
                data = data[nl:]
                if self._admitting or not data:
                    self._queue.extend(self._splitter.feed(data))
                    return out
            cut = data.rfind(b"\n") + 1
            if cut:
                region = data if cut == len(data) else data[:cut]
                lines = region.split(b"\n")
                lines.pop()
                limit = self._fast_limit  # longer lines: the careful path (too large, or off the loop)
                if len(region) <= limit or max(map(len, lines)) <= limit:
                    frames = admit_region(region, lines)
                    if frames is not None:
                        self._fast(region, lines, frames, out)
                        if cut < len(data):
                            self._splitter.feed(data[cut:])  # no LF in it: held, nothing returned
                        return out
        self._queue.extend(self._splitter.feed(data))
        self._process(out)
        return out

    def admitted(self, verdict: Admitted | Rejected | None) -> list[Effect]:
        """The verdict on the line of the last :class:`AdmitLine`; the rest of the queue goes on."""
        if not self._admitting:
            raise RuntimeError("admitted() without an AdmitLine")
        self._admitting = False
        out: list[Effect] = []
        if self.phase is not Phase.RUNNING:
            return out
        self._judged(verdict, out)
        self._process(out)
        if self._eof_waiting and not self._admitting:
            self._eof_waiting = False
            self._end_of_client(out)
        return out

    def client_closed(self) -> list[Effect]:
        """The client's end of file: its last unterminated line still counts."""
        out: list[Effect] = []
        if self.phase is not Phase.RUNNING:
            return out
        last = self._splitter.close()
        if last is not None:
            self._queue.append(last)
        if self._admitting:
            self._eof_waiting = True
            return out
        self._process(out)
        if self._admitting:
            self._eof_waiting = True
            return out
        self._end_of_client(out)
        return out

    def _end_of_client(self, out: list[Effect]) -> None:
        if not self.started and not self.seen_nonblank:  # an empty client stream is a session too
            out.append(StartSession())
            self._begin()
        self._abandon_approvals(out)
        self._cause(StopCause.CLIENT_EOF)
        out.append(CloseServerInput())
        self.phase = Phase.DRAINING
        self._eof_at = self._clock()

    def client_lost(self) -> list[Effect]:
        """Writing to the client failed: nobody reads replies any more. The run ends now."""
        if self.phase is Phase.DONE:
            return []
        out: list[Effect] = []
        self._abandon_approvals(out)  # recorded; their replies reach nobody (the shell drops them)
        self._cause(StopCause.CLIENT_EOF)
        self.phase = Phase.DONE
        out += [StopClient(), Finish(drain=False)]
        return out

    def _process(self, out: list[Effect]) -> None:
        """Judge queued lines in order; pause at a long one (:class:`AdmitLine`)."""
        queue = self._queue
        while queue:
            item = queue.popleft()
            if isinstance(item, bytes):
                line = item
                if len(line) >= BIG_CLIENT_LINE:
                    self._flush_forwards(out)
                    self._admitting = True
                    out.append(AdmitLine(line))
                    return
                self._judged(admit(line), out)
            else:
                self._judged(item, out)
        self._flush_forwards(out)

    def _flush_forwards(self, out: list[Effect]) -> None:
        fwd = self._fwd
        if fwd:
            out.append(ToServer(b"".join(fwd)))
            fwd.clear()  # in place: callers may hold the list

    def _starts_session(self, item: Admitted | Rejected) -> bool:
        """The first nonblank client line that is not a ``server/discover`` request (rejected
        lines included) starts the session, just before it is handled."""
        return not (isinstance(item, Admitted) and item.frame.get("method") == "server/discover")

    def _begin(self) -> None:
        """The run is a session from now on; frame counts cover the session only."""
        self.started = True
        self.forwarded = self.blocked = self.rejected = self.dropped = 0

    def _judged(self, item: Admitted | Rejected | None, out: list[Effect]) -> None:
        """The effects of one admitted or rejected line (None: a blank line, ignored)."""
        if item is None:
            return
        if not self.started and self._starts_session(item):
            self._flush_forwards(out)
            out.append(StartSession())
            self._begin()
        self.seen_nonblank = True
        if isinstance(item, Rejected):
            self.rejected += 1
            self._reply(replies.rejection_reply(item.reason), out)
            out.append(Warn(records.rejection_warning(item.reason)))
            if self.options.receipts and self.started:
                self._receipt_rejected(item, out)
            return
        if self._judge(item.frame, out, item.raw):
            self._fwd.append(item.raw)
        elif self._released:  # an answer accepted held calls: they go now, in this order
            self._fwd.extend(line + b"\n" for line in self._released)
            self._released.clear()

    def _fast(self, region: bytes, lines: list[bytes], frames: list[dict[str, Any]], out: list[Effect]) -> None:
        """A whole read of admitted frames (the usual case): one judgement per frame, and the
        region forwarded as it is when every frame goes through. Records and replies come out
        frame by frame; the shell writes a list's records before any of its bytes."""
        self.seen_nonblank = True
        judge = self._judge
        kept: list[bytes] | None = None
        released = self._released
        for i, frame in enumerate(frames):
            if judge(frame, out, lines[i]):
                if kept is not None:
                    kept.append(lines[i])
            else:
                if kept is None:
                    kept = lines[:i]
                if released:  # an answer accepted held calls: they go where the answer was
                    kept.extend(released)
                    released.clear()
        if kept is None:
            out.append(ToServer(region))
        elif kept:
            kept.append(b"")
            out.append(ToServer(b"\n".join(kept)))

    def _judge(self, frame: dict[str, Any], out: list[Effect], raw: bytes | None) -> bool:
        """One admitted frame: True when it is to be forwarded. Only ``tools/call`` is
        evaluated; every other method goes through untouched. ``raw`` (the line as read,
        with or without its terminator) is needed only for receipts."""
        method = frame.get("method")
        if method == _TOOLS_CALL:
            return self._tool_call(raw, frame, out)
        if method is None:  # a client response to a server request (or to wrap's own)
            if self._approvals is not None and self._approvals.owns(frame.get("id")):
                self._approval_answer(raw, frame, out)
                return False
            self.forwarded += 1
            if self.options.receipts and self.started:
                self._receipt(raw, frame, True, None, out)
            return True
        if method == "initialize" and "id" in frame:  # a later initialize replaces what it said
            self.can_elicit = approvals.can_elicit(frame.get("params"))
        elif method == _CANCELLED and self._approvals and self._client_cancel(raw, frame, out):
            return False
        if "id" in frame:
            self._pipeline.note_request()
            key = self._pending.add(frame["id"], method)
            if method == _TOOLS_LIST and key is not None:
                self._pending_tools_list.add(key)
                self._chains[key] = self._chain_for(frame.get("params"))
        self.forwarded += 1
        if self.options.receipts and self.started:
            self._receipt(raw, frame, True, None, out)
        return True

    def _tool_call(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool:
        params = frame.get("params")
        valid = params.__class__ is dict and params.get("name").__class__ is str
        name: str = params["name"] if valid else ""  # type: ignore[index]
        arguments = params.get("arguments") if valid else None  # type: ignore[union-attr]
        opts = self.options
        call = Call(name, arguments, opts.label, frame)
        decision = self._pipeline.decide(call, self._clock())
        if decision.outcome != "deny":
            if decision.approval_state is not None and not opts.dry_run:
                held = self._ask(raw, frame, params, name, arguments, valid, decision, out)
                if held is None:  # held until the person answers: nothing recorded yet
                    return False
                decision = held
        event_id = None
        if self._records_on:
            event_id = self._record(decision, frame, params, name, valid, out)
        has_id = "id" in frame
        if decision.outcome == "deny" and not opts.dry_run:
            if has_id:
                self._reply(
                    replies.deny_reply(
                        frame["id"],
                        decision.contract or {},
                        modern=replies.is_modern_request(frame),
                        structured=not self._may_have_output_schema(name),
                    ),
                    out,
                )
                self.blocked += 1
            else:  # a denied notification gets no reply: dropped and logged
                self.dropped += 1
            if opts.receipts and self.started:
                self._receipt(raw, frame, False, event_id, out)
            return False
        if decision.outcome != "deny":
            self._pipeline.enter(call, self._clock())
        if has_id:
            self._pending.add(frame["id"], _TOOLS_CALL)
        self.forwarded += 1
        if opts.receipts and self.started:
            self._receipt(raw, frame, True, event_id, out)
        retry_line = self._retry_line
        if retry_line is not None:  # an approved 2026-07-28-era retry goes without wrap's members
            self._retry_line = None
            self._released.append(retry_line)
            return False
        return True

    # -- approvals that ask a person (docs/wrap.md, "Approvals") -----------------------------

    def _ask(
        self,
        raw: bytes | None,
        frame: dict[str, Any],
        params: Any,
        name: str,
        arguments: Any,
        valid: bool,
        decision: Decision,
        out: list[Effect],
    ) -> Decision | None:
        """An allowed call that needs a person's approval (enforce mode). None: it is held and
        wrap's ``elicitation/create`` goes to the client. Otherwise the decision to go on with:
        the fallback (a client that cannot be asked) or a deny (too many approvals pending)."""
        table = self._approvals
        if table is not None and replies.is_modern_request(frame):
            return self._ask_modern(raw, frame, params, name, arguments, decision, out)
        if table is None or not self.can_elicit:
            return self._fallback(decision)
        if table.timeout <= 0:  # approval_timeout: 0 denies without asking
            return self._approval_denied(decision, "timed_out", approvals.timeout_reason(0))
        if table.full:
            return self._approval_denied(decision, "failed", approvals.REASONS["full"])
        if not table.fits(len(raw or b"")):
            return self._approval_denied(decision, "failed", approvals.REASONS["too_large"])
        approval_id = table.next_id()
        line = raw or b""
        if line.endswith(b"\n"):
            line = line[:-1]
        table.hold(
            approvals.HeldCall(
                approval_id=approval_id,
                raw=raw or b"",
                line=line,
                frame=frame,
                params=params,
                name=name,
                arguments=arguments,
                valid=valid,
                decision=decision,
                deadline=self._clock() + table.timeout,
                request_key=id_key(frame["id"]) if "id" in frame else None,
            )
        )
        self._reply(approvals.elicitation_request(approval_id, name, arguments), out)
        return None

    def _fallback(self, decision: Decision) -> Decision:
        """``tools.approval_fallback`` for a call whose client cannot be asked."""
        if self._approval_fallback == "allow":
            return decision.replace(approval_state="not_asked")
        return self._approval_denied(decision, "unavailable", approvals.REASONS["unavailable"])

    def _ask_modern(
        self,
        raw: bytes | None,
        frame: dict[str, Any],
        params: Any,
        name: str,
        arguments: Any,
        decision: Decision,
        out: list[Effect],
    ) -> Decision | None:
        """:meth:`_ask` for a 2026-07-28-era request (docs/wrap.md, "Approvals"): no initialize
        and no requests of wrap's own, so the call is answered with an ``input_required`` result
        asking the person (None: answered so, nothing recorded), and its retry carries the
        answer. An accepted retry has passed the decision pipeline again (this round's); it is
        forwarded rewritten (``_retry_line``)."""
        offers = self._offers
        table = self._approvals
        if offers is None or table is None:  # not reached: both exist whenever approvals ask
            return self._fallback(decision)
        if offers.claims(params):  # a retry answering one of wrap's approvals
            offer = offers.redeem(params.get("requestState"), name, arguments)
            if offer is None:
                return self._approval_denied(decision, "failed", approvals.REASONS["state"])
            if self._clock() >= offer.issued + table.timeout:
                return self._approval_denied(decision, "timed_out", approvals.timeout_reason(table.timeout))
            answer = approvals.read_input_response(params)
            if answer is None:
                return self._approval_denied(decision, "failed", approvals.REASONS["no_answer"])
            if answer != "accept":
                which = approvals.WHICH[answer]
                return self._approval_denied(decision, which, approvals.REASONS[which])
            line = approvals.rewrite_retry(frame, offer.restore)
            if line is None:
                return self._approval_denied(decision, "failed", approvals.REASONS["rewrite"])
            self._retry_line = line
            return decision.replace(approval_state="approved")
        if "id" not in frame or not approvals.modern_can_elicit(params):
            return self._fallback(decision)  # a notification gets no reply to ask with
        if table.timeout <= 0:  # approval_timeout: 0 denies without asking
            return self._approval_denied(decision, "timed_out", approvals.timeout_reason(0))
        state = offers.issue(name, arguments, params, self._clock())
        if state is None:
            return self._approval_denied(decision, "failed", approvals.REASONS["too_large"])
        self._reply(approvals.input_required_reply(frame["id"], name, arguments, state), out)
        # one call in two rounds counts once against limits.max_tool_calls_total: at its retry
        # (the first round stays a request for limits.max_requests_total)
        self._pipeline.defer()
        if self.options.receipts and self.started:
            self._receipt(raw, frame, False, None, out, disposition="consumed")
        return None

    def _approval_denied(self, decision: Decision, which: str, reason: str) -> Decision:
        """The deny of a call whose approval was not given (``approval`` says why)."""
        tool = decision.tool
        rule = "tools.approval_required" if self._approval_names(tool) else "tools.approval_required_classes"
        contract = {"status": "deny", "error_code": "E_APPROVAL_DENIED", "tool": tool, "approval": which, "reason": reason}
        return decision.denied("E_APPROVAL_DENIED", reason, contract, matched_rule=rule).replace(approval_state=which)

    def _approval_answer(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> None:
        """The client answered one of wrap's requests: consumed here, never forwarded. A late
        answer (the call was settled by a timeout, a cancel or the end) is ignored; one read
        after the deadline, before the timer settled the call, denies it ``timed_out``."""
        if self.options.receipts and self.started:
            self._receipt(raw, frame, False, None, out, disposition="consumed")
        table = self._approvals
        call = table.take(frame["id"]) if table is not None else None
        if call is None or table is None:
            return
        answer = approvals.read_answer(frame)
        if call.deadline <= self._clock():  # too late, whatever it says (the prompt is closed)
            decision = self._approval_denied(call.decision, "timed_out", approvals.timeout_reason(table.timeout))
        elif answer == "accept":
            # what the engine reads (pins, symlinks) and other calls may have changed meanwhile:
            # the engine and the session's checks run again
            again = Call(call.name, call.arguments, self.options.label, call.frame)
            decision = self._pipeline.recheck(again, call.decision, self._clock()).replace(approval_state="approved")
        else:
            which = approvals.WHICH[answer]
            reason = approvals.REASONS["error" if "error" in frame else which]
            decision = self._approval_denied(call.decision, which, reason)
        self._settle(call, decision, out)

    def _client_cancel(self, raw: bytes | None, frame: dict[str, Any], out: list[Effect]) -> bool:
        """``notifications/cancelled`` from the client: held calls with that request id are
        dropped without a reply (the client asked for none) and wrap's prompt is closed. True
        when the notification is consumed (no forwarded request has that id)."""
        if "id" in frame:  # a request, whatever its method: no SDK reads it as a cancellation
            return False
        params = frame.get("params")
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        if key is None or self._approvals is None:
            return False
        calls = self._approvals.take_request(key)
        if not calls:
            return False
        for call in calls:
            self._reply(approvals.cancel_notification(call.approval_id, approvals.CANCEL_REASONS["client"]), out)
            decision = self._approval_denied(call.decision, "cancelled", approvals.REASONS["client_cancelled"])
            self._settle(call, decision, out, answer=False)
        if key in self._pending:  # a forwarded request reuses the id: the server gets it too
            return False
        if self.options.receipts and self.started:
            self._receipt(raw, frame, False, None, out, disposition="consumed")
        return True

    def _settle(self, call: approvals.HeldCall, decision: Decision, out: list[Effect], *, answer: bool = True) -> None:
        """A held call's fate is known: its records, then its deny reply (unless ``answer`` is
        False) or its forward (after the frame in hand, through ``_released``)."""
        frame = call.frame
        event_id = None
        if self._records_on:
            event_id = self._record(decision, frame, call.params, call.name, call.valid, out)
        has_id = "id" in frame
        receipts = self.options.receipts and self.started
        if decision.outcome == "deny":
            if has_id and answer:
                self._reply(
                    replies.deny_reply(
                        frame["id"],
                        decision.contract or {},
                        modern=replies.is_modern_request(frame),
                        structured=not self._may_have_output_schema(call.name),
                    ),
                    out,
                )
                self.blocked += 1
            else:  # a notification, or a call the client cancelled: no reply
                self.dropped += 1
            if receipts:
                self._receipt(call.raw, frame, False, event_id, out)
            return
        self._pipeline.enter(Call(call.name, call.arguments, self.options.label, frame), self._clock())
        if has_id:
            self._pending.add(frame["id"], _TOOLS_CALL)
        self.forwarded += 1
        if receipts:
            self._receipt(call.raw, frame, True, event_id, out)
        self._released.append(call.line)

    def _expire_approvals(self, now: float, out: list[Effect]) -> None:
        """Held calls whose approval timed out: denied, and the client's prompt closed."""
        if self._approvals is None:
            return
        for call in self._approvals.expired(now):
            self._reply(approvals.cancel_notification(call.approval_id, approvals.CANCEL_REASONS["timed_out"]), out)
            reason = approvals.timeout_reason(self._approvals.timeout)
            self._settle(call, self._approval_denied(call.decision, "timed_out", reason), out)

    def _abandon_approvals(self, out: list[Effect]) -> None:
        """The session stops taking client input (client EOF, the child gone, a signal): every
        held call is denied ``cancelled`` (the client may still read) and its prompt closed."""
        if not self._approvals:
            return
        for call in self._approvals.take_all():
            self._reply(approvals.cancel_notification(call.approval_id, approvals.CANCEL_REASONS["ended"]), out)
            self._settle(call, self._approval_denied(call.decision, "cancelled", approvals.REASONS["ended"]), out)

    def _may_have_output_schema(self, name: str) -> bool:
        """Whether a definition of ``name`` that reached the client may declare an
        ``outputSchema`` (then a deny carries no ``structuredContent``, docs/wrap.md, "Deny
        replies"): it did, or wrap could not read some tools/list answer or its duplicates."""
        return name in self._output_schema_tools or self.state.unreadable

    def _reply(self, data: bytes, out: list[Effect]) -> None:
        """wrap's own line for the client; held while a long server line is being relayed."""
        if self._streaming:
            self._held.append(data)
            self.held_bytes += len(data)
        else:
            out.append(ToClient(data))

    def _record(
        self, decision: Decision, frame: dict[str, Any], params: Any, name: str, valid: bool, out: list[Effect]
    ) -> str | None:
        """Decision event, audit record and --verbose line of one evaluated call; returns the
        event id (receipts name it)."""
        rec = self._recorder.record(decision, frame, params, name, valid, self._bindings.get(name) if valid else None)
        line = rec.decision_line
        if line is not None:
            for sink in self.options.decision_sinks:
                out.append(Record(sink, line))
        if rec.audit_line is not None:
            out.append(Record(Sink.AUDIT_LOG, rec.audit_line))
        if rec.verbose is not None:
            out.append(Warn(rec.verbose))
        return rec.event_id

    def _receipt(
        self,
        raw: bytes | None,
        frame: dict[str, Any],
        forwarded: bool,
        event_id: str | None,
        out: list[Effect],
        *,
        disposition: str | None = None,
    ) -> None:
        """One request receipt (docs/wrap-records.md): digests and dispositions, never arguments.
        ``disposition`` overrides forwarded/blocked (``consumed``: wrap's own exchange)."""
        self._receipt_seq += 1
        has_method = "method" in frame
        out.append(Record(Sink.RECEIPTS, records.receipt_line(
            self._receipt_seq,
            "sha256:" + frame_digest(raw or b""),
            ("request" if "id" in frame else "notification") if has_method else "response",
            disposition or ("forwarded" if forwarded else "blocked"),
            method=frame["method"] if has_method else records.ABSENT,
            request_id=frame["id"] if "id" in frame else records.ABSENT,
            decision_event_id=event_id,
        )))

    def _receipt_rejected(self, item: Rejected, out: list[Effect]) -> None:
        self._receipt_seq += 1
        out.append(Record(Sink.RECEIPTS, records.receipt_line(
            self._receipt_seq, "sha256:" + item.frame_digest, "rejected", "rejected", reject_reason=item.reason
        )))

    def _chain_for(self, params: Any) -> ListChain:
        """A tools/list request continues the last chain when it asks for that chain's
        ``nextCursor``; otherwise it starts a new one."""
        cursor = params.get("cursor") if isinstance(params, dict) else None
        last = self.last_chain
        if isinstance(cursor, str) and last is not None and last.next_cursor == cursor:
            return last
        return ListChain()

    # ------------------------------------------------------------------------------------------
    # server -> client
    # ------------------------------------------------------------------------------------------

    def receive_server_data(self, data: bytes) -> list[Effect]:
        """Bytes the child wrote: whole lines go to the client (forged answers dropped); a
        partial line is held until its LF, up to SERVER_HOLD_LIMIT, then streamed through."""
        out: list[Effect] = []
        if not data:
            return out
        self.last_output = now = self._clock()
        if self._pending:
            self._owed_output_at = now
        if self._streaming:
            nl = data.find(b"\n")
            if nl < 0:
                out.append(ToClient(data))
                return out
            out.append(ToClient(data[: nl + 1]))
            self._end_streaming(out)
            data = data[nl + 1 :]
            if not data:
                return out
        cut = data.rfind(b"\n") + 1
        tail = self._tail
        if cut == 0:
            tail += data
            if len(tail) > self.options.server_hold_limit:
                self._unreadable_line(out)
                self._streaming = True
                out.append(ToClient(bytes(tail)))
                self._tail = bytearray()
            return out
        if tail:
            tail += data[:cut]
            chunk = bytes(tail)
            self._tail = bytearray(data[cut:])
        else:
            chunk = data if cut == len(data) else data[:cut]
            if cut < len(data):
                self._tail = bytearray(data[cut:])
        kept = self._judge_lines(chunk, out)
        if kept:
            out.append(ToClient(kept))
        return out

    def _end_streaming(self, out: list[Effect]) -> None:
        self._streaming = False
        if self._held:
            out.extend(ToClient(data) for data in self._held)
            self._held = []
            self.held_bytes = 0

    def server_closed(self) -> list[Effect]:
        """The child's stdout reached end of file."""
        out: list[Effect] = []
        if self._tail and not self._streaming:
            # an unterminated last line: relayed as it is (it answers nothing wrap can match)
            out.append(ToClient(bytes(self._tail)))
        self._tail = bytearray()
        if self._streaming:
            self._end_streaming(out)
        self.server_eof = True
        if self.phase is Phase.CHILD_EXITED:
            self.phase = Phase.DONE
            out.append(Finish(drain=True))
        elif self.phase is Phase.SIGNAL_DRAIN:
            self.phase = Phase.DONE
            out.append(Finish(drain=True, deadline=self._deadline))
        return out

    def _judge_lines(self, chunk: bytes, out: list[Effect]) -> bytes:
        """``chunk`` is whole LF-terminated lines: what of it goes to the client."""
        lines = chunk.split(b"\n")
        lines.pop()  # after the last LF
        keep: list[bytes] | None = None
        server_line = self._server_line
        for i, line in enumerate(lines):
            relay_it = server_line(line, out)
            if relay_it is True:
                if keep is not None:
                    keep.append(line)
                continue
            if keep is None:
                keep = lines[:i]
            if isinstance(relay_it, bytes):  # the line with tools hidden (--hide-denied-tools)
                keep.append(relay_it)
        if keep is None:
            return chunk
        return b"".join(line + b"\n" for line in keep)

    def _server_line(self, line: bytes, out: list[Effect]) -> bool | bytes:
        """One complete server line (without its LF): True to relay it, False to drop it, or
        the bytes to relay instead (a tools/list answer with tools hidden).

        A response (no string ``method``; a ``result`` or an ``error``) is relayed only when its
        id answers a forwarded client request still awaiting its answer; otherwise it is
        dropped with one stderr line (docs/wrap.md, "Dropped server responses"). Requests,
        notifications and lines that are not JSON objects are relayed. A ``tools/list`` answer
        feeds the pin state. Never raises on content.

        Most lines are read for their four members only (``result`` and ``error`` are skipped,
        not built); a line that reading refuses (not an object, ``NaN``, a lone surrogate, very
        deep nesting) is read in full by the lenient readers instead.
        """
        try:
            head = _read_head(line)
        except (msgspec.DecodeError, RecursionError, ValueError, MemoryError):
            return self._server_message(self._read_message(line), line, out)
        if head.method.__class__ is str:
            return self._server_request(head.method, head.id, out)
        if head.result is _UNSET and head.error is _UNSET:
            return True
        has_id = head.id is not _UNSET
        rid = head.id if has_id else None
        found = self._pending.answer(rid)
        if found is None:
            self.dropped_responses += 1
            out.append(Warn(records.dropped_response_warning(rid, has_id)))
            return False
        key, method = found
        if method == _TOOLS_LIST or key in self._pending_tools_list:
            message = self._read_message(line)
            if message.__class__ is dict:
                return self._tools_answer(key, message, line, out)
            # the head was read, the whole line was not (over the work budget): an answer
            # to tools/list that reaches the client unread (docs/wrap.md, "Tool pins")
            self._unreadable_line(out)
            self._tools_list_answered(key)
        return True

    def _server_request(self, method: str, request_id: Any, out: list[Effect]) -> bool:
        """A server request or notification is relayed, unless its id is one of this run's
        approval ids: the client's answer to it would be taken for a person's answer to wrap
        (docs/wrap.md, "Approvals"). The server cannot guess the run's random prefix; a line
        that uses it is dropped."""
        table = self._approvals
        if table is not None and request_id.__class__ is str and request_id.startswith(table.prefix):
            out.append(Warn(records.dropped_request_warning(method)))
            return False
        return True

    @staticmethod
    def _read_message(line: bytes) -> Any:
        """The whole line, read at least as leniently as the clients read it."""
        return serverlines.read_line(line)

    def _server_message(self, message: Any, line: bytes, out: list[Effect]) -> bool | bytes:
        """:meth:`_server_line` for a line read in full."""
        if message.__class__ is not dict:
            if message is serverlines.TOO_HARD:
                self._unreadable_line(out)
            return True
        if message.get("method").__class__ is str:
            return self._server_request(message["method"], message.get("id", _UNSET), out)
        if "result" not in message and "error" not in message:
            return True
        found = self._pending.answer(message.get("id"))
        if found is None:
            self.dropped_responses += 1
            out.append(Warn(records.dropped_response_warning(message.get("id"), "id" in message)))
            return False
        key, method = found
        if method == _TOOLS_LIST or key in self._pending_tools_list:
            return self._tools_answer(key, message, line, out)
        return True

    @property
    def coverage(self) -> records.Coverage | None:
        """This run's coverage aggregate (docs/wrap-records.md, "Session reports"); None unless
        ``keep_events``."""
        return self._recorder.coverage

    @property
    def counts(self) -> dict[str, int]:
        """Frames of the session: forwarded, blocked (denied calls answered), rejected, dropped
        (denied notifications)."""
        return {"forwarded": self.forwarded, "blocked": self.blocked, "rejected": self.rejected, "dropped": self.dropped}

    @property
    def owes_answers(self) -> bool:
        """Whether a forwarded client request still awaits the server's answer."""
        return bool(self._pending)

    def _unreadable_line(self, out: list[Effect]) -> None:
        """A line that may answer tools/list was not read: pinned and declared tools have an
        unknown identity from now on (docs/wrap.md, "Tool pins", "Declared baseline")."""
        if not self._pending_tools_list:
            return
        if self._baseline is not None:
            self._baseline.mark_unreadable()
        if self.state.unreadable:
            return
        self.state.mark_unreadable()
        out.append(Warn(records.unreadable_answer_warning()))

    def _tools_answer(self, key: Key, message: dict[str, Any], line: bytes, out: list[Effect]) -> bool | bytes:
        """Record tool identities from the answer to one of the client's tools/list requests
        (pins, the declared baseline and the observed manifest see every tool the server
        listed); True to relay the line, or the line with tools hidden (--hide-denied-tools)."""
        chain = self._tools_list_answered(key)
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return True
        tools = result["tools"]
        if chain is not None:
            chain.add_page(tools, result.get("nextCursor"))
            self.last_chain = chain
        label = self.options.label
        seen = self.state.observe_tools(label, tools)
        baseline = self._baseline
        if baseline is not None:
            baseline.observe(tools)
        alternative = self._other_reading(line)
        if alternative is not None:  # a client that drops invalid UTF-8 instead of replacing it
            seen += self.state.observe_tools(label, alternative)
            if baseline is not None:
                baseline.observe(alternative)
            tools = tools + alternative
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"].strip():
                name = tool["name"]
                if tool.get("outputSchema") is not None:
                    self._output_schema_tools.add(name)
                digest = tool_definition_digest(tool, label)
                if digest is None:
                    self._bindings.pop(name, None)
                else:
                    self._bindings[name] = digest
        if self.options.verbose:
            out.extend(Warn(records.tool_identity_line(n, label, s, m)) for (n, s, m) in seen)
        if self._hide:
            cut = hide_tools(line, message, self._hidden, self._read_message)
            if cut is not None:
                return cut
        return True

    def _tools_list_answered(self, key: Key) -> ListChain | None:
        """An answer with id ``key`` arrived while a tools/list with that id was pending: its
        chain, if it has one. A client that reuses an id in flight hands the first answer to
        its latest request with that id (both SDKs keep one handler per id), so any answer to
        such an id is read as a tools/list answer, and the id counts as a pending tools/list
        until no request with it is left (docs/wrap.md, "Dropped server responses")."""
        if key not in self._pending:
            self._pending_tools_list.discard(key)
        return self._chains.pop(key, None)

    def _hidden(self, name: str) -> bool:
        """Whether --hide-denied-tools takes ``name`` out of the tools/list answers: the policy
        denies it by name or class, or the declared baseline does not hold it (docs/wrap.md,
        "Hiding denied tools")."""
        if self._baseline is not None and not self._baseline.declares(name):
            return True
        return denied_by_name(self.policy, name)

    @staticmethod
    def _other_reading(line: bytes) -> list[Any] | None:
        """The tools of a line with invalid UTF-8 read with the bytes dropped (a Python client
        with ``errors="ignore"``): its definitions reach that client too. None otherwise."""
        try:
            line.decode("utf-8")
            return None
        except UnicodeDecodeError:
            pass
        message = serverlines.read_text(line.decode("utf-8", "ignore"))
        if message.__class__ is not dict:
            return None
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return None
        return result["tools"]

    def server_input_closed(self) -> list[Effect]:
        """Writing to the child failed (EPIPE): the child-exit path. The client is no longer
        read; if the child lingers, it gets the grace period like after a client EOF."""
        if self.phase is not Phase.RUNNING:
            return []
        out: list[Effect] = []
        self._abandon_approvals(out)
        self._cause(StopCause.CHILD_EXIT)
        self.phase = Phase.DRAINING
        self._eof_at = self._clock()
        out += [StopClient(), CloseServerInput()]
        return out

    # ------------------------------------------------------------------------------------------
    # lifecycle
    # ------------------------------------------------------------------------------------------

    def _cause(self, cause: StopCause) -> None:
        if self.stop_cause is None:
            self.stop_cause = cause

    def child_exited(self, returncode: int | None) -> list[Effect]:
        """The child exited (it is not reaped yet: its group cannot be reused)."""
        self.child_gone = True
        self.child_returncode = returncode
        out: list[Effect] = []
        phase = self.phase
        if phase in (Phase.RUNNING, Phase.DRAINING, Phase.TERMINATING, Phase.KILLED):
            self._abandon_approvals(out)
            self._cause(StopCause.CHILD_EXIT)
            out.append(StopClient())
            self.phase = Phase.CHILD_EXITED
            if self.server_eof:
                self.phase = Phase.DONE
                out.append(Finish(drain=True))
        elif phase is Phase.SIGNALLED:
            self.phase = Phase.SIGNAL_DRAIN
            self._deadline = self._clock() + SIGNAL_DRAIN_S
            if self.server_eof:
                self.phase = Phase.DONE
                out.append(Finish(drain=True, deadline=self._deadline))
        return out

    def signal(self, signum: int) -> list[Effect]:
        """wrap got SIGINT, SIGTERM or SIGHUP: exit 128+N once the child is stopped."""
        if self.phase in (Phase.SIGNALLED, Phase.SIGNAL_DRAIN, Phase.DONE):
            return []
        self.wrap_signal = signum
        self._cause(StopCause.SIGNAL)
        out: list[Effect] = [StopClient(), SignalChild(_signal.SIGTERM)]
        self._abandon_approvals(out)
        now = self._clock()
        if self.child_gone:
            self.phase = Phase.SIGNAL_DRAIN
            self._deadline = now + SIGNAL_DRAIN_S
            if self.server_eof:
                self.phase = Phase.DONE
                out.append(Finish(drain=True, deadline=self._deadline))
        else:
            self.phase = Phase.SIGNALLED
            self._deadline = now + KILL_AFTER_TERM_S
        return out

    @property
    def deadline(self) -> float | None:
        """The session-clock time at which :meth:`timer` is due, or None. While running: the
        earliest deadline of a held approval."""
        phase = self.phase
        if phase is Phase.RUNNING:
            return self._approvals.deadline if self._approvals else None
        if phase is Phase.DRAINING:
            return self._grace_base() + self.options.shutdown_grace
        if phase is Phase.CHILD_EXITED:
            if self.server_eof or self._silence_killed:
                return None
            return self.last_output + max(self.options.shutdown_grace, MIN_SILENCE_S)
        if phase in (Phase.TERMINATING, Phase.SIGNALLED, Phase.SIGNAL_DRAIN):
            return self._deadline
        return None

    def _grace_base(self) -> float:
        """After a client EOF the grace counts from the EOF, or from the child's last output
        while it owed answers to forwarded requests, whichever is later."""
        return max(self._eof_at, self._owed_output_at)

    def timer(self) -> list[Effect]:
        """The clock reached :attr:`deadline` (calling early does nothing)."""
        deadline = self.deadline
        now = self._clock()
        if deadline is None or now < deadline:
            return []
        phase = self.phase
        if phase is Phase.RUNNING:
            out: list[Effect] = []
            self._expire_approvals(now, out)
            return out
        if phase is Phase.DRAINING:
            self.phase = Phase.TERMINATING
            self._deadline = now + KILL_AFTER_TERM_S
            return [SignalChild(_signal.SIGTERM)]
        if phase is Phase.TERMINATING:
            self.phase = Phase.KILLED
            return [SignalChild(_signal.SIGKILL)]
        if phase is Phase.CHILD_EXITED:  # a descendant holds the child's stdout, silent
            self._silence_killed = True
            return [SignalChild(_signal.SIGKILL)]
        if phase is Phase.SIGNALLED:
            self.phase = Phase.SIGNAL_DRAIN
            self._deadline = now + SIGNAL_DRAIN_S
            return [SignalChild(_signal.SIGKILL)]
        if phase is Phase.SIGNAL_DRAIN:
            self.phase = Phase.DONE
            return [Finish(drain=False)]
        return []

    def output_failed(self, message: str) -> list[Effect]:
        """A record could not be written whole: fatal (exit 2). What came before it still
        gets a few seconds to take effect."""
        if self.phase is Phase.DONE:
            return []
        self.fatal = message
        if self._approvals is not None:
            self._approvals.take_all()  # records cannot be written: nothing more is said
        self._cause(StopCause.OUTPUT_ERROR)
        self.phase = Phase.DONE
        return [StopClient(), Finish(drain=True, deadline=self._clock() + FATAL_FLUSH_S)]

    def start_failed(self, message: str) -> list[Effect]:
        """The one-run outputs could not be created: fatal, and the run is no session (no
        stop record, no session-end reports)."""
        self.start_failed_ = True
        return self.output_failed(message)

    def exit_code(self, child_returncode: int | None) -> int:
        """The run's exit status once the child is reaped (docs/wrap.md, "Exit status")."""
        if self.fatal is not None:
            return 2 if self.wrap_signal is None else 128 + self.wrap_signal
        return exit_status(child_returncode, self.wrap_signal)

    @property
    def is_session(self) -> bool:
        """Whether this run became a session whose end gets reports."""
        return self.started and not self.start_failed_
