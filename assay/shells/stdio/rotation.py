"""A decision or audit log that rotates by size (docs/wrap.md, "Log rotation"): the shell's
append sink for a regular file, safe with every other wrap appending to the same file.

Several wraps of one client write the same log files (protect names them per client and
server), each through its own ``O_APPEND`` descriptor, so each record lands whole at the end of
the file it is written to. The rules that keep every record in exactly one file:

- before each write a writer checks (one ``lstat``) that the log's path still names the file it
  holds; if not (another wrap rotated it, or it was deleted), it opens the path again, creating
  the file, and checks again;
- the wrap whose write would take the file past the limit rotates it under the file's exclusive
  ``flock`` (so two wraps never rotate at once): it checks that the path still names the file
  it holds and that the file is still full (so a file is never rotated twice), renames it to a
  free rotated name (:func:`assay.logs.rotated.rotated_name`) and opens the path again;
- a write another wrap had under way when the file was renamed lands, whole, at the end of the
  renamed file: readers read rotated files too (docs/log.md, "Following"), so it is not lost;
  that writer's next write goes into the new file.

A lock another program holds is not waited for (the trio thread never sleeps here): the record
is written into the file the writer holds and the rotation waits for a later write. Another wrap
holds the lock only while it renames the file, and then the record lands, whole, at the end of
the renamed file, as above. A path
that is a symlink, a FIFO or a device is not rotated (a plain
:class:`~assay.shells.stdio.pipes.RecordSink`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable
from typing import IO

from assay.logs.rotated import rotated_name
from assay.shells.stdio.pipes import RecordSink

__all__ = ["RotatingSink", "LogOpenError", "open_flags", "open_log"]

_TRIES = 4  # reopen/rotate rounds per write before it is written into the file held
_NAMES = 1000  # rotated names tried per second of the clock


def open_flags() -> int:
    """How an append log is opened (never blocks: a FIFO without a reader is an error)."""
    return os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC


class LogOpenError(Exception):
    """A log that cannot be opened: one line, ``str(e)``."""


def open_log(path: str, what: str, max_bytes: int) -> RecordSink:
    """Open a log for appending. Never blocks: a FIFO without a reader is an error. A regular
    file (not through a symlink) rotates at ``max_bytes`` (0: never). A regular file that
    another writer rotated away between the open and the look at the path is opened again
    (the file at the path is the log)."""
    for attempt in range(_TRIES):
        try:
            fd = os.open(path, open_flags(), 0o666)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise LogOpenError(f"cannot open {what} {path}: it is a FIFO with no reader") from None
            raise LogOpenError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
        try:
            os.set_blocking(fd, True)
            st = os.fstat(fd)
            try:
                path_st: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                path_st = None
            moved = path_st is None or (stat.S_ISREG(path_st.st_mode) and _identity(st) != _identity(path_st))
            if stat.S_ISREG(st.st_mode) and moved and attempt + 1 < _TRIES:
                os.close(fd)  # rotated away meanwhile: the file at the path is the log
                continue
            if path_st is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            fh = os.fdopen(fd, "ab", buffering=0)
        except OSError as exc:
            os.close(fd)
            raise LogOpenError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
        if max_bytes and stat.S_ISREG(path_st.st_mode) and _identity(st) == _identity(path_st):
            return RotatingSink(what, fh, path, max_bytes)
        return RecordSink(what, fh)
    raise AssertionError("not reached")  # the last attempt returns or raises


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class RotatingSink(RecordSink):
    """An append log at ``path`` that is renamed to a rotated name once a record would take it
    past ``limit`` bytes (a record larger than ``limit`` goes whole into a file of its own).
    ``clock`` gives the time of a rotated name."""

    def __init__(self, name: str, fh: IO[bytes], path: str, limit: int, clock: Callable[[], float] = time.time) -> None:
        super().__init__(name, fh)
        self.path, self.limit, self._clock = path, limit, clock
        self._identity = _identity(os.fstat(self._fd))
        self.rotated = 0  # files this sink renamed (for tests and --verbose readers)

    def write(self, data: bytes) -> None:
        may_rotate = True
        for _ in range(_TRIES):
            try:
                st: os.stat_result | None = os.lstat(self.path)
            except OSError:
                st = None
            if st is None or _identity(st) != self._identity:
                if not self._reopen():  # rotated by another wrap, or deleted: the log's file now
                    break
                continue
            if may_rotate and st.st_size and st.st_size + len(data) > self.limit:
                may_rotate = False  # one try per record
                if self._rotate(len(data)):
                    if not self._reopen():
                        break
                    continue
            RecordSink.write(self, data)
            return
        RecordSink.write(self, data)

    def _rotate(self, size: int) -> bool:
        """Rename the log to a free rotated name, if it is still the file this sink holds and
        still full. True when the path may name another file now (open it again); False when
        the exclusive lock is held elsewhere (not waited for) or nothing could be renamed."""
        if not _lock(self._fd):
            return False
        try:
            st = os.lstat(self.path)
            if _identity(st) != self._identity or not stat.S_ISREG(st.st_mode) or st.st_size + size <= self.limit:
                return True  # rotated by another wrap already (or emptied): open the path again
            when = self._clock()
            for n in range(_NAMES):
                target = rotated_name(self.path, when, n)
                if not os.path.lexists(target):
                    os.rename(self.path, target)
                    self.rotated += 1
                    return True
            return False
        except OSError:
            return False
        finally:
            _unlock(self._fd)

    def _reopen(self) -> bool:
        """Hold the file the path names now, created (with the mode of the file held) if it is
        gone. False, and this sink rotates no more, when the path is no longer a regular file
        (a symlink, a FIFO, a device) or cannot be opened: records then go on into the file
        held. A path that names yet another file by the time it is checked (another wrap
        rotated the new file at once) is opened again."""
        for _ in range(_TRIES):
            got = self._open_path()
            if got is None:
                continue
            if got < 0:
                self.limit = _NEVER
                return False
            old, self._fd = self._fh, got
            self._identity = _identity(os.fstat(got))
            self._fh = os.fdopen(got, "ab", buffering=0)
            try:
                old.close()
            except OSError:
                pass
            return True
        self.limit = _NEVER
        return False

    def _open_path(self) -> int | None:
        """A descriptor of the regular file the path names; None when the path moved on while it
        was opened; -1 when it is not a regular file or cannot be opened."""
        try:
            mode = stat.S_IMODE(os.fstat(self._fd).st_mode)
            try:
                fd = os.open(self.path, open_flags() | os.O_EXCL, 0o600)
                os.fchmod(fd, mode)  # made here: as the file it follows
            except FileExistsError:
                fd = os.open(self.path, open_flags(), 0o666)
        except OSError:
            return -1
        try:
            os.set_blocking(fd, True)
            st = os.fstat(fd)
            path_st = os.lstat(self.path)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError:
            os.close(fd)
            return -1
        if not (stat.S_ISREG(st.st_mode) and stat.S_ISREG(path_st.st_mode)):
            os.close(fd)  # a FIFO, a device or a symlink now: not ours to rotate
            return -1
        if _identity(st) != _identity(path_st):
            os.close(fd)
            return None
        return fd


_NEVER = 1 << 62  # a limit no file reaches: rotation off


def _lock(fd: int) -> bool:
    """The exclusive ``flock`` of ``fd`` if it is free now (never waited for: the trio thread
    does not block); False when it is held elsewhere or locks are not supported there."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # EWOULDBLOCK: held; anything else: no lock to be had
        return False


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass
