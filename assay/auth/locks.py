"""One login at a time across the wraps of a client (the shell; docs/auth.md, "Logging in from
wrap").

A lock is a file in the token directory held with ``flock`` (the kernel lets go of it when its
process ends, however it ends); it records the holder's pid and what it does, so that a wrap
that waits can say for whom. Waiting is bounded: :func:`held` raises :class:`LockTimeout` (one
line) when the lock is not free in time. Two locks are used: one per server URL (a refresh or a
login of that server: the other wraps of it then reuse what the holder stored) and one for the
browser (one login window at a time).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["POLL", "LockTimeout", "held"]

POLL = 0.05  # seconds between two tries of a held lock


class LockTimeout(Exception):
    """The lock stayed held past the wait; ``str()`` is one line naming its holder."""


def _open(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), 0o600)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise OSError(errno.EPERM, "not a regular file of this user", path)
    return fd


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace")
    except OSError:
        return "another process"
    pid, _, what = text.strip().partition(" ")
    return f"process {pid} ({what})" if pid.isdigit() else "another process"


@asynccontextmanager
async def held(path: str, *, wait: float, what: str) -> AsyncIterator[None]:
    """Hold the lock file ``path`` for the block; wait for it at most ``wait`` seconds."""
    try:
        fd = _open(path)
    except OSError as exc:
        raise LockTimeout(f"cannot use the lock file {path} ({exc.strerror or exc})") from None
    try:
        deadline = trio.current_time() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if trio.current_time() >= deadline:
                    raise LockTimeout(
                        f"{_holder(fd)} held {os.path.basename(path)} for longer than {wait:g} s"
                    ) from None
                await trio.sleep(POLL)
        try:  # who holds it, for the others' message: a note, not needed for the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {what[:200]}\n".encode(), 0)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # lets go of the lock, if held
