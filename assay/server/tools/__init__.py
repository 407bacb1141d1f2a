"""The six tools, in `tools/list` order (spec/server.md P8, DECISIONS D22: identity last).

A tool is a blocking function ``run(ctx, arguments) -> payload``. It raises :class:`ToolError`
for errors it owns; anything else it raises becomes the fail-closed E_INTERNAL payload (F2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from assay.server.context import ToolContext

__all__ = ["Tool", "TOOLS", "BY_NAME", "IDENTITY_TOOL"]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ToolContext, Any], dict[str, Any]]
    # False for the identity tool: no usage event, no tool_decision, no `allowed` in logs (G5).
    takes_decision: bool = True

    def listing(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def _load() -> tuple[Tool, ...]:
    from assay.server.tools import (
        check_args,
        check_sequence,
        coverage,
        explain,
        identity,
        policy_decide,
    )

    return (
        check_args.TOOL,
        check_sequence.TOOL,
        policy_decide.TOOL,
        coverage.TOOL,
        explain.TOOL,
        identity.TOOL,
    )


TOOLS: tuple[Tool, ...] = _load()
BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}
IDENTITY_TOOL = "assay_server_identity"
