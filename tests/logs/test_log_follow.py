"""`assay mcp log --follow` stays complete and bounded (docs/log.md, "--follow"): a file made again
with the inode of the one read so far is read from its start, a rotated log is read to its end
and then its new file, and what a round brings is streamed, never gathered (the peak memory of a
real follower does not grow with what a replaced file holds)."""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from assay.logs.files import Counts, FileSet, LogFile, log_files
from tests.conftest import ASSAY


def audit(i: int, tool: str = "read_file", minute: int = 0) -> bytes:
    rec = {
        "timestamp": f"2026-12-06T06:{minute:02d}:{(i // 10000) % 60:02d}.{i % 10000:04d}00+00:00",
        "decision": "allow",
        "tool": tool,
        "reason": None,
        "session": None,
        "server": "files",
        "request_id": i,
    }
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """Truncate and write again through the same inode: what a file deleted and made again gets
    when the file system hands it the freed inode number (tmpfs, ext4 often do)."""
    before = os.stat(path).st_ino
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    assert os.stat(path).st_ino == before


def test_a_file_made_again_with_the_same_inode_is_read_from_its_start(tmp_path):
    """The new file is longer than what was read (so its size never went down) and starts
    differently: the old reader went on from its offset and lost the first entries."""
    path = tmp_path / "d.ndjson"
    path.write_bytes(audit(1) + audit(2))
    reader = LogFile(str(path), Counts())
    assert list(reader.lines()) == [audit(1)[:-1], audit(2)[:-1]]
    new = [audit(i, "write_file", minute=1) for i in range(10, 15)]
    _rewrite_in_place(path, b"".join(new))
    assert list(reader.lines()) == [line[:-1] for line in new]


def test_a_file_made_again_with_the_same_start_is_told_apart_by_what_was_read_last(tmp_path):
    """Its first bytes are the same (a first line longer than the bytes kept of the start), the
    bytes before the point read so far are not."""
    path = tmp_path / "d.ndjson"
    first = audit(1)[:-2] + b',"pad":"' + b"p" * 400 + b'"}\n'
    path.write_bytes(first + audit(2))
    reader = LogFile(str(path), Counts())
    assert len(list(reader.lines())) == 2
    new = [first, audit(3, "other"), audit(4), audit(5)]
    _rewrite_in_place(path, b"".join(new))
    assert list(reader.lines()) == [line[:-1] for line in new]


def test_a_file_that_only_grew_is_read_on(tmp_path):
    path = tmp_path / "d.ndjson"
    path.write_bytes(audit(1))
    reader = LogFile(str(path), Counts())
    assert len(list(reader.lines())) == 1
    with open(path, "ab") as fh:
        fh.write(audit(2))
    assert list(reader.lines()) == [audit(2)[:-1]]


def test_a_rotated_log_is_read_to_its_end_then_its_new_file(tmp_path):
    """Rotation renames the log (the rest of it arrived before) and a new file takes its name:
    read by identity, the renamed file goes on from where it was, the new one from its start,
    and no entry is read twice, whether the directory or the log's own path is followed."""
    for follow_dir in (True, False):
        d = tmp_path / ("dir" if follow_dir else "file")
        d.mkdir()
        log = d / "c-s.audit.ndjson"
        log.write_bytes(audit(1) + audit(2))
        given = [str(d)] if follow_dir else [str(log)]
        fileset = FileSet(Counts(), following=True)
        assert [e.request_id for e in fileset.read(log_files(given))] == [1, 2]
        with open(log, "ab") as fh:
            fh.write(audit(3))
        os.rename(log, d / "c-s.audit.20261206T060000Z.ndjson")
        log.write_bytes(audit(4) + audit(5))
        assert [e.request_id for e in fileset.read(log_files(given))] == [3, 4, 5]
        with open(log, "ab") as fh:
            fh.write(audit(6))
        assert [e.request_id for e in fileset.read(log_files(given))] == [6]


def test_a_log_rotated_while_it_is_read_is_read_on_under_its_new_name(tmp_path):
    """The rename comes between two chunks of one read: the reader finds the file again among
    the log's rotated files and reads it to its end."""
    log = tmp_path / "x.ndjson"
    lines = [audit(i) for i in range(3000)]  # several chunks
    log.write_bytes(b"".join(lines))
    reader = LogFile(str(log), Counts())
    got = reader.lines()
    head = [next(got) for _ in range(10)]
    os.rename(log, tmp_path / "x.20261206T060000Z.ndjson")
    log.write_bytes(audit(99999))
    assert head + list(got) == [line[:-1] for line in lines]


