"""The named examples of docs/policy.md load cleanly (tests/docs_examples.py finds them)."""

from __future__ import annotations

import pytest

from assay.policy import evaluate, load_policy
from tests.docs_examples import policy_example, policy_examples

EXAMPLES = sorted(policy_examples())


def test_the_page_has_named_examples() -> None:
    assert {"minimal", "classes-and-limits"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_named_example_loads_without_warnings(name: str) -> None:
    warnings: list[str] = []
    load_policy(policy_example(name).encode(), source=f"{name}.yaml", warn=warnings.append)
    assert warnings == []


def test_the_minimal_example_confines_read_file() -> None:
    policy = load_policy(policy_example("minimal").encode())
    assert evaluate(policy, "read_file", {"path": "/workspace/a"}).outcome == "allow"
    assert evaluate(policy, "read_file", {"path": "/workspace/../etc/passwd"}).reason_code == "E_PATH_CONFINEMENT"
    assert evaluate(policy, "write_file", {"path": "/workspace/a"}).reason_code == "E_TOOL_NOT_ALLOWED"
