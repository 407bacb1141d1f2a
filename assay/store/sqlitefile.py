"""The SQLite file of the shared sessions (docs/wrap.md, "Shared sessions"): created private
(mode 0600, never through a symlink), opened in autocommit mode with WAL, the busy deadline and
the schema (made on a new file, refused when another assay version wrote it), a wait while the
file is locked, and every failure as one line for the user.

:class:`assay.store.sqlite.SqliteStore` runs its transactions on the connections made here.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable

from assay.policy.storeapi import StoreError

__all__ = ["SCHEMA_VERSION", "cause", "connect", "rollback", "until_free"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions(
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, pid INTEGER, start TEXT, name TEXT, process TEXT,
    created REAL NOT NULL, last REAL NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0, tool_calls INTEGER NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS parts(
    key TEXT NOT NULL, part TEXT NOT NULL, version INTEGER NOT NULL, state BLOB, armed TEXT,
    PRIMARY KEY(key, part));
CREATE TABLE IF NOT EXISTS servers(
    key TEXT NOT NULL, server TEXT NOT NULL, calls INTEGER NOT NULL, last REAL NOT NULL, pid INTEGER,
    PRIMARY KEY(key, server));
CREATE TABLE IF NOT EXISTS events(
    id INTEGER PRIMARY KEY, key TEXT NOT NULL, time REAL NOT NULL, kind TEXT NOT NULL, detail TEXT);
CREATE INDEX IF NOT EXISTS events_key ON events(key, id);
"""


def cause(exc: BaseException, path: str, timeout: float) -> str:
    """One line for the user: what happened, and the file."""
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
        return f"{exc.strerror or exc}: {path}"
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = " ".join(str(exc).split()) or type(exc).__name__
    low = text.lower()
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in low:
        return f"database is locked (another wrap held it for more than {timeout:g} s): {path}"
    if name.startswith("SQLITE_FULL") or "full" in low:
        return f"disk full, the shared session could not be saved: {path}"
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in low or "malformed" in low:
        return f"not a database (corrupt?): {path}: remove it (its shared sessions are forgotten)"
    if name.startswith("SQLITE_READONLY") or "readonly" in low or "read-only" in low:
        return f"read-only, the shared session could not be saved: {path}"
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in low:
        return f"cannot open the database (a missing or unreadable directory?): {path}"
    return f"{text}: {path}"


# Held while this process creates the database file (:func:`_create`) and while it opens a
# connection to an existing one: the creation's ``close`` never meets a connection of this
# process that is being opened on the file.
_opening = threading.Lock()


def _create(path: str) -> None:
    """Create the database file (mode 0600) when absent; refuse a symlink. The file is never
    opened and closed here when it exists: closing any descriptor of a file drops every POSIX
    lock this process holds on it, those of its open SQLite connections too (``fcntl(2)``).
    SQLite would then go on believing it holds its shared lock on the database while no other
    process sees it, and another process's last connection to close would checkpoint and
    delete the WAL under this one's feet: the commits made after would be lost (a wrap's sweep
    has its own connection open while the store's connects for the first call)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with _opening:
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            if os.path.islink(path):  # what O_NOFOLLOW refused before O_EXCL: never followed
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
            return
        os.close(fd)  # a new file: no connection of this process has it open


def connect(path: str, timeout: float, create: bool) -> sqlite3.Connection:
    """A connection in autocommit mode (the store manages its transactions) with WAL, the busy
    deadline and the schema. ``create``: the file is created (mode 0600) when absent."""
    if create:
        _create(path)
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    else:
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=rw"
        with _opening:
            conn = sqlite3.connect(uri, timeout=timeout, isolation_level=None, check_same_thread=False, uri=True)
    try:
        conn.execute(f"PRAGMA busy_timeout = {max(0, int(timeout * 1000))}")
        until_free(lambda: conn.execute("PRAGMA journal_mode = WAL"), timeout)
        # WAL with synchronous=NORMAL: a crash (a killed wrap, even the OS) leaves the database
        # consistent, as the WAL is synced at each checkpoint; only a power loss may lose the
        # last commits (calls counted since), never corrupt what is there.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA journal_size_limit = 4194304")  # the WAL file shrinks back to 4 MiB
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
        elif version != SCHEMA_VERSION:
            raise StoreError(
                f"the database was written by another assay version (schema {version}, this one reads "
                f"{SCHEMA_VERSION}): {path}"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def until_free(step: Callable[[], object], timeout: float, stop: threading.Event | None = None) -> None:
    """``step`` again while the database is locked, for at most ``timeout`` seconds (or until
    ``stop`` is set: then the last "locked" is raised). Turning a
    new database to WAL needs the file to itself, and SQLite answers "locked" at once, without
    its busy wait, while another connection holds a write lock on it: two wraps creating the
    database at the same instant would otherwise see a spurious failure."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                raise
        wait = min(pause, max(0.0, deadline - time.monotonic()))
        if stop is not None:
            stop.wait(wait)
        else:
            time.sleep(wait)
        pause = min(pause * 2, 0.1)


def rollback(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
