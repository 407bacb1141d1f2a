"""Which shared session a wrap belongs to (docs/wrap.md, "Shared sessions").

``--shared-session`` (else ``$ASSAY_SHARED_SESSION``, else ``client``) is one of:

- ``client``: the session of the client process that started the wrap. Shells and launchers
  between them are skipped up the parent chain, so ``sh -c 'assay mcp wrap ...'``, a
  ``#!/bin/sh`` wrapper script or ``timeout 3600 assay mcp wrap ...`` in a client config still
  names the client. A process is a shell or a launcher by what it executes (its executable, for
  a script its interpreter; else its ``argv[0]``; else its command name), never by its command
  name alone: Linux names a script's process after the script. The walk may end at pid 1 (the
  client of a container), never at an init system. The client is its pid, its start time and
  the PID namespace its pid is counted in (``client:<pid>:<start>:ns<inode>``), so a process
  that later gets the same pid is a new session, and a process in another namespace (a
  container sharing the state directory) neither joins it nor takes it for gone.
- ``none``: no sharing (the wrap decides alone, as without a store).
- any other text: a named session ``name:<text>`` that every wrap given the same name shares.

Process information comes from ``/proc`` on Linux and from ``proc_pidinfo`` on macOS. Where
neither works the start time is ``unknown`` and the session is the pid's alone. The reading is
isolated in :func:`proc_info` and :func:`read_process`; :func:`find_client` and
:func:`identity` are plain code over what they return.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import NamedTuple

from assay.policy.storeapi import SessionKey

__all__ = [
    "INITS",
    "LAUNCHERS",
    "SHELLS",
    "ProcInfo",
    "client_alive",
    "find_client",
    "identity",
    "key_namespace",
    "parse_stat",
    "proc_info",
    "read_process",
    "session_key",
]

# shells: a client config may start wrap through one (`sh -c`, a `#!/bin/sh` wrapper script)
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ash", "ksh", "mksh"})
# launchers that may stay the wrap's parent (`timeout 3600 assay`, `uvx assay`, `pipx run
# assay`) or exec it (`env X=1`, `nice`); never `node` or `python`, which clients run as
LAUNCHERS = frozenset({"env", "nohup", "timeout", "nice", "ionice", "setsid", "stdbuf", "uv", "uvx", "pipx"})
SKIPPED = SHELLS | LAUNCHERS
# init systems and supervisors: never a client (the walk stops below them)
INITS = frozenset(
    {
        "init",
        "systemd",
        "launchd",
        "tini",
        "docker-init",
        "dumb-init",
        "catatonit",
        "s6-svscan",
        "runit",
        "openrc-init",
    }
)
# one binary that is many commands by the name it was run as (its argv[0])
_MULTICALL = frozenset({"busybox", "coreutils", "toybox"})
# Python scripts that are launchers (their process executes the interpreter)
_PY_LAUNCHERS = frozenset({"pipx"})
_PYTHON = re.compile(r"python[0-9.]*")
UNKNOWN = "unknown"  # the start time when the platform tells none
_MAX_DEPTH = 64  # parent chain walked at most this far (a guard against a looping chain)
_MAX_NAME = 128
_CMDLINE_READ = 4096  # enough for argv[0] and argv[1]


class ProcInfo(NamedTuple):
    pid: int
    ppid: int
    comm: str
    start: str  # the start time as the key text holds it
    exe: str | None = None  # the executable's path (a script's interpreter); None: unreadable
    argv: tuple[str, ...] = ()  # the first arguments (empty: unreadable)


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


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1].lstrip("-")  # "-bash": a login shell


def identity(info: ProcInfo) -> str:
    """What ``info`` executes, as a command name: its executable's name (for a script, the
    interpreter's), else its ``argv[0]``'s, else its command name. A multi-call binary
    (busybox) is the command it was run as; a Python launcher script (pipx) is the script."""
    argv = info.argv
    if info.exe:
        name = _base(info.exe)
    elif argv and argv[0]:
        name = _base(argv[0])
    else:
        return info.comm
    if name in _MULTICALL:
        applet = _base(argv[0]) if argv else ""
        if applet in _MULTICALL:
            applet = _base(argv[1]) if len(argv) > 1 else ""
        name = applet or info.comm
    if _PYTHON.fullmatch(name) and len(argv) > 1 and _base(argv[1]) in _PY_LAUNCHERS:
        name = _base(argv[1])
    return name


def find_client(first: int, lookup: Callable[[int], ProcInfo | None]) -> ProcInfo | None:
    """The client up the parent chain from ``first`` (the wrap's parent): shells and launchers
    are skipped (:func:`identity`); the walk stops at the top of what ``lookup`` shows, at a
    parent it cannot read, and below an init system. pid 1 is the client when the walk reaches
    it and it is not an init system (the agent of a container, or a shell there that started
    everything). None when ``first`` cannot be read."""
    info = lookup(first)
    if info is None:
        return None
    seen = {info.pid}
    while identity(info) in SKIPPED and info.ppid > 0 and len(seen) < _MAX_DEPTH:
        parent = lookup(info.ppid)
        if parent is None or parent.pid in seen or identity(parent) in INITS:
            break
        seen.add(parent.pid)
        info = parent
    return info


_cache: dict[str, str] = {}


def _boot_id() -> str:
    if "boot" not in _cache:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                _cache["boot"] = f.read().strip().replace("-", "")[:12] or "0"
        except (OSError, ValueError):
            _cache["boot"] = "0"
    return _cache["boot"]


def _namespace() -> str:
    """The PID namespace the pids of this process's ``/proc`` are counted in, as ``ns<inode>``
    (``""``: not told, as off Linux). That is this process's own namespace when ``/proc/self``
    is this pid (a ``/proc`` mounted in an outer namespace shows the pids of that one)."""
    if "ns" not in _cache:
        ns = ""
        if sys.platform.startswith("linux"):
            try:
                if os.readlink("/proc/self") == str(os.getpid()):
                    link = os.readlink("/proc/self/ns/pid")
                else:
                    link = os.readlink("/proc/1/ns/pid")  # that namespace's init (root may read it)
                m = re.fullmatch(r"pid:\[([0-9]+)\]", link)
                ns = f"ns{m.group(1)}" if m else ""
            except (OSError, ValueError):
                ns = ""
        _cache["ns"] = ns
    return _cache["ns"]


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
                ("flags", ctypes.c_uint32),
                ("status", ctypes.c_uint32),
                ("xstatus", ctypes.c_uint32),
                ("pid", ctypes.c_uint32),
                ("ppid", ctypes.c_uint32),
                ("uid", ctypes.c_uint32),
                ("gid", ctypes.c_uint32),
                ("ruid", ctypes.c_uint32),
                ("rgid", ctypes.c_uint32),
                ("svuid", ctypes.c_uint32),
                ("svgid", ctypes.c_uint32),
                ("rfu_1", ctypes.c_uint32),
                ("comm", ctypes.c_char * 16),
                ("name", ctypes.c_char * 32),
                ("nfiles", ctypes.c_uint32),
                ("pgid", ctypes.c_uint32),
                ("pjobc", ctypes.c_uint32),
                ("e_tdev", ctypes.c_uint32),
                ("e_tpgid", ctypes.c_uint32),
                ("nice", ctypes.c_int32),
                ("start_sec", ctypes.c_uint64),
                ("start_usec", ctypes.c_uint64),
            ]

        lib = ctypes.CDLL(ctypes.util.find_library("proc") or "/usr/lib/libSystem.B.dylib", use_errno=True)
        info = BsdInfo()
        size = ctypes.sizeof(info)
        got = lib.proc_pidinfo(
            ctypes.c_int(pid), ctypes.c_int(3), ctypes.c_uint64(0), ctypes.byref(info), ctypes.c_int(size)
        )
        if got != size or info.pid != pid:
            return None
        comm = info.comm.decode("utf-8", "replace")
        return ProcInfo(pid, int(info.ppid), comm, f"{int(info.start_sec)}.{int(info.start_usec):06d}")
    except Exception:  # noqa: BLE001 - an untested platform path: any failure falls back
        return None


def proc_info(pid: int) -> ProcInfo | None:
    """What this platform tells of ``pid``: its parent, command name and start time (None:
    gone, or nothing to tell)."""
    if pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        return _linux_info(pid)
    if sys.platform == "darwin":
        return _mac_info(pid)
    return None


def read_process(pid: int) -> ProcInfo | None:
    """:func:`proc_info` and, on Linux, what ``pid`` executes: ``/proc/<pid>/exe`` (unreadable
    for another user's process: None) and the first arguments of ``/proc/<pid>/cmdline``."""
    info = proc_info(pid)
    if info is None or not sys.platform.startswith("linux"):
        return info
    exe: str | None
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)") or None
    except OSError:
        exe = None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(_CMDLINE_READ)
        argv = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0")[:2])
        argv = argv if argv and argv[0] else ()
    except OSError:
        argv = ()
    return info._replace(exe=exe, argv=argv)


def _first_parent() -> int:
    """The wrap's parent as this process's ``/proc`` counts pids (``os.getppid()`` counts them
    in this process's namespace, which a ``/proc`` of an outer one does not)."""
    if sys.platform.startswith("linux"):
        try:
            me = int(os.readlink("/proc/self"))
            info = proc_info(me)
            if info is not None:
                return info.ppid
        except (OSError, ValueError):
            pass
    return os.getppid()


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
    ns = _namespace()
    tail = f":{ns}" if ns else ""
    info = find_client(ppid, read_process)
    if info is None:
        return SessionKey(key=f"client:{ppid}:{UNKNOWN}{tail}", kind="client", pid=ppid, start=UNKNOWN)
    return SessionKey(
        key=f"client:{info.pid}:{info.start}{tail}",
        kind="client",
        pid=info.pid,
        start=info.start,
        process=info.comm,
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
        return _client(_first_parent())
    _check_name(spec)
    return SessionKey(key=f"name:{spec}", kind="named", name=spec)


def key_namespace(key: SessionKey) -> str | None:
    """The PID namespace a client key's pid is counted in (``ns<inode>``); None for a key
    without one (written by an older assay, or off Linux)."""
    parts = key.key.split(":")
    if key.kind == "client" and len(parts) == 4 and re.fullmatch(r"ns[0-9]+", parts[3]):
        return parts[3]
    return None


def client_alive(key: SessionKey) -> bool | None:
    """Whether the client of ``key`` still runs: its pid exists with the same start time. None
    when this process cannot tell: the key's pid is counted in a PID namespace other than the
    one of this process's ``/proc``. A named session is always alive (it expires by idleness
    instead); a key without a namespace is looked up here, as it always was."""
    if key.kind != "client" or key.pid is None:
        return True
    ns = key_namespace(key)
    if ns is not None and ns != _namespace():
        return None
    if key.start == UNKNOWN or key.start is None:
        return _pid_exists(key.pid)
    info = proc_info(key.pid)
    if info is None:
        # a platform that tells nothing (the key was made elsewhere): the pid alone
        return _pid_exists(key.pid) if not sys.platform.startswith(("linux", "darwin")) else False
    return info.start == key.start
