"""Records the wrap relay writes: decision events, audit records, receipts, the stop record and
the stderr lines.

Sans-IO: every function takes plain values (and the policy engine's one decision value,
:class:`assay.policy.Decision`) and returns a dict, a str or the exact bytes of one line. Nothing
here reads a clock or a random source except through a default that a caller (or a test) can
replace. The relay owns the files and pipes; this module owns the shapes, their key order and
the values derived from the decision (docs/wrap-records.md). The bytes sent to the client (deny
and rejection replies) are :mod:`assay.wrap.replies`.

The key order of every record is part of its contract: NDJSON readers diff these lines, so dicts
are built in serialization order and encoded without sorting. :class:`Recorder` is the per-call
entry point of a session; it writes the same bytes as the builders below from templates made
once per decision (docs/wrap-records.md, "How records are built").
"""

from __future__ import annotations

import json
import os
import time as _time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Final

import ujson

from assay.policy.decision import EVIDENCE_FIELDS, Decision, event_reason_code
from assay.wrap.replies import REJECTION_REASONS

__all__ = [
    "ABSENT",
    "OUTCOMES",
    "Recorded",
    "Recorder",
    "audit_decision",
    "audit_record",
    "audit_record_for",
    "contract_obligations",
    "decision_data",
    "decision_event",
    "delegation_of",
    "dropped_response_warning",
    "encode_line",
    "merge_obligations",
    "new_event_id",
    "obligation_outcomes",
    "quoted",
    "receipt_line",
    "rejection_warning",
    "rfc3339_utc",
    "stop_record",
    "tool_call_id_for",
    "tool_identity_line",
    "typed_decision_of",
    "unreadable_answer_warning",
    "verbose_line",
    "wrap_reason_code",
]


class _Absent:
    """Marks a JSON member that was not there at all (distinct from JSON ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = _Absent()
"""The request had no ``id`` member. Pass it wherever a function takes ``request_id``."""

OUTCOMES: Final = ("allow", "allow_with_warning", "deny")

# ---------------------------------------------------------------------------------------------
# Encoding, time and event ids
# ---------------------------------------------------------------------------------------------


def encode_line(obj: Any) -> bytes:
    """One compact JSON line (UTF-8, no ASCII escaping, ``/`` left alone) ending in ``\\n``.

    ujson writes our own records. For strings, integers of any size, booleans and null its
    bytes equal ``json.dumps(separators=(",", ":"), ensure_ascii=False)``; floats may differ in
    exponent spelling (``1e-7`` vs ``1e-07``) but parse back equal. A lone surrogate (a client's
    ``"\\ud83d"`` escape) cannot be UTF-8: the whole line is then written with ASCII escapes.
    """
    text = ujson.dumps(obj, ensure_ascii=False, escape_forward_slashes=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return ujson.dumps(obj, ensure_ascii=True, escape_forward_slashes=False).encode("ascii") + b"\n"


def rfc3339_utc(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with a ``+00:00`` offset and 6 fractional digits (docs/wrap-records.md).

    A naive ``moment`` is taken to be UTC already; an aware one is converted.
    """
    if moment is None:
        moment = datetime.now(timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    else:
        moment = moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="microseconds")


def _stamp(value: datetime | str | None) -> str:
    return value if isinstance(value, str) else rfc3339_utc(value)


def _clock() -> Callable[[], str]:
    """``rfc3339_utc()`` of now, cheaper: the text up to the seconds is kept for the second it
    names, so a call formats only the microseconds."""
    time_ns, gmtime, strftime = _time.time_ns, _time.gmtime, _time.strftime
    second_now = -1
    prefix = ""

    def now() -> str:
        nonlocal second_now, prefix
        micro = time_ns() // 1000
        second = micro // 1_000_000
        if second != second_now:
            prefix = strftime("%Y-%m-%dT%H:%M:%S.", gmtime(second))
            second_now = second
        return "%s%06d+00:00" % (prefix, micro - second * 1_000_000)

    return now


_VARIANT: Final = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}
_ID_BATCH: Final = 256


def _event_ids() -> Callable[[], str]:
    """``evt_decision_<uuid4>`` ids from ``os.urandom``, read and formatted 256 at a time.

    Each id is a version-4 UUID as :func:`uuid.uuid4` makes it (16 random bytes, the version
    nibble set to 4 and the variant bits to ``10``), in its lowercase 8-4-4-4-12 form."""

    def ids() -> Iterator[str]:
        variant = _VARIANT
        while True:
            h = os.urandom(16 * _ID_BATCH).hex()
            yield from [
                f"evt_decision_{h[i:i + 8]}-{h[i + 8:i + 12]}-4{h[i + 13:i + 16]}-"
                f"{variant[h[i + 16]]}{h[i + 17:i + 20]}-{h[i + 20:i + 32]}"
                for i in range(0, 32 * _ID_BATCH, 32)
            ]

    return ids().__next__


def new_event_id() -> str:
    """A fresh decision event id, ``evt_decision_<uuid4>`` (docs/wrap-records.md, "Decision event")."""
    return f"evt_decision_{uuid.uuid4()}"


def _has_id(request_id: Any) -> bool:
    """Upstream reads ``id`` as ``Option<Value>``: absent and JSON null are both "no id"."""
    return request_id is not ABSENT and request_id is not None


# ---------------------------------------------------------------------------------------------
# The decision as record values
# ---------------------------------------------------------------------------------------------

# The approval, scope and redaction fields of a decision, in event order; the policy engine
# sets them when it attaches those obligations.
_EVIDENCE_FIELDS: Final = EVIDENCE_FIELDS


