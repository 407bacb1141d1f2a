"""The one place that starts child processes.

Everything in assay that runs a program (preflight probes, the wrap relay, tests' helpers if
they like) goes through this module, so deadlines, output caps and terminate -> kill -> reap
come from one trio concurrency model (docs/library.md, "Running child processes";
docs/architecture.md, "Child processes").

Why not ``trio.lowlevel.open_process``: it calls ``Popen`` in a worker thread, and Linux ties
``PR_SET_PDEATHSIG`` to the *thread* that forked, so a relay child would be SIGKILLed when trio's
idle worker thread retires. We fork from the trio thread itself (a fork is cheap) and wait on a
pidfd, which keeps waiting cancellable without a thread per child.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trio

__all__ = [
    "Child",
    "KeptChild",
    "ProgramNotFound",
    "SpawnError",
    "BoundedResult",
    "spawn",
    "spawn_kept",
    "keeper_available",
    "run_bounded",
    "read_capped",
    "DEVNULL",
    "PIPE",
    "INHERIT",
]

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
INHERIT = None

_PR_SET_PDEATHSIG = 1


class SpawnError(OSError):
    """The program exists (or might) but could not be started."""


class ProgramNotFound(SpawnError):
    """No file to execute: ENOENT at spawn time (docs/library.md, "Running child processes")."""


def _load_prctl():
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


def _make_preexec(parent_pid: int):
    """Child-side setup between fork and exec: die with the parent (docs/wrap.md, "Lifecycle and exit status").

    The getppid() check closes the race where the parent died before prctl ran.
    """
    prctl = _prctl

    def preexec() -> None:  # runs in the forked child: no allocation-heavy work
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent_pid:
                os._exit(137)

    return preexec


class Child:
    """A running child process with trio streams for the pipes it was given.

    ``returncode`` follows ``subprocess``: negative -N when the child died of signal N.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None,
        own_group: bool,
    ) -> None:
        self._popen = popen
        self.pid: int = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.own_group = own_group
        self._wait_lock = trio.Lock()
        self._exited = False  # exited (maybe not yet reaped)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):  # pragma: no cover - kernels without pidfd
            self._pidfd = None

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait_exit(self) -> None:
        """Wait until the child has exited, *without* reaping it.

        While the exited child is an unreaped zombie its pid, and so its process group id,
        cannot be reused: the safe moment to sweep the group (:meth:`signal_group`).
        """
        async with self._wait_lock:
            if self._popen.returncode is not None or self._exited:
                return
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                while not self._has_exited():  # pragma: no cover - polling fallback without pidfd
                    await trio.sleep(0.02)
            self._exited = True

    def _has_exited(self) -> bool:  # pragma: no cover - used only without pidfd
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    async def wait(self) -> int:
        """Wait for the child to exit and reap it. Cancellable; safe from several tasks."""
        await self.wait_exit()
        if self._popen.returncode is None:
            self._popen.wait()  # it has exited: this only collects the status
        self._close_pidfd()
        return self._popen.returncode

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            trio.lowlevel.notify_closing(fd)
            os.close(fd)

    def send_signal(self, sig: int) -> None:
        """Signal the direct child, if it has not been reaped yet."""
        if self._popen.returncode is None:
            try:
                if self._pidfd is not None:
                    signal.pidfd_send_signal(self._pidfd, sig)
                else:  # pragma: no cover
                    os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def signal_group(self, sig: int) -> None:
        """Signal the child's whole process group (only if it was spawned in its own group).

        Only while the leader is unreaped: after that its pid (the group id) could be reused.
        """
        if not self.own_group:
            self.send_signal(sig)
            return
        if self._popen.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def stop(self, *, term_grace: float = 0.5, group: bool | None = None) -> int:
        """SIGTERM, then SIGKILL after ``term_grace`` seconds, then reap.

        With ``group`` (default: when spawned in its own group) the signals go to the whole
        process group, and once the leader has exited whatever is left of the group is
        SIGKILLed before the leader is reaped, so no descendant outlives the stop (docs/wrap.md,
        "Lifecycle and exit status").
        Runs shielded: a stop that was started is finished, even while the caller is being
        cancelled, so no child is left behind.
        """
        use_group = self.own_group if group is None else group
        sig = self.signal_group if use_group else self.send_signal
        with trio.CancelScope(shield=True):
            if self.returncode is None:
                exited = False
                if not self._exited:
                    sig(signal.SIGTERM)
                    with trio.move_on_after(term_grace):
                        await self.wait_exit()
                        exited = True
                    if not exited:
                        sig(signal.SIGKILL)
                await self.wait_exit()
                if use_group:
                    self.signal_group(signal.SIGKILL)  # the zombie leader still holds the group id
            returncode = await self.wait()
        return returncode

    async def kill_and_reap(self) -> int:
        """SIGKILL the direct child and reap it, shielded."""
        with trio.CancelScope(shield=True):
            self.kill()
            returncode = await self.wait()
        return returncode

    async def aclose_streams(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                with trio.CancelScope(shield=True):
                    await stream.aclose()


def _candidate_exists(program: str, env: Mapping[str, str] | None) -> bool:
    """Is there a file that exec would have tried for ``program`` (PATH search for bare names)?"""
    if os.sep in program:
        return os.path.isfile(program)
    return any(os.path.isfile(os.path.join(d, program)) for d in os.get_exec_path(env))


def _stream_arg(kind, name: str, to_child: bool):
    """Return (popen_arg, parent_fd_or_None, child_fd_to_close_or_None)."""
    if kind is PIPE:
        r, w = os.pipe2(os.O_CLOEXEC)
        if to_child:
            return r, w, r
        return w, r, w
    if kind is None or kind is DEVNULL or isinstance(kind, int):
        return kind, None, None
    raise ValueError(f"unsupported {name} disposition: {kind!r}")


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    stdin=PIPE,
    stdout=PIPE,
    stderr=PIPE,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    own_group: bool = False,
    die_with_parent: bool = False,
) -> Child:
    """Start ``argv`` and return a :class:`Child`. Must be called from the trio thread.

    ``own_group`` puts the child in a new process group (so a stop can reach its descendants);
    ``die_with_parent`` asks Linux to SIGKILL it when this process dies (docs/library.md,
    "Running child processes").
    Raises :class:`ProgramNotFound` for ENOENT and :class:`SpawnError` for any other failure.
    """
    opened: list[int] = []
    to_close_after: list[int] = []
    try:
        a_in, p_in, c_in = _stream_arg(stdin, "stdin", True)
        for fd in (p_in, c_in):
            if fd is not None:
                opened.append(fd)
        a_out, p_out, c_out = _stream_arg(stdout, "stdout", False)
        for fd in (p_out, c_out):
            if fd is not None:
                opened.append(fd)
        a_err, p_err, c_err = _stream_arg(stderr, "stderr", False)
        for fd in (p_err, c_err):
            if fd is not None:
                opened.append(fd)
        to_close_after = [fd for fd in (c_in, c_out, c_err) if fd is not None]
        kwargs: dict = {}
        if own_group:
            kwargs["process_group"] = 0
        if die_with_parent:
            kwargs["preexec_fn"] = _make_preexec(os.getpid())
        try:
            popen = subprocess.Popen(
                [os.fspath(a) for a in argv],
                stdin=a_in,
                stdout=a_out,
                stderr=a_err,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                close_fds=True,
                **kwargs,
            )
        except FileNotFoundError as exc:
            program = os.fspath(argv[0])
            if cwd is not None and not os.path.isdir(cwd):
                raise SpawnError(exc.errno, exc.strerror, os.fspath(cwd)) from None
            if _candidate_exists(program, env):
                # The file is there but exec said ENOENT: its #! interpreter is missing
                # (docs/library.md, "Running child processes"). That is "cannot start", not "not found".
                raise SpawnError(errno.ENOEXEC, "cannot execute (interpreter not found)", program) from None
            raise ProgramNotFound(exc.errno, exc.strerror, program) from None
        except OSError as exc:
            raise SpawnError(exc.errno or errno.EIO, exc.strerror or str(exc), os.fspath(argv[0])) from None
        except subprocess.SubprocessError as exc:
            raise SpawnError(errno.EIO, str(exc), os.fspath(argv[0])) from None
    except BaseException:
        for fd in opened:
            try:
                os.close(fd)
            except OSError:
                pass
        raise
    for fd in to_close_after:
        os.close(fd)
    return Child(
        popen,
        trio.lowlevel.FdStream(p_in) if p_in is not None else None,
        trio.lowlevel.FdStream(p_out) if p_out is not None else None,
        trio.lowlevel.FdStream(p_err) if p_err is not None else None,
        own_group,
    )


