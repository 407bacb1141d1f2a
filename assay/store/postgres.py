"""The agent sessions of several gateways in one Postgres database (docs/serve.md, "Several
replicas").

:class:`PostgresDatabase` is one database and its connection pool (psycopg 3; a small pool of
its own, :class:`assay.store.pgpool._Pool`, that connects on the calling thread; the database part is :mod:`assay.store.pgdatabase`, the schema :mod:`assay.store.pgschema`),
shared by the store objects of one process; :class:`PostgresStore` is the
:class:`assay.policy.storeapi.Store` one link of the gateway holds. The semantics are the
SQLite store's (:mod:`assay.store.sqlite`), with the session's row as the lock instead of the
file's: :meth:`~PostgresStore.begin` takes a connection from the pool, opens a transaction and
locks the session's row (``INSERT ... ON CONFLICT DO UPDATE``, which creates or locks it in one
statement) *before* reading the session's totals and one part's state (both in the schema's
``assay_load``, one statement after ``BEGIN``), so two gateways deciding
for one user at the same instant are serialized on that row, and two users never wait for each
other. :meth:`~PostgresStore.commit` writes and commits; :meth:`~PostgresStore.attempt` is one
statement and one round trip, the schema's ``assay_attempt`` function: it locks the row
(``SELECT ... FOR UPDATE``), compares the part's version and the totals with what the link
decided on, and writes; when they differ it writes nothing and the store opens a transaction as
:meth:`~PostgresStore.begin` does (it stays open with the fresh state). The pool's connections
are in autocommit (that one statement is its own transaction; a longer one begins with an
explicit ``BEGIN``). Reset and sweep lock the rows they change first too (a sweep skips the rows
locked by a call: those are not idle).

The blocking psycopg calls run off the trio thread: a store object's transaction on its own
long-lived thread (:class:`assay.store.thread.StoreThread`; the transaction stays on one
connection), :meth:`~PostgresStore.sessions`, :meth:`~PostgresStore.reset` and
:meth:`~PostgresStore.sweep` in ``trio.to_thread`` workers, each on a pooled connection of its
own. Waiting for another gateway's lock is cut in steps of :data:`LOCK_STEP_MS` (Postgres'
``lock_timeout``) up to the store's ``timeout``, so a cancelled :meth:`~PostgresStore.begin` stops
within one step and leaves nothing open. Every failure (the database down, the pool out of
connections past the timeout, the schema missing) is a :class:`StoreError` with one line, and no
transaction stays open after one; a connection that broke is dropped and a call that had not
written yet is tried once more on a fresh one, and an idle connection the server closed (or
said anything on) is never used, so a restarted database serves the next call. While the
database refuses connections a call fails at once (the last failed attempt is remembered for
:data:`DOWN_S`), not after the timeout.

The schema is versioned (the ``schema_version`` table): :meth:`PostgresDatabase.migrate` creates
or upgrades it (``assay mcp serve --migrate``) and :meth:`PostgresDatabase.schema_problem` is
what a gateway checks at start (it refuses a database whose schema is missing, older or newer).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg.errors
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
    expired,
)
from assay.store.keys import client_alive
from assay.store.pgdatabase import _ERRORS, DOWN_S, LOCK_STEP_MS, Database, _rollback, redacted
from assay.store.pgschema import MIGRATIONS, SCHEMA_VERSION
from assay.store.rows import session_rows
from assay.store.thread import StoreThread, value_of

T = TypeVar("T")

__all__ = [
    "DOWN_S",
    "EVENTS_KEPT",
    "LOCK_STEP_MS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PostgresDatabase",
    "PostgresStore",
    "redacted",
]

EVENTS_KEPT = 1000  # the newest events kept per session


class PostgresDatabase(Database):
    """:class:`~assay.store.pgdatabase.Database` and the store objects made on it."""

    def store(self, alive: Alive | None = None) -> PostgresStore:
        """A new store object (one transaction at a time) on this database's pool."""
        return PostgresStore(self, alive=self.alive if alive is None else alive)


def _written(saved: Saved, now: float, entered: int) -> tuple[Any, ...]:
    """What ``assay_attempt`` and ``assay_write`` take after the row's key and version: the
    totals to write, the time, whether a call entered, this process, the part's state and its
    armed names (JSON)."""
    armed = json.dumps(list(saved.armed)) if saved.state is not None else None
    return (saved.requests, saved.tool_calls, now, entered, os.getpid(), saved.state, armed)


