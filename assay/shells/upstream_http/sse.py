"""A bounded Server-Sent Events decoder (sans-IO): docs/remote.md, "Answers and streams".

Feed the bytes of a ``text/event-stream`` body, get its events. It follows the event-stream
format of the HTML standard: lines end at CRLF, LF or CR; ``data`` lines are joined with LF;
``event`` names the type (default ``message``); ``id`` sets the id the next events carry (a
value with NUL is ignored), and a blank line makes it the stream's :attr:`SSEDecoder.last_id`
(what a client resuming the stream sends as ``Last-Event-ID``: an event cut off before its
blank line never counts as received); ``retry`` with ASCII digits only sets
:attr:`SSEDecoder.retry_ms`; comments (``:``) are dropped; a blank line dispatches; a BOM at the
start is dropped; an event without data is not dispatched.

Memory is bounded by ``cap``: an event whose lines add up to more than ``cap`` bytes is never
held whole. The decoder drops the rest of it up to the blank line that ends it and reports
:class:`TooLong` once, in the place of the event. An event that never ends is a line that is too
long. A line is kept as the pieces it came in and joined once, at its end (a ``data`` line
without its field name): a large event is copied once, not once per piece.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Event", "SSEDecoder", "TooLong"]

_EOL = re.compile(rb"[\r\n]")


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    data: bytes
    id: str | None


@dataclass(frozen=True, slots=True)
class TooLong:
    """An event longer than the cap (its bytes are dropped); ``nbytes`` counted so far."""

    nbytes: int


class SSEDecoder:
    __slots__ = (
        "cap",
        "_parts",
        "_plen",
        "_data",
        "_size",
        "_type",
        "_has_data",
        "_dropping",
        "_dropped",
        "last_id",
        "_id",
        "retry_ms",
        "_started",
        "_skip_lf",
        "_partial",
    )

    def __init__(self, cap: int, last_id: str | None = None, retry_ms: int | None = None) -> None:
        self.cap = cap
        self._parts: list[bytes] = []  # the current, unterminated line, as it came
        self._plen = 0  # its length
        self._data: list[bytes] = []
        self._size = 0  # bytes of the current event so far
        self._type = ""
        self._has_data = False
        self._dropping = False
        self._dropped = 0
        self.last_id = last_id  # the id of the last event dispatched (or given: a resumed stream)
        self._id = last_id  # the last event id buffer: what the next dispatch makes last_id
        self.retry_ms = retry_ms  # the server's reconnection time, in milliseconds
        self._started = False
        self._skip_lf = False  # the last chunk ended with CR: an LF first in the next is its end
        self._partial = False  # the current line has bytes (held or dropped)

    @property
    def holding(self) -> int:
        """Bytes held for the event being read."""
        return self._plen + self._size

    def feed(self, chunk: bytes) -> list[Event | TooLong]:
        out: list[Event | TooLong] = []
        if not chunk:
            return out
        if not self._started:
            self._started = True
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
        pos = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                pos = 1
        n = len(chunk)
        search = _EOL.search
        while pos < n:
            m = search(chunk, pos)
            end = n if m is None else m.start()
            if end > pos:
                self._partial = True
                if not self._dropping:
                    if self._size + self._plen + (end - pos) > self.cap:
                        self._dropping = True
                        self._dropped = self._size + self._plen
                        self._parts = []
                        self._plen = 0
                        self._data = []
                        self._size = 0
                    else:
                        self._parts.append(chunk[pos:end])  # the whole chunk itself when no line ends in it
                        self._plen += end - pos
                if self._dropping:
                    self._dropped += end - pos
            if m is None:
                break
            nxt = end + 1
            if chunk[end] == 13:  # CR: CRLF is one end of line
                if nxt < n:
                    if chunk[nxt] == 10:
                        nxt += 1
                else:
                    self._skip_lf = True
            blank = not self._partial
            self._partial = False
            if self._dropping:
                if blank:
                    self.last_id = self._id
                    out.append(TooLong(self._dropped))
                    self._dropping = False
                    self._dropped = 0
                    self._reset()
            else:
                parts, self._parts, self._plen = self._parts, [], 0
                self._line(parts, out)
            pos = nxt
        return out

    def _line(self, parts: list[bytes], out: list[Event | TooLong]) -> None:
        head = parts[0] if parts else b""
        taken = 1
        while len(head) < 6 and taken < len(parts):  # enough to see "data:" and its space
            head += parts[taken]
            taken += 1
        if head.startswith(b"data:") and len(parts) > taken:  # a long data line: joined once, without its name
            skip = 6 if head[5:6] == b" " else 5
            value = b"".join([head[skip:], *parts[taken:]])
            self._data.append(value)
            self._has_data = True
            self._size += len(value) + 1
            return
        line = head if taken == len(parts) else b"".join([head, *parts[taken:]])
        if not line:
            self.last_id = self._id
            if self._has_data:
                data = b"\n".join(self._data)
                out.append(Event(self._type or "message", data, self.last_id))
            self._reset()
            return
        if line[:1] == b":":
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
            self._size += len(value) + 1
        elif name == b"event":
            self._type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit() and value.isascii():
                self.retry_ms = int(value) if len(value) <= 9 else 10**9

    def _reset(self) -> None:
        self._data = []
        self._size = 0
        self._type = ""
        self._has_data = False