class Lines:
    """The lines a process prints, as they come (a thread reads them): :meth:`next` waits for
    the next one, and fails the test instead of hanging when none comes."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._queue: queue.Queue[bytes] = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(b"")

    def next(self, timeout: float = 60.0) -> dict:
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing shown within {timeout}s") from None
        assert line, "the follower ended"
        return json.loads(line)


def _peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


def _count_lines(proc: subprocess.Popen, count: int, timeout: float = 120.0) -> bytes:
    """Read what ``proc`` prints until ``count`` lines came (failing, not hanging, if they do not
    come in time); the last of them is returned."""
    assert proc.stdout is not None
    fd, seen, tail = proc.stdout.fileno(), 0, b""
    deadline = time.monotonic() + timeout
    while seen < count:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"{seen} of {count} lines shown in {timeout}s"
        data = os.read(fd, 1 << 20)
        assert data, "the follower ended"
        seen += data.count(b"\n")
        tail = (tail + data)[-4096:]
    return tail.splitlines()[-1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_following_a_file_replaced_by_many_entries_holds_what_it_held_before(tmp_path):
    """A real follower's peak resident memory after an 8 MiB file of 50,000 entries replaced the
    one it followed stays within a few MiB of what it held while following before (the old
    follower gathered the round's entries first: some 35 MiB more here, 105 MiB for 40 MiB)."""
    count = 50_000
    big = tmp_path / "big.ndjson"
    with open(big, "wb") as fh:
        for start in range(0, count, 5000):
            fh.write(b"".join(audit(i, minute=1) for i in range(start, min(start + 5000, count))))
    assert big.stat().st_size > 7 * 1024 * 1024
    followed = tmp_path / "f.ndjson"
    followed.write_bytes(audit(0, "first_tool"))
    # the table: its header and first row are printed once the file was read to its end, so
    # what follows is read by the follower's rounds
    proc = subprocess.Popen(
        [str(ASSAY), "mcp", "log", "--follow", str(followed)],
        stdout=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert b"first_tool" in _count_lines(proc, 2)
        with open(followed, "ab") as fh:
            fh.write(audit(1, "next_tool"))
        assert b"next_tool" in _count_lines(proc, 1)  # a round was read: the follower is as it stays
        before = _peak_kib(proc.pid)
        os.rename(big, followed)
        assert b"06:01:04  files" in _count_lines(proc, count)
        peak = _peak_kib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert peak - before < 8 * 1024, (peak, before)


def test_a_follower_shows_every_entry_of_a_file_replaced_again_and_again(tmp_path):
    """A real follower while the file is deleted and made again (the file system often reuses
    the inode) and truncated and rewritten (always the same inode), each new file longer than
    the last: every entry is shown once, in order. The test waits for each batch to be shown
    before it replaces the file."""
    path = tmp_path / "d.ndjson"
    path.write_bytes(audit(0))
    proc = subprocess.Popen([str(ASSAY), "mcp", "log", "--follow", "--json", str(path)], stdout=subprocess.PIPE)
    shown: list[int] = []
    try:
        lines = Lines(proc)
        shown.append(lines.next()["request_id"])
        n = 1
        for round_ in range(8):
            batch = [audit(i, minute=round_ + 1) for i in range(n, n + round_ + 2)]
            n += len(batch)
            if round_ % 2:
                _rewrite_in_place(path, b"".join(batch))
            else:
                os.unlink(path)
                path.write_bytes(b"".join(batch))
            for _ in batch:
                shown.append(lines.next(timeout=20)["request_id"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert shown == list(range(n))


def test_a_follower_opens_only_the_files_that_changed(tmp_path, monkeypatch):
    """A directory of many rotated logs: a round opens the file that grew, not the others."""
    from assay.logs import files

    for n in range(20):
        (tmp_path / f"x.20261206T0600{n:02d}Z.ndjson").write_bytes(audit(n))
    log = tmp_path / "x.ndjson"
    log.write_bytes(audit(100))
    fileset = FileSet(Counts(), following=True)
    assert len(list(fileset.read(log_files([str(tmp_path)])))) == 21
    opened: list[str] = []
    real = files.open_regular
    monkeypatch.setattr(files, "open_regular", lambda path, what: opened.append(path) or real(path, what))
    assert list(fileset.read(log_files([str(tmp_path)]))) == [] and opened == []
    with open(log, "ab") as fh:
        fh.write(audit(101))
    assert [e.request_id for e in fileset.read(log_files([str(tmp_path)]))] == [101]
    assert set(opened) == {str(log)}
