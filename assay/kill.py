"""`assay mcp kill`: stop running MCP server processes (docs/kill.md).

Sans-IO parts: target parsing, duration parsing, inventory look-ups. The I/O part signals
processes through pidfds (Linux), so a pid that exits and is reused by an unrelated process
between our check and our signal is never hit, and waits for exit on the pidfd instead of
polling. It signals processes; it never starts any.

Safety rules that differ from upstream, on purpose:
- a pid that the discover process scan does not recognise as an MCP server is refused unless
  ``--force`` is given (docs/kill.md);
- the default mode is graceful: SIGTERM, then SIGKILL after the grace period (docs/kill.md);
- ``--kill-children`` snapshots the descendants *before* the parent is signalled, so children
  re-parented when their parent dies are still reached (docs/kill.md);
- a pid that does not exist, or a target that cannot be resolved, fails the run (exit 30).
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio
import yaml

from assay import discover

__all__ = [
    "EXIT_FAILED",
    "MAX_PID",
    "DEFAULT_GRACE",
    "InventoryError",
    "parse_pid_target",
    "parse_grace",
    "load_inventory",
    "resolve_in_inventory",
    "running_pids",
    "KillOutcome",
    "kill_pid",
    "run_kill",
]

EXIT_FAILED = 30
#: Largest pid the kernel can hand out (pid_t is a signed 32-bit int). Larger numbers cannot
#: name a process; passing them on as pid_t would wrap to negative values, which kill(2)
#: treats as process groups, so they are reported as not found and never signalled.
MAX_PID = 2**31 - 1
DEFAULT_GRACE = 5.0
#: How long a SIGKILLed process may take to disappear before the kill counts as failed.
KILL_WAIT = 5.0

_PID_TARGET = re.compile(r"(?:proc-)?([0-9]+)")
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)?\s*")


class InventoryError(ValueError):
    """The inventory file cannot be read or is not a discover document."""


def parse_pid_target(token: str) -> int | None:
    """``proc-<pid>`` or ``<pid>`` (unsigned 32-bit) -> pid; anything else -> None (docs/kill.md)."""
    m = _PID_TARGET.fullmatch(token)
    if m is None:
        return None
    value = int(m.group(1))
    return value if value < 2**32 else None


def parse_grace(text: str) -> float:
    """``<n>ms``, ``<n>s`` or bare ``<n>`` seconds (docs/kill.md) -> seconds."""
    m = _DURATION.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid --grace {json.dumps(text)}: expected <n>ms, <n>s or <n> (seconds)")
    value = float(m.group(1))
    return value / 1000.0 if m.group(2) == "ms" else value


def load_inventory(path: str) -> dict[str, Any]:
    """A discover JSON/YAML document: JSON when the name ends in ``.json``, else YAML (docs/kill.md)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InventoryError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if path.lower().endswith(".json"):
            doc = json.loads(data)
        else:
            doc = yaml.safe_load(data)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InventoryError(f"cannot parse {path}: {first}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("servers"), list):
        raise InventoryError(f"{path} is not a discover inventory (no servers list)")
    return doc


def _entry_pid(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    source = entry.get("source")
    if isinstance(source, dict) and source.get("type") == "running_process":
        pid = source.get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            return pid
    return None


def resolve_in_inventory(doc: Mapping[str, Any], token: str) -> int | None:
    """Exact server id first, then name, preferring a running-process entry (docs/kill.md)."""
    servers = [s for s in doc.get("servers", []) if isinstance(s, dict)]
    for s in servers:
        if s.get("id") == token and _entry_pid(s) is not None:
            return _entry_pid(s)
    named = [s for s in servers if s.get("name") == token]
    for s in named:
        if _entry_pid(s) is not None:
            return _entry_pid(s)
    return None


def running_pids(doc: Mapping[str, Any]) -> list[int]:
    """Pids of running process entries, sorted and de-duplicated (docs/kill.md)."""
    pids = {
        _entry_pid(s)
        for s in doc.get("servers", [])
        if isinstance(s, dict) and s.get("status") == "running" and _entry_pid(s) is not None
    }
    return sorted(p for p in pids if p is not None)


# --------------------------------------------------------------------------------------------
# I/O: signalling through pidfds


@dataclass
class KillOutcome:
    """What happened to one pid: ``ok``, and the lines to print on stdout / stderr."""

    pid: int
    ok: bool
    children_killed: int = 0
    error: str | None = None


class _Handle:
    """A process reference that survives pid reuse (a pidfd), with a polling fallback."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = None
        if hasattr(os, "pidfd_open"):
            self.fd = os.pidfd_open(pid)  # raises ProcessLookupError / OSError
        else:  # pragma: no cover - non-Linux
            os.kill(pid, 0)

    def send(self, sig: int) -> None:
        if self.fd is not None:
            signal.pidfd_send_signal(self.fd, sig)
        else:  # pragma: no cover
            os.kill(self.pid, sig)

    def exited_now(self) -> bool:
        if self.fd is not None:
            import select

            p = select.poll()
            p.register(self.fd, select.POLLIN)
            return bool(p.poll(0))
        try:  # pragma: no cover
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    async def wait(self, timeout: float) -> bool:
        """True when the process exited (a zombie counts: it runs no more) within ``timeout``."""
        with trio.move_on_after(timeout):
            if self.fd is not None:
                await trio.lowlevel.wait_readable(self.fd)
            else:  # pragma: no cover
                while not self.exited_now():
                    await trio.sleep(0.05)
            return True
        return self.exited_now()

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            trio.lowlevel.notify_closing(fd)
            os.close(fd)


def _open_descendants(pid: int, snapshot: Sequence[discover.ProcInfo]) -> list[_Handle]:
    """Handles on every descendant of ``pid``, taken before ``pid`` is signalled (docs/kill.md)."""
    ticks = {p.pid: p.start_ticks for p in snapshot}
    handles: list[_Handle] = []
    for child in discover.descendants(snapshot, pid):
        try:
            handle = _Handle(child)
        except OSError:
            continue
        # The snapshot may be a moment old: make sure the pidfd names the same process.
        now = discover.read_proc_info(child)
        if now is None or now.start_ticks != ticks.get(child) or handle.exited_now():
            handle.close()
            continue
        handles.append(handle)
    return handles


def _signal_name(sig: int) -> str:
    return signal.Signals(sig).name


async def _terminate(handle: _Handle, mode: str, grace: float) -> str | None:
    """Stop one process; None on success, else the failure text."""
    first = signal.SIGTERM if mode == "graceful" else signal.SIGKILL
    try:
        handle.send(first)
    except ProcessLookupError:
        return "no such process"
    except OSError as exc:
        return f"{_signal_name(first)} failed for pid={handle.pid}: {exc.strerror or exc}"
    if mode == "graceful":
        if await handle.wait(grace):
            return None
        try:
            handle.send(signal.SIGKILL)
        except ProcessLookupError:
            return None
        except OSError as exc:
            return f"SIGKILL failed for pid={handle.pid}: {exc.strerror or exc}"
    if await handle.wait(KILL_WAIT):
        return None
    return "(failed to terminate process)"


async def kill_pid(
    pid: int,
    *,
    mode: str = "graceful",
    grace: float = DEFAULT_GRACE,
    kill_children: bool = False,
    force: bool = False,
    self_pid: int | None = None,
    proc_reader: Callable[[], Sequence[discover.ProcInfo]] = discover.read_proc_table,
) -> KillOutcome:
    """Check, signal and wait for one pid (docs/kill.md)."""
    if self_pid is not None and pid == self_pid:
        return KillOutcome(pid, False, error=f"✗ refusing to kill pid={pid}: that is this assay process")
    if pid <= 0 or pid > MAX_PID:
        return KillOutcome(pid, False, error=f"✗ failed to kill pid={pid}: no such process")
    try:
        handle = _Handle(pid)
    except ProcessLookupError:
        return KillOutcome(pid, False, error=f"✗ failed to kill pid={pid}: no such process")
    except OSError as exc:  # EINVAL: a thread id, not a process
        return KillOutcome(pid, False, error=f"✗ failed to kill pid={pid}: {exc.strerror or exc}")
    children: list[_Handle] = []
    try:
        snapshot = proc_reader()
        if not force and pid not in discover.mcp_server_pids(snapshot, self_pid=self_pid):
            if handle.exited_now():
                return KillOutcome(pid, False, error=f"✗ failed to kill pid={pid}: no such process")
            return KillOutcome(
                pid,
                False,
                error=f"✗ refusing to kill pid={pid}: not an MCP server process (use --force to kill it anyway)",
            )
        if kill_children:
            children = _open_descendants(pid, snapshot)
        failure = await _terminate(handle, mode, grace)
        killed = 0
        if kill_children:
            for child in sorted(children, key=lambda h: h.pid, reverse=True):
                try:
                    child.send(signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass  # already gone (or not ours to signal): nothing left to stop
            for child in children:
                await child.wait(KILL_WAIT)
        if failure is None:
            return KillOutcome(pid, True, killed)
        if failure.startswith("("):
            return KillOutcome(pid, False, killed, f"✗ failed to kill pid={pid} {failure}")
        return KillOutcome(pid, False, killed, f"✗ failed to kill pid={pid}: {failure}")
    finally:
        handle.close()
        for child in children:
            child.close()


async def run_kill(
    targets: Sequence[str],
    *,
    all_: bool,
    inventory_path: str,
    mode: str,
    grace: float,
    kill_children: bool,
    force: bool,
    out: Callable[[str], None],
    err: Callable[[str], None],
    self_pid: int | None = None,
) -> int:
    """Resolve targets, kill each pid once, report; 0 when all succeeded, else 30 (docs/kill.md).

    Usage checks (``--all`` without ``--yes``, no target) belong to the caller.
    Raises :class:`InventoryError` when ``--all`` cannot load its inventory.
    """
    pids: list[int] = []
    failed = False
    if all_:
        doc = load_inventory(inventory_path)
        pids = running_pids(doc)
        if not pids:
            out("No running process-based servers found in inventory.")
            return 0
        out(f"Found {len(pids)} running servers to kill.")
    else:
        inventory: dict[str, Any] | None = None
        inventory_error: str | None = None
        for token in targets:
            pid = parse_pid_target(token)
            if pid is None:
                if inventory is None and inventory_error is None:
                    try:
                        inventory = load_inventory(inventory_path)
                    except InventoryError as exc:
                        inventory_error = str(exc)
                if inventory_error is not None:
                    err(
                        f"✗ Could not resolve target {json.dumps(token)}: {inventory_error} (write an inventory "
                        f"with: assay mcp discover --format {'json' if inventory_path.lower().endswith('.json') else 'yaml'}"
                        f" -o {inventory_path})"
                    )
                    failed = True
                    continue
                pid = resolve_in_inventory(inventory or {}, token)
                if pid is None:
                    err(f"✗ Could not resolve target {json.dumps(token)} to a PID (not running process?)")
                    failed = True
                    continue
            if pid not in pids:
                pids.append(pid)
    for pid in pids:
        outcome = await kill_pid(
            pid, mode=mode, grace=grace, kill_children=kill_children, force=force, self_pid=self_pid
        )
        if outcome.ok:
            out(f"✓ killed pid={pid}")
            if outcome.children_killed:
                out(f"  children killed: {outcome.children_killed}")
        else:
            failed = True
            if outcome.error:
                err(outcome.error)
    return EXIT_FAILED if failed else 0
