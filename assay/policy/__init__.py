"""The MCP policy engine (docs/policy.md): sans-IO, bytes in → :class:`Policy`, call in → :class:`Decision`.

Modules: :mod:`.model` (the types), :mod:`.loader` (bytes -> Policy: YAML, then :mod:`.convert`,
which reads each section with :mod:`.sections` over :mod:`.reader` and warns with
:mod:`.schemacheck`), :mod:`.files` (the one policy *file* entry: capped read, ceiling, budget),
:mod:`.engine` (evaluation), :mod:`.plans` (a policy's compiled per-name plans), :mod:`.identity`
(tool identities), :mod:`.state` (a session's counters and observed identities), :mod:`.decision`
(the one decision value), :mod:`.pipeline` (the engine, then a session's guards), :mod:`.paths`
(path confinement), :mod:`.rates` (per-tool rate limits of a session), :mod:`.flows` with
:mod:`.flow_rules` and :mod:`.flow_kinds` (flow rules), :mod:`.yamlio` (YAML 1.2 within the
expansion budget).

Public API::

    load_policy(data: bytes, *, source="assay.yaml", strict_deprecations=False, warn=None) -> Policy
    read_policy_file(path) -> bytes   (regular file, ASSAY_MCP_MAX_POLICY_BYTES; PolicyFileError)
    read_policy_fd(fd, *, limit) -> bytes   (a descriptor the server's jail opened)
    load_policy_file(path, *, strict_deprecations=False, warn=None, limit=None, on_read=None) -> Policy
    PolicyFileError  (an OSError: "cannot read policy <path>: <reason>")
    check_schemas(policy) -> str | None,  schema_errors(policy) -> {tool: error}
    evaluate(policy, tool_name, arguments, state=None, *, server_id="default-mcp-server") -> Decision
    SessionState()  .note_request()  .observe_tools(server_id, tools)  .identity(name)
    tool_identity(tool: dict) -> (schema_hash, meta_hash)
    PolicyError  (.kind, .line, .column, .detail, .server_error())

The sequence-rule dialect of ``assay_check_sequence`` lives in :mod:`assay.policy.sequence`
(evaluation) and :mod:`assay.policy.sequence_rules` (its values and parser).
"""

from typing import TYPE_CHECKING, Any

from assay.policy.engine import (
    DEFAULT_SERVER_ID,
    REASONS,
    Decision,
    SessionState,
    ToolIdentity,
    check_schemas,
    compile_policy,
    evaluate,
    event_reason_code,
    schema_errors,
    tool_identity,
)
from assay.policy.errors import PolicyError
from assay.policy.files import PolicyFileError, load_policy_file, policy_ceiling, read_policy_fd, read_policy_file
from assay.policy.model import Limits, PathRule, Policy, RateRule, ToolPin, ToolRules
from assay.policy.patterns import NameMatcher, exact_name, exact_pattern, pattern_matches

if TYPE_CHECKING:
    from assay.policy.loader import load_policy


def __getattr__(name: str) -> Any:
    """``load_policy`` on first use: the loader brings the section readers and, when it parses,
    PyYAML (docs/testing.md, "Start-up of `assay mcp wrap`")."""
    if name == "load_policy":
        from assay.policy.loader import load_policy

        return load_policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PolicyError",
    "Policy",
    "ToolRules",
    "ToolPin",
    "Limits",
    "RateRule",
    "PathRule",
    "load_policy",
    "load_policy_file",
    "read_policy_file",
    "read_policy_fd",
    "policy_ceiling",
    "PolicyFileError",
    "compile_policy",
    "check_schemas",
    "schema_errors",
    "SessionState",
    "ToolIdentity",
    "Decision",
    "evaluate",
    "event_reason_code",
    "tool_identity",
    "pattern_matches",
    "NameMatcher",
    "exact_pattern",
    "exact_name",
    "DEFAULT_SERVER_ID",
    "REASONS",
]
