"""Policy durations (docs/policy.md, "Durations") and Decision.replace / Decision.denied."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from assay.policy import evaluate, load_policy
from assay.policy.durations import DurationError, parse_duration


@pytest.mark.parametrize(
    "text,seconds",
    [(0, 0.0), (90, 90.0), (1.5, 1.5), ("250ms", 0.25), ("60s", 60.0), ("5m", 300.0), ("1h", 3600.0), ("0.5s", 0.5)],
)
def test_durations_read(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad", [True, -1, float("nan"), float("inf"), "", "60", "60 s", "1d", "-5s", "s", "1e3s", None, [], "9999999h"]
)
def test_non_durations_refused(bad) -> None:
    with pytest.raises(DurationError):
        parse_duration(bad)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["ms", "s", "m", "h"]))
def test_unit_scaling(n: int, unit: str) -> None:
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if n * scale > 366 * 24 * 3600:
        with pytest.raises(DurationError):
            parse_duration(f"{n}{unit}")
    else:
        assert parse_duration(f"{n}{unit}") == pytest.approx(n * scale)


def test_denied_keeps_identity_and_drops_obligations() -> None:
    policy = load_policy(b'version: "2.0"\ntool_classes: {deploy: [release]}\ntools: {approval_required: [deploy]}\n')
    allow = evaluate(policy, "deploy", {})
    assert allow.approval_state == "required" and allow.obligations
    deny = allow.denied("E_SEQUENCE_VIOLATION", "why", {"status": "deny"}, matched_rule="r1")
    assert (deny.outcome, deny.tool, deny.reason_code, deny.matched_rule) == (
        "deny",
        "deploy",
        "E_SEQUENCE_VIOLATION",
        "r1",
    )
    assert deny.tool_classes == ("release",) and deny.policy_digest == policy.digest
    assert deny.obligations == [] and deny.approval_state is None
    assert deny.event_reason_code == "P_SEQUENCE_VIOLATION"
    again = allow.replace(approval_state="approved")
    assert again.approval_state == "approved" and again.obligations == allow.obligations
    assert again.to_dict() | {"approval_state": "required"} == allow.to_dict()