def typed_decision_of(outcome: str, policy_code: str | None) -> str:
    """The four-valued ``typed_decision`` of an outcome (docs/wrap-records.md, "Decision event"),
    computed from the outcome and code only."""
    if outcome == "allow":
        return "allow"
    if outcome == "allow_with_warning":
        return "allow_with_obligations"
    return "deny_with_alert" if policy_code == "E_TOOL_DRIFT" else "deny"


def contract_obligations(outcome: str, policy_code: str | None, reason: str | None) -> list[dict]:
    """Obligations the outcome itself implies (docs/wrap-records.md, "Obligations"): a warning
    becomes a ``legacy_warning``, a drift deny an ``alert``; both carry ``<code>:<reason>``."""
    if outcome == "allow_with_warning":
        return [{"type": "legacy_warning", "detail": f"{policy_code}:{reason}"}]
    if outcome == "deny" and policy_code == "E_TOOL_DRIFT":
        return [{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}]
    return []


def merge_obligations(
    outcome: str, policy_code: str | None, reason: str | None, extra: Iterable[Mapping[str, Any]] = ()
) -> list[dict]:
    """The event's obligation list: the ones the outcome implies first, then ``extra`` in order,
    skipping exact duplicates (the list is the same whether ``extra`` already holds them)."""
    merged = contract_obligations(outcome, policy_code, reason)
    for item in extra:
        item = dict(item)
        if item not in merged:
            merged.append(item)
    return merged


# ---------------------------------------------------------------------------------------------
# Reason codes and obligation outcomes
# ---------------------------------------------------------------------------------------------

