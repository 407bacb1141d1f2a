"""Processes (sans-IO, docs/discover.md): a ``/proc`` snapshot -> the running MCP servers, and
the pids `assay mcp kill` accepts without ``--force``."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assay.discover.commandline import launched_wrap_lines, looks_like_mcp_server, parse_wrapped

__all__ = ["ProcInfo", "descendants", "classify_processes", "mcp_server_pids"]


@dataclass(frozen=True)
class ProcInfo:
    """One process of a ``/proc`` snapshot. ``start_ticks`` tells a reused pid apart."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    start_ticks: int | None = None
    started_at: str | None = None
    user: str | None = None


def _children_map(procs: Iterable[ProcInfo]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    return children


def descendants(procs: Iterable[ProcInfo], pid: int) -> list[int]:
    """All descendants of ``pid`` in the snapshot (ppid walk), ascending pid."""
    children = _children_map(procs)
    found: set[int] = set()
    stack = list(children.get(pid, ()))
    while stack:
        child = stack.pop()
        if child in found or child == pid:
            continue
        found.add(child)
        stack.extend(children.get(child, ()))
    return sorted(found)


@dataclass(frozen=True)
class _Wraps:
    wraps: set[int]  # processes whose own argv is a wrap line (assay.clients.wrapped)
    under: set[int]  # their descendants: the servers they run
    launchers: set[int]  # processes that started one of those wraps, with the same line


def _wraps(procs: Sequence[ProcInfo]) -> _Wraps:
    """Which processes are wraps, what runs under them, and which launched them
    (docs/discover.md, "What is scanned"). A launcher's words alone never count: it must have
    a wrap among its descendants whose options and server are the ones it spells out."""
    lines = {p.pid: parse_wrapped(p.argv) for p in procs if p.argv}
    wraps = {pid for pid, line in lines.items() if line is not None}
    under: set[int] = set()
    for pid in wraps:
        under.update(descendants(procs, pid))
    launchers: set[int] = set()
    for p in procs:
        if p.pid in wraps or p.pid in under or not p.argv:
            continue
        claimed = {(tuple(sorted(line.options.items())), tuple(line.server)) for line in launched_wrap_lines(p.argv)}
        if not claimed:
            continue
        for child in descendants(procs, p.pid):
            line = lines.get(child)
            if line is not None and (tuple(sorted(line.options.items())), tuple(line.server)) in claimed:
                launchers.add(p.pid)
                break
    return _Wraps(wraps, under, launchers)


def _process_entry(p: ProcInfo, wrapped: bool) -> dict[str, Any]:
    return {
        "id": f"proc-{p.pid}",
        "name": None,
        "source": {
            "type": "running_process",
            "pid": p.pid,
            "cmdline": shlex.join(p.argv),  # one argument with spaces stays one (docs/discover.md)
            "started_at": p.started_at,
            "user": p.user,
        },
        "transport": {"type": "unknown"},
        "status": "running",
        "policy_status": "managed" if wrapped else "unmanaged",
        "auth": "unknown",
        "env_vars": [],
        "risk_hints": [],
        "wrapped": wrapped,
    }


def classify_processes(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> list[dict[str, Any]]:
    """Running MCP servers of a snapshot, ascending pid (docs/discover.md).

    A running `assay mcp wrap` is listed as wrapped; the server it runs (its child, and that
    child's own descendants, e.g. the node under an npx) is not listed again, nor is the
    launcher that started it (``sh -c "assay mcp wrap ..."``), whose other children are.
    """
    snapshot = sorted(procs, key=lambda p: p.pid)
    found = _wraps(snapshot)
    out: list[dict[str, Any]] = []
    for p in snapshot:
        if p.pid == self_pid or not p.argv or p.pid in found.under or p.pid in found.launchers:
            continue
        wrapped = p.pid in found.wraps
        if wrapped or looks_like_mcp_server(p.argv):
            out.append(_process_entry(p, wrapped))
    return out


def mcp_server_pids(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> set[int]:
    """Pids kill accepts without `--force` (docs/discover.md): listed servers, the servers wraps
    run, and the launchers of wraps."""
    snapshot = list(procs)
    found = _wraps(snapshot)
    listed = {e["source"]["pid"] for e in classify_processes(snapshot, self_pid=self_pid)}
    return (listed | found.under | found.launchers) - ({self_pid} if self_pid is not None else set())
