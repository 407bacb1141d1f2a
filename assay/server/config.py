"""Server configuration read from the environment (docs/server.md, "Environment").

Sans-IO: takes a mapping, returns values plus the names of variables whose value was unusable,
so the caller can log one warning per bad variable once logging is up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ServerConfig", "config_from_env", "DEFAULTS"]

DEFAULTS = {
    "ASSAY_MCP_TIMEOUT_MS": 2000,
    "ASSAY_MCP_MAX_BYTES": 1_000_000,
    "ASSAY_MCP_MAX_POLICY_BYTES": 1_000_000,
    "ASSAY_MCP_MAX_FIELD_BYTES": 64_000,
    "ASSAY_MCP_MAX_TOOL_CALLS": 2000,
    "ASSAY_MCP_CACHE_ENTRIES": 128,
}

_UINT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ServerConfig:
    timeout_ms: int = 2000
    max_msg_bytes: int = 1_000_000
    max_policy_bytes: int = 1_000_000
    max_field_bytes: int = 64_000
    max_tool_calls: int = 2000
    cache_entries: int = 128
    log_filter: str = "info"
    strict_deprecations: bool = False
    # Test-only hook: policy tools sleep this long when `policy` contains "slow".
    test_slow_ms: int | None = None
    invalid: tuple[str, ...] = field(default=())


def _uint(environ: Mapping[str, str], name: str, invalid: list[str]) -> int | None:
    raw = environ.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if _UINT.fullmatch(text):
        return int(text)
    invalid.append(name)
    return None


def config_from_env(environ: Mapping[str, str]) -> ServerConfig:
    """Absent values keep the default silently; unparsable or negative ones keep it and are listed."""
    invalid: list[str] = []
    values = {}
    for name, attr in (
        ("ASSAY_MCP_TIMEOUT_MS", "timeout_ms"),
        ("ASSAY_MCP_MAX_BYTES", "max_msg_bytes"),
        ("ASSAY_MCP_MAX_POLICY_BYTES", "max_policy_bytes"),
        ("ASSAY_MCP_MAX_FIELD_BYTES", "max_field_bytes"),
        ("ASSAY_MCP_MAX_TOOL_CALLS", "max_tool_calls"),
        ("ASSAY_MCP_CACHE_ENTRIES", "cache_entries"),
    ):
        value = _uint(environ, name, invalid)
        values[attr] = DEFAULTS[name] if value is None else value
    slow = _uint(environ, "ASSAY_MCP_TEST_SLOW_MS", invalid)
    return ServerConfig(
        **values,
        log_filter=environ.get("ASSAY_LOG", "info"),
        strict_deprecations=environ.get("ASSAY_STRICT_DEPRECATIONS") == "1",
        test_slow_ms=slow,
        invalid=tuple(invalid),
    )
