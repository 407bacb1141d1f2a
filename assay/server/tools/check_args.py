"""`assay_check_args`: pre-flight review of one proposed call against the MCP policy engine,
never running it (docs/server.md, "assay_check_args"; docs/policy.md).

The call is judged by the one decision pipeline (:class:`assay.policy.pipeline.Pipeline`) with no
session state, its guards built by the one registry (:mod:`assay.policy.guards`; the session's
guards, rate limits, flow rules and inspection, build nothing for a call with no session):
evaluation starts from fresh session state for each call
(docs/policy.md) and passes no runtime identity, so limits bite only at 0 and E_TOOL_DRIFT cannot
occur. The pipeline is built once per loaded policy (it is cached with it).
"""

from __future__ import annotations

from typing import Any

from assay.server.context import ToolContext, arguments_object, field_limit, require_str
from assay.server.log import TARGET_SERVER
from assay.server.jsontext import FixedPayload, compact_json, measured_size
from assay.server.toolbase import Tool

NAME = "assay_check_args"
_ALLOWED = FixedPayload({"allowed": True, "violations": [], "suggested_fix": None})


def decision_payload(decision: Any) -> dict[str, Any]:
    """The payload of an engine Decision (docs/server.md, "assay_check_args"): the Decision's
    own ``check_args_result``, with the allow case pre-encoded (the hot path)."""
    if decision.outcome == "allow":
        return _ALLOWED
    result: dict[str, Any] = decision.check_args_result()
    return result


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    tool = require_str(args, "tool")
    call_args = args["arguments"]  # required, any JSON
    policy = require_str(args, "policy")
    limit = ctx.config.max_field_bytes
    field_limit(tool, limit, "tool name too long")
    field_limit(policy, limit, "policy path too long")
    whole = measured_size(arguments)  # the protocol measured all of them for its log line
    if whole is None or whole > limit:  # within the limit, any member of them is too
        field_limit(compact_json(call_args), limit, "arguments too large")
    strict = ctx.config.strict_deprecations

    def parse(data: bytes) -> tuple[Any, tuple[str, ...]]:
        # the engine is imported on first use (it loads after start-up)
        from assay.policy import PolicyError, load_policy
        from assay.policy.files import user_home
        from assay.policy.guards import GuardContext, Surface, build_guards
        from assay.policy.pipeline import Pipeline

        warnings: list[str] = []
        try:
            loaded = load_policy(  # the YAML budget derives from the ceiling the bytes were read under
                data,
                source="policy",
                strict_deprecations=strict,
                warn=warnings.append,
                byte_ceiling=ctx.config.max_policy_bytes,
                home=user_home(),
            )
        except PolicyError as exc:
            raise _Refused({"allowed": False, "error": exc.server_error()}) from None
        # the guards every surface builds from the registry: here one call with no session
        # (assay.policy.guards; the session's guards need a session and build nothing here)
        guards = build_guards(GuardContext(loaded, Surface.CHECK))
        return Pipeline(loaded, None, guards.checks, guards.approvals, clock=_zero), tuple(warnings)

    try:
        pipeline, warnings = ctx.load(policy, "mcp", parse)
    except _Refused as exc:  # never cached: the next call parses again
        return exc.payload
    for line in warnings:  # unknown keys, v1 deprecation: said on every call, as the policy is used
        ctx.logger.event("WARN", TARGET_SERVER, "policy_warning", message=line)
    return decision_payload(pipeline.decide(_call()(tool, call_args), 0.0))


_CALL: list[Any] = []


def _zero() -> float:
    """The time of the server's check: a fresh session's first call (never compared)."""
    return 0.0


def _call() -> Any:
    """The pipeline's ``Call``, imported on first use (the engine loads after start-up)."""
    if not _CALL:
        from assay.policy.pipeline import Call

        _CALL.append(Call)
    return _CALL[0]


class _Refused(Exception):
    """A policy the engine refused: its payload, carried out of the cache's parse step."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__("policy refused")
        self.payload = payload


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
    inline=True,
)
