"""The inventory document and its renderings (sans-IO, docs/discover.md, "Output"): summary,
timestamps, JSON, YAML, the human table, and the table format's warning lines."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

__all__ = [
    "summarize",
    "build_document",
    "format_rfc3339",
    "format_table_time",
    "render_json",
    "render_yaml",
    "render_table",
    "error_warning_lines",
]

_STATUS_VARIANTS = {
    "configured": "Configured",
    "running": "Running",
    "listening": "Listening",
    "unreachable": "Unreachable",
    "unknown": "Unknown",
}
_AUTH_VARIANTS = {"none": "None", "api_key": "ApiKey", "o_auth": "OAuth", "mtls": "Mtls", "unknown": "Unknown"}


def summarize(servers: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The summary counts; a wrapped server counts as managed (docs/discover.md)."""
    return {
        "total": len(servers),
        "configured": sum(1 for s in servers if s["status"] == "configured"),
        "running": sum(1 for s in servers if s["status"] == "running"),
        "managed": sum(1 for s in servers if s["policy_status"] == "managed"),
        "unmanaged": sum(1 for s in servers if s["policy_status"] == "unmanaged"),
        "with_auth": sum(1 for s in servers if s["auth"] not in ("none", "unknown")),
        "without_auth": sum(1 for s in servers if s["auth"] == "none"),
    }


def _fraction(ns: int) -> str:
    """Sub-second digits as needed: none, 3, 6 or 9 (chrono's AutoSi)."""
    frac = ns % 1_000_000_000
    if frac == 0:
        return ""
    if frac % 1_000_000 == 0:
        return f".{frac // 1_000_000:03d}"
    if frac % 1_000 == 0:
        return f".{frac // 1_000:06d}"
    return f".{frac:09d}"


def format_rfc3339(ns: int) -> str:
    """``2026-08-22T05:24:38.123456789Z`` from Unix nanoseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + _fraction(ns) + "Z"


def format_table_time(ns: int) -> str:
    """``2026-08-22 05:24:38.123456789 UTC`` (docs/discover.md)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 1_000_000_000)) + _fraction(ns) + " UTC"


def build_document(
    servers: Sequence[dict[str, Any]],
    errors: Sequence[dict[str, Any]],
    *,
    generated_at_ns: int,
    host: Mapping[str, str],
) -> dict[str, Any]:
    """The inventory document, ``errors`` last (docs/discover.md, 'Output')."""
    return {
        "generated_at": format_rfc3339(generated_at_ns),
        "host": dict(host),
        "servers": list(servers),
        "summary": summarize(servers),
        "errors": list(errors),
    }


def render_json(doc: Mapping[str, Any]) -> str:
    """Pretty JSON, 2-space indent, UTF-8 kept (docs/discover.md); no trailing newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False)


def render_yaml(doc: Mapping[str, Any]) -> str:
    """The same data in YAML, members in document order."""
    return yaml.dump(dict(doc), Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _client_of(server: Mapping[str, Any]) -> str:
    source = server["source"]
    if source["type"] == "config_file":
        client: str = source["client"]
        return client
    if source["type"] == "running_process":
        return "process"
    return "network"


def render_table(doc: Mapping[str, Any], generated_at_ns: int) -> str:
    """The human report (docs/discover.md) with a WRAPPED column (docs/discover.md).

    A difference from upstream Assay (docs/compatibility.md): status and auth are padded like their headers so
    the added column lines up, and the summary names Managed.
    """
    host = doc["host"]
    lines = [
        "🔍 MCP Server Discovery Report",
        f"   Generated: {format_table_time(generated_at_ns)}",
        f"   Host: {host['hostname']} ({host['os']}/{host['arch']})",
        "",
    ]
    servers = doc["servers"]
    if not servers:
        lines.append("No servers found.")
        return "\n".join(lines) + "\n"
    lines.append(f"{'SERVER ID':<30} {'CLIENT':<15} {'STATUS':<15} {'AUTH':<15} WRAPPED")
    lines.append(f"{'---------':<30} {'------':<15} {'------':<15} {'----':<15} -------")
    for s in servers:
        status = _STATUS_VARIANTS.get(s["status"], s["status"])
        auth = _AUTH_VARIANTS.get(s["auth"], s["auth"])
        wrapped = ("yes" if s.get("wrapped") else "no") + (" (remote)" if s.get("remote") else "")
        lines.append(f"{s['id'][:29]:<30} {_client_of(s):<15} {status:<15} {auth:<15} {wrapped}")
    summary = doc["summary"]
    lines.append("")
    lines.append(
        f"Summary: Total={summary['total']}, Managed={summary['managed']}, "
        f"Unmanaged={summary['unmanaged']}, NoAuth={summary['without_auth']}"
    )
    return "\n".join(lines) + "\n"


def error_warning_lines(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table format's stderr line per unusable config file (docs/discover.md)."""
    return [f"warning: skipped {e['path']}: {e['error']}" for e in errors]
