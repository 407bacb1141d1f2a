"""Session-end reports of the wrap relay: coverage, state window, session context (sans-IO).

Each function returns a plain dict in the key order of its document; :func:`pretty_json` gives
the file bytes (2-space indent, no trailing newline). Coverage is computed from this
session's coverage aggregate (:class:`assay.session.records.Coverage`, kept by the recorder as each
call is decided), never by re-reading a log that may hold earlier runs.
Formats and rules: docs/wrap-records.md, "Session reports".
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from assay._version import __version__
from assay.canonical import jcs_bytes
from assay.policy.patterns import EXACT
from assay.session.records.coverage import ROUTES_MAX, TOOLS_MAX, Coverage, coverage_name

__all__ = [
    "coverage_report",
    "declared_tools_of",
    "new_session_id",
    "pretty_json",
    "session_context",
    "state_window",
]


def pretty_json(obj: Any) -> bytes:
    """UTF-8 JSON with a 2-space indent and ``": "`` separators, no trailing newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Coverage (docs/wrap-records.md, "Session reports")
# ---------------------------------------------------------------------------------------------


def _explicit(name: Any) -> str | None:
    """A declared tool name: trimmed, non-empty, and not a pattern (no ``*``)."""
    if not isinstance(name, str):
        return None
    name = name.strip()
    return name if name and "*" not in name else None


def _named(pattern: Any) -> str | None:
    """The tool a ``tools.allow``/``tools.deny`` entry declares: the name of the exact-name form
    (``=*`` declares the tool ``*``), else :func:`_explicit`."""
    if isinstance(pattern, str) and pattern.startswith(EXACT):
        return pattern[1:] or None
    return _explicit(pattern)


def declared_tools_of(
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    schema_keys: Iterable[str] | None = None,
    constraint_tools: Iterable[str] | None = None,
    pin_keys: Iterable[str] | None = None,
) -> list[str]:
    """Declared tools: the union of ``tools.allow``, ``tools.deny``, ``schemas`` keys
    (without ``$defs``), legacy ``constraints[].tool`` and ``tool_pins`` keys; trimmed, pattern
    entries dropped, sorted."""
    declared: set[str] = set()
    for group in (allow, deny):
        for item in group or ():
            name = _named(item)
            if name is not None:
                declared.add(name)
    for group in ([k for k in schema_keys or () if k != "$defs"], constraint_tools, pin_keys):
        for item in group or ():
            name = _explicit(item)
            if name is not None:
                declared.add(name)
    return sorted(declared)


