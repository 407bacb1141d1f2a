"""Decision and audit logs rotate by size (docs/wrap.md, "Log rotation"): the sink in memory
(names, limits, a second writer, a deleted log, a symlink, a lock held elsewhere), real writer
processes appending to one log at once (nothing lost, torn or duplicated, no file rotated
twice), a real follower carrying on into each new file, and real wraps whose rotated logs `log`
and `policy suggest` read."""

from __future__ import annotations

import calendar
import fcntl
import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.logs.rotated import is_rotated_of, sequence_key
from assay.shells.stdio.pipes import RecordSink
from assay.shells.stdio.rotation import RotatingSink, open_log
from tests.conftest import ASSAY
from tests.wrap.conftest import call

WRITER = Path(__file__).parent / "fixtures" / "log_writer.py"
WHEN = float(calendar.timegm((2026, 12, 3, 14, 27, 49)))


def record(i: int, writer: str = "w", pad: int = 0) -> bytes:
    rec = {
        "timestamp": f"2026-12-03T14:27:49.{i:06d}+00:00",
        "decision": "allow",
        "tool": "t",
        "reason": None,
        "session": None,
        "server": writer,
        "request_id": i,
        "pad": "x" * pad,
    }
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def files_of(log: Path) -> list[Path]:
    """The log's files in the order they were written: rotated ones by their place, then it."""
    names = [p for p in log.parent.iterdir() if p.name == log.name or is_rotated_of(p.name, log.name)]
    return sorted(names, key=lambda p: sequence_key(p.name)[1])


def sink(log: Path, limit: int) -> RotatingSink:
    fh = os.fdopen(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), "ab", buffering=0)
    return RotatingSink("audit log", fh, str(log), limit, clock=lambda: WHEN)


def test_a_log_is_renamed_before_a_record_would_take_it_past_its_size(tmp_path):
    log = tmp_path / "c-s.audit.ndjson"
    out = sink(log, 1000)
    lines = [record(i) for i in range(40)]
    for line in lines:
        out.write(line)
    files = files_of(log)
    assert [p.name for p in files[:3]] == [
        "c-s.audit.20261203T142749Z.ndjson",
        "c-s.audit.20261203T142749Z-1.ndjson",
        "c-s.audit.20261203T142749Z-2.ndjson",
    ]
    assert files[-1] == log and out.rotated == len(files) - 1 >= 4
    for p in files[:-1]:
        assert 1000 - len(lines[0]) < p.stat().st_size <= 1000
    assert b"".join(p.read_bytes() for p in files) == b"".join(lines)


def test_a_record_larger_than_the_limit_goes_whole_into_a_file_of_its_own(tmp_path):
    log = tmp_path / "d.ndjson"
    out = sink(log, 300)
    small, big = record(1), record(2, pad=1000)
    for line in (small, big, small):
        out.write(line)
    assert [p.read_bytes() for p in files_of(log)] == [small, big, small]


def test_two_writers_rotate_a_file_once_and_the_other_goes_on_in_the_new_one(tmp_path):
    """Two wraps of one client: the second holds the renamed file; it notices before it writes
    and writes into the new file (never into the renamed one, never renaming the new one)."""
    log = tmp_path / "d.ndjson"
    a, b = sink(log, 1000), sink(log, 1000)
    n = 0
    while a.rotated + b.rotated == 0:
        (a if n % 2 else b).write(record(n))
        n += 1
    rotator, other = (a, b) if a.rotated else (b, a)
    rotated, current = files_of(log)
    before = rotated.read_bytes()
    other.write(record(n))
    assert rotated.read_bytes() == before  # nothing more in a renamed file
    assert current.read_bytes().endswith(record(n)) and other.rotated == 0 and len(files_of(log)) == 2
    rotator.write(record(n + 1))
    assert len(files_of(log)) == 2
    assert [json.loads(x)["request_id"] for p in files_of(log) for x in p.read_bytes().splitlines()] == list(
        range(n + 2)
    )


