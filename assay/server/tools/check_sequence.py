"""`assay_check_sequence`: is the proposed next tool allowed by the ordering rules, given the
history so far? (docs/server.md, "assay_check_sequence"; docs/policy.md)

Argument checks, field limits, the jail, the byte ceiling and the parsed-policy cache are the
server's; parsing the three accepted forms and evaluating in partial mode is the policy engine's
sequence dialect (`assay.policy.sequence`).
"""

from __future__ import annotations

from typing import Any

from assay.server.context import ToolContext, arguments_object, field_limit, require_str
from assay.server.errors import ToolError
from assay.server.toolbase import Tool

NAME = "assay_check_sequence"


def parse(data: bytes, byte_ceiling: int | None = None) -> Any:
    """The first form that parses wins; none -> `Invalid sequence policy format`, no details.
    The YAML budget derives from ``byte_ceiling`` (the server's policy ceiling)."""
    from assay.policy.sequence import SequencePolicyError, parse_sequence_policy

    try:
        if byte_ceiling is None:
            return parse_sequence_policy(data)
        return parse_sequence_policy(data, byte_ceiling=byte_ceiling)
    except SequencePolicyError as exc:
        err = exc.server_error()
        raise ToolError(err["code"], err["message"]) from None


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    history = args["history"]
    if not isinstance(history, list) or not all(isinstance(item, str) for item in history):
        raise TypeError("history must be a list of strings")  # E_INTERNAL
    next_tool = require_str(args, "next_tool")
    policy = require_str(args, "policy")
    limit = ctx.config.max_field_bytes
    field_limit(policy, limit, "policy path too long")
    if len(history) > ctx.config.max_tool_calls:
        raise ToolError("E_LIMIT_EXCEEDED", "history too long")
    field_limit(next_tool, limit, "next_tool too long")
    parsed = ctx.load(policy, "sequence", lambda data: parse(data, ctx.config.max_policy_bytes))

    from assay.policy.sequence import check_sequence

    return check_sequence(parsed, history + [next_tool], partial=True)


TOOL = Tool(
    name=NAME,
    description=(
        "Check a proposed next tool against the policy's ordering rules (before, after, "
        "never_after, require, max_calls, sequence, ...) given the calls made so far."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "history": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Tools called so far, oldest first",
            },
            "next_tool": {"type": "string", "minLength": 1, "description": "Tool the agent wants to call next"},
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
        },
        "required": ["history", "next_tool", "policy"],
        "additionalProperties": False,
    },
    run=run,
    inline=True,
)
