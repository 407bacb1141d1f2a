"""Bounded newline framing of the inbound byte stream (docs/server.md, "Protocol").

Sans-IO. Feed chunks, get frames. A line is counted without its terminator (`\\n` or `\\r\\n`);
one longer than ``max_bytes`` becomes an :class:`Oversize` carrying its full byte count, and its
excess is discarded as it arrives, so memory stays bounded by ``max_bytes`` whatever the client
sends.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Oversize", "LineFramer"]


@dataclass(frozen=True)
class Oversize:
    nbytes: int


class LineFramer:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._discarding = False
        self._count = 0  # bytes of the current line seen so far (discard mode)
        self._last = -1  # last byte seen in discard mode (to spot a `\r` before `\n`)

    def _finish(self, line: bytes | bytearray, *, terminated: bool) -> bytes | Oversize:
        if terminated and line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self.max_bytes:
            return Oversize(len(line))
        return bytes(line)

    def feed(self, data: bytes) -> list[bytes | Oversize]:
        out: list[bytes | Oversize] = []
        cap = self.max_bytes + 1  # room for a `\r` before the `\n` of a line of exactly max_bytes
        pos = 0
        end = len(data)
        while pos < end:
            nl = data.find(b"\n", pos)
            stop = end if nl < 0 else nl
            piece = data[pos:stop]
            if self._discarding:
                if piece:
                    self._count += len(piece)
                    self._last = piece[-1]
            else:
                self._buf += piece
                if len(self._buf) > cap:
                    self._discarding = True
                    self._count = len(self._buf)
                    self._last = self._buf[-1]
                    self._buf = bytearray()
            if nl < 0:
                break
            if self._discarding:
                n = self._count - (1 if self._last == 0x0D else 0)
                out.append(Oversize(n))
                self._discarding = False
                self._count = 0
                self._last = -1
            else:
                out.append(self._finish(self._buf, terminated=True))
                self._buf = bytearray()
            pos = nl + 1
        return out

    def eof(self) -> list[bytes | Oversize]:
        """An unterminated last line still counts."""
        if self._discarding:
            n, self._discarding, self._count = self._count, False, 0
            return [Oversize(n)]
        if self._buf:
            line, self._buf = self._buf, bytearray()
            return [self._finish(line, terminated=True)]
        return []