def wrap_reason_code(outcome: str, policy_code: str | None) -> str:
    """``data.reason_code`` of a decision event (docs/wrap-records.md, "Which calls produce records").

    Allow → ``P_POLICY_ALLOW``; a warning keeps its raw code (``E_TOOL_UNCONSTRAINED``); a deny
    maps to its ``P_*`` code, with ``P_POLICY_DENY`` as the fail-closed catch-all. The mapping
    itself is the policy engine's (:func:`assay.policy.decision.event_reason_code`); this adds the
    checks a record builder needs.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
    if outcome == "allow_with_warning" and not policy_code:
        raise ValueError("a warning outcome needs its policy_code")
    return event_reason_code(outcome, policy_code)


# type → (outcome type, status, reason, reason_code). Executor-stage mapping for obligations the
# relay only records (wrap never blocks on them, docs/wrap-records.md, "Obligations"). Texts are
# upstream's values.
_OBLIGATION_EXECUTION: Final = {
    "log": ("log", "applied", None, None),
    "alert": ("alert", "applied", None, None),
    "legacy_warning": ("log", "applied", "mapped from legacy_warning", "legacy_warning_mapped"),
    "approval_required": ("approval_required", "skipped", "validated in handler", "validated_in_handler"),
    "restrict_scope": (
        "restrict_scope",
        "skipped",
        "contract-only in wave29 (no runtime enforcement)",
        "contract_only",
    ),
    "redact_args": (
        "redact_args",
        "skipped",
        "contract-only in wave31 (no runtime redaction execution)",
        "contract_only",
    ),
}
_UNSUPPORTED_OBLIGATION: Final = ("skipped", "unsupported obligation type in wave25", "unsupported_obligation_type")
_STATUS_REASON_CODE: Final = {"applied": "obligation_applied", "skipped": "obligation_skipped", "error": "obligation_error"}


def obligation_outcomes(obligations: Iterable[Mapping[str, Any]]) -> list[dict]:
    """One normalized outcome per obligation, in order (log-only execution + v1 normalization).

    Keys: ``type, status, reason?, reason_code, enforcement_stage, normalization_version``. A
    missing reason code is filled from the status (``obligation_applied`` ...).
    """
    out = []
    for obligation in obligations:
        kind = str(obligation.get("type", ""))
        if kind in _OBLIGATION_EXECUTION:
            otype, status, reason, code = _OBLIGATION_EXECUTION[kind]
        else:
            otype, (status, reason, code) = kind, _UNSUPPORTED_OBLIGATION
        entry: dict[str, Any] = {"type": otype, "status": status}
        if reason is not None:
            entry["reason"] = reason
        entry["reason_code"] = code if code is not None else _STATUS_REASON_CODE[status]
        entry["enforcement_stage"] = "executor"
        entry["normalization_version"] = "v1"
        out.append(entry)
    return out


_OBLIGATION_KEYS: Final = ("type", "detail", "restrict_scope", "redact_args")
_CONTRACT_KEYS: Final = {
    "restrict_scope": ("scope_type", "scope_value", "scope_match_mode"),
    "redact_args": ("redaction_target", "redaction_mode", "redaction_scope"),
}


def _ordered_obligation(obligation: Mapping[str, Any]) -> dict:
    """``{type, detail?, restrict_scope?, redact_args?}`` with absent members omitted."""
    out: dict[str, Any] = {}
    for key in _OBLIGATION_KEYS:
        value = obligation.get(key)
        if value is None:
            continue
        if key in _CONTRACT_KEYS and isinstance(value, Mapping):
            order = _CONTRACT_KEYS[key]
            value = {k: value[k] for k in order if k in value} | {k: v for k, v in value.items() if k not in order}
        out[key] = value
    for key, value in obligation.items():  # members the engine may add later keep their place last
        if key not in _OBLIGATION_KEYS and value is not None:
            out[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# Convergence block (upstream's classification of an emitted decision)
# ---------------------------------------------------------------------------------------------

_REQUIRED_CONSUMER_FIELDS: Final = (
    "decision",
    "reason_code",
    "decision_outcome_kind",
    "decision_origin",
    "fulfillment_decision_path",
    "decision_basis_version",
)
_REQUIRED_CONTEXT_FIELDS: Final = ("lane", "principal", "auth_context_summary", "approval_state")
_ENFORCEMENT_DENY_CODES: Final = frozenset({"P_APPROVAL_REQUIRED", "P_RESTRICT_SCOPE", "P_REDACT_ARGS", "P_MANDATE_REQUIRED"})

# kind → (policy_deny, fail_closed_deny, enforcement_deny, deny_convergence_reason)
_DENY_PROJECTION: Final = {
    "policy_deny": (True, False, False, "outcome_policy_deny"),
    "fail_closed_deny": (False, True, False, "outcome_fail_closed_deny"),
    "enforcement_deny": (False, False, True, "outcome_enforcement_deny"),
}


def _convergence(decision: str, reason_code: str, outcomes: list[dict], context: Mapping[str, Any]) -> dict:
    """The convergence fields for a decision that is ``allow`` or ``deny`` and never fail-closed.

    Wrap always has a converged outcome, so every fallback path of the upstream classification is
    settled: the classification source is the outcome kind and no fallback is applied.
    """
    applied = any(o["status"] == "applied" for o in outcomes)
    skipped = any(o["status"] == "skipped" for o in outcomes)
    errored = any(o["status"] == "error" for o in outcomes)
    if decision == "deny":
        if reason_code.startswith("M_") or reason_code in _ENFORCEMENT_DENY_CODES:
            kind, origin = "enforcement_deny", "runtime_enforcement"
        else:
            kind, origin = "policy_deny", "policy_engine"
        path = "policy_deny"
    else:
        kind = "obligation_error" if errored else "obligation_applied" if applied else "obligation_skipped"
        origin, path = "obligation_executor", "policy_allow"
    policy_deny, fail_closed_deny, enforcement_deny, deny_reason = _DENY_PROJECTION.get(
        kind, (False, False, False, "outcome_not_deny")
    )
    present = [name for name in _REQUIRED_CONTEXT_FIELDS if context.get(name) is not None]
    missing = [name for name in _REQUIRED_CONTEXT_FIELDS if context.get(name) is None]
    context_state = (
        "absent_envelope" if not present else "complete_envelope" if not missing else "partial_envelope"
    )
    block: dict[str, Any] = {
        "decision_outcome_kind": kind,
        "decision_origin": origin,
        "outcome_compat_state": "legacy_fields_preserved",
        "fulfillment_decision_path": path,
        "decision_basis_version": "wave39_v1",
        "compat_fallback_applied": False,
        "classification_source": "converged_outcome",
        "replay_diff_reason": f"converged_{kind}",
        "legacy_shape_detected": False,
        "decision_consumer_contract_version": "wave41_v1",
        "consumer_read_path": "converged_decision",
        "consumer_fallback_applied": False,
        "consumer_payload_state": "converged",
        "required_consumer_fields": list(_REQUIRED_CONSUMER_FIELDS),
        "decision_context_contract_version": "wave42_v1",
        "context_payload_state": context_state,
        "required_context_fields": list(_REQUIRED_CONTEXT_FIELDS),
    }
    if missing:
        block["missing_context_fields"] = missing
    block |= {
        "policy_deny": policy_deny,
        "fail_closed_deny": fail_closed_deny,
        "enforcement_deny": enforcement_deny,
        "deny_precedence_version": "wave40_v1",
        "deny_classification_source": "outcome_kind",
        "deny_legacy_fallback_applied": False,
        "deny_convergence_reason": deny_reason,
        "obligation_applied_present": applied,
        "obligation_skipped_present": skipped,
        "obligation_error_present": errored,
    }
    return block


# ---------------------------------------------------------------------------------------------
# Decision events (docs/wrap-records.md, "Decision event")
# ---------------------------------------------------------------------------------------------


def _data_head(decision: Decision, dry_run: bool, tool_definition_digest: str | None) -> dict:
    """``data`` from ``tool`` through the convergence block: every member that depends on the
    decision (and the tool binding) alone."""
    data: dict[str, Any] = {"tool": decision.tool}
    if decision.tool_classes:
        data["tool_classes"] = sorted(decision.tool_classes)
    if decision.matched_tool_classes:
        data["matched_tool_classes"] = sorted(decision.matched_tool_classes)
    if decision.match_basis is not None:
        data["match_basis"] = decision.match_basis
    if decision.matched_rule is not None:
        data["matched_rule"] = decision.matched_rule
    outcome, code, reason = decision.outcome, decision.reason_code, decision.reason
    data["typed_decision"] = decision.typed_decision or typed_decision_of(outcome, code)
    version = decision.policy_version
    data["policy_version"] = version if version is not None and version.strip() else "unspecified"
    digest = decision.policy_digest
    if digest:  # None or "" means the digest could not be computed: no cluster
        data["policy_digest"] = digest
        data["policy_snapshot_digest"] = digest
        data["policy_snapshot_digest_alg"] = "sha256"
        data["policy_snapshot_canonicalization"] = "jcs:mcp_policy"
        data["policy_snapshot_schema"] = "assay.mcp.policy.snapshot.v1"
    if tool_definition_digest is not None:
        data["tool_definition_digest"] = tool_definition_digest
        data["tool_definition_digest_alg"] = "sha256"
        data["tool_definition_canonicalization"] = "jcs:mcp_tool_definition.v1"
        data["tool_definition_schema"] = "assay.mcp.tool-definition.snapshot.v1"
        data["tool_definition_source"] = "mcp.tools/list"
    obligations = merge_obligations(outcome, code, reason, decision.obligations)
    outcomes = obligation_outcomes(obligations)
    if obligations:
        data["obligations"] = [_ordered_obligation(o) for o in obligations]
        data["obligation_outcomes"] = outcomes
    for name in _EVIDENCE_FIELDS:
        value = getattr(decision, name)
        if value is not None:
            data[name] = value
    kind = _event_decision(decision, dry_run)
    data |= _convergence(kind, wrap_reason_code(outcome, code), outcomes, {"approval_state": decision.approval_state})
    return data


def _event_decision(decision: Decision, dry_run: bool) -> str:
    return "deny" if decision.outcome == "deny" and not dry_run else "allow"


def _data_verdict(decision: Decision, dry_run: bool) -> dict:
    """``decision``, ``reason_code`` and ``reason`` (left out for a plain allow)."""
    out: dict[str, Any] = {
        "decision": _event_decision(decision, dry_run),
        "reason_code": wrap_reason_code(decision.outcome, decision.reason_code),
    }
    if decision.outcome != "allow" and decision.reason is not None:
        out["reason"] = decision.reason
    return out


def decision_data(
    decision: Decision,
    *,
    dry_run: bool,
    tool_call_id: str,
    request_id: Any = ABSENT,
    delegated_from: str | None = None,
    delegation_depth: int | None = None,
    tool_definition_digest: str | None = None,
) -> dict:
    """The ``data`` object of an ``assay.tool.decision`` event, keys in serialization order.

    ``decision.tool`` is the called tool (for a rate-limit deny too). Unset keys and empty
    lists are left out. In dry-run a deny is recorded as ``decision: allow`` while
    ``reason_code``, ``reason`` and ``typed_decision`` keep the deny; the convergence block then
    classifies the allow that actually happened (docs/wrap-records.md, "Dry run"). The event's
    obligations are the ones the outcome implies (``legacy_warning``, drift ``alert``) and then
    the decision's own, never doubled. ``tool_definition_digest`` (the ``sha256:`` digest of the
    cached binding) brings its four companion fields with it. ``request_id`` is left out when
    absent or null.
    """
    if decision.outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {decision.outcome!r}")
    data = _data_head(decision, dry_run, tool_definition_digest)
    if delegated_from is not None:
        data["delegated_from"] = delegated_from
    if delegation_depth is not None:
        data["delegation_depth"] = delegation_depth
    data |= _data_verdict(decision, dry_run)
    data["tool_call_id"] = tool_call_id
    if _has_id(request_id):
        data["request_id"] = request_id
    return data


def decision_event(
    source: str, data: Mapping[str, Any], *, event_id: str | None = None, time: datetime | str | None = None
) -> dict:
    """The CloudEvents 1.0 envelope of a decision (no ``datacontenttype``).

    ``event_id`` defaults to ``evt_decision_<uuid4>``; ``time`` (a string is used verbatim)
    defaults to now, RFC 3339 UTC.
    """
    return {
        "specversion": "1.0",
        "id": event_id if event_id is not None else new_event_id(),
        "type": "assay.tool.decision",
        "source": source,
        "time": _stamp(time),
        "data": dict(data),
    }


# ---------------------------------------------------------------------------------------------
# Request ids, tool_call_id and delegation (docs/wrap-records.md, "Decision event")
# ---------------------------------------------------------------------------------------------

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_U32_MAX: Final = 2**32 - 1


def _tool_arguments(params: Any) -> Any:
    """``params.arguments`` when ``params`` fits ``{name: string, arguments?: any}``, else None."""
    if isinstance(params, Mapping) and isinstance(params.get("name"), str):
        return params.get("arguments")
    return None


def tool_call_id_for(params: Any, request_id: Any, *, new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """``tool_call_id`` of a ``tools/call``.

    ``params.arguments._meta.tool_call_id`` when it is a string; else ``req_<id>`` for a string
    id or an integer id within signed 64 bits (``bool`` is not an integer here); else
    ``gen_<uuid4>``.
    """
    arguments = _tool_arguments(params)
    if isinstance(arguments, Mapping):
        meta = arguments.get("_meta")
        if isinstance(meta, Mapping) and isinstance(meta.get("tool_call_id"), str):
            return meta["tool_call_id"]
    if isinstance(request_id, str):
        return f"req_{request_id}"
    if isinstance(request_id, int) and not isinstance(request_id, bool) and _INT64_MIN <= request_id <= _INT64_MAX:
        return f"req_{request_id}"
    return f"gen_{new_uuid()}"


def delegation_of(params: Any) -> tuple[str | None, int | None]:
    """``(delegated_from, delegation_depth)`` from ``params.arguments._meta.delegation``.

    ``delegated_from`` must be a string that is non-empty after trimming (the trimmed text is
    kept); without it there is no delegation at all. ``delegation_depth`` must be an integer
    (not a bool or float) from 1 to 2^32-1, else it is None.
    """
    arguments = _tool_arguments(params)
    if not isinstance(arguments, Mapping):
        return None, None
    meta = arguments.get("_meta")
    delegation = meta.get("delegation") if isinstance(meta, Mapping) else None
    if not isinstance(delegation, Mapping):
        return None, None
    source = delegation.get("delegated_from")
    if not isinstance(source, str) or not source.strip():
        return None, None
    depth = delegation.get("delegation_depth")
    if not (isinstance(depth, int) and not isinstance(depth, bool) and 1 <= depth <= _U32_MAX):
        depth = None
    return source.strip(), depth


# ---------------------------------------------------------------------------------------------
# Audit records (docs/wrap-records.md, "Audit record")
# ---------------------------------------------------------------------------------------------

_AUDIT_VERDICTS: Final = ("allow", "allow_with_warning", "deny", "would_deny")


def audit_decision(outcome: str, *, dry_run: bool) -> str:
    """The audit ``decision`` for a policy outcome: a deny is ``would_deny`` in dry-run."""
    if outcome == "deny":
        return "would_deny" if dry_run else "deny"
    if outcome in OUTCOMES:
        return outcome
    raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")


def audit_record(
    decision: str,
    tool: str | None,
    reason: str | None,
    *,
    request_id: Any = ABSENT,
    agentic: Mapping[str, Any] | None = None,
    timestamp: datetime | str | None = None,
) -> dict:
    """One audit line's object: ``timestamp, decision, tool, reason, request_id?, agentic?``.

    ``tool`` and ``reason`` are always present (possibly null); ``request_id`` is left out when
    absent or null, ``agentic`` (the deny contract) when None.
    """
    if decision not in _AUDIT_VERDICTS:
        raise ValueError(f"audit decision must be one of {_AUDIT_VERDICTS}, not {decision!r}")
    record: dict[str, Any] = {"timestamp": _stamp(timestamp), "decision": decision, "tool": tool, "reason": reason}
    if _has_id(request_id):
        record["request_id"] = request_id
    if agentic is not None:
        record["agentic"] = dict(agentic)
    return record


_DECISION_TOOL: Final = object()


def audit_record_for(
    decision: Decision,
    *,
    dry_run: bool,
    request_id: Any = ABSENT,
    tool: Any = _DECISION_TOOL,
    timestamp: datetime | str | None = None,
) -> dict:
    """The one audit record of a decision: a warning is ``allow_with_warning`` only, never
    followed by an ``allow`` (docs/wrap-records.md, "Which calls produce records").

    ``tool`` defaults to ``decision.tool``; pass None for an allowed ``tools/call`` whose params
    did not fit the shape (upstream writes ``"tool": null`` there). Allow carries no reason; a
    deny carries its contract as ``agentic``.
    """
    name = decision.tool if tool is _DECISION_TOOL else tool
    verdict = audit_decision(decision.outcome, dry_run=dry_run)
    reason = None if decision.outcome == "allow" else decision.reason
    agentic = decision.contract if decision.outcome == "deny" else None
    return audit_record(verdict, name, reason, request_id=request_id, agentic=agentic, timestamp=timestamp)


# ---------------------------------------------------------------------------------------------
# Receipts and the stop record (docs/wrap.md, "One-run outputs and session reports")
# ---------------------------------------------------------------------------------------------


def receipt_line(
    seq: int,
    frame_digest: str,
    kind: str,
    disposition: str,
    *,
    method: Any = ABSENT,
    request_id: Any = ABSENT,
    reject_reason: str | None = None,
    decision_event_id: str | None = None,
) -> bytes:
    """One request receipt: digests and dispositions, never arguments, bodies or times.

    ``schema, seq, frame_digest, kind, method?, request_id?, disposition, reject_reason?,
    decision_event_id?``. ``frame_digest`` is written as given (``sha256:<hex>``). ``method``
    and ``request_id`` are left out only when ABSENT: a request whose ``id`` is null says
    ``"request_id":null``.
    """
    receipt: dict[str, Any] = {
        "schema": "assay.mcp_request_receipt.v0",
        "seq": seq,
        "frame_digest": frame_digest,
        "kind": kind,
    }
    if method is not ABSENT:
        receipt["method"] = method
    if request_id is not ABSENT:
        receipt["request_id"] = request_id
    receipt["disposition"] = disposition
    if reject_reason is not None:
        receipt["reject_reason"] = reject_reason
    if decision_event_id is not None:
        receipt["decision_event_id"] = decision_event_id
    return encode_line(receipt)


def stop_record(
    stop_cause: str,
    *,
    child_returncode: int | None,
    forwarded: int,
    blocked: int,
    rejected: int,
    dropped_responses: int,
    wrap_signal: int | None = None,
) -> dict:
    """The session-stop record, filled once the child is reaped.

    ``child_returncode`` is the child's status as :mod:`subprocess` reports it (negative for a
    signal, None when unknown): ``child_exit`` holds ``code`` or ``signal``, the other null.
    ``blocked`` counts denied calls, answered or dropped alike.
    """
    record: dict[str, Any] = {"schema": "assay.mcp_session_stop.v0", "stop_cause": stop_cause}
    if wrap_signal is not None:
        record["wrap_signal"] = wrap_signal
    rc = child_returncode
    record["child_exit"] = {
        "code": rc if rc is not None and rc >= 0 else None,
        "signal": -rc if rc is not None and rc < 0 else None,
    }
    record["frames"] = {
        "forwarded": forwarded,
        "blocked": blocked,
        "rejected": rejected,
        "dropped_responses": dropped_responses,
    }
    return record


# ---------------------------------------------------------------------------------------------
# The recorder: one call per evaluated tools/call (docs/wrap-records.md, "How records are built")
# ---------------------------------------------------------------------------------------------


class Recorded:
    """What :meth:`Recorder.record` built for one call; None where that output is off.

    ``decision_line`` and ``audit_line`` are whole NDJSON lines (ending in ``\\n``),
    ``verbose`` the ``--verbose`` line without its newline. ``event_id`` is the decision
    event's id whenever an event was made (for the receipt); ``event`` the event itself, only
    when the recorder keeps events (coverage reads them)."""

    __slots__ = ("decision_line", "audit_line", "verbose", "event_id", "event")

    def __init__(
        self,
        decision_line: bytes | None = None,
        audit_line: bytes | None = None,
        verbose: str | None = None,
        event_id: str | None = None,
        event: dict | None = None,
    ) -> None:
        self.decision_line = decision_line
        self.audit_line = audit_line
        self.verbose = verbose
        self.event_id = event_id
        self.event = event

    def __repr__(self) -> str:
        return (
            f"Recorded(decision_line={self.decision_line!r}, audit_line={self.audit_line!r}, "
            f"verbose={self.verbose!r}, event_id={self.event_id!r})"
        )


_dumps: Final = ujson.dumps


def _piece(value: Any) -> bytes | None:
    """``value`` as it appears inside an :func:`encode_line` line, or None when it holds a lone
    surrogate (that line is then all ASCII escapes: the caller builds it the generic way)."""
    try:
        return _dumps(value, ensure_ascii=False, escape_forward_slashes=False).encode("utf-8")
    except UnicodeEncodeError:
        return None


def _inner(obj: Mapping[str, Any]) -> bytes | None:
    """The members of a non-empty object as bytes, without the braces."""
    text = _piece(obj)
    return None if text is None else text[1:-1]


class _Template:
    """The invariant bytes of one decision's records (one Recorder, so one mode and source),
    made on first use.

    ``events``: tool-definition digest → :class:`_EventParts`. ``audits``: tool written as
    null? → (``,"decision":..,"tool":..,"reason":..``, the rest from ``agentic`` to the
    newline), or None when that holds a lone surrogate (the line is then built the generic
    way)."""

    __slots__ = ("decision", "dry_run", "events", "audits")

    def __init__(self, decision: Decision, dry_run: bool) -> None:
        self.decision = decision
        self.dry_run = dry_run
        self.events: dict[str | None, _EventParts] = {}
        self.audits: dict[bool, tuple[bytes, bytes] | None] = {}

    def event(self, tool_definition_digest: str | None) -> _EventParts:
        events = self.events
        if tool_definition_digest in events:
            return events[tool_definition_digest]
        parts = _EventParts(
            _data_head(self.decision, self.dry_run, tool_definition_digest), _data_verdict(self.decision, self.dry_run)
        )
        if len(events) < _HEADS_PER_DECISION:
            events[tool_definition_digest] = parts
        return parts

    def audit(self, null_tool: bool) -> tuple[bytes, bytes] | None:
        audits = self.audits
        if null_tool in audits:
            return audits[null_tool]
        decision = self.decision
        sample = audit_record_for(
            decision, dry_run=self.dry_run, tool=None if null_tool else decision.tool, timestamp=""
        )
        del sample["timestamp"]
        agentic = sample.pop("agentic", None)
        middle = _inner(sample)
        tail = b"}\n" if agentic is None else _piece(agentic)
        parts = None
        if middle is not None and tail is not None:
            parts = (b"," + middle, tail if agentic is None else b',"agentic":' + tail + b"}\n")
        audits[null_tool] = parts
        return parts


class _EventParts:
    """The invariant parts of one decision's event for one tool binding: ``head`` is ``data``
    from ``tool`` through the convergence block, ``verdict`` its ``decision``, ``reason_code``
    and ``reason``; as dicts and as bytes (``head_bytes`` without the closing brace,
    ``verdict_bytes`` with a leading comma), the bytes None when they hold a lone surrogate."""

    __slots__ = ("head", "verdict", "head_bytes", "verdict_bytes")

    def __init__(self, head: dict, verdict: dict) -> None:
        self.head = head
        self.verdict = verdict
        head_bytes = _piece(head)
        verdict_bytes = _inner(verdict)
        self.head_bytes = None if head_bytes is None else head_bytes[:-1]
        self.verdict_bytes = None if verdict_bytes is None else b"," + verdict_bytes


_TEMPLATES_MAX: Final = 512


def _shape(decision: Decision) -> tuple | None:
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
_HEADS_PER_DECISION: Final = 64


class Recorder:
    """The decision event, audit record and ``--verbose`` line of each evaluated ``tools/call``
    of one session, as one call (:meth:`record`).

    ``source`` is the event ``source`` (``--event-source``), ``label`` the server label
    (``--label``); ``dry_run`` the mode. ``decision_log``, ``audit_log``, ``keep_events`` and
    ``verbose`` say which outputs to build. ``new_event_id`` (default: ``evt_decision_<uuid4>``
    from a batched random source) and ``now`` (default: the clock, RFC 3339 UTC) can be
    replaced, e.g. by tests; both are called once per recorded call, and the event and the
    audit record of one call carry the same time.

    The lines are byte for byte what :func:`decision_data` + :func:`decision_event` +
    :func:`encode_line` and :func:`audit_record_for` + :func:`encode_line` give for the same
    values. They are assembled from bytes made once per decision object, or per kind of
    decision (every field but the deny contract): the policy engine returns the same
    :class:`Decision` for every plain call of a tool and a fresh one of the same kind for each
    schema deny, so the per-call work is the id, the time, ``tool_call_id``, ``request_id``,
    delegation and a fresh deny's contract.
    """

    __slots__ = (
        "source",
        "label",
        "dry_run",
        "decision_log",
        "audit_log",
        "keep_events",
        "verbose",
        "_new_id",
        "_now",
        "_fast_id",
        "_fast_time",
        "_templates",
        "_shapes",
        "_after_id",
    )

    def __init__(
        self,
        *,
        source: str,
        label: str,
        dry_run: bool,
        decision_log: bool,
        audit_log: bool,
        keep_events: bool,
        verbose: bool,
        new_event_id: Callable[[], str] | None = None,
        now: Callable[[], str] | None = None,
    ) -> None:
        self.source = source
        self.label = label
        self.dry_run = dry_run
        self.decision_log = decision_log
        self.audit_log = audit_log
        self.keep_events = keep_events
        self.verbose = verbose
        self._fast_id = new_event_id is None  # our ids and times need no JSON escaping
        self._fast_time = now is None
        self._new_id: Callable[[], str] = new_event_id if new_event_id is not None else _event_ids()
        self._now: Callable[[], str] = now if now is not None else _clock()
        self._templates: dict[int, _Template] = {}
        self._shapes: dict[tuple, _Template] = {}
        source_part = _piece(source)
        self._after_id = (
            None
            if source_part is None
            else b',"type":"assay.tool.decision","source":' + source_part + b',"time":'
        )

    @property
    def active(self) -> bool:
        """Whether :meth:`record` builds anything at all."""
        return self.decision_log or self.audit_log or self.keep_events or self.verbose

    def record(
        self,
        decision: Decision,
        frame: Mapping[str, Any],
        params: Any,
        name: str,
        valid: bool,
        tool_definition_digest: str | None,
    ) -> Recorded:
        """The records of one evaluated call.

        ``frame`` is the client's request (its ``id`` member, or none), ``params`` its
        ``params``; ``name`` the evaluated tool name (``""`` when ``valid`` is False: params
        did not fit ``{name: string, ...}``); ``tool_definition_digest`` the binding of the
        tool's listed definition, or None.
        """
        dry_run = self.dry_run
        verbose = None
        if self.verbose:
            verbose = verbose_line(
                decision.outcome,
                name if valid else None,
                policy_code=decision.reason_code,
                reason=decision.reason,
                dry_run=dry_run,
            )
        decision_log, keep_events, audit_log = self.decision_log, self.keep_events, self.audit_log
        if not (decision_log or keep_events or audit_log):
            return Recorded(None, None, verbose)
        request_id = frame["id"] if "id" in frame else ABSENT
        stamp = self._now()
        template = self._templates.get(id(decision))
        # The fast way needs a decision seen before, or one just like it (the engine returns
        # the same object for every plain call of a tool, and a fresh one such as a schema deny
        # for each such call: those differ only in the deny contract), the called name to be
        # the decision's (the engine's contract) and every per-call part to be UTF-8 (no lone
        # surrogate). The first of its kind is recorded the generic way.
        own = True
        if template is None or template.decision is not decision:
            shape = _shape(decision)
            template = self._shapes.get(shape) if shape is not None else None
            if template is None:
                template = self._new_template(decision, shape)
                fast = False
            else:
                own = False
                fast = name is decision.tool or name == decision.tool
        else:
            fast = name is decision.tool or name == decision.tool
        rid: bytes | None
        if request_id.__class__ is int:
            rid = b',"request_id":' + str(request_id).encode("ascii")
        elif request_id is ABSENT or request_id is None:
            rid = b""
        else:
            piece = _piece(request_id)
            rid = None if piece is None else b',"request_id":' + piece
        time_part = (b'"' + stamp.encode("ascii") + b'"') if self._fast_time else _piece(stamp)
        if rid is None or time_part is None:
            fast = False
            rid = time_part = b""  # unused: this call is built the generic way
        event_id = None
        event = None
        decision_line = None
        audit_line = None
        if decision_log or keep_events:
            event_id = self._new_id()
            delegated_from, delegation_depth, tool_call_id, call_part = _call_ids(params, request_id)
            if fast:
                events = template.events
                parts = (
                    events[tool_definition_digest]
                    if tool_definition_digest in events
                    else template.event(tool_definition_digest)
                )
                if decision_log:
                    decision_line = self._event_line(
                        parts, event_id, time_part, delegated_from, delegation_depth, tool_call_id, call_part, rid
                    )
                if keep_events:
                    event = self._event(
                        parts, event_id, stamp, delegated_from, delegation_depth, tool_call_id, request_id
                    )
            if (decision_log and decision_line is None) or (keep_events and event is None):
                full = decision_event(
                    self.source,
                    decision_data(
                        decision,
                        dry_run=dry_run,
                        tool_call_id=tool_call_id,
                        request_id=request_id,
                        delegated_from=delegated_from,
                        delegation_depth=delegation_depth,
                        tool_definition_digest=tool_definition_digest,
                    ),
                    event_id=event_id,
                    time=stamp,
                )
                if keep_events:
                    event = full
                if decision_log and decision_line is None:
                    decision_line = encode_line(full)
        if audit_log:
            null_tool = not valid and decision.outcome == "allow"
            audit_parts = template.audit(null_tool) if fast else None
            if audit_parts is not None and not own and decision.outcome == "deny":
                audit_parts = _with_contract(audit_parts[0], decision.contract)
            if audit_parts is not None:
                audit_line = b"".join((b'{"timestamp":', time_part, audit_parts[0], rid, audit_parts[1]))
            else:
                audit_line = encode_line(
                    audit_record_for(
                        decision,
                        dry_run=dry_run,
                        request_id=request_id,
                        tool=None if null_tool else name,
                        timestamp=stamp,
                    )
                )
        return Recorded(decision_line, audit_line, verbose, event_id, event)

    def _new_template(self, decision: Decision, shape: tuple | None) -> _Template:
        templates, shapes = self._templates, self._shapes
        if len(templates) >= _TEMPLATES_MAX:
            templates.clear()
        if len(shapes) >= _TEMPLATES_MAX:
            shapes.clear()
        template = templates[id(decision)] = _Template(decision, self.dry_run)
        if shape is not None:
            shapes[shape] = template
        return template

    def _event_line(
        self,
        parts: _EventParts,
        event_id: str,
        time_part: bytes,
        delegated_from: str | None,
        delegation_depth: int | None,
        tool_call_id: str,
        call_part: bytes | None,
        rid: bytes,
    ) -> bytes | None:
        """The event line from the template, or None when some part needs the generic way."""
        after_id = self._after_id
        head, verdict = parts.head_bytes, parts.verdict_bytes
        if after_id is None or head is None or verdict is None:
            return None
        id_part = (b'"' + event_id.encode("ascii") + b'"') if self._fast_id else _piece(event_id)
        if call_part is None:
            call_part = _piece(tool_call_id)
        if id_part is None or call_part is None:
            return None
        delegation = b""
        if delegated_from is not None:
            source = _piece(delegated_from)
            if source is None:
                return None
            delegation = b',"delegated_from":' + source
        if delegation_depth is not None:
            delegation += b',"delegation_depth":' + str(delegation_depth).encode("ascii")
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

    def _event(
        self,
        parts: _EventParts,
        event_id: str,
        stamp: str,
        delegated_from: str | None,
        delegation_depth: int | None,
        tool_call_id: str,
        request_id: Any,
    ) -> dict:
        """The event as :func:`decision_event` builds it; its nested lists and objects are
        shared with the other events of the same decision (read them, do not change them)."""
        data = dict(parts.head)
        if delegated_from is not None:
            data["delegated_from"] = delegated_from
        if delegation_depth is not None:
            data["delegation_depth"] = delegation_depth
        data.update(parts.verdict)
        data["tool_call_id"] = tool_call_id
        if _has_id(request_id):
            data["request_id"] = request_id
        return {
            "specversion": "1.0",
            "id": event_id,
            "type": "assay.tool.decision",
            "source": self.source,
            "time": stamp,
            "data": data,
        }


def _with_contract(middle: bytes, contract: Mapping[str, Any] | None) -> tuple[bytes, bytes] | None:
    """Audit parts of a deny whose template came from another decision of its kind: the
    ``agentic`` member is this decision's own contract."""
    if contract is None:
        return middle, b"}\n"
    piece = _piece(contract)
    return None if piece is None else (middle, b',"agentic":' + piece + b"}\n")


