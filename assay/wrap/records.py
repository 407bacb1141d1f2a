"""Records the wrap relay writes: decision events, audit records, deny and rejection replies.

Sans-IO: every function takes plain values and returns a dict, a str or the exact bytes of one
line. Nothing here reads a clock or a random source except through a default that a caller (or
a test) can replace. The relay owns the files and pipes; this module owns the shapes, their key
order and the values derived from the policy result (spec/wrap.md §4.3-§4.5, §6.1, §6.2).

The key order of every record is part of its contract: NDJSON readers diff these lines, so dicts
are built in serialization order and encoded without sorting.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Final

import ujson

from assay.policy.engine import event_reason_code

__all__ = [
    "ABSENT",
    "DecisionFacts",
    "OUTCOMES",
    "REJECTION_REASONS",
    "audit_decision",
    "audit_record",
    "audit_record_for",
    "contract_obligations",
    "decision_data",
    "decision_event",
    "delegation_of",
    "deny_payload_text",
    "deny_reply",
    "dropped_response_warning",
    "quoted",
    "encode_line",
    "is_modern_request",
    "merge_obligations",
    "obligation_outcomes",
    "rejection_reply",
    "rejection_warning",
    "rfc3339_utc",
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
# Encoding and time
# ---------------------------------------------------------------------------------------------


def encode_line(obj: Any) -> bytes:
    """One compact JSON line (UTF-8, no ASCII escaping, ``/`` left alone) ending in ``\\n``.

    ujson is the writer for our own records (DECISIONS D3a). For strings, integers of any size,
    booleans and null its bytes equal ``json.dumps(separators=(",", ":"), ensure_ascii=False)``;
    floats may differ in exponent spelling (``1e-7`` vs ``1e-07``) but parse back equal.
    """
    text = ujson.dumps(obj, ensure_ascii=False, escape_forward_slashes=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate from a client's "\ud83d" escape: keep it escaped
        return ujson.dumps(obj, ensure_ascii=True, escape_forward_slashes=False).encode("ascii") + b"\n"


def rfc3339_utc(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with a ``+00:00`` offset and 6 fractional digits (wrap.md §6).

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


def _has_id(request_id: Any) -> bool:
    """Upstream reads ``id`` as ``Option<Value>``: absent and JSON null are both "no id"."""
    return request_id is not ABSENT and request_id is not None


# ---------------------------------------------------------------------------------------------
# The policy result as plain values
# ---------------------------------------------------------------------------------------------

_MATCH_BASES: Final = ("name", "class", "name+class")
_TYPED: Final = ("allow", "allow_with_obligations", "deny", "deny_with_alert")


@dataclass(frozen=True)
class DecisionFacts:
    """One policy evaluation, detached from the engine's own classes.

    ``tool`` is the name of the tool that was called ("" when ``params`` did not fit the
    ``tools/call`` shape). For rate-limit denies it is still the called tool, never ``ALL``
    (DECISIONS D10). ``obligations`` may be the engine's final list or only its
    approval/scope/redaction obligations: the event always carries the typed-contract ones
    (``legacy_warning``, drift ``alert``) first, added here when missing and never duplicated
    (:func:`merge_obligations`). ``typed_decision`` left as None is derived by
    :func:`typed_decision_of`.

    The optional evidence fields are the ones the policy engine sets for the approval,
    restrict-scope and redact-args obligations (policy.md §10.1); None means "not set" and the
    field is left out of the event.
    """

    tool: str
    outcome: str
    policy_code: str | None = None
    reason: str | None = None
    contract: Mapping[str, Any] | None = None
    typed_decision: str | None = None
    obligations: Sequence[Mapping[str, Any]] = ()
    tool_classes: Sequence[str] = ()
    matched_tool_classes: Sequence[str] = ()
    match_basis: str | None = None
    matched_rule: str | None = None
    policy_version: str | None = None
    policy_digest: str | None = None
    # Obligation evidence (policy.md §10.1); wrap records it, never acts on it.
    approval_state: str | None = None
    scope_type: str | None = None
    scope_value: str | None = None
    scope_match_mode: str | None = None
    scope_evaluation_state: str | None = None
    scope_failure_reason: str | None = None
    restrict_scope_present: bool | None = None
    restrict_scope_target: str | None = None
    restrict_scope_match: bool | None = None
    restrict_scope_reason: str | None = None
    redaction_target: str | None = None
    redaction_mode: str | None = None
    redaction_scope: str | None = None
    redaction_applied_state: str | None = None
    redaction_reason: str | None = None
    redaction_failure_reason: str | None = None
    redact_args_present: bool | None = None
    redact_args_target: str | None = None
    redact_args_mode: str | None = None
    redact_args_result: str | None = None
    redact_args_reason: str | None = None

    @classmethod
    def of(cls, decision: Any, **overrides: Any) -> DecisionFacts:
        """Facts from any object with the engine's attribute names (``assay.policy.Decision``).

        Read by name (any object with these attributes will do): ``reason_code`` becomes
        ``policy_code``; attributes the object lacks stay unset. ``overrides`` win (e.g.
        ``tool=`` for the called tool).
        """
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            source = "reason_code" if name == "policy_code" else name
            if hasattr(decision, source):
                values[name] = getattr(decision, source)
        values.update(overrides)
        return cls(**values)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")
        if self.outcome != "allow" and not self.policy_code:
            raise ValueError(f"a {self.outcome} outcome needs its policy_code")
        if self.match_basis is not None and self.match_basis not in _MATCH_BASES:
            raise ValueError(f"match_basis must be one of {_MATCH_BASES}, not {self.match_basis!r}")
        if self.typed_decision is not None and self.typed_decision not in _TYPED:
            raise ValueError(f"typed_decision must be one of {_TYPED}, not {self.typed_decision!r}")


# Evidence fields in event order (upstream DecisionData struct order).
_EVIDENCE_FIELDS: Final = (
    "approval_state",
    "scope_type",
    "scope_value",
    "scope_match_mode",
    "scope_evaluation_state",
    "scope_failure_reason",
    "restrict_scope_present",
    "restrict_scope_target",
    "restrict_scope_match",
    "restrict_scope_reason",
    "redaction_target",
    "redaction_mode",
    "redaction_scope",
    "redaction_applied_state",
    "redaction_reason",
    "redaction_failure_reason",
    "redact_args_present",
    "redact_args_target",
    "redact_args_mode",
    "redact_args_result",
    "redact_args_reason",
)


def typed_decision_of(outcome: str, policy_code: str | None) -> str:
    """The four-valued projection of policy.md §5.5 (computed from the variant only)."""
    if outcome == "allow":
        return "allow"
    if outcome == "allow_with_warning":
        return "allow_with_obligations"
    return "deny_with_alert" if policy_code == "E_TOOL_DRIFT" else "deny"


def contract_obligations(outcome: str, policy_code: str | None, reason: str | None) -> list[dict]:
    """Obligations the typed contract itself adds (policy.md §5.5): a warning becomes a
    ``legacy_warning``, a drift deny an ``alert``; both carry ``<code>:<reason>``."""
    if outcome == "allow_with_warning":
        return [{"type": "legacy_warning", "detail": f"{policy_code}:{reason}"}]
    if outcome == "deny" and policy_code == "E_TOOL_DRIFT":
        return [{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}]
    return []


def merge_obligations(
    outcome: str, policy_code: str | None, reason: str | None, extra: Iterable[Mapping[str, Any]] = ()
) -> list[dict]:
    """Final obligation list (policy.md T2): typed-contract ones first, then ``extra`` in order,
    skipping exact duplicates."""
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
    """``data.reason_code`` of a decision event (wrap.md §4.3).

    Allow → ``P_POLICY_ALLOW``; a warning keeps its raw code (``E_TOOL_UNCONSTRAINED``); a deny
    maps to its ``P_*`` code, with ``P_POLICY_DENY`` as the fail-closed catch-all. The mapping
    itself is the policy engine's (policy.md §5.3); this adds the checks a record builder needs.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
    if outcome == "allow_with_warning" and not policy_code:
        raise ValueError("a warning outcome needs its policy_code")
    return event_reason_code(outcome, policy_code)


