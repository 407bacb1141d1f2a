"""The relay's output to the client: the one queue of bytes for our stdout and its writer.

Server lines and wrap's replies go to the client in the session's order. The effect runner
queues them (:meth:`ClientOutput.push`); one task, :meth:`ClientOutput.writer`, writes what is
queued, coalesced into few writes. The usual case of server output (one read gave whole lines,
nothing else queued) is written by the server pump itself (:meth:`ClientOutput.write_inline`),
saving two task switches per answer. Each write tells the session it is under way, then done
(``client_write``), and lets the relay's timer see a deadline that moved; a client that stopped
reading ends the run (``client_lost``, performed by the relay's effect runner) and drops what
was queued. The pumps wait on :attr:`ClientOutput.progress` (docs/wrap.md, "Output to the
client"); the end of a run waits for :meth:`ClientOutput.flushed` within the session's grace
(docs/wrap.md, "Lifecycle").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import trio

from assay.proc import ByteSender
from assay.session.effects import Effect
from assay.session.session import WrapSession
from assay.shells.stdio.pipes import _Pipe

__all__ = ["ClientOutput"]


class ClientOutput:
    """The client's output of one relay run. ``perform`` is the relay's effect runner (it
    performs ``client_lost``); ``check_timer`` wakes the relay's timer after each write."""

    def __init__(
        self,
        session: WrapSession,
        stream: ByteSender,
        *,
        perform: Callable[[list[Effect]], Awaitable[None]],
        check_timer: Callable[[], None],
    ) -> None:
        self.session = session
        self.chunks: deque[bytes] = deque()  # queued, not yet taken by a write
        self.queued_bytes = 0  # the bytes in chunks
        self.queued = 0  # chunks ever queued
        self.written = 0  # chunks ever written (or given up on)
        self.wake = trio.Event()  # the writer's: something was queued
        self.progress = trio.Event()  # set (and replaced) when queued chunks were written
        self.gone = False  # the client stopped reading: nothing more is written
        self.writing = False  # a write to the client is in progress (the writer's or inline)
        self._pipe = _Pipe(stream)
        self._perform = perform
        self._check_timer = check_timer

    def push(self, data: bytes) -> None:
        """Queue ``data`` for the writer (nothing once the client is gone)."""
        if self.gone or not data:
            return
        self.chunks.append(data)
        self.queued_bytes += len(data)
        self.queued += 1
        self.wake.set()

    def progressed(self) -> None:
        """Wake the tasks waiting on :attr:`progress`."""
        self.progress.set()
        self.progress = trio.Event()

    async def writer(self) -> None:
        """The one writer of the queue (a task of the relay's nursery)."""
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            chunks = self.chunks
            while chunks and not self.writing:  # an inline write of the server pump wakes us after it
                self.writing = True
                count = len(chunks)
                data = b"".join(chunks) if count > 1 else chunks[0]
                chunks.clear()
                self.queued_bytes = 0
                if not self.gone:
                    await self._send(data)
                self.writing = False
                self.written += count
                self.progress.set()
                self.progress = trio.Event()

    async def written_up_to(self, mark: int) -> None:
        """Wait until ``mark`` chunks were written (or the client is gone)."""
        while self.written < mark and not self.gone:
            await self.progress.wait()

    async def flushed(self) -> None:
        """Wait until everything queued so far was written (or the client is gone)."""
        await self.written_up_to(self.queued)

    async def drain(self, deadline: float | None) -> None:
        """The end of a run that drains (:attr:`~assay.session.effects.Finish.drain`): wait
        until everything queued was written, the client is gone, or ``deadline`` passed (the
        session's grace; docs/wrap.md, "Lifecycle")."""
        if self.gone:
            return
        with trio.move_on_at(deadline if deadline is not None else float("inf")):
            await self.flushed()

    async def write_inline(self, data: bytes) -> None:
        """Write ``data`` from the calling task, nothing queued and no write under way (the
        caller checked): the server pump's usual case."""
        self.writing = True
        try:
            await self._send(data)
        finally:
            self.writing = False
        if self.chunks:
            self.wake.set()

    async def _send(self, data: bytes) -> None:
        """One write to the client; a client that stopped reading ends the run. The session is
        told the write is under way, then done: after the client's end, a write that waits for
        the client does not count as the server's silence."""
        session = self.session
        session.client_write(True)
        try:
            await self._pipe.write(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            session.client_write(False)
            self.gone = True
            self.chunks.clear()
            self.queued_bytes = 0
            await self._perform(session.client_lost())
        finally:
            session.client_write(False)
            self._check_timer()
