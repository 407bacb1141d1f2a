"""The client's side of a wrap run: its bytes split into lines, lines admitted (long ones off
the event loop, :class:`~assay.session.effects.AdmitLine`), judged in order, and the forwards
gathered (sans-IO).

docs/wrap.md, "Client frames", says how lines are split and admitted; "One-run outputs and
session reports" when the run becomes a session.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from typing import Any

from assay.session import records, replies
from assay.session.admission import DEFAULT_MAX_FRAME_BYTES, Admitted, LineSplitter, Rejected, admit, admit_region
from assay.session.effects import AdmitLine, Effect, StartSession, ToServer, Warn
from assay.session.ledger import Ledger

__all__ = ["BIG_CLIENT_LINE", "ClientSide", "Reading", "Start"]

BIG_CLIENT_LINE = 1 << 20  # client lines at least this long are admitted off the event loop

Judge = Callable[[dict[str, Any], list[Effect], "bytes | None"], bool]


class Reading(enum.Enum):
    """Where the client's stream is."""

    LINES = "lines"  # bytes are taken
    ADMITTING = "admitting"  # a long line is being admitted off the loop: no bytes until its verdict
    ADMITTING_AT_EOF = "admitting_at_eof"  # ... and the client closed meanwhile
    CLOSED = "closed"  # every line was judged after the client's end of file


class Start(enum.Enum):
    """Whether the run is a session (docs/wrap.md, "One-run outputs and session reports")."""

    WAITING = "waiting"  # no nonblank line yet
    DISCOVERING = "discovering"  # only server/discover requests so far
    SESSION = "session"  # the first other line (or the client's end) started the session
    FAILED = "failed"  # the one-run outputs could not be made: no session after all