async def read_capped(stream: trio.abc.ReceiveStream, cap: int, sink: bytearray) -> bool:
    """Read ``stream`` into ``sink`` until EOF or ``cap`` bytes, then close it.

    Closing the read end at the cap means a child that keeps writing gets EPIPE/SIGPIPE instead
    of blocking on a full pipe. Returns True when the cap was hit (output truncated).
    """
    truncated = False
    try:
        while len(sink) < cap:
            chunk = await stream.receive_some(max(4096, min(65536, cap - len(sink))))
            if not chunk:
                break
            room = cap - len(sink)
            if len(chunk) > room:
                sink += chunk[:room]
                truncated = True
                break
            sink += chunk
        else:
            truncated = True
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
    return truncated


@dataclass(frozen=True)
class BoundedResult:
    """What a bounded run produced. ``returncode`` is None exactly when ``timed_out``."""

    pid: int
    timed_out: bool
    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool

    @property
    def exit_code(self) -> int | None:
        """The exit status with a death by signal counted as 1 (docs/library.md, "Running child processes")."""
        if self.returncode is None:
            return None
        return 1 if self.returncode < 0 else self.returncode


async def run_bounded(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    stdout_cap: int,
    stderr_cap: int,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> BoundedResult:
    """Run a child with stdin at EOF, both outputs piped and capped, under a wall-clock deadline.

    The run completes only when the child exited *and* both readers finished before the
    deadline (docs/library.md, "Running child processes"); otherwise the direct child is SIGKILLed and reaped and the
    result says ``timed_out``. Raises :class:`ProgramNotFound` / :class:`SpawnError` on spawn.
    """
    deadline = trio.current_time() + timeout
    child = spawn(argv, stdin=DEVNULL, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd)
    out, err = bytearray(), bytearray()
    flags = {"out": False, "err": False}
    completed = False
    try:
        with trio.move_on_at(deadline):

            async def pump(name: str, stream, sink: bytearray, cap: int) -> None:
                flags[name] = await read_capped(stream, cap, sink)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, "out", child.stdout, out, stdout_cap)
                nursery.start_soon(pump, "err", child.stderr, err, stderr_cap)
                nursery.start_soon(child.wait)
            completed = True
    finally:
        if not completed:
            await child.kill_and_reap()
        await child.aclose_streams()
    return BoundedResult(
        pid=child.pid,
        timed_out=not completed,
        returncode=child.returncode if completed else None,
        stdout=bytes(out),
        stderr=bytes(err),
        stdout_truncated=flags["out"],
        stderr_truncated=flags["err"],
    )


