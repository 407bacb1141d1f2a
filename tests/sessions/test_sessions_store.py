"""The SQLite store of shared sessions against the reference semantics of
:class:`assay.policy.storeapi.MemoryStore` (docs/wrap.md, "Shared sessions"), its bounds and
``reset``, in real SQLite files."""

from __future__ import annotations

import os
import subprocess
import sys
import sqlite3
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy.storeapi import Loaded, MemoryStore, Saved, SessionKey
from assay.store import sqlite as store_mod
from assay.store.sqlite import SqliteStore
from tests.sessions.syncstore import list_sessions, reset

A = SessionKey(key="name:a", kind="named", name="a")
B = SessionKey(key="name:b", kind="named", name="b")
T0 = 1_800_000_000.0


def _db(tmp_path) -> str:
    return str(tmp_path / "state" / "sessions.db")


ops = st.lists(
    st.tuples(
        st.sampled_from([A, B]),
        st.sampled_from(["p", "q"]),
        st.sampled_from(["s1", "s2"]),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.integers(0, 10**12),
        st.integers(0, 10**12),
        st.booleans(),
        st.lists(st.text(max_size=5), max_size=3).map(tuple),
        st.booleans(),  # abort instead of commit
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_same_results_as_memory_store(sequence):
    memory = MemoryStore()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state", "sessions.db")
        sql = SqliteStore(path)
        committed = set()
        for i, (key, part, server, state, req, calls, entered, armed, abort) in enumerate(sequence):
            now = T0 + i
            assert sql.begin_blocking(key, part, server, now) == memory.begin_blocking(key, part, server, now)
            if abort:
                sql.abort_blocking()
                memory.abort_blocking()
                continue
            saved = Saved(state, req, calls, entered, armed)
            assert sql.commit_blocking(saved, now) == memory.commit_blocking(saved, now)
            committed.add(key.key)
        sql.close()
        listed = {r["key"]: r for r in list_sessions(path)}
        assert set(listed) == committed  # an aborted begin leaves no session behind
        for key in committed:
            req, calls, entered = memory.totals[key]
            row = listed[key]
            assert (row["requests"], row["tool_calls"], row["calls"]) == (req, calls, entered)
            servers = {s["server"]: s["calls"] for s in row["servers"]}
            assert {s: c for s, c in servers.items() if c} == {s: c for (k, s), c in memory.servers.items() if k == key}
            armed = set()
            for (k, _part), row_ in memory.parts.items():
                if k == key and row_.state is not None:
                    armed.update(memory.armed[(k, _part)])
            assert set(row["armed"]) == armed


def test_one_transaction_at_a_time(tmp_path):
    s = SqliteStore(_db(tmp_path))
    with pytest.raises(RuntimeError):
        s.commit_blocking(Saved(None, 0, 0, False), T0)
    s.begin_blocking(A, "p", "s", T0)
    with pytest.raises(RuntimeError):
        s.begin_blocking(A, "p", "s", T0)
    s.abort_blocking()
    s.abort_blocking()  # twice: never raises
    assert s.begin_blocking(A, "p", "s", T0) == Loaded(0, None, 0, 0)
    s.commit_blocking(Saved(None, 1, 1, True), T0)


def test_abort_releases_the_lock_and_writes_nothing(tmp_path):
    one, two = SqliteStore(_db(tmp_path), timeout=0.2), SqliteStore(_db(tmp_path), timeout=0.2)
    one.begin_blocking(A, "p", "s", T0)
    one.abort_blocking()
    assert two.begin_blocking(A, "p", "s", T0) == Loaded(0, None, 0, 0)
    assert two.commit_blocking(Saved(b"x", 3, 2, True), T0) == 1
    one.begin_blocking(A, "p", "s", T0)
    one.abort_blocking()
    assert one.begin_blocking(A, "p", "s", T0) == Loaded(1, b"x", 3, 2)
    one.abort_blocking()


def test_the_file_does_not_grow_with_calls(tmp_path):
    """Nothing is kept per call: after a warm-up (the WAL reaches its working size), 18,000
    more commits leave the files as large as they were, without a VACUUM."""
    path = _db(tmp_path)
    s = SqliteStore(path)
    state = bytes(range(256)) * 2

    def run(n: int, start: int) -> None:
        for i in range(start, start + n):
            loaded = s.begin_blocking(A if i % 3 else B, "p" if i % 2 else "q", f"s{i % 4}", T0 + i)
            s.commit_blocking(Saved(state, loaded.requests + 1, loaded.tool_calls + 1, True, ("r1", "r2")), T0 + i)

    def size() -> int:
        return sum(os.path.getsize(path + ext) for ext in ("", "-wal", "-shm") if os.path.exists(path + ext))

    run(2000, 0)
    warm, db_warm = size(), os.path.getsize(path)
    run(18000, 2000)
    assert os.path.getsize(path) == db_warm
    assert size() <= warm + 65536
    assert size() < 8 * 2**20
    rows = {r["key"]: r for r in list_sessions(path)}
    assert rows["name:a"]["calls"] + rows["name:b"]["calls"] == 20000


def test_reset_forgets_trackers_and_totals(tmp_path):
    path = _db(tmp_path)
    s = SqliteStore(path)
    s.begin_blocking(A, "p", "s", T0)
    assert s.commit_blocking(Saved(b"state", 5, 4, True, ("r1",)), T0) == 1
    s.begin_blocking(B, "p", "s", T0)
    s.commit_blocking(Saved(b"other", 1, 1, True, ("r2",)), T0)
    assert reset(path, "name:a", "tester", now=T0 + 1)
    assert s.begin_blocking(A, "p", "s", T0 + 2) == Loaded(2, None, 0, 0)  # a new version: wraps read it again
    s.abort_blocking()
    assert s.begin_blocking(B, "p", "s", T0 + 2) == Loaded(1, b"other", 1, 1)  # another session untouched
    s.abort_blocking()
    rows = {r["key"]: r for r in list_sessions(path)}
    assert rows["name:a"]["armed"] == [] and rows["name:b"]["armed"] == ["r2"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT key, kind, detail FROM events").fetchall() == [("name:a", "reset", "tester")]
    assert not reset(path, "name:nobody", "tester")


def test_reset_events_are_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "EVENTS_KEPT", 5)
    path = _db(tmp_path)
    s = SqliteStore(path)
    s.begin_blocking(A, "p", "s", T0)
    s.commit_blocking(Saved(b"x", 1, 1, True), T0)
    s.close()
    for i in range(12):
        assert reset(path, "name:a", f"r{i}", now=T0 + i)
    conn = sqlite3.connect(path)
    assert [d for (d,) in conn.execute("SELECT detail FROM events ORDER BY id")] == [f"r{i}" for i in range(7, 12)]


def test_nothing_is_created_by_list_or_reset(tmp_path):
    path = str(tmp_path / "none" / "sessions.db")
    assert list_sessions(path) == []
    assert not reset(path, "name:a", "x")
    assert not (tmp_path / "none").exists()


def test_files_are_private(tmp_path):
    path = _db(tmp_path)
    s = SqliteStore(path)
    s.begin_blocking(A, "p", "s", T0)
    s.commit_blocking(Saved(b"x", 1, 1, True), T0)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    for ext in ("-wal", "-shm"):
        if os.path.exists(path + ext):
            assert os.stat(path + ext).st_mode & 0o077 == 0


def _call(store: SqliteStore) -> None:
    got = store.begin_blocking(A, "p", "s1", T0)
    store.commit_blocking(Saved(None, got.requests + 1, got.tool_calls + 1, True), T0)


async def test_a_connection_of_this_process_keeps_its_locks_while_the_store_connects(tmp_path, monkeypatch):
    """A wrap's sweep has a connection of its own open while the store connects for the first
    call. Connecting never closes a descriptor of the existing file (which would drop every
    POSIX lock of the process on it): else another process's last connection to close takes
    this one for gone, checkpoints and deletes the WAL, and the commits made after are lost
    (tests/e2e/test_e2e_session_race.py, the SIGKILLed wraps' counts)."""
    path = _db(tmp_path)
    first = SqliteStore(path)
    _call(first)  # another wrap made the database
    first.close()
    store = SqliteStore(path)

    def rows(conn: sqlite3.Connection, alive: object) -> list:
        conn.execute("SELECT count(*) FROM sessions").fetchone()  # this connection's shared lock
        _call(store)  # the store's first connection, made meanwhile
        return []

    monkeypatch.setattr(store_mod, "session_rows", rows)
    assert await SqliteStore(path).sessions(T0) == []
    # another wrap opens the database and closes it: it is not the last connection
    code = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM sessions').fetchone(); c.close()"
    subprocess.run([sys.executable, "-c", code, path], check=True)
    assert os.path.exists(path + "-wal")
    _call(store)
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT tool_calls, calls FROM sessions").fetchone() == (3, 3)