def _utc_seconds(moment: datetime | str | None) -> str:
    if isinstance(moment, str):
        return moment
    if moment is None:
        moment = datetime.now(timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def coverage_report(
    coverage: Coverage | None,
    declared_tools: Iterable[str],
    *,
    assay_version: str = __version__,
    generated_at: datetime | str | None = None,
) -> dict[str, Any]:
    """``coverage_report_v1`` over this session's coverage aggregate (None: no call recorded).

    Calls whose tool is blank (a ``tools/call`` whose params named no tool) name nothing to
    cover and were skipped; upstream failed the whole report on them. ``generated_at`` is UTC
    with second precision and ``Z`` (a string is used verbatim). A declared name is compared
    with the seen ones as coverage keeps it (:func:`assay.session.records.coverage_name`). Tools
    and routes beyond the aggregate's bounds add a ``coverage_truncated`` finding
    (docs/wrap-records.md, "Session reports").
    """
    declared = sorted({t.strip() for t in declared_tools if isinstance(t, str) and t.strip()})
    classes = coverage.tools if coverage is not None else {}
    seen = sorted(classes)
    unknown = sorted(set(seen) - {coverage_name(t) for t in declared})
    classes_seen = sorted(set().union(*classes.values()))
    classes_missing = [t for t in seen if not classes[t]]
    routes = coverage.routes if coverage is not None else {}
    findings: list[dict[str, Any]] = [
        {
            "kind": "unknown_tool",
            "severity": "note",
            "message": f"tool '{t}' was seen but not declared",
            "tool": t,
            "count": 1,
        }
        for t in unknown
    ] + [
        {
            "kind": "missing_taxonomy",
            "severity": "note",
            "message": f"tool '{t}' was seen but has no taxonomy entry",
            "tool": t,
            "count": 1,
        }
        for t in classes_missing
    ]
    if coverage is not None and coverage.uncounted_calls:
        findings.append(
            {
                "kind": "coverage_truncated",
                "severity": "note",
                "message": f"calls of tools beyond the first {TOOLS_MAX} distinct names were not counted",
                "tool": "",
                "count": coverage.uncounted_calls,
            }
        )
    if coverage is not None and coverage.uncounted_routes:
        findings.append(
            {
                "kind": "coverage_truncated",
                "severity": "note",
                "message": f"routes beyond the first {ROUTES_MAX} distinct pairs were not counted",
                "tool": "",
                "count": coverage.uncounted_routes,
            }
        )
    findings.sort(key=lambda f: (f["severity"], f["kind"], f["message"], f["tool"]))
    return {
        "schema_version": "coverage_report_v1",
        "report_version": "1",
        "run": {"assay_version": assay_version, "generated_at": _utc_seconds(generated_at), "source": "decision_jsonl"},
        "tools": {"tools_seen": seen, "tools_declared": declared, "tools_unknown": unknown},
        "taxonomy": {"tool_classes_seen": classes_seen, "tool_classes_missing": classes_missing},
        "routes": {"routes_seen": [{"from": a, "to": b, "count": n} for (a, b), n in sorted(routes.items())]},
        "findings": findings,
    }


# ---------------------------------------------------------------------------------------------
# State window (docs/wrap-records.md, "Session reports")
# ---------------------------------------------------------------------------------------------


def new_session_id(pid: int | None = None, now_ns: int | None = None) -> str:
    """``mcpwrap-<pid>-<unix nanoseconds>``, the session id upstream puts in the state window."""
    return f"mcpwrap-{os.getpid() if pid is None else pid}-{time.time_ns() if now_ns is None else now_ns}"


def _sorted_compact(value: Any) -> bytes:
    """Compact JSON with keys sorted recursively by their bytes (upstream's canonical_json)."""

    def norm(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: norm(v[k]) for k in sorted(v, key=lambda s: s.encode("utf-8"))}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def state_window(event_source: str, server_id: str, session_id: str) -> dict[str, Any]:
    """``session_state_window_v1``. ``state_snapshot_id`` is the SHA-256 of the compact,
    recursively key-sorted JSON of ``{session, window, privacy}``; it holds no timestamp."""
    session = {"event_source": event_source, "server_id": server_id, "session_id": session_id}
    window = {"window_kind": "session"}
    privacy = {
        "stores_raw_tool_args": False,
        "stores_raw_prompt_bodies": False,
        "stores_raw_document_bodies": False,
    }
    digest = hashlib.sha256(_sorted_compact({"session": session, "window": window, "privacy": privacy})).hexdigest()
    return {
        "schema_version": "session_state_window_v1",
        "report_version": "1",
        "session": session,
        "window": window,
        "snapshot": {"state_snapshot_id": f"sha256:{digest}", "canonicalization": {"method": "canonical_json_sha256"}},
        "privacy": privacy,
    }


# ---------------------------------------------------------------------------------------------
# Session context (docs/wrap-records.md, "Session reports")
# ---------------------------------------------------------------------------------------------


def session_context(argv: Sequence[str], *, dry_run: bool) -> dict[str, Any]:
    """``assay.mcp_session_context.v0``: the mode and the SHA-256 of the JCS bytes of the child
    command line ``[command, *args]`` exactly as given after ``--`` (no plaintext, no time).

    Raises ValueError for an empty argv or an argument that is not valid Unicode (a lone
    surrogate, as Python makes from non-UTF-8 command-line bytes): JCS cannot encode it.
    """
    if not argv:
        raise ValueError("the command line is empty")
    for arg in argv:
        if not isinstance(arg, str):
            raise ValueError(f"command-line argument is not a string: {arg!r}")
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                "command-line argument is not valid UTF-8; the command digest needs Unicode text"
            ) from None
    digest = hashlib.sha256(jcs_bytes(list(argv))).hexdigest()
    return {
        "schema": "assay.mcp_session_context.v0",
        "mode": "dry_run" if dry_run else "enforce",
        "command_digest": f"sha256:{digest}",
        "command_digest_alg": "sha256",
        "command_canonicalization": "jcs:command_argv.v0",
    }
