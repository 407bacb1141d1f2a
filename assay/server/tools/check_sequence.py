"""`assay_check_sequence` (spec/server.md §8.3, policy.md §7): is the proposed next tool allowed
by the ordering rules, given the history so far?

The file is tried as (1) a v1.1 policy mapping, (2) a bare list of rules, (3) a bare list of tool
names (legacy: the trace must equal it). Rule evaluation (partial mode) belongs to the policy
engine's sequence dialect; until `assay.policy.sequence` lands it runs in
:mod:`assay.server.sequence_eval`.
"""

from __future__ import annotations

import json
from typing import Any

from assay.server.context import ToolContext, arguments_object, field_limit, require_str
from assay.server.errors import MSG_SEQUENCE_FORMAT, ToolError
from assay.server.tools import Tool
from assay.server.sequence_eval import evaluate_partial
from assay.server.v11 import Rule, parse_rule, parse_v11

NAME = "assay_check_sequence"


class _Parsed:
    __slots__ = ("legacy", "rules", "aliases", "doc")

    def __init__(self, legacy=None, rules=(), aliases=None, doc=None) -> None:
        self.legacy: list[str] | None = legacy
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.aliases: dict[str, tuple[str, ...]] = aliases or {}
        self.doc = doc  # the YAML value, for the engine's own parser


def parse_sequence_policy(data: bytes) -> _Parsed:
    """S2: the first form that parses wins; none -> `Invalid sequence policy format`, no details."""
    from assay.policy.yamlio import parse_yaml

    try:
        doc = parse_yaml(data.decode("utf-8"))
    except Exception:  # syntax, invalid UTF-8, structure caps: all the same fixed message
        raise ToolError("E_POLICY_PARSE", MSG_SEQUENCE_FORMAT) from None
    if isinstance(doc, dict):
        try:
            p = parse_v11(doc)
            return _Parsed(rules=p.rules, aliases=p.aliases, doc=doc)
        except (ValueError, TypeError, AttributeError):
            pass
    elif isinstance(doc, list):
        if all(isinstance(item, dict) and "type" in item for item in doc):
            try:
                return _Parsed(rules=[parse_rule(item) for item in doc], doc=doc)
            except (ValueError, TypeError, AttributeError):
                pass
        if all(isinstance(item, str) for item in doc):
            return _Parsed(legacy=list(doc), doc=doc)
    raise ToolError("E_POLICY_PARSE", MSG_SEQUENCE_FORMAT)


def evaluate_rules(parsed: _Parsed, trace: list[str]) -> list[dict[str, Any]]:
    """Violations of forms 1/2 in partial mode (S4)."""
    return evaluate_partial(parsed.rules, parsed.aliases, trace)


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    history = args["history"]
    if not isinstance(history, list) or not all(isinstance(item, str) for item in history):
        raise TypeError("history must be a list of strings")  # S1: E_INTERNAL
    next_tool = require_str(args, "next_tool")
    policy = require_str(args, "policy")
    limit = ctx.config.max_field_bytes
    field_limit(policy, limit, "policy path too long")
    if len(history) > ctx.config.max_tool_calls:
        raise ToolError("E_LIMIT_EXCEEDED", "history too long")
    field_limit(next_tool, limit, "next_tool too long")
    path, data = ctx.read_policy(policy)
    parsed = ctx.caches["sequence"].get_or_parse(path, data, parse_sequence_policy)
    trace = history + [next_tool]
    if parsed.legacy is not None:  # S3: exact match only
        if trace == parsed.legacy:
            return {"allowed": True, "violations": [], "suggested_fix": None}
        expected = json.dumps(parsed.legacy, ensure_ascii=False)
        found = json.dumps(trace, ensure_ascii=False)
        return {
            "allowed": False,
            "violations": [{"constraint": "sequence_exact_match", "suggestion": f"Expected {expected}, found {found}"}],
            "suggested_fix": None,
        }
    violations = evaluate_rules(parsed, trace)
    return {"allowed": not violations, "violations": violations, "suggested_fix": None}


TOOL = Tool(
    name=NAME,
    description=(
        "Check a proposed next tool against the policy's ordering rules (before, after, "
        "never_after, require, max_calls, sequence, ...) given the calls made so far."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "history": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Tools called so far, oldest first"},
            "next_tool": {"type": "string", "minLength": 1, "description": "Tool the agent wants to call next"},
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
        },
        "required": ["history", "next_tool", "policy"],
        "additionalProperties": False,
    },
    run=run,
)
