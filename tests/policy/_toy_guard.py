"""A toy guard, added through the registry only (tests/policy/test_guard_registry.py): it denies
``toy_blocked``, and every call after ``toy_trigger`` went to the server; the calls it saw enter
are its shared state (docs/architecture.md, "Adding a guard")."""

from __future__ import annotations

from typing import Any

from assay.policy.guards import Built, GuardContext, Part

NAME = "toy"
BUILT: list[str] = []  # the surfaces it was built for


class ToyGuard:
    def __init__(self) -> None:
        self.entered: list[str] = []

    def check(self, call: Any, decision: Any, now: float) -> Any:
        if call.name == "toy_blocked" or "toy_trigger" in self.entered:
            reason = f"the toy guard refuses {call.name}"
            return decision.denied(
                "E_TOY", reason, {"status": "deny", "error_code": "E_TOY", "tool": call.name, "reason": reason}
            )
        return None

    def enter(self, call: Any, now: float) -> None:
        self.entered.append(call.name)

    def export(self) -> list[str]:
        return list(self.entered)

    def restore(self, value: Any) -> None:
        if value is not None and not isinstance(value, list):
            raise ValueError("not the toy's state")
        self.entered = list(value or [])


def build(ctx: GuardContext) -> Built:
    BUILT.append(ctx.surface.value)
    guard = ToyGuard()
    return Built(guard, Part(NAME, guard.export, guard.restore), tracker=guard)
