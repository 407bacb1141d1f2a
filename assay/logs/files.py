"""The files `assay mcp log` and `assay mcp policy suggest` read (docs/log.md, "What it reads"):
which ones, read how, and followed how. The I/O shell around :mod:`assay.logs.entries` and
:mod:`assay.logs.view`.

- A directory stands for its regular files whose name ends in ``.ndjson`` (not recursive); a
  file is read whatever its name, with its rotated files (:mod:`assay.logs.rotated`). Only
  regular files are read: a FIFO or a device is refused (opened without blocking, then
  checked), so the command never waits on a writer. A file named twice is read once.
- Lines are read in chunks; a line longer than :data:`MAX_LINE` is skipped (counted as foreign)
  without being held, so memory stays bounded whatever a file holds. A last line with no
  newline is torn (a writer was stopped mid-line): skipped and counted, or, when following,
  kept until the rest of it arrives.
- The entries of several files are merged by time as they are read (each file is in time
  order: wraps append), never gathered first: memory does not grow with what a file holds.
- A file is known by its device and inode, not its name, so a rotated log (renamed by wrap,
  docs/wrap.md, "Log rotation") is read on from where it was, and its new file from the start.
  An inode can be reused by a file deleted and made again: a known file whose size went below
  what was read of it, or whose first bytes or the bytes just before that point changed, is a
  new file and is read from its start.
"""

from __future__ import annotations

import errno
import heapq
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from assay.inputs import InputFileError, open_regular
from assay.logs.entries import FOREIGN, Entry, client_of_file, parse_line
from assay.logs.rotated import is_rotated_of, sequence_key
from assay.terminal import printable

__all__ = [
    "LogError",
    "Counts",
    "LogFile",
    "FileSet",
    "follow_files",
    "log_files",
    "log_paths",
    "read_entries",
    "MAX_LINE",
]

MAX_LINE = 8 * 1024 * 1024  # bytes: a record with large recorded arguments fits many times over
_CHUNK = 64 * 1024  # per file being merged: many files stay cheap
_HEAD = 256  # bytes of a file's start kept to tell it from a new file that got its inode
_MARK = 64  # bytes before the read point kept for the same
_MOVES = 4  # renames of a file followed in one open


class LogError(Exception):
    """A path that cannot be read as a log: one line, ``str(e)``."""


@dataclass
class Counts:
    """Lines skipped, by why."""

    torn: int = 0
    foreign: int = 0
    too_long: int = 0

    def summary(self) -> str | None:
        parts = [
            f"{n} {what}"
            for n, what in ((self.torn, "torn"), (self.foreign, "not a decision record"), (self.too_long, "too long"))
            if n
        ]
        if not parts:
            return None
        return f"skipped {self.total} line{'s' if self.total > 1 else ''} ({', '.join(parts)})"

    @property
    def total(self) -> int:
        return self.torn + self.foreign + self.too_long


def _cannot(path: str, why: str) -> LogError:
    return LogError(f"cannot read {printable(path)}: {why}")


def log_paths(given: list[str], state_dir: str | None, environ: Mapping[str, str]) -> list[str]:
    """What `log` and `policy suggest` read: the paths given, else the state directory
    (``--state-dir``, ``$ASSAY_STATE_DIR``, ...). A state directory that does not exist is the
    one error both commands word the same way."""
    if given:
        return given
    from assay.statedir import state_dir as resolve

    directory = resolve(state_dir, environ)
    if not os.path.isdir(directory):
        raise LogError(
            f"no logs in {printable(directory)} (it does not exist): give the log files or directories, "
            "or the --log-dir you gave assay mcp protect"
        )
    return [directory]


def log_files(paths: list[str]) -> list[str]:
    """The files ``paths`` stand for: a directory its ``*.ndjson`` files, a file itself and its
    rotated files, each sorted by name."""
    out: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise _cannot(path, exc.strerror or str(exc)) from None
        if stat.S_ISDIR(st.st_mode):
            out.extend(_directory_logs(path, lambda name: name.endswith(".ndjson")))
        elif stat.S_ISREG(st.st_mode):
            directory, name = os.path.split(path)
            out.extend(_directory_logs(directory or ".", lambda other: is_rotated_of(other, name), quiet=True))
            out.append(path)
        else:
            raise _cannot(path, "not a regular file or a directory")
    return out