def _call_ids(params: Any, request_id: Any) -> tuple[str | None, int | None, str, bytes | None]:
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


# ---------------------------------------------------------------------------------------------
# stderr lines (docs/wrap-records.md); returned without the newline. Every name, id and reason that
# comes from a client, a server or a policy is JSON-quoted with ASCII escapes, so no control
# character or terminal escape reaches the terminal raw and no line can forge another.
# ---------------------------------------------------------------------------------------------


def rejection_warning(reason: str) -> str:
    """The stderr line for a rejected frame (docs/wrap-records.md, "Reply to a refused line")."""
    if reason not in REJECTION_REASONS:
        raise ValueError(f"unknown rejection reason {reason!r}")
    return f"[assay] WARNING: rejected client frame ({reason})"


def quoted(value: Any) -> str:
    """``value`` as JSON with every non-ASCII and control character escaped (never raises)."""
    try:
        return json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value))


def verbose_line(
    outcome: str, tool: str | None, *, policy_code: str | None = None, reason: str | None = None, dry_run: bool = False
) -> str:
    """The ``--verbose`` line for one decision, names and reasons JSON-quoted.

    Allow: ``[assay] ALLOW "<tool>"`` (``unknown``, unquoted, when ``tool`` is None, i.e. params
    did not fit the ``tools/call`` shape). Warning: ``[assay] WARNING: Allowing tool "<tool>"
    with warning (code: <code>, reason: "<reason>").`` Deny: ``[assay] DENY "<tool>" (reason:
    "<reason>")``, or ``WOULD_DENY`` in dry-run. For a warning or deny, None stands for the
    evaluated name ``""``.
    """
    if outcome == "allow":
        return f"[assay] ALLOW {quoted(tool) if tool is not None else 'unknown'}"
    tool = "" if tool is None else tool
    if outcome == "allow_with_warning":
        return (f"[assay] WARNING: Allowing tool {quoted(tool)} with warning "
                f"(code: {policy_code}, reason: {quoted(reason)}).")
    if outcome == "deny":
        return f"[assay] {'WOULD_DENY' if dry_run else 'DENY'} {quoted(tool)} (reason: {quoted(reason)})"
    raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")


