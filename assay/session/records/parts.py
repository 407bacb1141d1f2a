"""The parts decision event and audit lines are assembled from (docs/wrap-records.md, "How
records are built"), each made in one place for either encoder (UTF-8, or ASCII escapes for a
line that holds a lone surrogate), and the per-decision templates that keep the invariant ones.

Sans-IO; the templates are owned by one :class:`assay.session.records.Recorder`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from assay.policy.decision import Decision
from assay.session.records.encoding import inner, piece
from assay.session.records.values import (
    audit_decision,
    data_head,
    data_verdict,
    delegation_of,
    tool_call_id_for,
)

__all__ = [
    "Encoder",
    "Origin",
    "Template",
    "after_id_bytes",
    "audit_parts",
    "audit_tail",
    "cacheable",
    "call_ids",
    "event_bytes",
    "event_parts",
    "origin_members",
    "shape_of",
]

Encoder = Callable[[Any], "bytes | None"]


class Origin(NamedTuple):
    """Which agent session and which server a wrap's records belong to (docs/wrap-records.md,
    "Decision event"): the session key (``None``: the wrap shares no session) and the
    ``--label``. Constant for one Recorder (for one client of a gateway's link: the Recorder
    keeps templates per client), so part of every template."""

    session: str | None
    server: str
    #: the user a gateway's records belong to (docs/serve.md, "Records"); None in wrap, whose
    #: records then have no ``subject`` member at all
    subject: str | None = None
    #: the client a gateway's call came from, its ``clientInfo`` name and version (docs/serve.md,
    #: "Records"), already bounded; None when not known (and always in wrap)
    client_name: str | None = None
    client_version: str | None = None


def origin_members(origin: Origin) -> dict[str, str | None]:
    """``{"session": .., "server": ..}``, then ``"subject"`` when there is one, then
    ``"client_name"`` and ``"client_version"`` when the client is known: the members both
    records carry, in this order."""
    members: dict[str, str | None] = {"session": origin.session, "server": origin.server}
    if origin.subject is not None:
        members["subject"] = origin.subject
    if origin.client_name is not None:
        members["client_name"] = origin.client_name
        members["client_version"] = origin.client_version
    return members


_HEADS_PER_DECISION: Final = 64  # tool bindings kept per template
# Tool names are chosen by the client, up to the frame limit: a template of a longer name (or of
# a decision with a longer reason) is used for its call and never kept, so the template cache
# stays bounded in bytes, not only in count (MCP tool names are 1 to 128 characters).
_CACHED_TEXT_MAX: Final = 256
_CACHED_REASON_MAX: Final = 4096
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def event_parts(
    decision: Decision, dry_run: bool, digest: str | None, origin: Origin, enc: Encoder
) -> tuple[bytes, bytes] | None:
    """``data`` from ``tool`` through the convergence block (without the closing brace) and
    ``,"decision":..,"reason_code":..[,"reason":..],"session":..,"server":..``; None when
    ``enc`` cannot encode them."""
    head = enc(data_head(decision, dry_run, digest))
    verdict = inner(enc(data_verdict(decision, dry_run) | origin_members(origin)))
    if head is None or verdict is None:
        return None
    return head[:-1], b"," + verdict


def audit_parts(
    decision: Decision,
    dry_run: bool,
    tool: str | None,
    contract: Mapping[str, Any] | None,
    origin: Origin,
    enc: Encoder,
) -> tuple[bytes, bytes] | None:
    """``,"decision":..,"tool":..,"reason":..,"session":..,"server":..`` and the rest from
    ``agentic`` to the newline; None when ``enc`` cannot encode them. A warning is
    ``allow_with_warning`` only; an allow carries no reason, a deny its contract as ``agentic``
    (docs/wrap-records.md, "Audit record")."""
    outcome = decision.outcome
    members = {
        "decision": audit_decision(outcome, dry_run=dry_run),
        "tool": tool,
        "reason": None if outcome == "allow" else decision.reason,
        **origin_members(origin),
    }
    middle = inner(enc(members))
    tail = audit_tail(contract if outcome == "deny" else None, enc)
    return None if middle is None or tail is None else (b"," + middle, tail)


def audit_tail(contract: Mapping[str, Any] | None, enc: Encoder) -> bytes | None:
    """``,"agentic":<the deny contract>}\n``, or the bare end without one."""
    if contract is None:
        return b"}\n"
    agentic = enc(dict(contract))
    return None if agentic is None else b',"agentic":' + agentic + b"}\n"


def event_bytes(
    id_part: bytes,
    after_id: bytes,
    time_part: bytes,
    head: bytes,
    delegation: bytes,
    verdict: bytes,
    call_part: bytes,
    rid: bytes,
) -> bytes:
    return b"".join(
        (
            b'{"specversion":"1.0","id":',
            id_part,
            after_id,
            time_part,
            b',"data":',
            head,
            delegation,
            verdict,
            b',"tool_call_id":',
            call_part,
            rid,
            b"}}\n",
        )
    )


def after_id_bytes(source: str, enc: Encoder) -> bytes | None:
    source_part = enc(source)
    return None if source_part is None else b',"type":"assay.tool.decision","source":' + source_part + b',"time":'


class Template:
    """The invariant bytes of one decision's records (one Recorder, so one mode, source and
    origin), made on first use (UTF-8; None where they hold a lone surrogate).

    ``events``: tool-definition digest -> event parts. ``audits``: tool written as null? ->
    audit parts."""

    __slots__ = ("decision", "dry_run", "origin", "events", "audits")

    def __init__(self, decision: Decision, dry_run: bool, origin: Origin) -> None:
        self.decision = decision
        self.dry_run = dry_run
        self.origin = origin
        self.events: dict[str | None, tuple[bytes, bytes] | None] = {}
        self.audits: dict[bool, tuple[bytes, bytes] | None] = {}

    def event(self, tool_definition_digest: str | None) -> tuple[bytes, bytes] | None:
        events = self.events
        if tool_definition_digest in events:
            return events[tool_definition_digest]
        parts = event_parts(self.decision, self.dry_run, tool_definition_digest, self.origin, piece)
        if len(events) < _HEADS_PER_DECISION:
            events[tool_definition_digest] = parts
        return parts

    def audit(self, null_tool: bool) -> tuple[bytes, bytes] | None:
        audits = self.audits
        if null_tool in audits:
            return audits[null_tool]
        decision = self.decision
        parts = audits[null_tool] = audit_parts(
            decision, self.dry_run, None if null_tool else decision.tool, decision.contract, self.origin, piece
        )
        return parts


def shape_of(decision: Decision) -> tuple[Any, ...] | None:
    """Every field the invariant parts of a decision's records depend on (all but the deny
    contract), as a dict key; None when an obligation holds anything but strings (the key
    could then equate values that encode differently, such as ``1`` and ``true``)."""
    frozen = []
    for obligation in decision.obligations:
        items = tuple(obligation.items())
        for _key, value in items:
            if value.__class__ is not str:
                return None
        frozen.append(items)
    return (
        decision.outcome,
        decision.tool,
        decision.reason_code,
        decision.reason,
        decision.typed_decision,
        decision.tool_classes,
        decision.matched_tool_classes,
        decision.match_basis,
        decision.matched_rule,
        decision.policy_version,
        decision.policy_digest,
        decision.approval_state,
        decision.scope_type,
        decision.scope_value,
        decision.scope_match_mode,
        decision.redaction_target,
        decision.redaction_mode,
        decision.redaction_scope,
        tuple(frozen),
    )


def cacheable(decision: Decision) -> bool:
    """Whether a template of this decision may be kept: its client-chosen text is short."""
    reason = decision.reason
    return len(decision.tool) <= _CACHED_TEXT_MAX and (reason is None or len(reason) <= _CACHED_REASON_MAX)


def call_ids(params: Any, request_id: Any) -> tuple[str | None, int | None, str, bytes | None]:
    """:func:`delegation_of` and :func:`tool_call_id_for` of one call, and the JSON bytes of
    that ``tool_call_id`` when they are known without encoding (else None). The common case (no
    ``arguments._meta``, an integer or string id) skips their general checks."""
    arguments = params.get("arguments") if params.__class__ is dict else None
    if arguments is None or (arguments.__class__ is dict and arguments.get("_meta") is None):
        cls = request_id.__class__
        if cls is int and _INT64_MIN <= request_id <= _INT64_MAX:
            digits = str(request_id)
            return None, None, "req_" + digits, b'"req_' + digits.encode("ascii") + b'"'
        if cls is str:
            return None, None, "req_" + request_id, None
    delegated_from, delegation_depth = delegation_of(params)
    return delegated_from, delegation_depth, tool_call_id_for(params, request_id), None
