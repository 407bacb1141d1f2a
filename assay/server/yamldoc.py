"""Policy bytes -> YAML value, with the server's parse-error taxonomy (docs/server.md, "Shared rules").

The YAML reading itself (YAML 1.2 scalars, duplicate keys refused, alias-expansion cap) is the
policy engine's (`assay.policy.yamlio`); this module only maps its failures onto the three
fixed E_POLICY_PARSE messages, never passing parser text or policy content through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.server.errors import (
    MSG_ROOT_NOT_MAPPING,
    MSG_STRUCTURE_INVALID,
    MSG_YAML_INVALID,
    ToolError,
)

if TYPE_CHECKING:
    from assay.policy.sequence import SequencePolicy

__all__ = ["parse_document", "parse_mapping", "parse_v11_policy", "syntax_error", "structure_error"]


def syntax_error(line: int | None = None, column: int | None = None) -> ToolError:
    details = None
    if line and column and line > 0 and column > 0:  # 1-based, both > 0
        details = {"line": line, "column": column}
    return ToolError("E_POLICY_PARSE", MSG_YAML_INVALID, details)


def structure_error() -> ToolError:
    return ToolError("E_POLICY_PARSE", MSG_STRUCTURE_INVALID)


def parse_document(data: bytes, byte_ceiling: int | None = None) -> Any:
    """Decode and parse one YAML document; ToolError(E_POLICY_PARSE) on failure. The expansion
    budget derives from ``byte_ceiling`` (the server's ``ASSAY_MCP_MAX_POLICY_BYTES``, the
    ceiling the bytes were read under; docs/policy.md, "File ceilings")."""
    from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise syntax_error() from None  # invalid UTF-8: no details
    try:
        return parse_yaml(text) if byte_ceiling is None else parse_yaml(text, byte_ceiling=byte_ceiling)
    except YamlSyntaxError as exc:
        raise syntax_error(exc.line, exc.column) from None
    except YamlStructureError:
        raise structure_error() from None


def parse_mapping(data: bytes, byte_ceiling: int | None = None) -> dict[str, Any]:
    value = parse_document(data, byte_ceiling)
    if not isinstance(value, dict):
        raise ToolError("E_POLICY_PARSE", MSG_ROOT_NOT_MAPPING)
    return value


def parse_v11_policy(data: bytes, byte_ceiling: int | None = None) -> SequencePolicy:
    """Bytes -> the typed v1.1 policy of the coverage and explain tools: the mapping
    stage first, then the sequence dialect's policy form; a shape mismatch is the structure error."""
    from assay.policy.sequence import parse_policy_mapping

    doc = parse_mapping(data, byte_ceiling)
    try:
        return parse_policy_mapping(doc)
    except (ValueError, TypeError, AttributeError):
        raise structure_error() from None
