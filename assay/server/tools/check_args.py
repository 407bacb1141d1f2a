"""`assay_check_args` (spec/server.md §8.2, policy.md §6.2): pre-flight review of one proposed
call against the MCP policy engine, never running it.

Evaluation starts from fresh session state for each call (policy.md ST3) and passes no runtime
identity, so limits bite only at 0 and E_TOOL_DRIFT cannot occur.
"""

from __future__ import annotations

import json
from typing import Any

from assay.server.context import ToolContext, arguments_object, field_limit, require_str
from assay.server.log import TARGET_SERVER
from assay.server.tools import Tool

NAME = "assay_check_args"


def decision_payload(decision: Any) -> dict[str, Any]:
    """A4: allow / allow-with-warning / deny payloads from an engine Decision."""
    if decision.outcome == "allow":
        return {"allowed": True, "violations": [], "suggested_fix": None}
    if decision.outcome == "allow_with_warning":
        return {
            "allowed": True,
            "warning": {"code": decision.reason_code, "reason": decision.reason},
            "violations": [],
            "suggested_fix": None,
        }
    contract = decision.contract or {"status": "deny", "error_code": decision.reason_code}
    return {
        "allowed": False,
        "code": decision.reason_code,
        "reason": decision.reason,
        "violations": list(contract.get("violations", [])),
        "suggested_fix": None,
        "contract": contract,
    }


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    tool = require_str(args, "tool")
    call_args = args["arguments"]  # required, any JSON (A1)
    policy = require_str(args, "policy")
    limit = ctx.config.max_field_bytes
    field_limit(tool, limit, "tool name too long")
    field_limit(policy, limit, "policy path too long")
    compact = json.dumps(call_args, separators=(",", ":"), ensure_ascii=False)
    field_limit(compact, limit, "arguments too large")
    _path, data = ctx.read_policy(policy)

    from assay.policy import PolicyError, evaluate, load_policy

    def warn(line: str) -> None:  # G6: unknown keys, v1 deprecation
        ctx.logger.event("WARN", TARGET_SERVER, "policy_warning", message=line)

    try:
        loaded = load_policy(
            data, source="policy", strict_deprecations=ctx.config.strict_deprecations, warn=warn
        )
    except PolicyError as exc:
        return {"allowed": False, "error": exc.server_error()}
    return decision_payload(evaluate(loaded, tool, call_args))


TOOL = Tool(
    name=NAME,
    description=(
        "Pre-flight review of one proposed tool call: checks the tool name against the policy's "
        "allow/deny rules and the arguments against the tool's JSON Schema. Never runs the tool."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "tool": {"type": "string", "minLength": 1, "description": "Tool the agent wants to call"},
            "arguments": {"type": "object", "description": "Arguments it would pass"},
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
        },
        "required": ["tool", "arguments", "policy"],
        "additionalProperties": False,
    },
    run=run,
)
