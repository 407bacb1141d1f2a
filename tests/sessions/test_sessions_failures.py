"""Every way the store can fail gives a StoreError with a one-line cause, never another
exception, and leaves no transaction open (docs/wrap.md, "Shared sessions")."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from assay.policy.storeapi import Loaded, Saved, SessionKey, StoreError
from assay.store import sqlite as store_mod
from assay.store import sqlitefile
from assay.statedir import ensure_state_dir, state_dir
from assay.store.sqlite import SqliteStore
from tests.sessions.syncstore import list_sessions, reset

A = SessionKey(key="name:a", kind="named", name="a")
T0 = 1_800_000_000.0


def _fails(store: SqliteStore, *words: str) -> str:
    with pytest.raises(StoreError) as info:
        store.begin_blocking(A, "p", "s", T0)
    cause = info.value.cause
    assert "\n" not in cause and cause
    for word in words:
        assert word in cause, cause
    return cause


def _made(path: str) -> None:
    s = SqliteStore(path)
    s.begin_blocking(A, "p", "s", T0)
    s.commit_blocking(Saved(b"x", 1, 1, True), T0)
    s.close()


def test_state_dir_order(tmp_path):
    assert state_dir("/opt/s", {"ASSAY_STATE_DIR": "/e"}) == "/opt/s"
    assert state_dir(None, {"ASSAY_STATE_DIR": "/e", "XDG_STATE_HOME": "/x"}) == "/e"
    assert state_dir("  ", {"ASSAY_STATE_DIR": " ", "XDG_STATE_HOME": "/x"}) == "/x/assay"
    assert state_dir(None, {"XDG_STATE_HOME": "relative", "HOME": "/home/u"}) == "/home/u/.local/state/assay"
    assert state_dir(None, {"HOME": "/home/u"}) == "/home/u/.local/state/assay"


def test_ensure_state_dir_creates_private_parents(tmp_path):
    target = tmp_path / "a" / "b" / "assay"
    ensure_state_dir(str(target))
    assert target.is_dir() and target.stat().st_mode & 0o777 == 0o700
    ensure_state_dir(str(target))  # again: fine


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_group_or_world_writable_dir_is_refused(tmp_path, mode):
    target = tmp_path / "s"
    target.mkdir()
    target.chmod(mode)
    with pytest.raises(StoreError, match="writable by group or others"):
        ensure_state_dir(str(target))
    _fails(SqliteStore(str(target / "sessions.db")), "writable by group or others")
    assert not (target / "sessions.db").exists()


def test_state_dir_that_is_a_file(tmp_path):
    (tmp_path / "s").write_text("x")
    _fails(SqliteStore(str(tmp_path / "s" / "sessions.db")), "not a directory", str(tmp_path / "s"))
    (tmp_path / "link").symlink_to(tmp_path / "s")
    _fails(SqliteStore(str(tmp_path / "link" / "sessions.db")), "not a directory", "symlink")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another user needs root")
def test_dir_of_another_user_is_refused_also_through_a_symlink(tmp_path):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 65534, 65534)
    (tmp_path / "link").symlink_to(other)
    for p in (other, tmp_path / "link"):
        with pytest.raises(StoreError, match="belongs to another user"):
            ensure_state_dir(str(p))


def test_database_file_that_is_a_symlink_is_refused(tmp_path):
    (tmp_path / "s").mkdir(mode=0o700)
    _made(str(tmp_path / "real.db"))
    (tmp_path / "s" / "sessions.db").symlink_to(tmp_path / "real.db")
    _fails(SqliteStore(str(tmp_path / "s" / "sessions.db")), "sessions.db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_read_only_state_dir(tmp_path):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    d.chmod(0o500)
    try:
        _fails(SqliteStore(str(d / "sessions.db")), "sessions.db")
    finally:
        d.chmod(0o700)


def test_read_only_database(tmp_path, monkeypatch):
    """A database that cannot be written (here: query_only, as a read-only mount would)."""
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    real = store_mod.connect

    def read_only(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.execute("PRAGMA query_only = 1")
        return conn

    monkeypatch.setattr(store_mod, "connect", read_only)
    s = SqliteStore(path)
    _fails(s, "read-only", path)
    assert s._conn is None and s._open is None


def test_corrupt_file(tmp_path):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    path = d / "sessions.db"
    path.write_bytes(os.urandom(8192))
    s = SqliteStore(str(path))
    for _ in range(2):  # the next begin tries again and fails the same way
        _fails(s, "not a database (corrupt?)", str(path))
    for call in (lambda: list_sessions(str(path)), lambda: reset(str(path), "name:a", "x")):
        with pytest.raises(StoreError, match="not a database"):
            call()


def test_corrupt_page_inside_a_database(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    with open(path, "r+b") as f:  # keep the header, ruin the pages after it
        f.seek(4096)
        f.write(b"\xa5" * (4096 * 3))
    os.unlink(path + "-wal") if os.path.exists(path + "-wal") else None
    s = SqliteStore(path)
    with pytest.raises(StoreError) as info:
        s.begin_blocking(A, "p", "s", T0)
        s.commit_blocking(Saved(b"y" * 5000, 2, 2, True), T0)
    assert "\n" not in info.value.cause and path in info.value.cause


def test_locked_database(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    s = SqliteStore(path, timeout=0.2)
    t = time.monotonic()
    cause = _fails(s, "database is locked", "0.2 s", path)
    assert time.monotonic() - t < 1.5, cause
    holder.execute("COMMIT")
    assert s.begin_blocking(A, "p", "s", T0) == Loaded(1, b"x", 1, 1)  # opened again after the failure
    s.abort_blocking()


def test_locked_at_the_very_first_open(tmp_path):
    """The schema is being created by another wrap: wait, then fail with the lock's cause."""
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    holder = sqlite3.connect(str(d / "sessions.db"), isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    _fails(SqliteStore(str(d / "sessions.db"), timeout=0.1), "database is locked")
    holder.execute("ROLLBACK")


def test_disk_full(tmp_path, monkeypatch):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    real = store_mod.connect

    def small(*args, **kwargs):
        conn = real(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(store_mod, "connect", small)
    s = SqliteStore(path)
    assert s.begin_blocking(A, "p", "s", T0) == Loaded(1, b"x", 1, 1)
    with pytest.raises(StoreError) as info:
        s.commit_blocking(Saved(os.urandom(200_000), 2, 2, True), T0)
    assert info.value.cause == f"disk full, the shared session could not be saved: {path}"
    assert s.begin_blocking(A, "p", "s", T0) == Loaded(1, b"x", 1, 1)  # nothing of it was written
    s.commit_blocking(Saved(b"small", 2, 2, True), T0)


def test_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    _fails(SqliteStore(path), "another assay version", path)


def test_hostile_values_in_the_database(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE sessions SET requests = 'many'")
    conn.commit()
    conn.close()
    s = SqliteStore(path)
    _fails(s, path)
    assert s._open is None


def test_empty_file_gets_the_schema(tmp_path):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    (d / "sessions.db").write_bytes(b"")
    assert SqliteStore(str(d / "sessions.db")).begin_blocking(A, "p", "s", T0) == Loaded(0, None, 0, 0)


def test_values_sqlite_cannot_hold(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    _made(path)
    s = SqliteStore(path)
    s.begin_blocking(A, "p", "s", T0)
    with pytest.raises(StoreError) as info:
        s.commit_blocking(Saved(b"y", 2**64, 1, True), T0)
    assert "\n" not in info.value.cause and path in info.value.cause
    assert s.begin_blocking(A, "p", "s", T0) == Loaded(1, b"x", 1, 1)  # rolled back, opened again
    s.abort_blocking()


def test_two_wraps_creating_the_database_at_once_wait_for_each_other(tmp_path, monkeypatch):
    """Turning a new database to WAL while another connection writes to it is answered "locked"
    at once, without SQLite's busy wait: the store waits for it like for any lock, within its
    timeout (docs/wrap.md, "Shared sessions")."""
    directory = tmp_path / "s"
    ensure_state_dir(str(directory))
    path = str(directory / "sessions.db")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other(a)")
    holder.execute("BEGIN IMMEDIATE")  # a write lock on a database not yet in WAL mode
    waited: list[float] = []

    def sleep(seconds: float) -> None:  # the first wait ends the other writer's transaction
        if not waited:
            holder.execute("COMMIT")
        waited.append(seconds)

    monkeypatch.setattr(sqlitefile.time, "sleep", sleep)
    store = SqliteStore(path, timeout=5)
    loaded = store.begin_blocking(A, "p", "s", T0)
    store.commit_blocking(Saved(b"x", loaded.requests + 1, loaded.tool_calls + 1, True), T0)
    store.close()
    assert waited
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)