def _directory_logs(path: str, wanted: Callable[[str], bool], quiet: bool = False) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        if quiet:
            return []
        raise _cannot(path, exc.strerror or str(exc)) from None
    found = []
    for name in names:
        if not wanted(name):
            continue
        full = os.path.join(path, name) if path != "." else name
        try:
            if stat.S_ISREG(os.stat(full).st_mode):
                found.append(full)
        except OSError:
            continue  # gone since the listing
    return found


@dataclass
class LogFile:
    """One file read from where the last read stopped. :meth:`lines` returns the complete lines
    that arrived; a line over :data:`MAX_LINE` is dropped as it streams (``counts.too_long``).
    ``identity`` is the file's (device, inode) once read; ``path`` follows it when wrap renames
    it to a rotated name."""

    path: str
    counts: Counts
    offset: int = 0
    identity: tuple[int, int] | None = None
    _head: bytes = b""
    _mark: bytes = b""
    _partial: bytearray = field(default_factory=bytearray)
    _skipping: bool = False
    seen: tuple[int, int] | None = None  # (size, mtime) when it was last read to its end

    def unchanged(self, st: os.stat_result) -> bool:
        """Whether ``st`` (of this file) says nothing was written since it was read to its end:
        a follower then leaves it unopened (a directory of many rotated logs stays cheap)."""
        return (st.st_dev, st.st_ino) == self.identity and (st.st_size, st.st_mtime_ns) == self.seen

    def lines(self) -> Iterator[bytes]:
        """The complete lines from where the last read stopped to the end of the file as it is
        now, read a chunk at a time (the file is opened for each chunk: many files can be
        read at once without holding a descriptor each). Each chunk checks first that the file
        is still the one read so far."""
        while True:
            chunk = self._chunk()
            if not chunk:
                return
            self.seen = None
            out: list[bytes] = []
            self._take(chunk, out)
            yield from out

    def _open(self) -> tuple[int, os.stat_result]:
        """The file read so far, opened: under its path, or under the rotated name it was given
        since (a few tries: a file renamed again and again is read as it is found)."""
        for _ in range(_MOVES):
            try:
                fd, st = open_regular(self.path, "log")
            except InputFileError as exc:
                moved = self._moved() if exc.errno == errno.ENOENT and self.identity is not None else None
                if moved is None:
                    raise _cannot(self.path, exc.reason) from None
                self.path = moved
                continue
            if self.identity is None or (st.st_dev, st.st_ino) == self.identity:
                return fd, st
            moved = self._moved()  # rotated: the file read so far has another name now
            if moved is None:
                return fd, st  # another file took the name: read from its start
            os.close(fd)
            self.path = moved
        return open_regular(self.path, "log")

    def _chunk(self) -> bytes:
        try:
            fd, st = self._open()
        except InputFileError as exc:
            raise _cannot(self.path, exc.reason) from None
        try:
            identity = (st.st_dev, st.st_ino)
            if identity != self.identity or st.st_size < self.offset or not self._same(fd):
                self._restart(identity)  # a new file (or the same inode made again): from the top
            chunk = os.pread(fd, _CHUNK, self.offset)
            if not chunk and st.st_size == self.offset:
                self.seen = (st.st_size, st.st_mtime_ns)
            if self.offset < _HEAD:
                self._head += chunk[: _HEAD - self.offset]
            self.offset += len(chunk)
            self._mark = (self._mark + chunk)[-_MARK:]
            return chunk
        except OSError as exc:
            raise _cannot(self.path, exc.strerror or str(exc)) from None
        finally:
            os.close(fd)

    def _same(self, fd: int) -> bool:
        """Whether the file holds what was read of it: its first bytes and those before the
        read point unchanged."""
        if self.offset == 0:
            return True
        return (
            os.pread(fd, len(self._head), 0) == self._head
            and os.pread(fd, len(self._mark), self.offset - len(self._mark)) == self._mark
        )

    def _restart(self, identity: tuple[int, int]) -> None:
        if self.identity is not None:
            self.counts.torn += self.torn()
        self.identity, self.offset, self._head, self._mark = identity, 0, b"", b""
        self._partial.clear()
        self._skipping = False

    def _moved(self) -> str | None:
        """The rotated name the file read so far has now, if it is one of this path's."""
        directory, name = os.path.split(self.path)
        for other in _directory_logs(directory or ".", lambda n: is_rotated_of(n, name), quiet=True):
            try:
                st = os.stat(other)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == self.identity:
                return other
        return None

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


