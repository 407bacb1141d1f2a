"""The wrap shell's I/O ends: straight pipe reads and writes (:class:`_Pipe`), the fail-closed
record sinks (:class:`RecordSink`) and our own stdio. :mod:`assay.shells.stdio.relay` uses them and
re-exports the public names (docs/architecture.md, "One frame's way through wrap")."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import IO, cast

import trio

from assay.proc import ByteReceiver, ByteSender

__all__ = ["RecordSink", "RelayFatal", "bytes_of", "open_stdio"]


def bytes_of(data: bytes | bytearray) -> bytes:
    """What a stream read returned, as bytes (pipes give bytes; other streams may not)."""
    return data if isinstance(data, bytes) else bytes(data)


class _Pipe:
    """Reads and writes on a trio stream; on a pipe (an ``FdStream``) straight through
    non-blocking ``os.read``/``os.write``, waiting with ``wait_readable``/``wait_writable``
    only when the pipe is not ready. That saves the scheduler pass a stream call makes before
    every read and write (two per direction of a round trip). A cancelled scope is still
    noticed at every call, and a pipe that is always ready yields to the other tasks every
    few calls, so no task starves. Other streams (memory streams of library callers) go
    through their own methods."""

    __slots__ = ("stream", "fd", "_streak")

    YIELD_EVERY = 16

    def __init__(self, stream: ByteReceiver | ByteSender) -> None:
        self.stream = stream
        self.fd: int | None = stream.fileno() if isinstance(stream, trio.lowlevel.FdStream) else None
        self._streak = 0

    async def _pace(self) -> None:
        self._streak += 1
        if self._streak >= self.YIELD_EVERY:
            self._streak = 0
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def read(self, size: int) -> bytes:
        fd = self.fd
        if fd is None:
            return bytes_of(await cast(ByteReceiver, self.stream).receive_some(size))
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                data = os.read(fd, size)
            except BlockingIOError:
                self._streak = 0
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the pipe was closed") from None
                raise trio.BrokenResourceError(str(exc)) from exc
            await self._pace()
            return data

    async def write(self, data: bytes) -> None:
        fd = self.fd
        if fd is None:
            await cast(ByteSender, self.stream).send_all(data)
            return
        await trio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(data)
        sent = 0
        while sent < len(data):
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                self._streak = 0
                await trio.lowlevel.wait_writable(fd)
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the pipe was closed") from None
                raise trio.BrokenResourceError(str(exc)) from exc
        await self._pace()


class RelayFatal(Exception):
    """A record could not be written whole (the run stops, exit 2)."""


class RecordSink:
    """An open output that records are appended to, fail-closed: a record is written whole
    before the frame it describes has any effect. Short writes are retried; a write that cannot
    complete raises :class:`RelayFatal`, and a partial record is cut off again (regular files),
    so a log never ends in a fragment."""

    def __init__(self, name: str, fh: IO[bytes]) -> None:
        self.name = name
        self._fh = fh
        self._fd = fh.fileno()

    def write(self, data: bytes) -> None:
        done = 0
        try:
            view = memoryview(data)
            while done < len(data):
                n = os.write(self._fd, view[done:])
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                done += n
        except OSError as exc:
            if done:
                self._cut(done)
            raise RelayFatal(f"cannot write {self.name}: {exc.strerror or exc}") from None

    def _cut(self, written: int) -> None:
        try:
            st = os.fstat(self._fd)
            if stat.S_ISREG(st.st_mode):
                os.ftruncate(self._fd, max(0, st.st_size - written))
        except OSError:
            pass

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass


async def open_stdio() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream, Callable[[], None]]:
    """Our own stdin/stdout as trio streams, and a function restoring their blocking flags."""
    saved = {}
    for fd in (0, 1):
        try:
            saved[fd] = os.get_blocking(fd)
        except OSError:
            pass
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))

    def restore() -> None:
        for fd, blocking in saved.items():
            try:
                os.set_blocking(fd, blocking)
            except OSError:
                pass

    return stdin, stdout, restore