class PostgresStore:
    """:class:`assay.policy.storeapi.Store` in a :class:`PostgresDatabase`. ``alive`` fills
    :attr:`SessionRow.alive` in :meth:`sessions`. A transaction holds one pooled connection
    from :meth:`begin` (or :meth:`attempt`) to its end; between transactions the store object
    holds none. The ``*_blocking`` methods are the same work on the calling thread."""

    def __init__(self, database: PostgresDatabase, *, alive: Alive = client_alive) -> None:
        self.database = database
        self.alive = alive
        self._conn: psycopg.Connection[Any] | None = None
        self._cursor: psycopg.Cursor[Any] | None = None  # the transaction's statements go through one cursor
        self._open: tuple[str, str, str] | None = None
        self._version = 0
        self._writing = False  # the transaction's writes were sent (it is not tried again)
        self._lock = threading.Lock()  # one thread at a time on the transaction
        self._thread = StoreThread()  # where begin, commit, abort and attempt run

    @property
    def where(self) -> str:
        return self.database.where

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
        # not given up on cancel: the write is short (the row is locked) and either all of it is
        # committed or none; the cancellation comes at the next checkpoint
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
            if isinstance(got, Loaded):
                with trio.CancelScope(shield=True):
                    await self._thread.run(self.abort_blocking)
            await trio.lowlevel.checkpoint()  # raises the cancellation
        if isinstance(got, BaseException):
            raise got
        return got

    # -- the same work on the calling thread -----------------------------------------------------

    def _transaction(self, step: Callable[[psycopg.Cursor[Any]], T], stop: threading.Event | None) -> T:
        """``step`` on a cursor of a pooled connection, in a transaction this object keeps (``step`` commits
        it, or it stays open for :meth:`commit`): tried again while the session's row is locked
        (up to the timeout, or until ``stop`` is set) and once on a fresh connection when a pooled
        one turns out broken. On failure nothing stays open and the error is raised."""
        database = self.database
        deadline = time.monotonic() + database.timeout
        fresh_tried = False
        self._writing = False
        while True:
            conn = self._conn = database.take()
            try:
                # one cursor for the transaction's statements (psycopg's conn.execute makes one
                # per statement: a measurable part of a call's CPU)
                self._cursor = conn.cursor()
                return step(self._cursor)
            except psycopg.errors.LockNotAvailable:
                _rollback(conn)
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    raise
                self._release()
            except psycopg.OperationalError:
                if not conn.broken or fresh_tried or self._writing:
                    raise  # (a write that may have reached the database is never sent twice)
                fresh_tried = True  # nothing was written: the database restarted since
                self._release()
                database.drop_broken()
            if stop is not None and stop.is_set():
                raise StoreError("cancelled")

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        self._cursor = None
        if conn is not None:
            _rollback(conn)
            self.database.give(conn)

    def _fail(self, exc: BaseException) -> StoreError:
        """Roll back, give the connection back, and the error."""
        self._open = None
        self._release()
        return self.database.cause(exc)

    def begin_blocking(
        self, session: SessionKey, part: str, server: str, now: float, stop: threading.Event | None = None
    ) -> Loaded:
        """:meth:`begin` on the calling thread; ``stop`` set: give up waiting for the lock."""
        with self._lock:
            if self._open is not None:
                raise RuntimeError("PostgresStore: a transaction is already open")
            try:
                self._open = (session.key, part, server)
                return self._transaction(lambda cur: self._load(cur, session, part, now), stop)
            except _ERRORS as exc:
                raise self._fail(exc) from None

    def _load(self, cur: psycopg.Cursor[Any], session: SessionKey, part: str, now: float) -> Loaded:
        """Lock the session's row (created when absent) and read its totals and ``part``'s state,
        in a new transaction (it stays open): ``BEGIN`` and one statement, the schema's
        ``assay_load``. (Sent in a pipeline the two would be one round trip, but psycopg's
        pipeline mode costs more CPU on both sides than it saves on a near network:
        ``bench/bench_pgstore.py --stale``.)"""
        cur.execute("BEGIN")
        row = cur.execute(
            "SELECT requests, tool_calls, version, state FROM assay_load(%s,%s,%s,%s,%s,%s,%s,%s)",
            (session.key, session.kind, session.pid, session.start, session.name, session.process, now, part),
        ).fetchone()
        assert row is not None
        requests, tool_calls, version, state = row
        if state is not None and not isinstance(state, bytes):
            state = bytes(state)
        self._version = int(version)
        return Loaded(self._version, state, int(requests), int(tool_calls))

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

        def step(cur: psycopg.Cursor[Any]) -> int | Loaded:
            if stop is not None and stop.is_set():
                raise StoreError("cancelled")
            # one statement, one round trip: the server's assay_attempt locks the row, compares and
            # writes, as its own transaction (the connection is in autocommit)
            self._writing = True  # its outcome is unknown if the connection breaks now
            entered = 1 if saved.entered else 0
            got = cur.execute(
                "SELECT assay_attempt(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (
                    session.key,
                    part,
                    server,
                    expect.version,
                    expect.requests,
                    expect.tool_calls,
                    *_written(saved, now, entered),
                ),
            ).fetchone()
            if got is not None and got[0] is not None:
                self._open = None
                self._release()
                return int(got[0])
            # a new session, or another gateway wrote: nothing was written; as begin (it stays open)
            self._writing = False
            if stop is not None and stop.is_set():
                raise StoreError("cancelled")
            return self._load(cur, session, part, now)

        with self._lock:
            if self._open is not None:
                raise RuntimeError("PostgresStore: a transaction is already open")
            try:
                self._open = (session.key, part, server)
                return self._transaction(step, stop)
            except _ERRORS as exc:
                raise self._fail(exc) from None

    def commit_blocking(self, saved: Saved, now: float) -> int:
        """:meth:`commit` on the calling thread."""
        with self._lock:
            if self._open is None or self._conn is None or self._cursor is None:
                raise RuntimeError("PostgresStore: no transaction is open")
            try:
                return self._write(self._conn, self._cursor, saved, now)
            except _ERRORS as exc:
                raise self._fail(exc) from None

    def _write(self, conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any], saved: Saved, now: float) -> int:
        """Write ``saved`` in the open transaction, commit it and give the connection back; the
        part's version now."""
        assert self._open is not None
        key, part, server = self._open
        entered = 1 if saved.entered else 0
        version = self._version
        self._writing = True
        row = cur.execute(
            "SELECT assay_write(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                key,
                part,
                server,
                version,
                *_written(saved, now, entered),
            ),
        ).fetchone()
        conn.commit()
        assert row is not None
        version = int(row[0])
        self._open = None
        self._release()
        return version

    def abort_blocking(self) -> None:
        """:meth:`abort` on the calling thread."""
        with self._lock:
            self._open = None
            self._release()

    def close(self) -> None:
        """Let go of the connection (an open transaction is rolled back). Never raises."""
        self.abort_blocking()

    async def aclose(self) -> None:
        await self._thread.run(self.close)
        self._thread.stop()

    # -- transactions of their own -----------------------------------------------------------------

    async def sessions(self, now: float) -> list[SessionRow]:
        alive = self.alive

        def work(conn: psycopg.Connection[Any]) -> list[SessionRow]:
            rows = session_rows(conn, alive)
            conn.rollback()
            return rows

        return await trio.to_thread.run_sync(self.database.run_blocking, work)

    async def reset(self, key: str, who: str, now: float) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            if conn.execute("SELECT 1 FROM sessions WHERE key = %s FOR UPDATE", (key,)).fetchone() is None:
                conn.rollback()
                return False
            conn.execute("UPDATE parts SET state = NULL, armed = '[]', version = version + 1 WHERE key = %s", (key,))
            conn.execute("UPDATE sessions SET requests = 0, tool_calls = 0 WHERE key = %s", (key,))
            conn.execute("INSERT INTO events(key, time, kind, detail) VALUES (%s,%s,%s,%s)", (key, now, "reset", who))
            conn.execute(
                "DELETE FROM events WHERE key = %s AND id <= "
                "(SELECT id FROM events WHERE key = %s ORDER BY id DESC LIMIT 1 OFFSET %s)",
                (key, key, EVENTS_KEPT),
            )
            conn.commit()
            return True

        return await trio.to_thread.run_sync(self.database.run_blocking, work)

    async def sweep(self, now: float, alive: Alive) -> int:
        def work(conn: psycopg.Connection[Any]) -> int:
            # the rows a call holds are skipped: that session is in use, not idle
            candidates = conn.execute(
                "SELECT key, kind, pid, start, last FROM sessions WHERE kind = 'client' OR last < %s "
                "FOR UPDATE SKIP LOCKED",
                (now - NAMED_IDLE + 1.0,),
            ).fetchall()
            gone = [
                key
                for key, kind, pid, start, last in candidates
                if expired(SessionKey(key=key, kind=kind, pid=pid, start=start), float(last), now, alive)
            ]
            if gone:
                for table in ("parts", "servers", "events", "sessions"):
                    conn.execute(f"DELETE FROM {table} WHERE key = ANY(%s)".encode(), (gone,))
            conn.commit()
            return len(gone)

        return await trio.to_thread.run_sync(self.database.run_blocking, work)