# ----------------------------------------------------------------------------------------------
# the keeper: no process of a wrap run outlives it (docs/wrap.md, "Lifecycle")
#
# A relay child is not started by us directly. We fork a small *keeper* process first (no exec:
# a fork of this interpreter, done while only the trio thread runs), which makes itself a child
# subreaper (PR_SET_CHILD_SUBREAPER) and starts the server in a new process group. Every
# descendant of the server that is orphaned (a double fork, a `setsid` daemon) is re-parented to
# the keeper instead of init, so the keeper's process subtree is exactly "every process of the
# run". The keeper holds the read end of a control pipe: one byte is a signal number to deliver
# to the server's group and the whole subtree; end of file (we closed it, or we died, even by
# SIGKILL) means: SIGKILL the whole subtree until nothing is left, then exit. The keeper reaps the
# server and reports its status on a second pipe; only the keeper ever signals by pid, and it
# knows when the server has been reaped, so a stale pid or group id is never signalled.

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


def _keeper_main(argv: list[str], env, cwd, in_fd: int, out_fd: int, ctl: int, status: int, parent: int) -> None:
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


class KeptChild:
    """A server started under a keeper (see above); the interface of :class:`Child` that the
    relay uses. ``pid`` is the server's; ``returncode`` follows ``subprocess``."""

    def __init__(self, keeper_pid: int, server_pid: int, ctl: int, status: int,
                 stdin: trio.lowlevel.FdStream, stdout: trio.lowlevel.FdStream) -> None:
        self.keeper_pid = keeper_pid
        self.pid = server_pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = None
        self.own_group = True
        self._ctl: int | None = ctl
        self._status = status
        self._returncode: int | None = None
        self._exited = False
        self._wait_lock = trio.Lock()
        self._keeper_done = False

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait_exit(self) -> None:
        """Wait until the keeper reports the server's exit (or the keeper is gone)."""
        import struct

        async with self._wait_lock:
            while not self._exited:
                await trio.lowlevel.wait_readable(self._status)
                try:
                    data = os.read(self._status, 64)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data[:1] == b"X" and len(data) >= 5:
                    self._returncode = struct.unpack("!i", data[1:5])[0]
                self._exited = True  # "X", or EOF: the keeper died, the server with it

    async def wait(self) -> int | None:
        await self.wait_exit()
        return self._returncode

    def signal_group(self, sig: int) -> None:
        """Deliver ``sig`` to the server's group and every process of the run."""
        if self._ctl is None:
            return
        try:
            os.write(self._ctl, bytes([int(sig)]))
        except OSError:
            pass

    send_signal = signal_group

    def kill(self) -> None:
        self.signal_group(signal.SIGKILL)

    async def stop(self, *, term_grace: float = 0.5, group: bool | None = None) -> int | None:
        """SIGTERM, SIGKILL after ``term_grace``, then the keeper kills whatever is left of the
        run (every descendant, in the group or not) and exits. Shielded, like :meth:`Child.stop`."""
        with trio.CancelScope(shield=True):
            if not self._exited:
                self.signal_group(signal.SIGTERM)
                with trio.move_on_after(term_grace):
                    await self.wait_exit()
                if not self._exited:
                    self.signal_group(signal.SIGKILL)
                    with trio.move_on_after(10):
                        await self.wait_exit()
            await self._end_keeper()
        return self._returncode

    async def _end_keeper(self) -> None:
        if self._keeper_done:
            return
        self._keeper_done = True
        if self._ctl is not None:
            os.close(self._ctl)  # end of file: the keeper sweeps the run and exits
            self._ctl = None
        try:
            pidfd = os.pidfd_open(self.keeper_pid)
        except OSError:
            pidfd = None
        if pidfd is not None:
            with trio.move_on_after(10):
                await trio.lowlevel.wait_readable(pidfd)
            trio.lowlevel.notify_closing(pidfd)
            os.close(pidfd)
        try:
            os.waitpid(self.keeper_pid, os.WNOHANG)
        except ChildProcessError:
            pass
        trio.lowlevel.notify_closing(self._status)
        os.close(self._status)

    async def kill_and_reap(self) -> int | None:
        with trio.CancelScope(shield=True):
            self.kill()
            returncode = await self.stop(term_grace=0)
        return returncode

    async def aclose_streams(self) -> None:
        for stream in (self.stdin, self.stdout):
            if stream is not None:
                with trio.CancelScope(shield=True):
                    await stream.aclose()


