"""The files `assay mcp log` reads (docs/log.md, "What it reads"): which ones, read how, and
followed how. The I/O shell around :mod:`assay.logs.entries` and :mod:`assay.logs.view`.

- A directory stands for its regular files whose name ends in ``.ndjson`` (not recursive); a
  file is read whatever its name. Only regular files are read: a FIFO or a device is refused
  (opened without blocking, then checked), so the command never waits on a writer.
- Lines are read in chunks; a line longer than :data:`MAX_LINE` is skipped (counted as foreign)
  without being held, so memory stays bounded whatever a file holds. A last line with no
  newline is torn (a writer was stopped mid-line): skipped and counted, or, when following,
  kept until the rest of it arrives.
- The entries of several files are merged by time (each file is in time order: wraps append).
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from assay.inputs import InputFileError, open_regular
from assay.logs.entries import FOREIGN, Entry, parse_line

__all__ = ["LogError", "Counts", "LogFile", "follow_files", "log_files", "read_entries", "MAX_LINE"]

MAX_LINE = 8 * 1024 * 1024  # bytes: a record with large recorded arguments fits many times over
_CHUNK = 64 * 1024  # per file being merged: many files stay cheap


class LogError(Exception):
    """A path that cannot be read as a log: one line, ``str(e)``."""


@dataclass
class Counts:
    """Lines skipped, by why."""

    torn: int = 0
    foreign: int = 0
    too_long: int = 0

    def summary(self) -> str | None:
        parts = [f"{n} {what}" for n, what in ((self.torn, "torn"), (self.foreign, "not a decision record"),
                                                 (self.too_long, "too long")) if n]
        if not parts:
            return None
        return f"skipped {self.total} line{'s' if self.total > 1 else ''} ({', '.join(parts)})"

    @property
    def total(self) -> int:
        return self.torn + self.foreign + self.too_long


def log_files(paths: list[str]) -> list[str]:
    """The files ``paths`` stand for (a directory: its ``*.ndjson`` files, sorted by name)."""
    out: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise LogError(f"cannot read {path}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            out.extend(_directory_logs(path))
        elif stat.S_ISREG(st.st_mode):
            out.append(path)
        else:
            raise LogError(f"cannot read {path}: not a regular file or a directory")
    return out


def _directory_logs(path: str) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise LogError(f"cannot read {path}: {exc.strerror or exc}") from None
    found = []
    for name in names:
        if not name.endswith(".ndjson"):
            continue
        full = os.path.join(path, name)
        try:
            if stat.S_ISREG(os.stat(full).st_mode):
                found.append(full)
        except OSError:
            continue  # gone since the listing
    return found


@dataclass
class LogFile:
    """One file read from where the last read stopped. :meth:`lines` returns the complete lines
    that arrived; a line over :data:`MAX_LINE` is dropped as it streams (``counts.too_long``)."""

    path: str
    counts: Counts
    offset: int = 0
    identity: tuple[int, int] | None = None
    _partial: bytearray = field(default_factory=bytearray)
    _skipping: bool = False

    def lines(self) -> Iterator[bytes]:
        """The complete lines from where the last read stopped to the end of the file as it is
        now, read a chunk at a time (the file is opened for each chunk: many files can be
        read at once without holding a descriptor each)."""
        while True:
            chunk = self._chunk()
            if not chunk:
                return
            out: list[bytes] = []
            self._take(chunk, out)
            yield from out

    def _chunk(self) -> bytes:
        try:
            fd, st = open_regular(self.path, "log")
        except InputFileError as exc:
            raise LogError(f"cannot read {self.path}: {exc.reason}") from None
        try:
            identity = (st.st_dev, st.st_ino)
            if identity != self.identity or st.st_size < self.offset:  # replaced or truncated: from the top
                if self.identity is not None:
                    self.counts.torn += self.torn()
                self.identity, self.offset = identity, 0
                self._partial.clear()
                self._skipping = False
            chunk = os.pread(fd, _CHUNK, self.offset)
            self.offset += len(chunk)
            return chunk
        except OSError as exc:
            raise LogError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def _take(self, chunk: bytes, out: list[bytes]) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not self._skipping:
                    self._partial += chunk[start:]
                    if len(self._partial) > MAX_LINE:
                        self._partial.clear()
                        self._skipping = True
                return
            if self._skipping:
                self._skipping = False
                self.counts.too_long += 1
            else:
                self._partial += chunk[start:end]
                if len(self._partial) > MAX_LINE:
                    self.counts.too_long += 1
                elif self._partial.strip():
                    out.append(bytes(self._partial))
                self._partial.clear()
            start = end + 1

    def torn(self) -> bool:
        """Whether a line without its newline is pending."""
        return self._skipping or bool(bytes(self._partial).strip())


def entries_of(lines: Iterable[bytes], path: str, counts: Counts,
               other: Callable[[bytes], None] | None = None) -> Iterator[Entry]:
    for line in lines:
        got = parse_line(line, path)
        if isinstance(got, Entry):
            yield got
        elif got == FOREIGN:
            counts.foreign += 1
        elif other is not None:
            other(line)


def read_entries(files: list[str], counts: Counts, *, other: Callable[[bytes], None] | None = None,
                 readers: dict[str, LogFile] | None = None) -> Iterator[Entry]:
    """Every entry of ``files``, merged by time. ``other`` gets each line that is a record of
    ours but not a call (tool listings). ``readers`` (when given) keeps each file's reader,
    positioned after what was read, for :func:`follow`. A torn last line is counted; when
    following it stays pending in its reader."""

    def one(path: str) -> Iterator[Entry]:
        reader = LogFile(path, counts)
        if readers is not None:
            readers[path] = reader
        yield from entries_of(reader.lines(), path, counts, other)
        if readers is None and reader.torn():
            counts.torn += 1

    return heapq.merge(*(one(path) for path in files), key=_order)


def _order(entry: Entry) -> tuple[float, int]:
    """Time order; of a call's two records the decision event first (it says more)."""
    return (entry.at if entry.at is not None else 0.0), entry.kind != "decision"


async def follow_files(paths: list[str], readers: dict[str, LogFile], counts: Counts,
                 emit: Callable[[Entry], bool], *, interval: float = 0.25) -> None:
    """After :func:`read_entries` with ``readers``: every ``interval`` seconds, read what was
    appended to each file (and the files that appeared in a directory of ``paths``) and
    ``emit`` its entries in time order, until ``emit`` returns False (the reader of the output
    went away) or the caller's cancel scope ends it. A file that was replaced or truncated is
    read again from its start; one that cannot be read this round is tried again the next."""
    import trio

    while True:
        await trio.sleep(interval)
        try:
            files = log_files(paths)
        except LogError:
            files = list(readers)
        batch: list[Entry] = []
        for path in files:
            reader = readers.setdefault(path, LogFile(path, counts))
            try:
                batch.extend(entries_of(reader.lines(), path, counts))
            except LogError:
                continue
        batch.sort(key=_order)
        for entry in batch:
            if not emit(entry):
                return