def entries_of(
    lines: Iterable[bytes], path: str, counts: Counts, other: Callable[[bytes], None] | None = None
) -> Iterator[Entry]:
    client = client_of_file(path)
    for line in lines:
        got = parse_line(line, path, client)
        if isinstance(got, Entry):
            yield got
        elif got == FOREIGN:
            counts.foreign += 1
        elif other is not None:
            other(line)


class FileSet:
    """The files being read, known by identity, each with its :class:`LogFile`. :meth:`read`
    gives what the files hold beyond what was read, merged by time, as it is read: the files
    of one log (its rotated files, then itself) one after the other, the logs side by side, so
    a chunk is held per log, not per file. Following, a torn last line stays pending; else it
    is counted when its file has been read."""

    def __init__(
        self, counts: Counts, *, following: bool = False, other: Callable[[bytes], None] | None = None
    ) -> None:
        self.counts, self.following, self.other = counts, following, other
        self.readers: dict[tuple[int, int], LogFile] = {}

    def read(self, files: list[str]) -> Iterator[Entry]:
        known = {r.identity: r for r in self.readers.values() if r.identity is not None}
        now: dict[tuple[int, int], LogFile] = {}
        logs: dict[tuple[str, str], list[tuple[tuple[str, int], LogFile]]] = {}
        for path in files:
            try:
                st = os.stat(path)
            except OSError:
                continue  # gone since it was listed (a rotated file deleted): nothing to read
            identity = (st.st_dev, st.st_ino)
            if identity in now or not stat.S_ISREG(st.st_mode):
                continue  # the same file under a second name
            reader = known.pop(identity, None) or LogFile(path, self.counts)
            reader.path = path
            now[identity] = reader
            if reader.unchanged(st):
                continue  # nothing new: not opened this round
            directory, name = os.path.split(path)
            log, place = sequence_key(name)
            logs.setdefault((directory, log), []).append((place, reader))
        for gone in known.values():  # deleted: what it held unfinished is torn
            self.counts.torn += gone.torn()
        self.readers = now
        return heapq.merge(
            *(self._log([r for _, r in sorted(group, key=lambda f: f[0])]) for group in logs.values()), key=_order
        )

    def _log(self, readers: list[LogFile]) -> Iterator[Entry]:
        for reader in readers:
            yield from self._entries(reader)

    def _entries(self, reader: LogFile) -> Iterator[Entry]:
        try:
            yield from entries_of(reader.lines(), reader.path, self.counts, self.other)
        except LogError:
            if not self.following:
                raise
            return  # cannot be read this round: tried again the next
        if not self.following and reader.torn():
            self.counts.torn += 1


def read_entries(
    files: list[str], counts: Counts, *, other: Callable[[bytes], None] | None = None, following: FileSet | None = None
) -> Iterator[Entry]:
    """Every entry of ``files``, merged by time as they are read. ``other`` gets each line that
    is a record of ours but not a call (tool listings). ``following`` (a :class:`FileSet` made
    with ``following=True``) reads them and keeps each file's reader, positioned after what was
    read, for :func:`follow_files`."""
    fileset = following if following is not None else FileSet(counts, other=other)
    return fileset.read(files)


def _order(entry: Entry) -> tuple[float, int]:
    """Time order; of a call's two records the decision event first (it says more)."""
    return (entry.at if entry.at is not None else 0.0), entry.kind != "decision"


async def follow_files(
    paths: list[str],
    fileset: FileSet,
    emit: Callable[[Entry], bool],
    *,
    end_of_round: Callable[[], bool] | None = None,
    interval: float = 0.25,
) -> None:
    """After :func:`read_entries` with ``fileset``: every ``interval`` seconds, read what was
    appended to the files of ``paths`` (and the files that appeared: a new ``.ndjson`` file in
    a directory, a rotated file) and ``emit`` its entries in time order as they are read, then
    call ``end_of_round`` (to flush what was emitted), until either returns False (the reader
    of the output went away) or the caller's cancel scope ends it. A file that was replaced or
    truncated is read again from its start; a file that was rotated is read to its end and its
    new file from the start; one that cannot be read this round is tried again the next."""
    import trio

    files: list[str] = []
    while True:
        await trio.sleep(interval)
        try:
            files = log_files(paths)
        except LogError:
            files = [r.path for r in fileset.readers.values()] or files
        for entry in fileset.read(files):
            if not emit(entry):
                return
        if end_of_round is not None and not end_of_round():
            return
