"""What every tool module shares: the :class:`Tool` record.

A leaf module: the tool modules import it, the registry in :mod:`assay.server.tools` collects
them, and neither imports the other back.

A tool is a blocking function ``run(ctx, arguments) -> payload``. It raises
:class:`~assay.server.errors.ToolError` for errors it owns; anything else it raises becomes the
fail-closed E_INTERNAL payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from assay.server.context import ToolContext

__all__ = ["Tool"]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ToolContext, Any], dict[str, Any]]
    # False for the identity tool: no usage event, no tool_decision, no `allowed` in logs.
    takes_decision: bool = True
    # True when a call whose policy is already parsed is cheap and bounded enough to answer
    # inline in the serving loop (no worker thread); the handler raises NeedsWorker otherwise.
    inline: bool = False

    def listing(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