def test_a_deleted_log_is_made_again_with_its_mode(tmp_path):
    log = tmp_path / "d.ndjson"
    out = sink(log, 10_000)
    out.write(record(1))
    os.chmod(log, 0o600)
    os.unlink(log)
    out.write(record(2))
    assert log.read_bytes() == record(2) and stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_symlink_a_fifo_or_a_limit_of_zero_is_never_rotated(tmp_path):
    target = tmp_path / "target.ndjson"
    target.write_bytes(b"")
    link = tmp_path / "link.ndjson"
    link.symlink_to(target)
    out = open_log(str(link), "decision log", 100)
    assert type(out) is RecordSink
    for i in range(5):
        out.write(record(i))
    assert len(target.read_bytes().splitlines()) == 5 and sorted(p.name for p in tmp_path.iterdir()) == [
        "link.ndjson",
        "target.ndjson",
    ]
    assert type(open_log(str(tmp_path / "plain.ndjson"), "decision log", 0)) is RecordSink
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert type(open_log(str(fifo), "decision log", 100)) is RecordSink
    finally:
        os.close(reader)


def test_a_lock_held_elsewhere_neither_waits_nor_loses_a_record(tmp_path, monkeypatch):
    """Another program holds the log's lock: the record is written at once where the writer is
    (the log; wrap's loop never sleeps on it), and the rotation waits for a later record."""
    log = tmp_path / "d.ndjson"
    out = sink(log, 200)
    out.write(record(1))
    other = os.open(log, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX)

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"the writer slept {seconds} s on the trio thread")

    monkeypatch.setattr(time, "sleep", no_sleep)
    try:
        out.write(record(2))
        assert log.read_bytes() == record(1) + record(2) and out.rotated == 0
    finally:
        os.close(other)
    out.write(record(3))
    assert out.rotated == 1 and [p.read_bytes() for p in files_of(log)] == [record(1) + record(2), record(3)]


def _writers(log: Path, count: int, per: int, limit: int, batch: int = 1) -> list[subprocess.Popen]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), str(log), str(limit), f"w{k}", str(per), str(batch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=log.parent,
        )
        for k in range(count)
    ]
    for proc in procs:  # all started and opened: go at once
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    return procs


def _records(files: list[Path]) -> list[tuple[str, int]]:
    got = []
    for p in files:
        data = p.read_bytes()
        assert data.endswith(b"\n") or not data, p
        for line in data.splitlines():
            doc = json.loads(line)  # none torn
            got.append((doc["server"], doc["request_id"]))
    return got


