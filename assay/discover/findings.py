"""What to scan and how to react (sans-IO, docs/discover.md): ``--fail-on``, the policy's
``discovery`` block, and the exit code of the findings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["parse_fail_on", "DiscoverySettings", "evaluate_findings", "settings_from_policy"]


def parse_fail_on(values: Iterable[str] | None) -> set[str]:
    """Comma-separated, repeatable; unknown words are ignored (docs/discover.md)."""
    out: set[str] = set()
    for value in values or ():
        out.update(part.strip() for part in value.split(",") if part.strip())
    return out


@dataclass(frozen=True)
class DiscoverySettings:
    """What to scan and how to react (docs/discover.md)."""

    enabled: bool = True
    methods: tuple[str, ...] = ("config_files", "processes")
    unmanaged_server: str = "log"
    no_auth: str = "log"


def evaluate_findings(
    summary: Mapping[str, int], fail_on: set[str], settings: DiscoverySettings
) -> tuple[list[str], int]:
    """``(stderr lines, exit code)``: 10 unmanaged, 11 without auth (docs/discover.md)."""
    lines: list[str] = []
    code = 0
    unmanaged = summary["unmanaged"]
    if unmanaged > 0:
        action = "fail" if "unmanaged" in fail_on else settings.unmanaged_server
        if action == "fail":
            lines.append(f"Error: Found {unmanaged} unmanaged servers.")
            code = 10
        elif action == "warn":
            lines.append(f"Warning: Found {unmanaged} unmanaged servers.")
    without = summary["without_auth"]
    if without > 0:
        action = "fail" if "no_auth" in fail_on else settings.no_auth
        if action == "fail":
            lines.append(f"Error: Found {without} servers without authentication.")
            if code == 0:
                code = 11
        elif action == "warn":
            lines.append(f"Warning: Found {without} servers without authentication.")
    return lines, code


def settings_from_policy(discovery: Mapping[str, Any] | None) -> DiscoverySettings:
    """Discovery settings from a loaded policy's ``discovery`` block (docs/discover.md).

    No block -> scan as without a policy. With one, ``enabled`` defaults to false (the policy
    loader fills the defaults, docs/policy.md) and an empty ``methods`` list means both.
    """
    if discovery is None:
        return DiscoverySettings()
    methods = tuple(discovery.get("methods") or ("config_files", "processes"))
    findings = discovery.get("on_findings") or {}
    return DiscoverySettings(
        enabled=bool(discovery.get("enabled", False)),
        methods=methods,
        unmanaged_server=findings.get("unmanaged_server", "log"),
        no_auth=findings.get("no_auth", "log"),
    )
