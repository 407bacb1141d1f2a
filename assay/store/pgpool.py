"""The Postgres store's connection pool (docs/serve.md, "Several replicas"): a small pool of its
own that connects on the calling thread, so a database that refuses connections is an error at
once and one that is back serves the next call; an idle connection the server closed (or said
anything on) is never handed out. Blocking: used from the store's worker threads."""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["_Pool", "_PoolTimeout", "_close"]


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
