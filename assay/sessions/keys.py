"""Which shared session a wrap belongs to (docs/wrap.md, "Shared sessions").

``--shared-session`` (else ``$ASSAY_SHARED_SESSION``, else ``client``) is one of:

- ``client``: the session of the client process that started the wrap. Shells and launchers
  between them (``sh``, ``bash``, ``dash``, ``zsh``, ``fish``, ``env``) are skipped up the parent
  chain, so ``sh -c 'assay mcp wrap ...'`` in a client config still names the client. The
  client is its pid and its start time (``client:<pid>:<start>``), so a process that later gets
  the same pid is a new session.
- ``none``: no sharing (the wrap decides alone, as without a store).
- any other text: a named session ``name:<text>`` that every wrap given the same name shares.

Process information comes from ``/proc`` on Linux and from ``proc_pidinfo`` on macOS. Where
neither works the start time is ``unknown`` and the session is the pid's alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NamedTuple

from assay.policy.shared import SessionKey

__all__ = ["SHELLS", "ProcInfo", "client_alive", "parse_stat", "proc_info", "session_key"]

# shells and launchers: a client config may start wrap through them (`sh -c`, `env X=1 assay`,
# `uvx assay`, `pipx run assay`); never `node` or `python`, which are what clients themselves run as
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "env", "nohup", "uv", "uvx", "pipx"})
UNKNOWN = "unknown"  # the start time when the platform tells none
_MAX_DEPTH = 64  # parent chain walked at most this far (a guard against a looping chain)
_MAX_NAME = 128


class ProcInfo(NamedTuple):
    pid: int
    ppid: int
    comm: str
    start: str  # the start time as the key text holds it


def parse_stat(text: str) -> tuple[str, int, int]:
    """``(comm, ppid, starttime)`` of one ``/proc/<pid>/stat`` line. The command name sits in
    parentheses and may itself hold spaces and parentheses, so the fields are read after the
    *last* ``)``. Raises ValueError on anything else."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        raise ValueError("no command name in /proc stat")
    comm = text[open_ + 1 : close]
    fields = text[close + 1 :].split()
    # after the name: state(3) ppid(4) ... starttime(22), numbered as in proc(5)
    if len(fields) < 20:
        raise ValueError("too few fields in /proc stat")
    ppid, start = int(fields[1]), int(fields[19])
    if ppid < 0 or start < 0:
        raise ValueError("negative field in /proc stat")
    return comm, ppid, start


_boot: list[str] = []


def _boot_id() -> str:
    if not _boot:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                _boot.append(f.read().strip().replace("-", "")[:12] or "0")
        except (OSError, ValueError):
            _boot.append("0")
    return _boot[0]


def _linux_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            comm, ppid, start = parse_stat(f.read())
    except (OSError, ValueError):
        return None
    return ProcInfo(pid, ppid, comm, f"{start}@{_boot_id()}")


def _mac_info(pid: int) -> ProcInfo | None:
    """``proc_pidinfo(PROC_PIDTBSDINFO)`` through ctypes (struct proc_bsdinfo of
    <sys/proc_info.h>). Any failure is None."""
    try:
        import ctypes
        import ctypes.util

        class BsdInfo(ctypes.Structure):
            _fields_ = [
                ("flags", ctypes.c_uint32), ("status", ctypes.c_uint32), ("xstatus", ctypes.c_uint32),
                ("pid", ctypes.c_uint32), ("ppid", ctypes.c_uint32),
                ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32), ("ruid", ctypes.c_uint32),
                ("rgid", ctypes.c_uint32), ("svuid", ctypes.c_uint32), ("svgid", ctypes.c_uint32),
                ("rfu_1", ctypes.c_uint32), ("comm", ctypes.c_char * 16), ("name", ctypes.c_char * 32),
                ("nfiles", ctypes.c_uint32), ("pgid", ctypes.c_uint32), ("pjobc", ctypes.c_uint32),
                ("e_tdev", ctypes.c_uint32), ("e_tpgid", ctypes.c_uint32), ("nice", ctypes.c_int32),
                ("start_sec", ctypes.c_uint64), ("start_usec", ctypes.c_uint64),
            ]

        lib = ctypes.CDLL(ctypes.util.find_library("proc") or "/usr/lib/libSystem.B.dylib", use_errno=True)
        info = BsdInfo()
        size = ctypes.sizeof(info)
        got = lib.proc_pidinfo(ctypes.c_int(pid), ctypes.c_int(3), ctypes.c_uint64(0), ctypes.byref(info), ctypes.c_int(size))
        if got != size or info.pid != pid:
            return None
        comm = info.comm.decode("utf-8", "replace")
        return ProcInfo(pid, int(info.ppid), comm, f"{int(info.start_sec)}.{int(info.start_usec):06d}")
    except Exception:  # noqa: BLE001 - an untested platform path: any failure falls back
        return None


def proc_info(pid: int) -> ProcInfo | None:
    """What this platform tells of ``pid`` (None: gone, or nothing to tell)."""
    if pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        return _linux_info(pid)
    if sys.platform == "darwin":
        return _mac_info(pid)
    return None


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _client(ppid: int) -> SessionKey:
    """The session of the process that started this one, shells and launchers skipped."""
    info = proc_info(ppid)
    if info is None:
        return SessionKey(key=f"client:{ppid}:{UNKNOWN}", kind="client", pid=ppid, start=UNKNOWN)
    seen = {info.pid}
    while info.comm in SHELLS and info.ppid > 1 and len(seen) < _MAX_DEPTH:
        parent = proc_info(info.ppid)
        if parent is None or parent.pid in seen:
            break
        seen.add(parent.pid)
        info = parent
    return SessionKey(
        key=f"client:{info.pid}:{info.start}", kind="client", pid=info.pid, start=info.start, process=info.comm
    )


def _check_name(name: str) -> None:
    if not 1 <= len(name) <= _MAX_NAME:
        raise ValueError(f"a shared session name has 1 to {_MAX_NAME} characters (got {len(name)})")
    if not name.isprintable():
        raise ValueError("a shared session name holds printable characters only (no control characters)")


def session_key(spec: str | None, env: Mapping[str, str]) -> SessionKey | None:
    """The session a wrap belongs to: ``spec`` (``--shared-session``; None: ``ASSAY_SHARED_SESSION``,
    else ``client``). None for ``none`` (no sharing). Raises ValueError (one line) for a bad
    session name."""
    if spec is None:
        spec = env.get("ASSAY_SHARED_SESSION") or "client"
    if spec == "none":
        return None
    if spec == "client":
        return _client(os.getppid())
    _check_name(spec)
    return SessionKey(key=f"name:{spec}", kind="named", name=spec)


def client_alive(key: SessionKey) -> bool:
    """Whether the client of ``key`` still runs: its pid exists with the same start time. A
    named session is always alive (it expires by idleness instead)."""
    if key.kind != "client" or key.pid is None:
        return True
    if key.start == UNKNOWN or key.start is None:
        return _pid_exists(key.pid)
    info = proc_info(key.pid)
    if info is None:
        # a platform that tells nothing (the key was made elsewhere): the pid alone
        return _pid_exists(key.pid) if not sys.platform.startswith(("linux", "darwin")) else False
    return info.start == key.start
