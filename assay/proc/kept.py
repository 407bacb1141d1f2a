"""A relay server started under the keeper (:mod:`assay.proc.keeper`): the parent's side of
its pipes, and how the run's processes are stopped (docs/wrap.md, "The keeper")."""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from assay.proc.child import Child
from assay.proc.handle import ChildHandle
from assay.proc.keeper import Forked, fork_keeper, keeper_available
from assay.proc.spawning import INHERIT, PIPE, ProgramNotFound, SpawnError, _candidate_exists, spawn

__all__ = ["KeptChild", "adopt_kept", "keeper_available", "spawn_kept"]


class KeptChild:
    """A server started under a keeper (see above); the interface of :class:`Child` that the
    relay uses. ``pid`` is the server's; ``returncode`` follows ``subprocess``."""

    def __init__(
        self,
        keeper_pid: int,
        server_pid: int,
        ctl: int,
        status: int,
        stdin: trio.lowlevel.FdStream,
        stdout: trio.lowlevel.FdStream,
    ) -> None:
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

    if not keeper_available():
        return spawn(
            argv, stdin=PIPE, stdout=PIPE, stderr=INHERIT, env=env, cwd=cwd, own_group=True, die_with_parent=True
        )
    args = [os.fspath(a) for a in argv]
    return adopt_kept(fork_keeper(args, dict(env) if env is not None else None, cwd), cwd=cwd)


def adopt_kept(forked: Forked, *, cwd: str | os.PathLike[str] | None = None) -> KeptChild:
    """The :class:`KeptChild` of a keeper :func:`~assay.proc.keeper.fork_keeper` started (with
    ``cwd``), from the trio thread; or, when the server could not be started,
    :class:`ProgramNotFound` / :class:`SpawnError` (the keeper reaped)."""
    import struct

    if forked.taken:
        raise RuntimeError("this keeper was taken over or abandoned already")
    pid, in_w, out_r, ctl_w, st_r = forked.pid, forked.stdin, forked.stdout, forked.ctl, forked.status
    first, args, env = forked.first, forked.args, forked.env
    if first[:1] != b"P" or len(first) < 5:
        forked.abandon()
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
    forked.taken = True
    server_pid = struct.unpack("!i", first[1:5])[0]
    os.set_blocking(st_r, False)
    child = KeptChild(pid, server_pid, ctl_w, st_r, trio.lowlevel.FdStream(in_w), trio.lowlevel.FdStream(out_r))
    if first[5:6] == b"X" and len(first) >= 10:  # it exited already: both messages came in one read
        child._returncode = struct.unpack("!i", first[6:10])[0]
        child._exited = True
    return child


if TYPE_CHECKING:  # mypy checks that both kinds of child are what the relay takes

    def _both_are_handles(kept: KeptChild, child: Child) -> tuple[ChildHandle, ChildHandle]:
        return kept, child