class ClientSide:
    """Client bytes in; judged frames out, in order (``judge`` says forward or not)."""

    __slots__ = (
        "reading",
        "start",
        "ledger",
        "_judge",
        "_reply",
        "_released",
        "_splitter",
        "_fast_limit",
        "_queue",
        "_fwd",
        "_on_unread",
    )

    def __init__(
        self,
        judge: Judge,
        reply: Callable[[bytes, list[Effect]], None],
        released: list[bytes],
        ledger: Ledger,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_unread: Callable[[bytes, str], None] | None = None,
    ) -> None:
        self.reading = Reading.LINES
        self._on_unread = on_unread
        self.start = Start.WAITING
        self.ledger = ledger
        self._judge = judge
        self._reply = reply
        self._released = released  # held calls to forward in the place of the frame in hand
        self._splitter = LineSplitter(max_frame_bytes)
        self._fast_limit = min(BIG_CLIENT_LINE - 1, max_frame_bytes)
        self._queue: deque[bytes | Rejected] = deque()  # split, not yet judged (behind an AdmitLine)
        self._fwd: list[bytes] = []  # judged frames to forward, not yet emitted

    @property
    def started(self) -> bool:
        return self.start is Start.SESSION or self.start is Start.FAILED

    def receive(self, data: bytes, out: list[Effect]) -> None:
        """Bytes the client wrote: the effects of every line they complete."""
        if self.reading is not Reading.LINES:
            raise RuntimeError("receive_client_data while a line is being admitted")
        if self.start is Start.SESSION and not self._queue:
            splitter = self._splitter
            if splitter.holding:  # the line a previous read began: finish it first
                nl = data.find(b"\n") + 1
                if not nl:
                    self._queue.extend(splitter.feed(data))
                    self._process(out)
                    return
                self._queue.extend(splitter.feed(data[:nl]))
                self._process(out)
                data = data[nl:]
                if self.reading is not Reading.LINES or not data:
                    self._queue.extend(splitter.feed(data))
                    return
            cut = data.rfind(b"\n") + 1
            if cut:
                region = data if cut == len(data) else data[:cut]
                lines = region.split(b"\n")
                lines.pop()
                limit = self._fast_limit  # longer lines: the careful path (too large, or off the loop)
                if len(region) <= limit or max(map(len, lines)) <= limit:
                    frames = admit_region(region, lines)
                    if frames is not None:
                        self._fast(region, lines, frames, out)
                        if cut < len(data):
                            splitter.feed(data[cut:])  # no LF in it: held, nothing returned
                        return
        self._queue.extend(self._splitter.feed(data))
        self._process(out)

    def admitted(self, verdict: Admitted | Rejected | None, out: list[Effect], running: bool) -> bool:
        """The verdict on the line of the last :class:`AdmitLine`; the rest of the queue goes
        on. True when the client's end is due now (it closed while the line was admitted)."""
        if self.reading is Reading.LINES or self.reading is Reading.CLOSED:
            raise RuntimeError("admitted() without an AdmitLine")
        at_eof = self.reading is Reading.ADMITTING_AT_EOF
        self.reading = Reading.LINES
        if not running:
            return False
        self._judged(verdict, out)
        self._process(out)
        if self.reading is Reading.ADMITTING:
            if at_eof:
                self.reading = Reading.ADMITTING_AT_EOF
            return False
        if at_eof:
            self.reading = Reading.CLOSED
        return at_eof

    def close(self, out: list[Effect]) -> bool:
        """The client's end of file: its last unterminated line still counts. True when the
        client's end is due now (no line is being admitted)."""
        last = self._splitter.close()
        if last is not None:
            self._queue.append(last)
        if self.reading is Reading.CLOSED:
            return False
        if self.reading is Reading.LINES:
            self._process(out)
        if self.reading is not Reading.LINES:
            self.reading = Reading.ADMITTING_AT_EOF
            return False
        self.reading = Reading.CLOSED
        return True

    def end(self, out: list[Effect]) -> None:
        """The client's end is taken: an empty client stream is a session too."""
        if self.start is Start.WAITING:
            out.append(StartSession())
            self.begin()

    def begin(self) -> None:
        """The run is a session from now on; frame counts cover the session only."""
        self.start = Start.SESSION
        self.ledger.begin()

    def _process(self, out: list[Effect]) -> None:
        """Judge queued lines in order; pause at a long one (:class:`AdmitLine`)."""
        queue = self._queue
        while queue:
            item = queue.popleft()
            if isinstance(item, bytes):
                line = item
                if len(line) >= BIG_CLIENT_LINE:
                    self._flush_forwards(out)
                    self.reading = Reading.ADMITTING
                    out.append(AdmitLine(line))
                    return
                self._judged(admit(line), out)
            else:
                self._judged(item, out)
        self._flush_forwards(out)

    def _flush_forwards(self, out: list[Effect]) -> None:
        fwd = self._fwd
        if fwd:
            out.append(ToServer(b"".join(fwd)))
            fwd.clear()  # in place: callers may hold the list

    def _judged(self, item: Admitted | Rejected | None, out: list[Effect]) -> None:
        """The effects of one admitted or rejected line (None: a blank line, ignored). The
        first nonblank line that is not a ``server/discover`` request (rejected lines
        included) starts the session, just before it is handled."""
        if item is None:
            return
        if self.start is not Start.SESSION and self.start is not Start.FAILED:
            if not (isinstance(item, Admitted) and item.frame.get("method") == "server/discover"):
                self._flush_forwards(out)
                out.append(StartSession())
                self.begin()
            else:
                self.start = Start.DISCOVERING
        if isinstance(item, Rejected):
            ledger = self.ledger
            ledger.rejected += 1
            self._reply(replies.rejection_reply(item.reason), out)
            out.append(Warn(records.rejection_warning(item.reason)))
            if self._on_unread is not None:
                self._on_unread(item.raw, item.reason)
            if ledger.receipting:
                ledger.receipt_rejected(item, out)
            return
        if self._judge(item.frame, out, item.raw):
            self._fwd.append(item.raw)
        elif self._released:  # an answer accepted held calls: they go now, in this order
            self._fwd.extend(line + b"\n" for line in self._released)
            self._released.clear()

    def _fast(self, region: bytes, lines: list[bytes], frames: list[dict[str, Any]], out: list[Effect]) -> None:
        """A whole read of admitted frames (the usual case, in a session): one judgement per
        frame, and the region forwarded as it is when every frame goes through. Records and
        replies come out frame by frame; the shell writes a list's records before any of its
        bytes."""
        judge = self._judge
        kept: list[bytes] | None = None
        released = self._released
        for i, frame in enumerate(frames):
            if judge(frame, out, lines[i]):
                if kept is not None:
                    kept.append(lines[i])
            else:
                if kept is None:
                    kept = lines[:i]
                if released:  # an answer accepted held calls: they go where the answer was
                    kept.extend(released)
                    released.clear()
        if kept is None:
            out.append(ToServer(region))
        elif kept:
            kept.append(b"")
            out.append(ToServer(b"\n".join(kept)))
