"""The six tools, in `tools/list` order (identity last; docs/server.md, "Tools").

This package only collects the tool modules; the :class:`~assay.server.toolbase.Tool` record
they build lives in the leaf module :mod:`assay.server.toolbase`.
"""

from __future__ import annotations

from assay.server.toolbase import Tool
from assay.server.tools import (
    check_args,
    check_sequence,
    coverage,
    explain,
    identity,
    policy_decide,
)

__all__ = ["Tool", "TOOLS", "BY_NAME"]

TOOLS: tuple[Tool, ...] = (
    check_args.TOOL,
    check_sequence.TOOL,
    policy_decide.TOOL,
    coverage.TOOL,
    explain.TOOL,
    identity.TOOL,
)
BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}
