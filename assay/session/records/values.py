"""The decision as record values (docs/wrap-records.md, "Decision event", "Obligations" and
"Which calls produce records"): everything a decision event or an audit record says that
follows from the policy engine's :class:`assay.policy.Decision`, the mode and the call's
``params``; the per-call ids (``tool_call_id``, delegation) too.

Sans-IO: plain values in, plain values out. The lines themselves are assembled by
:mod:`assay.session.records.recorder`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from assay.policy.decision import EVIDENCE_FIELDS, Decision, event_reason_code
from assay.session.records.encoding import OUTCOMES

__all__ = [
    "audit_decision",
    "contract_obligations",
    "data_head",
    "data_verdict",
    "delegation_of",
    "event_decision",
    "merge_obligations",
    "obligation_outcomes",
    "tool_call_id_for",
    "typed_decision_of",
    "wrap_reason_code",
]

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


def contract_obligations(outcome: str, policy_code: str | None, reason: str | None) -> list[dict[str, Any]]:
    """Obligations the outcome itself implies (docs/wrap-records.md, "Obligations"): a warning
    becomes a ``legacy_warning``, a drift deny an ``alert``; both carry ``<code>:<reason>``."""
    if outcome == "allow_with_warning":
        return [{"type": "legacy_warning", "detail": f"{policy_code}:{reason}"}]
    if outcome == "deny" and policy_code == "E_TOOL_DRIFT":
        return [{"type": "alert", "detail": f"E_TOOL_DRIFT:{reason}"}]
    return []


def merge_obligations(
    outcome: str, policy_code: str | None, reason: str | None, extra: Iterable[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
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
_STATUS_REASON_CODE: Final = {
    "applied": "obligation_applied",
    "skipped": "obligation_skipped",
    "error": "obligation_error",
}


def obligation_outcomes(obligations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One normalized outcome per obligation, in order (log-only execution + v1 normalization).

    Keys: ``type, status, reason?, reason_code, enforcement_stage, normalization_version``. A
    missing reason code is filled from the status (``obligation_applied`` ...).
    """
    out: list[dict[str, Any]] = []
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


def _ordered_obligation(obligation: Mapping[str, Any]) -> dict[str, Any]:
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
_ENFORCEMENT_DENY_CODES: Final = frozenset(
    {"P_APPROVAL_REQUIRED", "P_RESTRICT_SCOPE", "P_REDACT_ARGS", "P_MANDATE_REQUIRED"}
)

# kind → (policy_deny, fail_closed_deny, enforcement_deny, deny_convergence_reason)
_DENY_PROJECTION: Final = {
    "policy_deny": (True, False, False, "outcome_policy_deny"),
    "fail_closed_deny": (False, True, False, "outcome_fail_closed_deny"),
    "enforcement_deny": (False, False, True, "outcome_enforcement_deny"),
}


def _convergence(
    decision: str, reason_code: str, outcomes: list[dict[str, Any]], context: Mapping[str, Any]
) -> dict[str, Any]:
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
    context_state = "absent_envelope" if not present else "complete_envelope" if not missing else "partial_envelope"
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


def data_head(decision: Decision, dry_run: bool, tool_definition_digest: str | None) -> dict[str, Any]:
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
    kind = event_decision(decision, dry_run)
    data |= _convergence(kind, wrap_reason_code(outcome, code), outcomes, {"approval_state": decision.approval_state})
    return data


def event_decision(decision: Decision, dry_run: bool) -> str:
    return "deny" if decision.outcome == "deny" and not dry_run else "allow"


def data_verdict(decision: Decision, dry_run: bool) -> dict[str, Any]:
    """``decision``, ``reason_code``, ``error_code`` (a deny's: the code of the deny contract the
    client got, or would have got in a dry run) and ``reason`` (left out for a plain allow)."""
    out: dict[str, Any] = {
        "decision": event_decision(decision, dry_run),
        "reason_code": wrap_reason_code(decision.outcome, decision.reason_code),
    }
    if decision.outcome == "deny" and decision.reason_code is not None:
        out["error_code"] = decision.reason_code
    if decision.outcome != "allow" and decision.reason is not None:
        out["reason"] = decision.reason
    return out


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
        given = meta.get("tool_call_id") if isinstance(meta, Mapping) else None
        if isinstance(given, str):
            return given
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