def keeper_available() -> bool:
    """The keeper needs Linux's child subreaper; elsewhere :func:`spawn_kept` falls back."""
    return _prctl is not None and hasattr(os, "pidfd_open")


def spawn_kept(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> KeptChild | Child:
    """Start a relay server (stdin and stdout piped, stderr inherited) under a keeper, so that
    no process of the run outlives us on any path, SIGKILL of this process included. Must be
    called from the trio thread while it is the only thread. Where the keeper is not available
    (not Linux), falls back to :func:`spawn` with its own group and the parent-death signal.
    Raises :class:`ProgramNotFound` / :class:`SpawnError` like :func:`spawn`.
    """
    import struct

    if not keeper_available():
        return spawn(argv, stdin=PIPE, stdout=PIPE, stderr=INHERIT, env=env, cwd=cwd,
                     own_group=True, die_with_parent=True)
    args = [os.fspath(a) for a in argv]
    child_env = dict(env) if env is not None else None
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
            _keeper_main(args, child_env, cwd, in_r, out_w, ctl_r, st_w, parent)
        finally:
            os._exit(70)
    for fd in (in_r, out_w, ctl_r, st_w):
        os.close(fd)
    first = b""
    try:
        first = os.read(st_r, 512)  # "P"+pid, or "E"+errno+message (the keeper writes it at once)
    except OSError:
        pass
    if first[:1] != b"P" or len(first) < 5:
        for fd in (in_w, out_r, ctl_w, st_r):
            os.close(fd)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        err = struct.unpack("!i", first[1:5])[0] if first[:1] == b"E" and len(first) >= 5 else errno.EIO
        text = first[5:].decode("utf-8", "replace") or os.strerror(err)
        program = args[0] if args else ""
        if err == errno.ENOENT:
            if cwd is not None and not os.path.isdir(cwd):
                raise SpawnError(err, text, os.fspath(cwd))
            if _candidate_exists(program, env):
                raise SpawnError(errno.ENOEXEC, "cannot execute (interpreter not found)", program)
            raise ProgramNotFound(err, text, program)
        raise SpawnError(err, text, program)
    server_pid = struct.unpack("!i", first[1:5])[0]
    os.set_blocking(st_r, False)
    child = KeptChild(pid, server_pid, ctl_w, st_r,
                      trio.lowlevel.FdStream(in_w), trio.lowlevel.FdStream(out_r))
    if first[5:6] == b"X" and len(first) >= 10:  # it exited already: both messages came in one read
        child._returncode = struct.unpack("!i", first[6:10])[0]
        child._exited = True
    return child
