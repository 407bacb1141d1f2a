"""Processes (sans-IO, docs/discover.md): a ``/proc`` snapshot -> the running MCP servers, and
the pids `assay mcp kill` accepts without ``--force``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assay.discover.commandline import looks_like_mcp_server, runs_assay_wrap

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


def _wrap_pids_and_their_trees(procs: Sequence[ProcInfo]) -> tuple[set[int], set[int]]:
    wraps = {p.pid for p in procs if p.argv and runs_assay_wrap(p.argv)}
    under: set[int] = set()
    for pid in wraps:
        under.update(descendants(procs, pid))
    return wraps, under


def _process_entry(p: ProcInfo, wrapped: bool) -> dict[str, Any]:
    return {
        "id": f"proc-{p.pid}",
        "name": None,
        "source": {
            "type": "running_process",
            "pid": p.pid,
            "cmdline": " ".join(p.argv),
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


def classify_processes(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> list[dict]:
    """Running MCP servers of a snapshot, ascending pid (docs/discover.md).

    A running `assay mcp wrap` is listed as wrapped; the server it runs (its child, and that
    child's own descendants, e.g. the node under an npx) is not listed again.
    """
    snapshot = sorted(procs, key=lambda p: p.pid)
    wraps, under = _wrap_pids_and_their_trees(snapshot)
    out: list[dict] = []
    for p in snapshot:
        if p.pid == self_pid or not p.argv or p.pid in under:
            continue
        wrapped = p.pid in wraps
        if wrapped or looks_like_mcp_server(p.argv):
            out.append(_process_entry(p, wrapped))
    return out


def mcp_server_pids(procs: Iterable[ProcInfo], *, self_pid: int | None = None) -> set[int]:
    """Pids kill accepts without `--force` (docs/discover.md): listed servers and the servers wraps run."""
    snapshot = list(procs)
    _, under = _wrap_pids_and_their_trees(snapshot)
    listed = {e["source"]["pid"] for e in classify_processes(snapshot, self_pid=self_pid)}
    return (listed | under) - ({self_pid} if self_pid is not None else set())