# type → (outcome type, status, reason, reason_code). Executor-stage mapping for obligations the
# relay only records (wrap never blocks on them, policy.md §10.1). Texts are upstream's values.
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
# Decision events (wrap.md §6.1)
# ---------------------------------------------------------------------------------------------


def decision_data(
    facts: DecisionFacts,
    *,
    dry_run: bool,
    tool_call_id: str,
    request_id: Any = ABSENT,
    delegated_from: str | None = None,
    delegation_depth: int | None = None,
    tool_definition_digest: str | None = None,
) -> dict:
    """The ``data`` object of an ``assay.tool.decision`` event, keys in serialization order.

    Unset keys and empty lists are left out (§6.1.5). In dry-run a deny is recorded as
    ``decision: allow`` while ``reason_code``, ``reason`` and ``typed_decision`` keep the deny
    (§6.1.7); the convergence block then classifies the allow that actually happened.
    ``tool_definition_digest`` (the ``sha256:`` digest of the cached binding) brings its four
    companion fields with it. ``request_id`` is left out when absent or null (§4.5.3).
    """
    data: dict[str, Any] = {"tool": facts.tool}
    if facts.tool_classes:
        data["tool_classes"] = sorted(facts.tool_classes)
    if facts.matched_tool_classes:
        data["matched_tool_classes"] = sorted(facts.matched_tool_classes)
    if facts.match_basis is not None:
        data["match_basis"] = facts.match_basis
    if facts.matched_rule is not None:
        data["matched_rule"] = facts.matched_rule
    data["typed_decision"] = facts.typed_decision or typed_decision_of(facts.outcome, facts.policy_code)
    version = facts.policy_version
    data["policy_version"] = version if version is not None and version.strip() else "unspecified"
    if facts.policy_digest:  # None or "" means the digest could not be computed: no cluster
        data["policy_digest"] = facts.policy_digest
        data["policy_snapshot_digest"] = facts.policy_digest
        data["policy_snapshot_digest_alg"] = "sha256"
        data["policy_snapshot_canonicalization"] = "jcs:mcp_policy"
        data["policy_snapshot_schema"] = "assay.mcp.policy.snapshot.v1"
    if tool_definition_digest is not None:
        data["tool_definition_digest"] = tool_definition_digest
        data["tool_definition_digest_alg"] = "sha256"
        data["tool_definition_canonicalization"] = "jcs:mcp_tool_definition.v1"
        data["tool_definition_schema"] = "assay.mcp.tool-definition.snapshot.v1"
        data["tool_definition_source"] = "mcp.tools/list"
    obligations = merge_obligations(facts.outcome, facts.policy_code, facts.reason, facts.obligations)
    outcomes = obligation_outcomes(obligations)
    if obligations:
        data["obligations"] = [_ordered_obligation(o) for o in obligations]
        data["obligation_outcomes"] = outcomes
    for name in _EVIDENCE_FIELDS:
        value = getattr(facts, name)
        if value is not None:
            data[name] = value

    decision = "deny" if facts.outcome == "deny" and not dry_run else "allow"
    reason_code = wrap_reason_code(facts.outcome, facts.policy_code)
    data |= _convergence(decision, reason_code, outcomes, {"approval_state": facts.approval_state})

    if delegated_from is not None:
        data["delegated_from"] = delegated_from
    if delegation_depth is not None:
        data["delegation_depth"] = delegation_depth
    data["decision"] = decision
    data["reason_code"] = reason_code
    if facts.outcome != "allow" and facts.reason is not None:
        data["reason"] = facts.reason
    data["tool_call_id"] = tool_call_id
    if _has_id(request_id):
        data["request_id"] = request_id
    return data


