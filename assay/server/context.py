"""What a tool handler may use: the canonical root, the configuration, the logger, the caches.

Handlers are plain blocking functions (they run in a worker thread under the dispatch deadline,
spec/server.md F1), so everything here is thread-safe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from assay.server.cache import PolicyCache
from assay.server.config import ServerConfig
from assay.server.errors import ToolError
from assay.server.log import Logger
from assay.server.policyfile import read_policy

__all__ = ["ToolContext", "field_limit", "require_str", "arguments_object"]


@dataclass
class ToolContext:
    root: str
    config: ServerConfig
    logger: Logger
    caches: dict[str, PolicyCache] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("blocklist", "sequence"):
            self.caches.setdefault(name, PolicyCache(name, self.config.cache_entries, self.logger))

    def slow_hook(self, policy: str) -> None:
        """Test-only (server.md F5): sleep when ASSAY_MCP_TEST_SLOW_MS is set and `policy` says slow."""
        if self.config.test_slow_ms is not None and "slow" in policy:
            time.sleep(self.config.test_slow_ms / 1000)

    def read_policy(self, policy: str) -> tuple[str, bytes]:
        """Jail + bounded read (§4.1, §4.2); the one routine all five policy tools use (B3)."""
        self.slow_hook(policy)
        return read_policy(self.root, policy, self.config.max_policy_bytes)


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def field_limit(value: str, limit: int, message: str) -> None:
    """L1: inclusive byte limits, checked before any file access."""
    if _nbytes(value) > limit:
        raise ToolError("E_LIMIT_EXCEEDED", message)


def arguments_object(arguments: Any) -> dict[str, Any]:
    """Non-object arguments are a dispatch failure (F2), never a tool-level error."""
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be an object")
    return arguments


def require_str(arguments: dict[str, Any], key: str) -> str:
    value = arguments[key]  # KeyError -> F2
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value
