"""The shared sessions of one machine in one SQLite file (docs/wrap.md, "Shared sessions").

:class:`SqliteStore` is the :class:`assay.policy.storeapi.Store` of every wrap on the machine:
:meth:`~SqliteStore.begin` takes the database's write lock (``BEGIN IMMEDIATE``, so it is held
*before* anything is read: two wraps can never both pass a ``max: 1``) and reads the session's
totals and one part's state; :meth:`~SqliteStore.commit` writes them back and ends the
transaction. :meth:`~SqliteStore.attempt` is both in one trip to the worker thread: under the
same lock it compares the part's version and the totals with what the wrap decided on and
writes, or stays open with the fresh state. A wrap killed in between leaves the database as it was (the transaction never
committed). Every failure is a :class:`StoreError` with a one-line cause; no transaction stays
open after one, and the next :meth:`~SqliteStore.begin` opens the file again.

The file holds one row per session, per (session, part) and per (session, server), and the
``reset`` events (at most :data:`EVENTS_KEPT` per session): nothing grows with the number of
calls. Sessions expire (:func:`assay.policy.storeapi.expired`) when the wrap sweeps
(:meth:`~SqliteStore.sweep`, :func:`assay.store.store.keep_swept`).

:meth:`~SqliteStore.sessions`, :meth:`~SqliteStore.reset` and :meth:`~SqliteStore.sweep` are
transactions of their own, on a connection of their own, in a worker thread (never on the trio
thread); on a database that does not exist they create nothing. ``assay mcp session list|reset``
is them.

The file itself (created private, opened with WAL, the busy deadline and the schema, a failure's
one line) is :mod:`assay.store.sqlitefile`'s.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

import trio

from assay.policy.storeapi import (
    NAMED_IDLE,
    Alive,
    Expect,
    Loaded,
    Saved,
    SessionKey,
    SessionRow,
    StoreError,
)
from assay.statedir import ensure_state_dir
from assay.store.keys import client_alive
from assay.store.rows import session_rows, sweep_expired
from assay.store.sqlitefile import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported: the schema's version
from assay.store.sqlitefile import cause, connect, rollback, until_free
from assay.store.thread import StoreThread, value_of

__all__ = ["EVENTS_KEPT", "NAMED_IDLE", "SCHEMA_VERSION", "SqliteStore"]

EVENTS_KEPT = 1000  # the newest events kept per session

T = TypeVar("T")

# Test hook (tests/sessions/test_crash.py): ASSAY_TEST_KILL_IN_COMMIT=N makes the Nth commit of
# this process SIGKILL itself after its UPDATEs and before COMMIT. Read once per store.
_KILL_ENV = "ASSAY_TEST_KILL_IN_COMMIT"
_commits_done = [0]

_LOCK_STEP_MS = 50  # one wait for the write lock inside SQLite; a cancelled begin stops within it


class SqliteStore:
    """:class:`assay.policy.storeapi.Store` in the SQLite file ``path`` (its directory is created
    private, see :func:`assay.statedir.ensure_state_dir`). ``timeout``: how long
    :meth:`begin` waits for another wrap's transaction. ``alive`` fills
    :attr:`SessionRow.alive` in :meth:`sessions` (whether a client session's process still
    runs, None when this process cannot tell; tests inject it).

    The coroutines run the SQLite work off the event loop, one at a time on one connection, so
    the event loop never waits for the file or for another writer's lock: ``begin``, ``commit``,
    ``abort`` and ``attempt`` on the store's own long-lived thread (:class:`StoreThread`: about
    half the cost of a ``trio.to_thread`` hop, measured; a judged call is one or two hops),
    ``sessions``, ``reset`` and ``sweep`` in ``trio.to_thread`` workers.
    The wait for the lock is cut in steps of :data:`_LOCK_STEP_MS` up to ``timeout``: a
    cancelled :meth:`begin` stops waiting within one step and leaves no transaction open. The
    ``*_blocking`` methods are the same work on the calling thread (tests, and scripts without
    an event loop)."""

    def __init__(self, path: str, timeout: float = 2.0, *, alive: Alive = client_alive) -> None:
        self.path = path
        self.timeout = timeout
        self.alive = alive
        self._conn: sqlite3.Connection | None = None
        self._open: tuple[str, str, str] | None = None
        self._version = 0
        self._lock = threading.Lock()  # one thread at a time on the connection
        self._thread = StoreThread()  # where begin, commit, abort and attempt run
        try:
            self._kill_at = int(os.environ.get(_KILL_ENV, "0"))
        except ValueError:
            self._kill_at = 0

    # -- the Store interface (off the event loop) ------------------------------------------------

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        stop = threading.Event()
        got, cancelled = await self._thread.run(lambda: self.begin_blocking(session, part, server, now, stop), stop)
        if cancelled:  # the thread stopped waiting for the lock; what it opened is rolled back
            if isinstance(got, Loaded):
                with trio.CancelScope(shield=True):
                    await self._thread.run(self.abort_blocking)
            await trio.lowlevel.checkpoint()  # raises the cancellation
        return value_of(got)

    async def commit(self, saved: Saved, now: float) -> int:
        # not given up on cancel: the write is short (the lock is held) and either all of it is
        # committed or none, never left open; the cancellation comes at the next checkpoint
        got, _cancelled = await self._thread.run(lambda: self.commit_blocking(saved, now))
        return value_of(got)

    async def abort(self) -> None:
        await self._thread.run(self.abort_blocking)

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        stop = threading.Event()

        def work() -> int | Loaded:
            return self.attempt_blocking(session, part, server, expect, saved, now, stop)

        got, cancelled = await self._thread.run(work, stop)
        if cancelled and not isinstance(got, int):
            # the thread stopped waiting for the lock and wrote nothing; a transaction it opened
            # is rolled back. (When it wrote before it could stop, the version is returned: the
            # write is the caller's to know, the cancellation comes at its next checkpoint.)
            if isinstance(got, Loaded):
                with trio.CancelScope(shield=True):
                    await self._thread.run(self.abort_blocking)
            await trio.lowlevel.checkpoint()  # raises the cancellation
        if isinstance(got, BaseException):
            raise got
        return got

    # -- the same work on the calling thread -----------------------------------------------------

    def _fail(self, exc: BaseException) -> StoreError:
        """Roll back, drop the connection (the next begin opens the file again), and the error."""
        self._open = None
        conn, self._conn = self._conn, None
        if conn is not None:
            rollback(conn)
            try:
                conn.close()
            except sqlite3.Error:
                pass
        if isinstance(exc, StoreError):
            return exc
        return StoreError(cause(exc, self.path, self.timeout))

    def begin_blocking(
        self, session: SessionKey, part: str, server: str, now: float, stop: threading.Event | None = None
    ) -> Loaded:
        """:meth:`begin` on the calling thread; ``stop`` set: give up waiting for the lock."""
        with self._lock:
            if self._open is not None:
                raise RuntimeError("SqliteStore: a transaction is already open")
            try:
                conn = self._begin(stop)
                self._open = (session.key, part, server)
                return self._load(conn, session, part, now)
            except (sqlite3.Error, OSError, StoreError, ValueError, TypeError, OverflowError) as exc:
                raise self._fail(exc) from None

    def _begin(self, stop: threading.Event | None) -> sqlite3.Connection:
        """The connection (opened when there is none), in a write transaction."""
        conn = self._conn
        if conn is None:
            ensure_state_dir(os.path.dirname(os.path.abspath(self.path)))
            conn = self._conn = connect(self.path, self.timeout, create=True)
            conn.execute(f"PRAGMA busy_timeout = {_LOCK_STEP_MS}")
        until_free(lambda: conn.execute("BEGIN IMMEDIATE"), self.timeout, stop or threading.Event())
        return conn

    def _load(self, conn: sqlite3.Connection, session: SessionKey, part: str, now: float) -> Loaded:
        """The session's totals (its row created when absent) and ``part``'s state, in the open
        transaction."""
        row = conn.execute("SELECT requests, tool_calls FROM sessions WHERE key = ?", (session.key,)).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO sessions(key, kind, pid, start, name, process, created, last) VALUES (?,?,?,?,?,?,?,?)",
                (session.key, session.kind, session.pid, session.start, session.name, session.process, now, now),
            )
            row = (0, 0)
        got = conn.execute(
            "SELECT version, state FROM parts WHERE key = ? AND part = ?", (session.key, part)
        ).fetchone()
        version, state = (0, None) if got is None else (int(got[0]), got[1])
        if state is not None and not isinstance(state, bytes):
            state = bytes(state) if isinstance(state, (bytearray, memoryview)) else str(state).encode()
        self._version = version
        return Loaded(version, state, int(row[0]), int(row[1]))

    def attempt_blocking(
        self,
        session: SessionKey,
        part: str,
        server: str,
        expect: Expect,
        saved: Saved,
        now: float,
        stop: threading.Event | None = None,
    ) -> int | Loaded:
        """:meth:`attempt` on the calling thread; ``stop`` set: give up (before anything is
        written; a :class:`StoreError`)."""
        with self._lock:
            if self._open is not None:
                raise RuntimeError("SqliteStore: a transaction is already open")
            try:
                conn = self._begin(stop)
                if stop is not None and stop.is_set():
                    raise StoreError("cancelled")
                self._open = (session.key, part, server)
                got = conn.execute(
                    "SELECT s.requests, s.tool_calls, p.version FROM sessions AS s "
                    "LEFT JOIN parts AS p ON p.key = s.key AND p.part = ? WHERE s.key = ?",
                    (part, session.key),
                ).fetchone()
                if got is None or (int(got[2] or 0), int(got[0]), int(got[1])) != expect:
                    return self._load(conn, session, part, now)  # another wrap wrote: stay open
                self._version = expect.version
                return self._write(conn, saved, now)
            except (sqlite3.Error, OSError, StoreError, ValueError, TypeError, OverflowError) as exc:
                raise self._fail(exc) from None

    def commit_blocking(self, saved: Saved, now: float) -> int:
        """:meth:`commit` on the calling thread."""
        with self._lock:
            if self._open is None or self._conn is None:
                raise RuntimeError("SqliteStore: no transaction is open")
            try:
                return self._write(self._conn, saved, now)
            except (sqlite3.Error, OSError, ValueError, TypeError, OverflowError) as exc:
                raise self._fail(exc) from None

    def _write(self, conn: sqlite3.Connection, saved: Saved, now: float) -> int:
        """Write ``saved`` in the open transaction and commit it; the part's version now."""
        assert self._open is not None
        key, part, server = self._open
        entered = 1 if saved.entered else 0
        conn.execute(
            "UPDATE sessions SET requests = ?, tool_calls = ?, last = ?, calls = calls + ? WHERE key = ?",
            (saved.requests, saved.tool_calls, now, entered, key),
        )
        conn.execute(
            "INSERT INTO servers(key, server, calls, last, pid) VALUES (?,?,?,?,?) ON CONFLICT(key, server) "
            "DO UPDATE SET calls = calls + excluded.calls, last = excluded.last, pid = excluded.pid",
            (key, server, entered, now, os.getpid()),
        )
        version = self._version
        if saved.state is not None:
            version += 1
            conn.execute(
                "INSERT INTO parts(key, part, version, state, armed) VALUES (?,?,?,?,?) ON CONFLICT(key, part) "
                "DO UPDATE SET version = excluded.version, state = excluded.state, armed = excluded.armed",
                (key, part, version, saved.state, json.dumps(list(saved.armed))),
            )
        if self._kill_at:
            _commits_done[0] += 1
            if _commits_done[0] == self._kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        conn.execute("COMMIT")
        self._open = None
        return version

    def abort_blocking(self) -> None:
        """:meth:`abort` on the calling thread."""
        with self._lock:
            self._open = None
            if self._conn is not None:
                rollback(self._conn)

    def close(self) -> None:
        """Close the file (an open transaction is rolled back). Never raises."""
        self.abort_blocking()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    @property
    def where(self) -> str:
        return self.path

    async def aclose(self) -> None:
        await self._thread.run(self.close)
        self._thread.stop()

    async def _read(self, work: Callable[[sqlite3.Connection], T], absent: T) -> T:
        """``work`` on a connection of its own in a worker thread (so it never waits for, nor
        runs inside, this object's transaction), closed after; ``absent`` when there is no
        database (nothing is created, the state directory neither)."""
        path, timeout = self.path, self.timeout

        def run() -> T:
            if not os.path.exists(path):
                return absent
            try:
                conn = connect(path, timeout, create=False)
            except (sqlite3.Error, OSError) as exc:
                raise StoreError(cause(exc, path, timeout)) from None
            try:
                return work(conn)
            except (sqlite3.Error, OSError, ValueError, TypeError, OverflowError) as exc:
                rollback(conn)
                raise StoreError(cause(exc, path, timeout)) from None
            finally:
                conn.close()

        return await trio.to_thread.run_sync(run)

    async def ping(self) -> None:
        """Whether the database answers, cheaply (a serve's readiness: docs/serve.md, "Health and
        metrics"): opened on a connection of its own and read, in a worker thread; raises
        :class:`StoreError`. No database yet is an answer (the first call creates it)."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("SELECT count(*) FROM sessions WHERE 0").fetchone()

        await self._read(work, None)

    async def sessions(self, now: float) -> list[SessionRow]:
        alive = self.alive
        return await self._read(lambda conn: session_rows(conn, alive), [])

    async def reset(self, key: str, who: str, now: float) -> bool:
        timeout = self.timeout

        def work(conn: sqlite3.Connection) -> bool:
            until_free(lambda: conn.execute("BEGIN IMMEDIATE"), timeout)
            if conn.execute("SELECT 1 FROM sessions WHERE key = ?", (key,)).fetchone() is None:
                conn.execute("ROLLBACK")
                return False
            conn.execute("UPDATE parts SET state = NULL, armed = '[]', version = version + 1 WHERE key = ?", (key,))
            conn.execute("UPDATE sessions SET requests = 0, tool_calls = 0 WHERE key = ?", (key,))
            conn.execute("INSERT INTO events(key, time, kind, detail) VALUES (?,?,?,?)", (key, now, "reset", who))
            conn.execute(
                "DELETE FROM events WHERE key = ? AND id <= "
                "(SELECT id FROM events WHERE key = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (key, key, EVENTS_KEPT),
            )
            conn.execute("COMMIT")
            return True

        return await self._read(work, False)

    async def sweep(self, now: float, alive: Alive) -> int:
        timeout = self.timeout

        def work(conn: sqlite3.Connection) -> int:
            until_free(lambda: conn.execute("BEGIN IMMEDIATE"), timeout)
            gone = sweep_expired(conn, now, alive)
            conn.execute("COMMIT")
            return gone

        return await self._read(work, 0)