def decision_event(
    source: str, data: Mapping[str, Any], *, event_id: str | None = None, time: datetime | str | None = None
) -> dict:
    """The CloudEvents 1.0 envelope of a decision (§6.1.2-3; no ``datacontenttype``).

    ``event_id`` defaults to ``evt_decision_<uuid4>``; ``time`` (a string is used verbatim)
    defaults to now, RFC 3339 UTC.
    """
    return {
        "specversion": "1.0",
        "id": event_id if event_id is not None else f"evt_decision_{uuid.uuid4()}",
        "type": "assay.tool.decision",
        "source": source,
        "time": _stamp(time),
        "data": dict(data),
    }


# ---------------------------------------------------------------------------------------------
# Request ids, tool_call_id and delegation (wrap.md §4.5)
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
    """``tool_call_id`` of a ``tools/call`` (§4.5.2).

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
    """``(delegated_from, delegation_depth)`` from ``params.arguments._meta.delegation`` (§4.5.4).

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
# Audit records (wrap.md §6.2, DECISIONS D14a)
# ---------------------------------------------------------------------------------------------

_AUDIT_DECISIONS: Final = ("allow", "allow_with_warning", "deny", "would_deny")


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
    if decision not in _AUDIT_DECISIONS:
        raise ValueError(f"audit decision must be one of {_AUDIT_DECISIONS}, not {decision!r}")
    record: dict[str, Any] = {"timestamp": _stamp(timestamp), "decision": decision, "tool": tool, "reason": reason}
    if _has_id(request_id):
        record["request_id"] = request_id
    if agentic is not None:
        record["agentic"] = dict(agentic)
    return record


_FROM_FACTS: Final = object()


def audit_record_for(
    facts: DecisionFacts,
    *,
    dry_run: bool,
    request_id: Any = ABSENT,
    tool: Any = _FROM_FACTS,
    timestamp: datetime | str | None = None,
) -> dict:
    """The one audit record of a decision (D14a: a warning is not followed by an ``allow``).

    ``tool`` defaults to ``facts.tool``; pass None for an allowed ``tools/call`` whose params did
    not fit the shape (upstream writes ``"tool": null`` there). Allow carries no reason; a deny
    carries its contract as ``agentic``.
    """
    name = facts.tool if tool is _FROM_FACTS else tool
    decision = audit_decision(facts.outcome, dry_run=dry_run)
    reason = None if facts.outcome == "allow" else facts.reason
    agentic = facts.contract if facts.outcome == "deny" else None
    return audit_record(decision, name, reason, request_id=request_id, agentic=agentic, timestamp=timestamp)