@pytest.mark.parametrize("batch", [1, 7])
def test_writer_processes_at_once_lose_tear_and_duplicate_nothing(tmp_path, batch):
    """Four processes append to one log with a small limit: every record is in exactly one
    file, whole; every rotated file was full when it was renamed (a file renamed twice would be
    a new, nearly empty one)."""
    log, limit, per = tmp_path / "c-s.audit.ndjson", 6000, 400
    procs = _writers(log, 4, per, limit, batch)
    rotated = sum(int(p.communicate(timeout=120)[0]) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    files = files_of(log)
    got = _records(files)
    assert sorted(got) == sorted((f"w{k}", i) for k in range(4) for i in range(per))
    assert rotated == len(files) - 1
    largest = max(len(record(per, pad=49)) * batch, 1)
    total = sum(p.stat().st_size for p in files)
    for p in files[:-1]:
        assert p.stat().st_size > limit - largest, p
    assert rotated >= total // (2 * limit)  # rotation kept up with four writers


def _read_until(proc: subprocess.Popen, want: set, timeout: float = 120.0) -> list:
    """The records a follower shows until it has shown every one of ``want`` (or the time is up)."""
    assert proc.stdout is not None
    fd, buf, shown = proc.stdout.fileno(), b"", []
    deadline = time.monotonic() + timeout
    while not want.issubset(shown) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        shown += [(d["server"], d["request_id"]) for d in map(json.loads, lines)]
    return shown


def test_a_follower_carries_on_into_each_new_file(tmp_path):
    """`log --follow DIR` while three writer processes fill and rotate its log: every record
    is shown once (the renamed file read to its end, the new one from its start; a renamed file
    is no new file to read again)."""
    log = tmp_path / "c-s.audit.ndjson"
    log.write_bytes(record(0, "first"))
    follower = subprocess.Popen([str(ASSAY), "mcp", "log", "--follow", "--json", str(tmp_path)], stdout=subprocess.PIPE)
    try:
        assert _read_until(follower, {("first", 0)}) == [("first", 0)]
        procs = _writers(log, 3, 300, 4000)
        for p in procs:
            p.communicate(timeout=120)
        want = {(f"w{k}", i) for k in range(3) for i in range(300)}
        shown = _read_until(follower, want)
    finally:
        follower.terminate()
        follower.wait(timeout=30)
    assert len(files_of(log)) > 5
    assert sorted(shown) == sorted(want)


def test_wraps_rotate_their_logs_and_log_and_suggest_read_every_file(wrapper):
    """Real wraps with --log-max-bytes: the logs are rotated, and `log` (a directory, or the log
    itself) and `policy suggest` read every call once."""
    tmp = wrapper.tmp
    (tmp / "logs").mkdir()
    opts = [
        "--decision-log",
        "logs/s.decisions.ndjson",
        "--audit-log",
        "logs/s.audit.ndjson",
        "--log-max-bytes",
        "3000",
        "--label",
        "s",
    ]
    n = 0
    for _run in range(3):
        proc = wrapper.popen(*opts)
        assert proc.stdin is not None and proc.stdout is not None
        for _ in range(6):  # one call at a time: a write of records each
            n += 1
            proc.stdin.write(call(n, "read_file", {"path": f"/workspace/{n}"}))
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == n
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    decisions = files_of(tmp / "logs" / "s.decisions.ndjson")
    assert len(decisions) > 3 and len(files_of(tmp / "logs" / "s.audit.ndjson")) > 1
    for given in ("logs", "logs/s.decisions.ndjson", "logs/s.audit.ndjson"):
        res = subprocess.run([str(ASSAY), "mcp", "log", "--json", given], capture_output=True, cwd=tmp, timeout=60)
        assert res.returncode == 0 and res.stderr == b"", res.stderr
        assert sorted(json.loads(x)["request_id"] for x in res.stdout.splitlines()) == list(range(1, n + 1)), given
    res = subprocess.run([str(ASSAY), "mcp", "policy", "suggest", "logs"], capture_output=True, cwd=tmp, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"replayed {n} observed calls".encode() in res.stderr
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--log-max-bytes", "-1", "--", "true"], capture_output=True, cwd=tmp, timeout=60
    )
    assert res.returncode == 2 and b"--log-max-bytes" in res.stderr


def test_a_log_rotated_away_between_the_open_and_the_look_is_opened_again(tmp_path, monkeypatch):
    """Another writer renames the log between this one's open and its look at the path (seen
    under load): the log is opened again, at the path, and rotates; before, the open failed
    with ENOENT, or (a new file already at the path) wrote into the rotated file for good."""
    from assay.shells.stdio import rotation

    for recreate in (False, True):
        log = tmp_path / f"r{int(recreate)}.audit.ndjson"
        real_lstat = os.lstat
        moved: list[str] = []

        def racing_lstat(path, *args, **kwargs):
            if str(path) == str(log) and not moved:  # the other writer rotates right now
                os.rename(log, str(log) + ".old")
                if recreate:
                    log.write_bytes(b"")
                moved.append(str(path))
            return real_lstat(path, *args, **kwargs)

        monkeypatch.setattr(rotation.os, "lstat", racing_lstat)
        sink = rotation.open_log(str(log), "audit log", 1000)
        monkeypatch.setattr(rotation.os, "lstat", real_lstat)
        assert moved and isinstance(sink, rotation.RotatingSink)
        sink.write(record(1))
        sink.close()
        assert log.read_bytes() == record(1)  # into the log at the path, not the rotated file
