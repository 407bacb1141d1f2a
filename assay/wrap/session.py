"""What the relay does with each client frame and server line (sans-IO).

``WrapSession.handle`` turns one judged client frame into a :class:`FrameOutcome`: bytes to
forward to the child, a reply for the client, records for the sinks and stderr lines. Only
``tools/call`` is evaluated (DECISIONS D10); every other method is forwarded untouched. The
relay (``relay.py``) performs the outcome; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import hashlib

import ujson

from assay.canonical import jcs_bytes
from assay.policy import Decision, Policy, SessionState, evaluate
from assay.policy.engine import identity_bytes
from assay.wrap import records, replies, serverlines
from assay.wrap.admission import Admitted, Rejected, frame_digest

DECISION_SINKS = ("decision_log",)  # sinks that take assay.tool.decision events
AUDIT_SINK = "audit_log"


@dataclass
class FrameOutcome:
    """The effects of one client frame, in the order the relay performs them."""

    forward: bytes | None = None
    reply: bytes | None = None
    records: list[tuple[str, bytes]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    disposition: str = "forwarded"  # forwarded | blocked | rejected | dropped | none
    decision_event_id: str | None = None
    receipt: bytes | None = None  # written after the frame's outcome is complete (wrap.md §6.8)


@dataclass
class SessionOptions:
    dry_run: bool = False
    verbose: bool = False
    label: str = "default-mcp-server"
    event_source: str | None = None
    decision_sinks: tuple[str, ...] = ()
    audit: bool = False
    keep_events: bool = False  # hold this run's decision events in memory (coverage, D15a)
    receipts: bool = False  # build request receipts (wrap.md §6.8)


def _id_key(value: Any) -> tuple[str, Any] | None:
    """A hashable key for a JSON-RPC id that keeps 1 and "1" apart (bools are not ids)."""
    if value.__class__ is int:
        return ("n", value)
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, int):
        return ("n", int(value))
    if isinstance(value, float):
        if value.is_integer():
            return ("n", int(value))
        return ("f", value) if value == value else None
    return None


_TOOLS_LIST = "tools/list"


def tool_definition_digest(tool: dict[str, Any], label: str) -> str | None:
    """The bounded tool-definition binding of wrap.md §4.2.4, or None when ``inputSchema`` is
    not an object. Projection: name, trimmed description (omitted if empty), input_schema,
    trimmed server id."""
    schema = tool.get("inputSchema", tool.get("input_schema"))
    if not isinstance(schema, dict):
        return None
    projection: dict[str, Any] = {"name": tool["name"]}
    description = tool.get("description")
    if isinstance(description, str) and description.strip():
        projection["description"] = description.strip()
    projection["input_schema"] = schema
    projection["server_id"] = label.strip()
    # never raises on server content (lone surrogates, huge integers, deep nesting)
    return "sha256:" + hashlib.sha256(identity_bytes(projection)).hexdigest()


class _Chain:
    """One tools/list exchange, following ``nextCursor`` pages (docs/wrap.md, "One-run outputs and session reports").

    A tool whose definition has no canonical JSON form (a lone surrogate, an integer beyond
    what JCS encodes, nesting deeper than the encoder recurses) cannot be digested for the
    observed manifest: it is left out and the chain counts as incomplete, so that the
    manifest says so instead of the session end failing on server content."""

    __slots__ = ("tools", "next_cursor", "complete", "skipped")

    def __init__(self) -> None:
        self.tools: list[dict[str, Any]] = []
        self.next_cursor: str | None = None
        self.complete = False
        self.skipped = False

    def add_page(self, tools: list[Any], next_cursor: Any) -> None:
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            try:
                jcs_bytes(tool)
            except (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, MemoryError):
                self.skipped = True
                continue
            self.tools.append(tool)
        self.next_cursor = next_cursor if isinstance(next_cursor, str) else None
        self.complete = self.next_cursor is None and not self.skipped


class WrapSession:
    """Policy state and bookkeeping for one wrap run (one client stream)."""

    def __init__(
        self,
        policy: Policy,
        options: SessionOptions,
        *,
        new_event_id: Callable[[], str] | None = None,
        now: Callable[[], str] | None = None,
    ) -> None:
        self.policy = policy
        self.options = options
        self.state = SessionState()
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
        # Forwarded client requests still awaiting their answer: id key -> methods (a client may
        # reuse an id while the first is in flight); string ids the Python SDK reads as integers
        # are also indexed by that integer (docs/wrap.md, "Dropped server responses").
        self._pending: dict[tuple[str, Any], list[str]] = {}
        self._pending_tools_list: set[tuple[str, Any]] = set()
        self._py_alias: dict[int, list[tuple[str, Any]]] = {}
        self.dropped_responses = 0  # server responses dropped (stop record, frames.dropped_responses)
        self._output_schema_tools: set[str] = set()  # tools listed with an outputSchema
        self._bindings: dict[str, str] = {}  # tool name -> tool-definition digest (wrap.md §4.2.4)
        self.events: list[dict[str, Any]] = []  # this run's decision events (coverage, D15a)
        self.counts = {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}
        self.started = False  # the run became a session (wrap.md §7 OR-5)
        self.seen_nonblank = False
        self._receipt_seq = 0
        # tools/list chains for the observed manifest (D33): pending id -> chain
        self._chains: dict[tuple[str, Any], _Chain] = {}
        self.last_chain: _Chain | None = None

    # -- session start (wrap.md §7) --------------------------------------------------------------

    def starts_session(self, item: Admitted | Rejected) -> bool:
        """OR-5a: the first nonblank client line that is not a server/discover request (rejected
        lines included) starts the session, just before it is handled."""
        if self.started:
            return False
        return not (isinstance(item, Admitted) and item.frame.get("method") == "server/discover")

    def starts_session_at_eof(self) -> bool:
        """OR-5b: client EOF starts the session only when no nonblank line came at all."""
        return not self.started and not self.seen_nonblank

    def begin_session(self) -> None:
        """Mark the session started; frame counts cover the session only (§6.9)."""
        self.started = True
        self.counts = {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}

    # -- client frames ---------------------------------------------------------------------------

    def handle(self, item: Admitted | Rejected) -> FrameOutcome:
        """Decide what one nonblank client frame does (see :class:`FrameOutcome`)."""
        self.seen_nonblank = True
        outcome = self._handle(item)
        if self.options.receipts and self.started:
            outcome.receipt = self._receipt(item, outcome)
        return outcome

    def _receipt(self, item: Admitted | Rejected, outcome: FrameOutcome) -> bytes:
        """One request receipt (wrap.md §6.8): digests and dispositions, never arguments."""
        self._receipt_seq += 1
        if isinstance(item, Rejected):
            return records.receipt_line(
                self._receipt_seq, "sha256:" + item.frame_digest, "rejected", "rejected", reject_reason=item.reason
            )
        frame = item.frame
        return records.receipt_line(
            self._receipt_seq,
            "sha256:" + frame_digest(item.raw),
            "request" if item.is_request else "response" if item.is_response else "notification",
            "forwarded" if outcome.disposition == "forwarded" else "blocked",
            method=frame["method"] if "method" in frame else records.ABSENT,
            request_id=frame["id"] if "id" in frame else records.ABSENT,
            decision_event_id=outcome.decision_event_id,
        )

    def _handle(self, item: Admitted | Rejected) -> FrameOutcome:
        if isinstance(item, Rejected):
            self.counts["rejected"] += 1
            return FrameOutcome(
                reply=replies.rejection_reply(item.reason),
                stderr=[records.rejection_warning(item.reason)],
                disposition="rejected",
            )
        frame = item.frame
        method = frame.get("method")
        if method is None:  # a client response (wrap.md §3.4.1)
            self.counts["forwarded"] += 1
            return FrameOutcome(forward=item.raw)
        if method != "tools/call":
            if item.is_request:
                self.state.note_request()
                key = self._await_answer(frame["id"], method)
                if method == _TOOLS_LIST and key is not None:
                    self._pending_tools_list.add(key)
                    self._chains[key] = self._chain_for(frame.get("params"))
            self.counts["forwarded"] += 1
            return FrameOutcome(forward=item.raw)
        return self._tool_call(item)

    def _tool_call(self, item: Admitted) -> FrameOutcome:
        frame = item.frame
        params = frame.get("params")
        valid = isinstance(params, dict) and isinstance(params.get("name"), str)
        name: str = params["name"] if valid else ""
        arguments: Any = params.get("arguments") if valid else None
        opts = self.options
        decision = evaluate(self.policy, name, arguments, self.state, server_id=opts.label)
        denied = decision.outcome == "deny"
        has_id = "id" in frame
        outcome = FrameOutcome()
        # Records are built only when something consumes them: the hot path of a plain
        # enforcing relay is evaluate -> forward or deny reply.
        if opts.decision_sinks or opts.keep_events or opts.audit or opts.verbose:
            self._record(outcome, decision, frame, params, name, valid)
        if denied and not opts.dry_run:
            if has_id:
                outcome.reply = replies.deny_reply(
                    frame["id"],
                    decision.contract or {},
                    modern=replies.is_modern_request(frame),
                    structured=not self._may_have_output_schema(name),
                )
                outcome.disposition = "blocked"
                self.counts["blocked"] += 1
            else:  # D12: a denied notification gets no reply; it is dropped and logged
                outcome.disposition = "dropped"
                self.counts["dropped"] += 1
            return outcome
        if has_id:
            self._await_answer(frame["id"], "tools/call")
        outcome.forward = item.raw
        self.counts["forwarded"] += 1
        return outcome

    def _may_have_output_schema(self, name: str) -> bool:
        """Whether a definition of ``name`` that reached the client may declare an
        ``outputSchema`` (then a deny carries no ``structuredContent``, docs/wrap.md, "Deny
        replies"): it did, or wrap could not read some tools/list answer or its duplicates."""
        return name in self._output_schema_tools or self.state.unreadable

    def _record(
        self, outcome: FrameOutcome, decision: Decision, frame: dict, params: Any, name: str, valid: bool
    ) -> None:
        """Decision event, audit record and --verbose line of one evaluated call."""
        out = self._recorder.record(decision, frame, params, name, valid, self._bindings.get(name) if valid else None)
        if out.event is not None:
            self.events.append(out.event)
        outcome.decision_event_id = out.event_id
        if out.decision_line is not None:
            outcome.records.extend((sink, out.decision_line) for sink in self.options.decision_sinks)
        if out.audit_line is not None:
            outcome.records.append((AUDIT_SINK, out.audit_line))
        if out.verbose is not None:
            outcome.stderr.append(out.verbose)

    def _chain_for(self, params: Any) -> _Chain:
        """A tools/list request continues the last chain when it asks for that chain's
        ``nextCursor``; otherwise it starts a new one (D33)."""
        cursor = params.get("cursor") if isinstance(params, dict) else None
        last = self.last_chain
        if isinstance(cursor, str) and last is not None and last.next_cursor == cursor:
            return last
        return _Chain()

    # -- pending client requests ----------------------------------------------------------------

    def _await_answer(self, request_id: Any, method: str) -> tuple[str, Any] | None:
        """Register a forwarded client request: its answer is relayed, any other is dropped."""
        key = _id_key(request_id)
        if key is None:
            return None
        methods = self._pending.get(key)
        if methods is None:
            self._pending[key] = [method]
            if key[0] == "s":
                alias = serverlines.python_id(key[1])
                if alias.__class__ is int:
                    self._py_alias.setdefault(alias, []).append(key)
        else:
            methods.append(method)
        return key

    def _answered(self, request_id: Any) -> tuple[tuple[str, Any], str] | None:
        """The pending request a response id answers for some official client, removed from
        the table, or None. The exact id first; then the Python SDK's form (a string ``int()``
        reads answers that integer); then the TypeScript SDK's (``Number(id)``)."""
        key = _id_key(request_id)
        pending = self._pending
        if key is None or key not in pending:
            key = None
            for candidate in self._equivalents(request_id):
                if candidate in pending:
                    key = candidate
                    break
            if key is None:
                return None
        methods = pending[key]
        method = methods.pop(0)
        if not methods:
            del pending[key]
            if key[0] == "s":
                alias = serverlines.python_id(key[1])
                if alias.__class__ is int:
                    keys = self._py_alias.get(alias)
                    if keys is not None and key in keys:
                        keys.remove(key)
                        if not keys:
                            del self._py_alias[alias]
        return key, method

    def _equivalents(self, request_id: Any) -> list[tuple[str, Any]]:
        """Pending keys an id answers other than its exact self, in SDK order (Python, TS)."""
        out: list[tuple[str, Any]] = []
        py = serverlines.python_id(request_id) if request_id.__class__ is not float else None
        if py.__class__ is int:
            out.append(("n", py))
            out.extend(self._py_alias.get(py, ()))
        number = serverlines.js_number(request_id)
        if number is not None and number == number and number not in (float("inf"), float("-inf")):
            if number.is_integer():
                out.append(("n", int(number)))
        return out

    # -- server lines ----------------------------------------------------------------------------

    def server_line(self, line: bytes) -> tuple[bool, list[str]]:
        """Judge one complete server line (the bytes before its LF): ``(relay_it, stderr)``.

        A response (no string ``method``; a ``result`` or an ``error``) is relayed only when its
        id answers a forwarded client request still awaiting its answer; otherwise it is
        dropped with one stderr line (docs/wrap.md, "Dropped server responses"). Requests,
        notifications and lines that are not JSON objects are relayed. A ``tools/list`` answer
        feeds the pin state. Never raises on content.
        """
        try:
            message = ujson.loads(line)
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            message = serverlines.read_text(line.decode("utf-8", "replace"))
        if message.__class__ is not dict:
            if message is serverlines.TOO_HARD:
                return True, self._unreadable_line()
            return True, []
        if message.get("method").__class__ is str or ("result" not in message and "error" not in message):
            return True, []
        found = self._answered(message.get("id"))
        if found is None:
            self.dropped_responses += 1
            return False, [records.dropped_response_warning(message.get("id"), "id" in message)]
        key, method = found
        if method != _TOOLS_LIST:
            return True, []
        return True, self._tools_answer(key, message, line)

    def server_line_unreadable(self) -> list[str]:
        """A server line too long to read was relayed unread: every pending tools/list answer
        counts as unreadable, so pinned tools have an unknown identity from now on."""
        return self._unreadable_line()

    def _unreadable_line(self) -> list[str]:
        if not self._pending_tools_list:
            return []
        if self.state.unreadable:
            return []
        self.state.mark_unreadable()
        return [records.unreadable_answer_warning()]

    def _tools_answer(self, key: tuple[str, Any], message: dict, line: bytes) -> list[str]:
        """Record tool identities from the answer to one of our tools/list requests."""
        self._pending_tools_list.discard(key)
        chain = self._chains.pop(key, None)
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return []
        tools = result["tools"]
        if chain is not None:
            chain.add_page(tools, result.get("nextCursor"))
            self.last_chain = chain
        label = self.options.label
        seen = self.state.observe_tools(label, tools)
        alternative = self._other_reading(line)
        if alternative is not None:  # a client that drops invalid UTF-8 instead of replacing it
            seen += self.state.observe_tools(label, alternative)
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
        if not self.options.verbose:
            return []
        return [records.tool_identity_line(n, label, s, m) for (n, s, m) in seen]

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

    @property
    def wants_server_lines(self) -> bool:
        """True while any forwarded client request awaits its answer (the relay's client-EOF
        grace waits on this)."""
        return bool(self._pending)

    def observe_server_line(self, line: bytes) -> list[str]:
        """:meth:`server_line` for a caller that never drops lines: only its stderr lines."""
        return self.server_line(line)[1]