# ---------------------------------------------------------------------------------------------
# Replies to the client (wrap.md §4.4, §3.3; DECISIONS D11, D16a)
# ---------------------------------------------------------------------------------------------

DENY_TEXT: Final = "Content blocked by policy"


def deny_payload_text(contract: Mapping[str, Any]) -> str:
    """The deny payload as compact JSON text: the second ``content`` item of a deny result."""
    return ujson.dumps(contract, ensure_ascii=False, escape_forward_slashes=False)


def deny_reply(
    request_id: Any, contract: Mapping[str, Any], *, modern: bool = False, structured: bool = True
) -> bytes:
    """The enforce-mode deny line: a ``CallToolResult`` with ``isError: true``.

    ``content`` holds the text item ``Content blocked by policy`` and a second text item with
    the deny payload as JSON (``status``, ``error_code``, ``tool``, ``reason`` or
    ``violations``), so that the model learns why. ``structuredContent`` carries the same
    payload unless ``structured`` is False: a tool whose definition declares an
    ``outputSchema`` gets none, since clients validate it against that schema even on errors
    (docs/wrap.md, "Deny replies"). ``id`` echoes the request's id unchanged; absent or null
    gives ``"id":null``. For a 2026-07-28-era request (``modern``), ``"resultType":"complete"``
    is the last member of ``result``.
    """
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": DENY_TEXT}, {"type": "text", "text": deny_payload_text(contract)}],
        "isError": True,
    }
    if structured:
        result["structuredContent"] = contract
    if modern:
        result["resultType"] = "complete"
    rid = None if request_id is ABSENT else request_id
    return encode_line({"jsonrpc": "2.0", "id": rid, "result": result})


PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
MODERN_SINCE: Final = "2026-07-28"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _is_calendar_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def is_modern_request(frame: Mapping[str, Any]) -> bool:
    """Whether a request belongs to a 2026-07-28-era session (D16a).

    True exactly when ``params`` is an object, ``params._meta`` is an object, and its
    ``io.modelcontextprotocol/protocolVersion`` member is a string that is a real calendar date
    ``YYYY-MM-DD`` on or after ``2026-07-28`` (the revision that made ``resultType`` required;
    later revisions keep it). Anything else (absent, not a string, not a date such as
    ``2026-99-99`` or ``draft``, or an earlier date) is a legacy request. Dates compare as text
    only once they are known to be dates.
    """
    params = frame.get("params") if isinstance(frame, Mapping) else None
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, Mapping) else None
    return isinstance(version, str) and _is_calendar_date(version) and version >= MODERN_SINCE


_PARSE_ERROR: Final = (-32700, "Parse error")
_INVALID_REQUEST: Final = (-32600, "Invalid Request")
REJECTION_REASONS: Final = {
    "frame_too_large": _INVALID_REQUEST,
    "invalid_utf8": _PARSE_ERROR,
    "embedded_line_break": _PARSE_ERROR,
    "malformed_json": _PARSE_ERROR,
    "batch": _INVALID_REQUEST,
    "not_an_object": _INVALID_REQUEST,
    "duplicate_member": _INVALID_REQUEST,
    "non_string_method": _INVALID_REQUEST,
}
"""Rejection reason → (JSON-RPC code, message), in D11's precedence order."""


def rejection_reply(reason: str) -> bytes:
    """The error line for a rejected client frame (§3.3, D11): always ``"id":null``, the frame
    content never echoed, the cause in ``error.data.reason``."""
    try:
        code, message = REJECTION_REASONS[reason]
    except KeyError:
        raise ValueError(f"unknown rejection reason {reason!r}") from None
    return encode_line(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message, "data": {"reason": reason}}}
    )


def rejection_warning(reason: str) -> str:
    """The stderr line for a rejected frame (§3.3), without its newline."""
    if reason not in REJECTION_REASONS:
        raise ValueError(f"unknown rejection reason {reason!r}")
    return f"[assay] WARNING: rejected client frame ({reason})"


# ---------------------------------------------------------------------------------------------
# stderr lines (docs/wrap-records.md); returned without the newline. Every name, id and reason that
# comes from a client, a server or a policy is JSON-quoted with ASCII escapes, so no control
# character or terminal escape reaches the terminal raw and no line can forge another.
# ---------------------------------------------------------------------------------------------


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


def unreadable_answer_warning() -> str:
    """The stderr line when a server line that may answer a tools/list request was not read."""
    return ("[assay] WARNING: a server line that may answer tools/list could not be read; "
            "pinned tools are denied for the rest of the session")
