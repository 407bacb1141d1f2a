"""The MCP policy engine (spec/policy.md): sans-IO, bytes in → :class:`Policy`, call in → :class:`Decision`.

Public API::

    load_policy(data: bytes, *, source="assay.yaml", strict_deprecations=False, warn=None) -> Policy
    evaluate(policy, tool_name, arguments, state=None, *, server_id="default-mcp-server") -> Decision
    SessionState()  .note_request()  .observe_tools(server_id, tools)  .identity(name)
    tool_identity(tool: dict) -> (schema_hash, meta_hash)
    PolicyError  (.kind, .line, .column, .detail, .server_error())

The sequence-rule dialect of ``assay_check_sequence`` lives in :mod:`assay.policy.sequence`.
"""

from assay.policy.engine import (
    DEFAULT_SERVER_ID,
    REASONS,
    Decision,
    SessionState,
    ToolIdentity,
    evaluate,
    event_reason_code,
    tool_identity,
)
from assay.policy.errors import PolicyError
from assay.policy.model import Limits, Policy, ToolPin, ToolRules, load_policy
from assay.policy.patterns import NameMatcher, pattern_matches

__all__ = [
    "PolicyError",
    "Policy",
    "ToolRules",
    "ToolPin",
    "Limits",
    "load_policy",
    "SessionState",
    "ToolIdentity",
    "Decision",
    "evaluate",
    "event_reason_code",
    "tool_identity",
    "pattern_matches",
    "NameMatcher",
    "DEFAULT_SERVER_ID",
    "REASONS",
]
