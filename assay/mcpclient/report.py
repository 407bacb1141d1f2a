"""What `assay mcp tools` prints for each server (docs/tools.md, "Output"), sans-IO: a
:class:`Target`, what listing it gave, and the policy (or None) in; stdout and stderr lines out.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assay.mcpclient.protocol import Listing, ListingError
from assay.mcpclient.tooldefs import describe, json_line, safe, text_lines

if TYPE_CHECKING:
    from assay.policy.model import Policy

__all__ = ["Target", "render"]


@dataclass(frozen=True)
class Target:
    """One server to list: its name (the config entry's, or the command's program), the policy
    label its calls carry (wrap's ``--label``), how to start it, or why it is skipped."""

    name: str
    label: str
    argv: tuple[str, ...] | None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    wrapped: bool = False
    skipped: str | None = None


def _who(target: Target) -> str:
    return f"server {json.dumps(target.name, ensure_ascii=True)}"


def render(
    target: Target, result: Listing | ListingError | None, policy: Policy | None, as_json: bool
) -> tuple[list[str], list[str]]:
    """``(stdout lines, stderr lines)`` for one target (``result`` None: skipped)."""
    if target.skipped is not None or result is None:
        line = f"{_who(target)}: skipped: {safe(target.skipped or 'not started')}"
        return ([], [line]) if as_json else ([line], [])
    if isinstance(result, ListingError):
        return [], [f"fatal: {_who(target)}: {result}"]
    summaries = None
    if policy is not None:
        from assay.policy.toolview import tool_summary

        summaries = {t["name"]: tool_summary(policy, t["name"], server=target.label).to_dict() for t in result.tools}
    out: list[str] = []
    if as_json:
        for tool in result.tools:
            out.append(json_line(target.name, describe(tool), None if summaries is None else summaries[tool["name"]]))
        return out, []
    info = result.server_info
    who = " ".join(safe(info.get(k), 80) for k in ("name", "version") if isinstance(info.get(k), str))
    command = safe(shlex.join(target.argv or ()), 160)
    count = len(result.tools)
    out.append(
        f"{_who(target)} ({command}){' [wrapped]' if target.wrapped else ''}: "
        f"{count} tool{'s' if count != 1 else ''}, protocol {safe(result.protocol_version, 40)}"
        + (f", {who}" if who else "")
    )
    for tool in result.tools:
        out.extend(
            "  " + line for line in text_lines(describe(tool), None if summaries is None else summaries[tool["name"]])
        )
    return out, []
