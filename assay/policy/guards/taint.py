"""The value taint (docs/inspect.md, "Value taint"): no check of its own (the outbound guard
reads it), but state the session shares: what came back marked secret or tainted, as keyed
fingerprints. Built when wrap's session keeps one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.policy.guards import Built, Part

if TYPE_CHECKING:
    from assay.policy.guards import GuardContext

NAME = "taint"


def build(ctx: GuardContext) -> Built | None:
    taint = ctx.taint
    if taint is None:
        return None

    def restore(value: Any) -> None:
        if value is not None and value.__class__ is not bytes:
            raise ValueError("the value taint's state is not bytes")
        taint.restore_state(value)

    return Built(part=Part(NAME, taint.export_state, restore), tracker=taint)
