"""A running child and how it ends: waiting on a pidfd, signals to it or its group, and
terminate -> kill -> reap (docs/architecture.md, "Child processes")."""

from __future__ import annotations

import os
import signal
import subprocess

import trio

__all__ = ["Child"]


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
