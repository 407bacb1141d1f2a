"""Bounded newline framing of the inbound byte stream (docs/server.md, "Protocol").

Sans-IO. Feed chunks, get frames. A line is counted without its terminator (`\\n` or `\\r\\n`);
one longer than ``max_bytes`` becomes an :class:`Oversize` carrying its full byte count, and its
excess is discarded as it arrives, so memory stays bounded by ``max_bytes`` whatever the client
sends. The splitting is :class:`assay.framing.BoundedLineSplitter` (shared with wrap's client
side); this adapter only drops the terminators and reads a CR ending the unterminated last line
as part of its terminator.
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.framing import BoundedLineSplitter

__all__ = ["Oversize", "LineFramer"]


@dataclass(frozen=True)
class Oversize:
    nbytes: int


def _oversize(nbytes: int, _digest: str | None) -> Oversize:
    return Oversize(nbytes)


def _body(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        return line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line


class LineFramer:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lines = BoundedLineSplitter(max_bytes, _oversize)

    @property
    def _buf(self) -> bytes:
        """What is held of the current line (the memory bound of docs/server.md, "Protocol")."""
        return b"\0" * self._lines.buffered

    def feed(self, data: bytes) -> list[bytes | Oversize]:
        return [_body(item) if isinstance(item, bytes) else item for item in self._lines.feed(data)]

    def eof(self) -> list[bytes | Oversize]:
        """An unterminated last line still counts."""
        last = self._lines.close(cr_terminates=True)
        return [] if last is None else [last]
