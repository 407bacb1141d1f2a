"""The process table of Linux's ``/proc`` (the I/O side of :mod:`assay.discover.processes`):
one process, or a snapshot of every readable one. `assay mcp kill` reads it too."""

from __future__ import annotations

import os
import posixpath

from assay.discover.processes import ProcInfo

__all__ = ["parse_proc_stat", "read_proc_info", "read_proc_table"]

_users: dict[int, str | None] = {}


def _user_name(uid: int) -> str | None:
    if uid not in _users:
        try:
            import pwd

            _users[uid] = pwd.getpwuid(uid).pw_name
        except (KeyError, ImportError):
            _users[uid] = None
    return _users[uid]


def _boot_time(proc_root: str) -> int | None:
    try:
        with open(posixpath.join(proc_root, "stat"), "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def parse_proc_stat(data: bytes) -> tuple[int, int] | None:
    """``(ppid, starttime ticks)`` from ``/proc/<pid>/stat``; the name may hold spaces and ')'."""
    try:
        rest = data[data.rindex(b")") + 2 :].split()
        return int(rest[1]), int(rest[19])
    except (ValueError, IndexError):
        return None


def read_proc_info(pid: int, proc_root: str = "/proc", *, btime: int | None = None) -> ProcInfo | None:
    """One process, or None when it is gone or unreadable."""
    base = posixpath.join(proc_root, str(pid))
    try:
        with open(posixpath.join(base, "stat"), "rb") as f:
            parsed = parse_proc_stat(f.read())
        if parsed is None:
            return None
        with open(posixpath.join(base, "cmdline"), "rb") as f:
            raw = f.read()
        uid = os.stat(base).st_uid
    except OSError:
        return None
    ppid, ticks = parsed
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    argv = tuple(p.decode("utf-8", "replace") for p in parts)
    started_at = None
    if btime is not None:
        started_at = str(btime + ticks // _CLK_TCK)
    return ProcInfo(pid, ppid, argv, ticks, started_at, _user_name(uid))


try:
    _CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
    _CLK_TCK = 100


def read_proc_table(proc_root: str = "/proc") -> list[ProcInfo]:
    """A snapshot of every readable process (Linux). Empty where there is no /proc."""
    btime = _boot_time(proc_root)
    out: list[ProcInfo] = []
    try:
        names = os.listdir(proc_root)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        info = read_proc_info(int(name), proc_root, btime=btime)
        if info is not None:
            out.append(info)
    out.sort(key=lambda p: p.pid)
    return out
