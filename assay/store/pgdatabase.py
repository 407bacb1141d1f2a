"""One Postgres database of agent sessions (docs/serve.md, "Several replicas"): its connection
pool (:mod:`assay.store.pgpool`), its schema (:mod:`assay.store.pgschema`; ``--migrate`` and the
check at start), and one transaction's work on a pooled connection, with the errors told in one
line that never names a password. Blocking: the store objects (:mod:`assay.store.postgres`) run
it off the trio thread."""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg.errors
import trio

from assay.policy.storeapi import Alive, StoreError
from assay.store.keys import client_alive
from assay.store.pgpool import _Pool, _PoolTimeout, _close
from assay.store.pgschema import _MIGRATE_LOCK, MIGRATIONS, SCHEMA_VERSION

__all__ = ["DOWN_S", "LOCK_STEP_MS", "Database", "redacted"]

LOCK_STEP_MS = 50  # one wait for a session's row lock; a cancelled begin stops within it
DOWN_S = 0.5  # after a failed connection attempt, calls fail at once for this long

T = TypeVar("T")


# psycopg reports some connection failures as logging warnings; the gateway reports the store's
# failures itself (each denied call says why), so they do not go to stderr too
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


_ERRORS = (psycopg.Error, _PoolTimeout, StoreError, OSError, ValueError, TypeError, OverflowError)


class Database:
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
