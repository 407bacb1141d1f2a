"""Bounded LF line splitting of a byte stream, sans-IO: the one framer of ``assay mcp wrap``'s
client side (docs/wrap.md, "Client frames") and of the server's stdin (docs/server.md, "Protocol").

Feed chunks, get lines. A line ends at LF; a CR just before the LF belongs to the terminator, so
the *body* of a line is its bytes without ``\\n`` or ``\\r\\n``, and the cap counts the body.

- A line whose body is at most the cap comes out whole, terminator included, exactly as read.
- A longer line is never held whole: once more than ``cap + 1`` bytes of it are buffered (the
  one extra byte leaves room for the CR of a CRLF), the rest is discarded as it arrives, counted
  (and, with ``digest=True``, hashed with SHA-256), and the line comes out once, when it ends, as
  ``too_long(nbytes, digest)``: the caller's own value for an over-long line, with the body's
  byte count and hex digest (None without ``digest``). Memory stays bounded by the cap whatever
  the stream sends.
- :meth:`BoundedLineSplitter.close` (end of stream) returns the unterminated last line: its body
  is all of it (a trailing CR included), unless ``cr_terminates=True`` drops one trailing CR
  first (the server's reading).

How the stream is cut into reads never changes the lines (tests/test_framing.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["BoundedLineSplitter"]

T = TypeVar("T")


class BoundedLineSplitter(Generic[T]):
    """LF-only, capped line splitter; see the module docstring."""

    __slots__ = ("cap", "_buf", "_discarding", "_count", "_held_cr", "_hasher", "_digest", "_too_long")

    def __init__(self, cap: int, too_long: Callable[[int, str | None], T], *, digest: bool = False) -> None:
        self.cap = cap
        self._too_long = too_long
        self._digest = digest
        self._buf = bytearray()
        self._discarding = False  # an over-long line is being discarded
        self._count = 0  # body bytes of that line discarded so far (a held CR not yet counted)
        self._held_cr = False  # a CR at a chunk end might be the start of the terminator
        self._hasher: Any = None  # hashlib sha256 of the discarded body, with ``digest``

    @property
    def holding(self) -> bool:
        """Whether part of a line is held (or an over-long line is being discarded)."""
        return self._discarding or bool(self._buf)

    @property
    def buffered(self) -> int:
        """Bytes of the current line held in memory: at most ``cap + 1``."""
        return len(self._buf)

    def _discard(self, chunk: bytes, final: bool) -> None:
        if self._held_cr:
            self._count += 1
            if self._hasher is not None:
                self._hasher.update(b"\r")
            self._held_cr = False
        if not final and chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            self._held_cr = True
        self._count += len(chunk)
        if self._hasher is not None:
            self._hasher.update(chunk)

    def _end_discard(self) -> T:
        result = self._too_long(self._count, None if self._hasher is None else self._hasher.hexdigest())
        self._discarding = False
        self._count = 0
        self._held_cr = False
        self._hasher = None
        return result

    def _over(self, body: bytes | bytearray) -> T:
        return self._too_long(len(body), hashlib.sha256(body).hexdigest() if self._digest else None)

    def feed(self, data: bytes) -> list[bytes | T]:
        """The lines ``data`` completes, in order: ``bytes`` (terminator included) or ``too_long``."""
        out: list[bytes | T] = []
        start = 0
        n = len(data)
        while start < n:
            nl = data.find(b"\n", start)
            if self._discarding:
                if nl < 0:
                    self._discard(data[start:], final=False)
                    return out
                body = data[start:nl]
                if body.endswith(b"\r"):
                    body = body[:-1]
                elif not body and self._held_cr:
                    self._held_cr = False  # the held CR was the terminator's
                self._discard(body, final=True)
                out.append(self._end_discard())
                start = nl + 1
                continue
            if nl < 0:
                self._buf += data[start:]
                if len(self._buf) > self.cap + 1:  # +1: room for the CR of a CRLF
                    self._discarding = True
                    self._hasher = hashlib.sha256() if self._digest else None
                    pending = bytes(self._buf)
                    self._buf.clear()
                    self._discard(pending, final=False)
                return out
            if self._buf:
                self._buf += data[start : nl + 1]
                line = bytes(self._buf)
                self._buf.clear()
            else:
                line = data[start : nl + 1]
            start = nl + 1
            body_len = len(line) - (2 if line.endswith(b"\r\n") else 1)
            out.append(self._over(line[:body_len]) if body_len > self.cap else line)
        return out

    def close(self, *, cr_terminates: bool = False) -> bytes | T | None:
        """End of stream: the unterminated last line (its body is all of it; with
        ``cr_terminates`` one trailing CR is dropped first), ``too_long``, or None."""
        if self._discarding:
            if self._held_cr:
                self._discard(b"", final=True)
            return self._end_discard()
        if not self._buf:
            return None
        line = bytes(self._buf)
        self._buf.clear()
        if cr_terminates and line.endswith(b"\r"):
            line = line[:-1]
        return self._over(line) if len(line) > self.cap else line
