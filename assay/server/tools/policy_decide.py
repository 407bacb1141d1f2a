"""`assay_policy_decide` (docs/server.md, "assay_policy_decide"): a cheap name-only blocklist.

Its own dialect: a mapping whose `blocklist` is a list of exact tool names. No wildcards, so
`dangerous_*` blocks only a tool literally named so.
"""

from __future__ import annotations

from typing import Any

from assay.server.context import ToolContext, arguments_object, field_limit, require_str
from assay.server.jsontext import FixedPayload
from assay.server.toolbase import Tool
from assay.server.yamldoc import parse_mapping, structure_error

NAME = "assay_policy_decide"
_ALLOWED = FixedPayload({"allowed": True, "reason": "Allowed by policy"})


def parse_blocklist(data: bytes, byte_ceiling: int | None = None) -> frozenset[str]:
    """The blocklist policy (docs/server.md, "assay_policy_decide"): a root mapping without
    `allow`/`deny`/`tools`; `blocklist` absent (nothing blocked) or a list of strings."""
    doc = parse_mapping(data, byte_ceiling)
    if any(key in doc for key in ("allow", "deny", "tools")):
        raise structure_error()
    if "blocklist" not in doc:
        return frozenset()
    items = doc["blocklist"]
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise structure_error()
    return frozenset(items)


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    tool = require_str(args, "tool")
    policy = require_str(args, "policy")
    limit = ctx.config.max_field_bytes
    field_limit(tool, limit, "tool name too long")
    field_limit(policy, limit, "policy path too long")
    blocked = ctx.load(policy, "blocklist", lambda data: parse_blocklist(data, ctx.config.max_policy_bytes))
    if tool in blocked:
        return {"allowed": False, "matches": [f"Tool '{tool}' is blocked by policy"]}
    return _ALLOWED


TOOL = Tool(
    name=NAME,
    description=(
        "Cheap name-only decision: is this tool name on the policy file's blocklist? Exact "
        "names, no wildcards. The policy path is relative to the server's policy root."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "tool": {"type": "string", "minLength": 1, "description": "Tool name to decide on"},
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
        },
        "required": ["tool", "policy"],
        "additionalProperties": False,
    },
    run=run,
    inline=True,
)
