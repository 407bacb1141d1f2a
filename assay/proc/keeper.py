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

import os
import signal
import subprocess
from collections.abc import Mapping

from assay.proc.spawning import _PR_SET_PDEATHSIG, _prctl

__all__: list[str] = []  # the keeper is started by assay.proc.kept.spawn_kept only

_PR_SET_CHILD_SUBREAPER = 36
_KEEPER_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)


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
        rest = stat[stat.rfind(b")") + 2:].split()
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
            argv, stdin=in_fd, stdout=out_fd, stderr=None, env=env, cwd=cwd,
            close_fds=True, process_group=0, preexec_fn=child_setup,
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
