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

import ujson

from assay.canonical import jcs_digest
from assay.policy import Decision, Policy, SessionState, evaluate
from assay.wrap import records
from assay.wrap.admission import Admitted, Rejected

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
    fatal: str | None = None
    fatal_cause: str | None = None


@dataclass
class SessionOptions:
    dry_run: bool = False
    verbose: bool = False
    label: str = "default-mcp-server"
    event_source: str | None = None
    decision_sinks: tuple[str, ...] = ()
    audit: bool = False
    keep_events: bool = False  # hold this run's decision events in memory (coverage, D15a)


def _id_key(value: Any) -> tuple[str, Any] | None:
    """A hashable key for a JSON-RPC id that keeps 1 and "1" apart (bools are not ids)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, int):
        return ("n", value)
    if isinstance(value, float) and value.is_integer():
        return ("n", int(value))
    return None


def facts_from_decision(decision: Decision, called_tool: str) -> records.DecisionFacts:
    """The engine's decision as the plain facts records are built from. The tool is always
    the called one (a rate-limit deny names it, not ``ALL``: DECISIONS D10)."""
    return records.DecisionFacts(
        tool=called_tool,
        outcome=decision.outcome,
        policy_code=decision.reason_code,
        reason=decision.reason,
        contract=decision.contract,
        typed_decision=decision.typed_decision,
        obligations=decision.obligations,
        tool_classes=decision.tool_classes,
        matched_tool_classes=decision.matched_tool_classes,
        match_basis=decision.match_basis,
        matched_rule=decision.matched_rule,
        policy_version=decision.policy_version,
        policy_digest=decision.policy_digest,
        approval_state=decision.approval_state,
        scope_type=decision.scope_type,
        scope_value=decision.scope_value,
        scope_match_mode=decision.scope_match_mode,
        redaction_target=decision.redaction_target,
        redaction_mode=decision.redaction_mode,
        redaction_scope=decision.redaction_scope,
    )


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
    return jcs_digest(projection)


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
        self._new_event_id = new_event_id
        self._now = now
        self._pending_tools_list: set[tuple[str, Any]] = set()
        self._bindings: dict[str, str] = {}  # tool name -> tool-definition digest (wrap.md §4.2.4)
        self.events: list[dict[str, Any]] = []  # this run's decision events (coverage, D15a)
        self.counts = {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}

    # -- client frames ---------------------------------------------------------------------------

    def handle(self, item: Admitted | Rejected) -> FrameOutcome:
        if isinstance(item, Rejected):
            self.counts["rejected"] += 1
            return FrameOutcome(
                reply=records.rejection_reply(item.reason),
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
                if method == "tools/list":
                    key = _id_key(frame["id"])
                    if key is not None:
                        self._pending_tools_list.add(key)
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
                outcome.reply = records.deny_reply(
                    frame["id"], decision.contract or {}, modern=records.is_modern_request(frame)
                )
                outcome.disposition = "blocked"
                self.counts["blocked"] += 1
            else:  # D12: a denied notification gets no reply; it is dropped and logged
                outcome.disposition = "dropped"
                self.counts["dropped"] += 1
            return outcome
        outcome.forward = item.raw
        self.counts["forwarded"] += 1
        return outcome

    def _record(
        self, outcome: FrameOutcome, decision: Decision, frame: dict, params: Any, name: str, valid: bool
    ) -> None:
        """Decision event, audit record and --verbose line of one evaluated call."""
        opts = self.options
        facts = facts_from_decision(decision, name)
        request_id = frame["id"] if "id" in frame else records.ABSENT
        if opts.decision_sinks or opts.keep_events:
            delegated_from, delegation_depth = records.delegation_of(params)
            data = records.decision_data(
                facts,
                dry_run=opts.dry_run,
                tool_call_id=records.tool_call_id_for(params, request_id),
                request_id=request_id,
                delegated_from=delegated_from,
                delegation_depth=delegation_depth,
                tool_definition_digest=self._bindings.get(name) if valid else None,
            )
            event = records.decision_event(
                opts.event_source or "",
                data,
                event_id=self._new_event_id() if self._new_event_id else None,
                time=self._now() if self._now else None,
            )
            if opts.keep_events:
                self.events.append(event)
            outcome.decision_event_id = event["id"]
            if opts.decision_sinks:
                line = records.encode_line(event)
                outcome.records.extend((sink, line) for sink in opts.decision_sinks)
        if opts.audit:
            rec = records.audit_record_for(
                facts,
                dry_run=opts.dry_run,
                request_id=request_id,
                tool=name if valid or facts.outcome != "allow" else None,
                timestamp=self._now() if self._now else None,
            )
            outcome.records.append((AUDIT_SINK, records.encode_line(rec)))
        if opts.verbose:
            outcome.stderr.append(
                records.verbose_line(
                    facts.outcome,
                    name if valid else None,
                    policy_code=facts.policy_code,
                    reason=facts.reason,
                    dry_run=opts.dry_run,
                )
            )

    def client_eof(self) -> FrameOutcome:
        """The client closed its side; nothing to do at this stage (hook for one-run outputs)."""
        return FrameOutcome(disposition="none")

    # -- server lines ----------------------------------------------------------------------------

    @property
    def wants_server_lines(self) -> bool:
        """True while a tools/list answer is awaited: only then are server lines parsed (D13)."""
        return bool(self._pending_tools_list)

    def observe_server_line(self, line: bytes) -> list[str]:
        """Record tool identities from the tools/list result answering one of our requests."""
        if b'"tools"' not in line:
            return []
        try:
            message = ujson.loads(line)
        except (ValueError, TypeError):
            return []
        if not isinstance(message, dict):
            return []
        key = _id_key(message.get("id"))
        if key is None or key not in self._pending_tools_list:
            return []
        self._pending_tools_list.discard(key)
        result = message.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return []
        tools = result["tools"]
        seen = self.state.observe_tools(self.options.label, tools)
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"].strip():
                digest = tool_definition_digest(tool, self.options.label)
                if digest is None:
                    self._bindings.pop(tool["name"], None)
                else:
                    self._bindings[tool["name"]] = digest
        if not self.options.verbose:
            return []
        return [records.tool_identity_line(n, self.options.label, s, m) for (n, s, m) in seen]