def tool_identity_line(name: str, server_id: str, schema_hash: str, meta_hash: str) -> str:
    """The line for a newly seen tool, so that users can write ``tool_pins``. The name and the
    server id are JSON strings, which YAML reads back as the same double-quoted scalars."""
    return f"[assay] TOOL {quoted(name)} server_id={quoted(server_id)} schema_hash={schema_hash} meta_hash={meta_hash}"


_MAX_ID_TEXT: Final = 80


def dropped_response_warning(request_id: Any, has_id: bool = True) -> str:
    """The stderr line for a dropped server response: its id (JSON-quoted, cut when long),
    never its content."""
    if not has_id:
        shown = "no id"
    else:
        text = quoted(request_id)
        shown = "id " + (text if len(text) <= _MAX_ID_TEXT else text[:_MAX_ID_TEXT] + "...(cut)")
    return f"[assay] WARNING: dropped a server response ({shown}) that answers no pending client request"


def dropped_request_warning(method: str) -> str:
    """The stderr line for a server request dropped because its id is one of wrap's approval
    ids: the method (JSON-quoted, cut when long), never the content."""
    text = quoted(method)
    shown = text if len(text) <= _MAX_ID_TEXT else text[:_MAX_ID_TEXT] + "...(cut)"
    return f"[assay] WARNING: dropped a server request ({shown}) that used one of wrap's approval ids"


def unreadable_answer_warning() -> str:
    """The stderr line when a server line that may answer a tools/list request was not read."""
    return ("[assay] WARNING: a server line that may answer tools/list could not be read; "
            "pinned tools are denied for the rest of the session")
