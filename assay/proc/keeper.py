"""The keeper process: no process of a wrap run outlives it (docs/wrap.md, "The keeper";
docs/wrap.md, "Lifecycle"). This module is the keeper's side; :mod:`assay.proc.kept` is ours.

A relay child is not started by us directly. We fork a small *keeper* process first (no exec:
a fork of this interpreter, done while only the trio thread runs), which makes itself a child
subreaper (PR_SET_CHILD_SUBREAPER) and starts the server in a new process group. Every
descendant of the server that is orphaned (a double fork, a `setsid` daemon) is re-parented to
the keeper instead of init, so the keeper's process subtree is exactly "every process of the
run". The keeper holds the read end of a control pipe: one byte is a signal number to deliver
to the server's group and the whole subtree; end of file (we closed it, or we died, even by
SIGKILL) means: SIGKILL the whole subtree until nothing is left, then exit. The keeper reaps the
server and reports its status on a second pipe; only the keeper ever signals by pid, and it
knows when the server has been reaped, so a stale pid or group id is never signalled.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

__all__: list[str] = []  # the keeper is started by assay.proc.kept.spawn_kept (or fork_keeper) only

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1


class SpawnError(OSError):
    """The program exists (or might) but could not be started."""


class ProgramNotFound(SpawnError):
    """No file to execute: ENOENT at spawn time (docs/library.md, "Running child processes")."""


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_prctl = _load_prctl()

_KEEPER_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)


def keeper_available() -> bool:
    """The keeper needs Linux's child subreaper; elsewhere :func:`spawn_kept` falls back."""
    return _prctl is not None and hasattr(os, "pidfd_open")


class Forked:
    """A keeper just forked (:func:`fork_keeper`), from our side: its pid, our ends of the
    server's stdin and stdout and of the control and status pipes, the keeper's first report
    (:attr:`first`), and the command and environment it was given. ``taken`` once
    :func:`assay.proc.kept.adopt_kept` took it over; until then, :meth:`abandon` is ours to
    call."""

    __slots__ = ("pid", "stdin", "stdout", "ctl", "status", "_first", "args", "env", "taken")

    def __init__(
        self, pid: int, fds: tuple[int, int, int, int], args: list[str], env: Mapping[str, str] | None
    ) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.ctl, self.status = fds
        self._first: bytes | None = None
        self.args = args
        self.env = env
        self.taken = False

    @property
    def first(self) -> bytes:
        """The keeper's first report: ``P`` + the server's pid (maybe ``X`` + its status), or
        ``E`` + errno + message; read when first asked for (the keeper writes it as soon as the
        server is started or could not be), so that wrap imports trio meanwhile instead of
        waiting for the server's exec (docs/testing.md, "Start-up of `assay mcp wrap`")."""
        if self._first is None:
            try:
                self._first = os.read(self.status, 512)
            except OSError:
                self._first = b""
        return self._first

    def abandon(self) -> None:
        """End the run before it started: close our ends (end of file on the control pipe: the
        keeper kills every process of the run) and wait until the keeper has exited, so that
        nothing of the run is left running when this returns. Once only."""
        if self.taken:
            return
        self.taken = True
        for fd in (self.stdin, self.stdout, self.ctl, self.status):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def fork_keeper(
    args: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None
) -> Forked:
    """Fork the keeper, which starts ``args`` (its first report is read when asked for:
    :attr:`Forked.first`). No trio: wrap calls
    this before it imports trio (docs/wrap.md, "The keeper"), :func:`assay.proc.kept.spawn_kept`
    from the trio thread (the only thread: a fork copies only the thread that forks)."""
    argv = list(args)
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    ctl_r, ctl_w = os.pipe2(os.O_CLOEXEC)
    st_r, st_w = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the keeper
        try:
            for fd in (in_w, out_r, ctl_w, st_r):
                os.close(fd)
            _keeper_main(argv, env, cwd, in_r, out_w, ctl_r, st_w, parent)
        finally:
            os._exit(70)
    for fd in (in_r, out_w, ctl_r, st_w):
        os.close(fd)
    return Forked(pid, (in_w, out_r, ctl_w, st_r), argv, env)


def _subtree(root: int) -> list[int]:
    """Every live descendant of ``root`` (from /proc parent links), children first."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) < 2:
            continue
        children.setdefault(int(rest[1]), []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out


def _keeper_main(
    argv: list[str],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    in_fd: int,
    out_fd: int,
    ctl: int,
    status: int,
    parent: int,
) -> None:
    """The keeper's whole life (runs in the forked process; never returns)."""
    import select
    import struct

    me = os.getpid()
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    for sig in _KEEPER_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.setpgid(0, 0)  # a kill of the wrap's group does not take the keeper with it
    except OSError:
        pass
    if _prctl is not None:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    low = 3
    for fd in sorted({in_fd, out_fd, ctl, status}):  # close everything else we inherited
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, _max_fd())
    try:  # the client's pipes are not ours to hold
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass
    if os.getppid() != parent:
        os._exit(0)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def child_setup() -> None:  # in the server, between fork and exec
        for sig in _KEEPER_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != me:
                os._exit(137)

    try:
        server = subprocess.Popen(
            argv,
            stdin=in_fd,
            stdout=out_fd,
            stderr=None,
            env=env,
            cwd=cwd,
            close_fds=True,
            process_group=0,
            preexec_fn=child_setup,
        )
    except OSError as exc:
        msg = (exc.strerror or str(exc)).encode("utf-8", "replace")[:200]
        os.write(status, b"E" + struct.pack("!i", exc.errno or 0) + msg)
        os._exit(0)
    except BaseException as exc:  # SubprocessError and the like
        os.write(status, b"E" + struct.pack("!i", 5) + str(exc).encode("utf-8", "replace")[:200])
        os._exit(0)
    spid = server.pid
    os.close(in_fd)
    os.close(out_fd)
    os.write(status, b"P" + struct.pack("!i", spid))
    reaped = False

    def reap() -> None:
        nonlocal reaped
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == spid and not reaped:
                reaped = True
                try:
                    os.write(status, b"X" + struct.pack("!i", os.waitstatus_to_exitcode(wstatus)))
                except OSError:
                    pass

    def deliver(sig: int) -> None:
        if not reaped:
            try:
                os.killpg(spid, sig)  # unreaped: the group id is still ours
            except OSError:
                pass
        for pid in _subtree(me):
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def sweep() -> None:
        for _ in range(2000):
            deliver(signal.SIGKILL)
            reap()
            if reaped and not _subtree(me):
                return
            select.select([wake_r], [], [], 0.005)

    while True:
        try:
            ready, _, _ = select.select([ctl, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            reap()
        if ctl in ready:
            try:
                data = os.read(ctl, 64)
            except OSError:
                data = b""
            if not data:
                sweep()
                os._exit(0)
            for signum in data:
                deliver(signum)
                if signum == signal.SIGKILL:
                    reap()


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 65536)
    except (ValueError, OSError):
        return 1024
