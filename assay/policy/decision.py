"""The one decision value of the MCP policy engine: what :func:`assay.policy.evaluate` returns.

Immutable; containers are handed out as copies. The surfaces read it directly: wrap's decision
and audit records (``event_reason_code``, the obligation and evidence fields, ``contract`` as the
deny payload) and the server's ``assay_check_args`` (:meth:`Decision.check_args_result`). The
deny reply on the wire is wrap's (it depends on the session: protocol era, the tool's
``outputSchema``), built from ``contract``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

__all__ = ["EVIDENCE_FIELDS", "ApprovalState", "Decision", "Outcome", "TypedDecision", "event_reason_code"]


class Outcome(StrEnum):
    """``Decision.outcome``: the same strings on the wire and in every record."""

    ALLOW = "allow"
    ALLOW_WITH_WARNING = "allow_with_warning"
    DENY = "deny"


class TypedDecision(StrEnum):
    """``Decision.typed_decision`` (docs/wrap-records.md)."""

    ALLOW = "allow"
    ALLOW_WITH_OBLIGATIONS = "allow_with_obligations"
    DENY = "deny"
    DENY_WITH_ALERT = "deny_with_alert"


class ApprovalState(StrEnum):
    """``Decision.approval_state``: what became of a call that needs a person's approval
    (docs/wrap-records.md, the ``approval_state`` table; docs/wrap.md, "Approvals")."""

    REQUIRED = "required"  # the engine's: approval needed (and, in a dry run, what is recorded)
    APPROVED = "approved"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    NOT_ASKED = "not_asked"


# the members compared on every decision, bound once (an enum's class attribute lookup costs
# several times the comparison itself)
_ALLOW = Outcome.ALLOW
_WARN = Outcome.ALLOW_WITH_WARNING
_DENY = Outcome.DENY

# a value given as its string (or as the member) -> the member: a decision always holds members,
# so code on every call's path compares them by identity (``decision.outcome is _DENY``)
_OUTCOMES: dict[str, Outcome] = {m.value: m for m in Outcome}
_TYPED: dict[str, TypedDecision] = {m.value: m for m in TypedDecision}
_APPROVALS: dict[str, ApprovalState] = {m.value: m for m in ApprovalState}

_EVENT_CODES = {
    "E_TOOL_DENIED": "P_TOOL_DENIED",
    "E_TOOL_NOT_ALLOWED": "P_TOOL_NOT_ALLOWED",
    "E_ARG_SCHEMA": "P_ARG_SCHEMA",
    "E_RATE_LIMIT": "P_RATE_LIMIT",
    "E_TOOL_DRIFT": "P_TOOL_DRIFT",
    "E_SEQUENCE_VIOLATION": "P_SEQUENCE_VIOLATION",
    "E_APPROVAL_DENIED": "P_APPROVAL_DENIED",
    "E_TOOL_UNDECLARED": "P_TOOL_UNDECLARED",
    "E_SESSION_STATE": "P_SESSION_STATE",
}


def event_reason_code(outcome: str, reason_code: str | None) -> str:
    """The wrap decision-event ``reason_code`` (docs/wrap-records.md).

    Allow → ``P_POLICY_ALLOW``; allow-with-warning → the raw code; deny → its ``P_*`` code, any
    unlisted deny code → ``P_POLICY_DENY`` (fail-closed catch-all).
    """
    if outcome == _ALLOW:
        return "P_POLICY_ALLOW"
    if outcome == _WARN:
        return reason_code or "P_POLICY_ALLOW"
    return _EVENT_CODES.get(reason_code or "", "P_POLICY_DENY")


EVIDENCE_FIELDS = (
    # the approval, scope and redaction fields, set when the engine attaches those obligations;
    # in this order in a decision event (docs/wrap-records.md)
    "approval_state",
    "scope_type",
    "scope_value",
    "scope_match_mode",
    "redaction_target",
    "redaction_mode",
    "redaction_scope",
)

_FIELDS: tuple[str, ...] = (
    "outcome",
    "tool",
    "reason_code",
    "reason",
    "typed_decision",
    "tool_classes",
    "matched_tool_classes",
    "match_basis",
    "matched_rule",
    "policy_version",
    "policy_digest",
    *EVIDENCE_FIELDS,
)


class Decision:
    """One evaluation result. Immutable; containers are handed out as copies.

    ``outcome`` ∈ ``allow`` | ``allow_with_warning`` | ``deny``; ``tool`` is the called tool
    (also for ``E_RATE_LIMIT``); ``reason_code`` is the ``E_*`` code (``None`` for allow);
    ``contract`` is the structured deny payload (upstream member order) or ``None``;
    ``typed_decision`` ∈ ``allow`` | ``allow_with_obligations`` | ``deny`` | ``deny_with_alert``.
    The approval/scope/redaction fields carry the policy's obligation contracts, set
    only when an obligation applied. ``outcome``, ``typed_decision`` and ``approval_state``
    are always the members of :class:`Outcome`, :class:`TypedDecision` and
    :class:`ApprovalState` (given as members or as their strings): compare them by identity.
    """

    __slots__ = _FIELDS + ("_contract", "_obligations")

    outcome: Outcome
    tool: str
    reason_code: str | None
    reason: str | None
    typed_decision: TypedDecision
    tool_classes: tuple[str, ...]
    matched_tool_classes: tuple[str, ...]
    match_basis: str | None
    matched_rule: str | None
    policy_version: str
    policy_digest: str
    approval_state: ApprovalState | None
    scope_type: str | None
    scope_value: str | None
    scope_match_mode: str | None
    redaction_target: str | None
    redaction_mode: str | None
    redaction_scope: str | None
    _contract: dict[str, Any] | None
    _obligations: tuple[dict[str, Any], ...]

    def __init__(
        self,
        outcome: str,
        tool: str,
        *,
        reason_code: str | None = None,
        reason: str | None = None,
        contract: dict[str, Any] | None = None,
        typed_decision: str = TypedDecision.ALLOW,
        obligations: Iterable[dict[str, Any]] = (),
        tool_classes: tuple[str, ...] = (),
        matched_tool_classes: tuple[str, ...] = (),
        match_basis: str | None = None,
        matched_rule: str | None = None,
        policy_version: str = "unspecified",
        policy_digest: str = "",
        approval_state: str | None = None,
        scope_type: str | None = None,
        scope_value: str | None = None,
        scope_match_mode: str | None = None,
        redaction_target: str | None = None,
        redaction_mode: str | None = None,
        redaction_scope: str | None = None,
    ) -> None:
        s = object.__setattr__
        try:
            s(self, "outcome", _OUTCOMES[outcome])
            s(self, "typed_decision", _TYPED[typed_decision])
            s(self, "approval_state", None if approval_state is None else _APPROVALS[approval_state])
        except KeyError as exc:  # a value no record may carry
            raise ValueError(f"not a decision value: {exc.args[0]!r}") from None
        s(self, "tool", tool)
        s(self, "reason_code", reason_code)
        s(self, "reason", reason)
        s(self, "_contract", contract)
        s(self, "_obligations", tuple(obligations))
        s(self, "tool_classes", tuple(tool_classes))
        s(self, "matched_tool_classes", tuple(matched_tool_classes))
        s(self, "match_basis", match_basis)
        s(self, "matched_rule", matched_rule)
        s(self, "policy_version", policy_version)
        s(self, "policy_digest", policy_digest)
        s(self, "scope_type", scope_type)
        s(self, "scope_value", scope_value)
        s(self, "scope_match_mode", scope_match_mode)
        s(self, "redaction_target", redaction_target)
        s(self, "redaction_mode", redaction_mode)
        s(self, "redaction_scope", redaction_scope)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Decision is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Decision is immutable")

    def replace(self, **changes: Any) -> "Decision":
        """A copy with some fields changed (same keywords as the constructor; ``contract`` and
        ``obligations`` included)."""
        kwargs: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS[2:]}
        kwargs["contract"] = self._contract
        kwargs["obligations"] = self._obligations
        kwargs.update(changes)
        outcome = kwargs.pop("outcome", self.outcome)
        tool = kwargs.pop("tool", self.tool)
        return Decision(outcome, tool, **kwargs)

    def denied(
        self,
        reason_code: str,
        reason: str,
        contract: dict[str, Any],
        *,
        matched_rule: str | None = None,
        typed_decision: str = TypedDecision.DENY,
    ) -> "Decision":
        """A deny of the same call made by a check after the policy engine (the declared
        baseline, rate and flow rules, approvals): tool, classes and policy identity kept; the
        allow's obligations, evidence and matches dropped; ``matched_rule`` names the rule."""
        return Decision(
            _DENY,
            self.tool,
            reason_code=reason_code,
            reason=reason,
            contract=contract,
            typed_decision=typed_decision,
            tool_classes=self.tool_classes,
            matched_rule=matched_rule,
            policy_version=self.policy_version,
            policy_digest=self.policy_digest,
        )

    # -- views -----------------------------------------------------------------------------

    @property
    def contract(self) -> dict[str, Any] | None:
        """The structured deny payload (a fresh copy), ``None`` unless the outcome is deny."""
        c = self._contract
        if c is None:
            return None
        out = dict(c)
        if "violations" in out:
            out["violations"] = [dict(v) for v in out["violations"]]
        return out

    @property
    def obligations(self) -> list[dict[str, Any]]:
        """Obligations (copies): typed-contract ones first, then approval/scope/redact."""
        return [_copy_obligation(o) for o in self._obligations]

    @property
    def event_reason_code(self) -> str:
        """``reason_code`` for the wrap decision event."""
        return event_reason_code(self.outcome, self.reason_code)

    def check_args_result(self) -> dict[str, Any]:
        """The ``assay_check_args`` payload: ``allowed``, then for a warning ``warning``, then
        ``violations`` and ``suggested_fix``; a deny adds ``code``, ``reason`` and ``contract``
        (``{"status": "deny", "error_code": <code>}`` when the deny carries no payload)."""
        if self.outcome is _ALLOW:
            return {"allowed": True, "violations": [], "suggested_fix": None}
        if self.outcome is _WARN:
            return {
                "allowed": True,
                "warning": {"code": self.reason_code, "reason": self.reason},
                "violations": [],
                "suggested_fix": None,
            }
        contract = self.contract or {"status": "deny", "error_code": self.reason_code}
        return {
            "allowed": False,
            "code": self.reason_code,
            "reason": self.reason,
            "violations": list(contract.get("violations", [])),
            "suggested_fix": None,
            "contract": contract,
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field, for logging and comparisons."""
        out = {name: getattr(self, name) for name in _FIELDS}
        out["tool_classes"] = list(self.tool_classes)
        out["matched_tool_classes"] = list(self.matched_tool_classes)
        out["contract"] = self.contract
        out["obligations"] = self.obligations
        out["event_reason_code"] = self.event_reason_code
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Decision(outcome={self.outcome!r}, tool={self.tool!r}, reason_code={self.reason_code!r})"


def _copy_obligation(o: dict[str, Any]) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in o.items()}
