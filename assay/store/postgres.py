"""The agent sessions of several gateways in one Postgres database (docs/serve.md, "Several
replicas").

:class:`PostgresDatabase` is one database and its connection pool (psycopg 3; a small pool of
its own, :class:`_Pool`, that connects on the calling thread),
shared by the store objects of one process; :class:`PostgresStore` is the
:class:`assay.policy.storeapi.Store` one link of the gateway holds. The semantics are the
SQLite store's (:mod:`assay.store.sqlite`), with the session's row as the lock instead of the
file's: :meth:`~PostgresStore.begin` takes a connection from the pool, opens a transaction and
locks the session's row (``INSERT ... ON CONFLICT DO UPDATE``, which creates or locks it in one
statement) *before* reading the session's totals and one part's state, so two gateways deciding
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
import logging
import os
import select
import threading
import time
import urllib.parse
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
from assay.store.rows import session_rows
from assay.store.thread import StoreThread, value_of

__all__ = ["DOWN_S", "EVENTS_KEPT", "LOCK_STEP_MS", "MIGRATIONS", "SCHEMA_VERSION", "PostgresDatabase", "PostgresStore"]

EVENTS_KEPT = 1000  # the newest events kept per session
LOCK_STEP_MS = 50  # one wait for a session's row lock; a cancelled begin stops within it
DOWN_S = 0.5  # after a failed connection attempt, calls fail at once for this long
_MIGRATE_LOCK = 0x61737361  # the advisory lock two --migrate runs take in turn

T = TypeVar("T")

#: The schema, one step per version: ``(version, statements)``; :meth:`PostgresDatabase.migrate`
#: runs the steps above the database's version in one transaction. A new version is one more
#: step here (never an edit of an old one).
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE sessions(
                key text PRIMARY KEY, kind text NOT NULL, pid bigint, start text, name text, process text,
                created double precision NOT NULL, last double precision NOT NULL,
                requests bigint NOT NULL DEFAULT 0, tool_calls bigint NOT NULL DEFAULT 0,
                calls bigint NOT NULL DEFAULT 0)""",
            """CREATE TABLE parts(
                key text NOT NULL, part text NOT NULL, version bigint NOT NULL, state bytea, armed text,
                PRIMARY KEY(key, part))""",
            """CREATE TABLE servers(
                key text NOT NULL, server text NOT NULL, calls bigint NOT NULL,
                last double precision NOT NULL, pid bigint, PRIMARY KEY(key, server))""",
            """CREATE TABLE events(
                id bigserial PRIMARY KEY, key text NOT NULL, time double precision NOT NULL,
                kind text NOT NULL, detail text)""",
            "CREATE INDEX events_key ON events(key, id)",
        ),
    ),
    (
        2,
        (
            # a call's writes (the session's totals, the server's count, the part when it changed):
            # the part's version after them
            """CREATE FUNCTION assay_write(_key text, _part text, _server text, _version bigint,
                _requests bigint, _tool_calls bigint, _now double precision, _entered bigint,
                _pid bigint, _state bytea, _armed text) RETURNS bigint LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE sessions SET requests = _requests, tool_calls = _tool_calls, last = _now,
                    calls = calls + _entered WHERE key = _key;
                INSERT INTO servers(key, server, calls, last, pid) VALUES (_key, _server, _entered, _now, _pid)
                    ON CONFLICT (key, server) DO UPDATE SET calls = servers.calls + excluded.calls,
                    last = excluded.last, pid = excluded.pid;
                IF _state IS NOT NULL THEN
                    _version := _version + 1;
                    INSERT INTO parts(key, part, version, state, armed) VALUES (_key, _part, _version, _state, _armed)
                        ON CONFLICT (key, part) DO UPDATE SET version = excluded.version,
                        state = excluded.state, armed = excluded.armed;
                END IF;
                RETURN _version;
            END $$""",
            # PostgresStore.attempt in one statement: lock the session's row, compare the part's
            # version and the totals with what the call was decided on, and write when they match
            # (the new version) or nothing (NULL: a new session, or another gateway wrote). Each
            # statement of a function takes a new snapshot under READ COMMITTED, so the part read
            # after the lock is what the previous holder committed.
            """CREATE FUNCTION assay_attempt(_key text, _part text, _server text, _expect_version bigint,
                _expect_requests bigint, _expect_tool_calls bigint, _requests bigint, _tool_calls bigint,
                _now double precision, _entered bigint, _pid bigint, _state bytea, _armed text)
                RETURNS bigint LANGUAGE plpgsql AS $$
            DECLARE
                _held record;
                _version bigint;
            BEGIN
                SELECT requests, tool_calls INTO _held FROM sessions WHERE key = _key FOR UPDATE;
                IF NOT FOUND THEN
                    RETURN NULL;
                END IF;
                SELECT version INTO _version FROM parts WHERE key = _key AND part = _part;
                IF coalesce(_version, 0) <> _expect_version OR _held.requests <> _expect_requests
                        OR _held.tool_calls <> _expect_tool_calls THEN
                    RETURN NULL;
                END IF;
                RETURN assay_write(_key, _part, _server, _expect_version, _requests, _tool_calls, _now,
                    _entered, _pid, _state, _armed);
            END $$""",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

# psycopg-pool reports every failed reconnection as a logging warning; the gateway reports the
# store's failures itself (each denied call says why), so they do not go to stderr too
_quiet = logging.getLogger("psycopg")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def redacted(url: str) -> str:
    """``url`` for messages: without a password (the config never holds one, a URL from
    elsewhere might) and without its query."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = user.partition(":")[0] + "@" + host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class _PoolTimeout(Exception):
    """Every connection of the pool stayed in use for the timeout."""


def _close(conn: psycopg.Connection[Any]) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection
        pass


def _idle_and_open(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` can serve the next call: open, outside a transaction, and nothing came
    from the server while it was idle (a server shutting down or restarted says so, or closes the
    socket): a call's one statement may write, so it is never sent on a connection that may be
    dead and then tried again."""
    if conn.closed or conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


class _Pool:
    """At most ``size`` connections made by ``connect``, reused newest first: :meth:`get` gives
    an idle one that is still open, or makes a new one on the calling thread (so a database that
    refuses connections is an error at once, and one that is back is used by the next call),
    waiting at most ``timeout`` while all are in use."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], size: int, timeout: float) -> None:
        self._connect = connect
        self._size = size
        self._timeout = timeout
        self._cond = threading.Condition()
        self._idle: list[psycopg.Connection[Any]] = []
        self._count = 0  # idle or in use
        self._closed = False

    def get(self) -> tuple[psycopg.Connection[Any], bool]:
        """A connection and whether it is new. Raises psycopg's error (a new one failed) or
        :class:`_PoolTimeout`."""
        deadline = time.monotonic() + self._timeout
        with self._cond:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if _idle_and_open(conn):
                        return conn, False
                    self._count -= 1
                    _close(conn)
                if self._count < self._size:
                    self._count += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _PoolTimeout()
                self._cond.wait(left)
        try:
            return self._connect(), True
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def put(self, conn: psycopg.Connection[Any]) -> None:
        """``conn`` back (closed instead when it is broken, in a transaction, or the pool closed)."""
        keep = not conn.closed and conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self._cond:
            if keep and not self._closed:
                self._idle.append(conn)
            else:
                self._count -= 1
            self._cond.notify()
        if not keep or self._closed:
            _close(conn)

    def drop_idle(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            _close(conn)

    def close(self) -> None:
        """Close the idle connections; those in use are closed when they come back."""
        with self._cond:
            self._closed = True
        self.drop_idle()


_ERRORS = (psycopg.Error, _PoolTimeout, StoreError, OSError, ValueError, TypeError, OverflowError)


class PostgresDatabase:
    """One Postgres database of agent sessions (``url``: ``postgresql://user@host:port/db``;
    ``password``: None for none or libpq's own, ``PGPASSWORD`` or ``~/.pgpass``) and the
    connection pool its store objects share (at most ``pool`` connections, opened on first use).
    ``timeout``: how long a call waits for a connection or for another gateway's lock on a
    session. :meth:`store` makes the store objects; :meth:`close` closes the pool (a later use
    opens another)."""

    def __init__(
        self,
        url: str,
        password: str | None = None,
        *,
        pool: int = 10,
        timeout: float = 2.0,
        alive: Alive = client_alive,
    ) -> None:
        self.url = url
        self.where = redacted(url)
        self.timeout = timeout
        self.alive = alive
        self._size = max(1, pool)
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(1, int(timeout + 0.999)),
            "application_name": "assay",
        }
        if password is not None:
            self._kwargs["password"] = password
        self._mutex = threading.Lock()
        self._pool: _Pool | None = None
        # the last failure to connect: (until when new calls fail at once, the error)
        self._down: tuple[float, StoreError] | None = None

    def store(self, alive: Alive | None = None) -> PostgresStore:
        """A new store object (one transaction at a time) on this database's pool."""
        return PostgresStore(self, alive=self.alive if alive is None else alive)

    def _connect_pooled(self) -> psycopg.Connection[Any]:
        """A new connection for the pool: in autocommit (a call's one statement is its own
        transaction, a longer one starts with an explicit ``BEGIN``), with the session's settings
        in one round trip: a lock wait is cut in steps (a cancelled call stops within one), a
        statement never runs past the timeout, a transaction left idle (a gateway stuck) is ended
        by the server."""
        conn = psycopg.connect(self.url, autocommit=True, **self._kwargs)
        try:
            conn.execute(
                f"SET lock_timeout = {LOCK_STEP_MS}; "
                f"SET statement_timeout = {max(100, int(self.timeout * 1000))}; "
                "SET idle_in_transaction_session_timeout = 60000".encode()
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def _connections(self) -> _Pool:
        with self._mutex:
            if self._pool is None:
                self._pool = _Pool(self._connect_pooled, self._size, self.timeout)
            return self._pool

    def take(self) -> psycopg.Connection[Any]:
        """A connection of the pool (blocking, at most ``timeout``): an idle one that is still
        open, or a new one. While the database refuses connections (the last attempt failed less
        than :data:`DOWN_S` ago) a :class:`StoreError` at once, without trying again. Raises
        :class:`StoreError`."""
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise down[1]
        try:
            conn, new = self._connections().get()
        except _ERRORS as exc:
            error = self.cause(exc)
            if isinstance(exc, (psycopg.Error, OSError)):  # the database took no new connection
                self._down = (time.monotonic() + DOWN_S, error)
            raise error from None
        if new:
            self._down = None
        return conn

    def give(self, conn: psycopg.Connection[Any]) -> None:
        """``conn`` back to the pool (dropped when it is broken or not idle). Never raises."""
        pool = self._pool
        if pool is not None:
            pool.put(conn)
        else:
            _close(conn)

    def drop_broken(self) -> None:
        """After a connection broke: drop the pool's idle connections (the database restarted:
        they broke too), so the next call opens a fresh one. Never raises."""
        pool = self._pool
        if pool is not None:
            pool.drop_idle()

    def cause(self, exc: BaseException) -> StoreError:
        """One line for the user about ``exc``, naming the database (never a password)."""
        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, _PoolTimeout):
            return StoreError(
                f"the session store's {self._size} connections stayed busy for {self.timeout:g} s: {self.where}"
            )
        if isinstance(exc, psycopg.errors.UndefinedTable):
            return StoreError(f"the session store has no schema (run assay mcp serve --migrate): {self.where}")
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return StoreError(
                f"the session is locked (another gateway held it for more than {self.timeout:g} s): {self.where}"
            )
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return StoreError(f"the session store took more than {self.timeout:g} s: {self.where}")
        return StoreError(f"{_line(exc)}: {self.where}")

    # -- the schema ------------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection of its own (not the pool's): the schema's work."""
        return psycopg.connect(self.url, **self._kwargs)

    def schema_blocking(self) -> int:
        """The database's schema version (0: none yet). Raises :class:`StoreError`."""
        try:
            with self._connect() as conn:
                try:
                    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                except psycopg.errors.UndefinedTable:
                    return 0
                return int(row[0] or 0) if row is not None else 0
        except _ERRORS as exc:
            raise self.cause(exc) from None

    def migrate_blocking(self) -> tuple[int, int]:
        """Create or upgrade the schema, in one transaction (two runs at once take turns); the
        version before and after. Raises :class:`StoreError` (then nothing changed), also for a
        database of a newer assay."""
        try:
            with self._connect() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version(version integer NOT NULL)")
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                before = int(row[0] or 0) if row is not None else 0
                if before > SCHEMA_VERSION:
                    raise StoreError(self._newer(before))
                for version, statements in MIGRATIONS:
                    if version > before:
                        for statement in statements:
                            conn.execute(statement.encode())
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version(version) VALUES (%s)", (SCHEMA_VERSION,))
                conn.commit()
                return before, SCHEMA_VERSION
        except _ERRORS as exc:
            raise self.cause(exc) from None

    def _newer(self, version: int) -> str:
        return (
            f"the session store's schema is version {version}, newer than this assay's "
            f"({SCHEMA_VERSION}): use a newer assay: {self.where}"
        )

    def schema_problem_blocking(self) -> str | None:
        """Why a gateway cannot use the database as it is (None: it can): unreachable, no schema
        or an older one (run ``--migrate``), a newer one."""
        try:
            version = self.schema_blocking()
        except StoreError as exc:
            return f"cannot use the session store: {exc.cause}"
        if version == 0:
            return f"the session store has no schema yet: run assay mcp serve --config FILE --migrate ({self.where})"
        if version < SCHEMA_VERSION:
            return (
                f"the session store's schema is version {version}, this assay needs {SCHEMA_VERSION}: "
                f"run assay mcp serve --config FILE --migrate ({self.where})"
            )
        if version > SCHEMA_VERSION:
            return self._newer(version)
        return None

    async def schema_problem(self) -> str | None:
        """:meth:`schema_problem_blocking` in a worker thread."""
        return await trio.to_thread.run_sync(self.schema_problem_blocking)

    async def migrate(self) -> tuple[int, int]:
        """:meth:`migrate_blocking` in a worker thread."""
        return await trio.to_thread.run_sync(self.migrate_blocking)

    def close(self) -> None:
        """Close the pool (its connections and threads). Never raises."""
        with self._mutex:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    async def aclose(self) -> None:
        await trio.to_thread.run_sync(self.close)

    # -- a transaction of its own (sessions, reset, sweep) ------------------------------------------

    def run_blocking(self, work: Callable[[psycopg.Connection[Any]], T], stop: threading.Event | None = None) -> T:
        """``work`` in one transaction on a pooled connection, committed by ``work``; tried again
        while a lock is not free (up to ``timeout``) and once when a pooled connection turns out
        broken before anything was written. Raises :class:`StoreError`."""
        deadline = time.monotonic() + self.timeout
        fresh_tried = False
        while True:
            try:
                conn = self.take()
            except _ERRORS as exc:
                raise self.cause(exc) from None
            try:
                conn.execute("BEGIN")
                return work(conn)
            except psycopg.errors.LockNotAvailable as exc:
                _rollback(conn)
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    raise self.cause(exc) from None
            except psycopg.OperationalError as exc:
                if not conn.broken or fresh_tried:
                    _rollback(conn)
                    raise self.cause(exc) from None
                fresh_tried = True
                self.give(conn)
                conn = None  # type: ignore[assignment]
                self.drop_broken()
            except _ERRORS as exc:
                _rollback(conn)
                raise self.cause(exc) from None
            finally:
                if conn is not None:
                    self.give(conn)


def _rollback(conn: psycopg.Connection[Any]) -> None:
    try:
        if not conn.closed:
            conn.rollback()
    except Exception:  # noqa: BLE001 - a broken connection: the pool drops it
        pass


class PostgresStore:
    """:class:`assay.policy.storeapi.Store` in a :class:`PostgresDatabase`. ``alive`` fills
    :attr:`SessionRow.alive` in :meth:`sessions`. A transaction holds one pooled connection
    from :meth:`begin` (or :meth:`attempt`) to its end; between transactions the store object
    holds none. The ``*_blocking`` methods are the same work on the calling thread."""

    def __init__(self, database: PostgresDatabase, *, alive: Alive = client_alive) -> None:
        self.database = database
        self.alive = alive
        self._conn: psycopg.Connection[Any] | None = None
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

    def _transaction(self, step: Callable[[psycopg.Connection[Any]], T], stop: threading.Event | None) -> T:
        """``step`` on a pooled connection, in a transaction this object keeps (``step`` commits
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
                return step(conn)
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
                return self._transaction(lambda conn: self._load(conn, session, part, now), stop)
            except _ERRORS as exc:
                raise self._fail(exc) from None

    def _load(self, conn: psycopg.Connection[Any], session: SessionKey, part: str, now: float) -> Loaded:
        """Lock the session's row (created when absent) and read its totals and ``part``'s state,
        in a new transaction (it stays open)."""
        conn.execute("BEGIN")
        row = conn.execute(
            "INSERT INTO sessions(key, kind, pid, start, name, process, created, last) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (key) DO UPDATE SET kind = sessions.kind "
            "RETURNING requests, tool_calls",
            (session.key, session.kind, session.pid, session.start, session.name, session.process, now, now),
        ).fetchone()
        assert row is not None
        # a statement of its own, after the lock: it sees what the previous holder committed
        got = conn.execute(
            "SELECT version, state FROM parts WHERE key = %s AND part = %s", (session.key, part)
        ).fetchone()
        version, state = (0, None) if got is None else (int(got[0]), got[1])
        if state is not None and not isinstance(state, bytes):
            state = bytes(state)
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

        def step(conn: psycopg.Connection[Any]) -> int | Loaded:
            if stop is not None and stop.is_set():
                raise StoreError("cancelled")
            # one statement, one round trip: the server's assay_attempt locks the row, compares and
            # writes, as its own transaction (the connection is in autocommit)
            self._writing = True  # its outcome is unknown if the connection breaks now
            entered = 1 if saved.entered else 0
            got = conn.execute(
                "SELECT assay_attempt(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (
                    session.key,
                    part,
                    server,
                    expect.version,
                    expect.requests,
                    expect.tool_calls,
                    saved.requests,
                    saved.tool_calls,
                    now,
                    entered,
                    os.getpid(),
                    saved.state,
                    json.dumps(list(saved.armed)) if saved.state is not None else None,
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
            return self._load(conn, session, part, now)

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
            if self._open is None or self._conn is None:
                raise RuntimeError("PostgresStore: no transaction is open")
            try:
                return self._write(self._conn, saved, now)
            except _ERRORS as exc:
                raise self._fail(exc) from None

    def _write(self, conn: psycopg.Connection[Any], saved: Saved, now: float) -> int:
        """Write ``saved`` in the open transaction, commit it and give the connection back; the
        part's version now."""
        assert self._open is not None
        key, part, server = self._open
        entered = 1 if saved.entered else 0
        version = self._version
        self._writing = True
        row = conn.execute(
            "SELECT assay_write(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                key,
                part,
                server,
                version,
                saved.requests,
                saved.tool_calls,
                now,
                entered,
                os.getpid(),
                saved.state,
                json.dumps(list(saved.armed)) if saved.state is not None else None,
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
