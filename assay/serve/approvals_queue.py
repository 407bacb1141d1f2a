"""The approvals queue of ``assay mcp serve`` (docs/serve.md, "Out-of-band approvers"): the calls
waiting for a person, in a small SQLite file of the gateway's state directory, that
``assay mcp approvals list|allow|deny`` reads and answers from another process.

One row per call asked: a short random id (what the person types), the user, the upstream, the
tool, the arguments (JSON), when it was asked and when it expires (wall-clock seconds), and its
fate: pending (``decision`` NULL), ``allow`` or ``deny`` (answered, with who answered), or
``withdrawn`` (the gateway settled the call otherwise: it timed out, the client cancelled it, the
link ended). An answer is one ``UPDATE ... WHERE decision IS NULL AND expires > now``: of two
answers to one id the first wins and the second finds it answered. Rows are forgotten once they
expire (at the next question asked).

:class:`ApprovalQueue` has the plain (blocking) operations, which the command line uses as they
are; the gateway awaits the same ones off the trio thread (:meth:`ApprovalQueue.run`).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar
from urllib.parse import quote

import trio

__all__ = ["DB_NAME", "Answered", "ApprovalQueue", "Pending", "QueueError", "queue_path"]

DB_NAME = "approvals.db"
_LOCK_WAIT_S = 5.0  # a writer waits this long for another
_ID_BYTES = 5  # 10 hex digits: short to type, never guessed by accident

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    subject TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    asked REAL NOT NULL,
    expires REAL NOT NULL,
    decision TEXT,
    answered REAL,
    answered_by TEXT
)
"""

R = TypeVar("R")

Answered = Literal["ok", "unknown", "expired", "answered"]
"""What an answer did: ``ok`` (it decided the call), ``unknown`` (no such id), ``expired`` (its
deadline passed, or the gateway settled the call otherwise), ``answered`` (another answer came
first)."""


class QueueError(Exception):
    """The queue cannot be used (one line: the file cannot be opened or read)."""


def queue_path(state_dir: str) -> str:
    """The queue's file in the state directory ``state_dir``."""
    return os.path.join(state_dir, DB_NAME)


@dataclass(frozen=True)
class Pending:
    """One call waiting for a person (what ``approvals list`` shows)."""

    id: str
    subject: str | None
    server: str
    tool: str
    arguments: str  # JSON text
    asked: float
    expires: float


class ApprovalQueue:
    """The queue in the file ``path``. The gateway's object keeps one connection (used by one
    worker thread at a time); ``create=False`` (the command line) never creates the file."""

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.path = path
        self.create = create
        self._conn: sqlite3.Connection | None = None
        self._mutex = threading.Lock()
        self._limiter = trio.CapacityLimiter(1) if create else None

    # -- the connection -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if not self.create and not os.path.exists(self.path):
            raise FileNotFoundError(self.path)
        try:
            uri = f"file:{quote(os.path.abspath(self.path))}?mode={'rwc' if self.create else 'rw'}"
            conn = sqlite3.connect(uri, uri=True, timeout=_LOCK_WAIT_S, isolation_level=None, check_same_thread=False)
            conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise QueueError(f"cannot open the approvals queue {self.path}: {exc}") from None
        self._conn = conn
        return conn

    def _do(self, work: Callable[[sqlite3.Connection], R]) -> R:
        with self._mutex:
            conn = self._connect()
            try:
                return work(conn)
            except sqlite3.Error as exc:
                raise QueueError(f"the approvals queue {self.path}: {exc}") from None

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def run(self, work: Callable[[], R]) -> R:
        """``work`` (one of the operations below) off the trio thread; a cancelled caller still
        waits for it (each is one short statement), so what it did is never lost."""
        return await trio.to_thread.run_sync(work, limiter=self._limiter)

    # -- the gateway's side -------------------------------------------------------------------

    def put(self, subject: str | None, server: str, tool: str, arguments: str, now: float, expires: float) -> str:
        """A new pending call; its id. Rows expired by ``now`` are forgotten first."""

        def work(conn: sqlite3.Connection) -> str:
            conn.execute("DELETE FROM approvals WHERE expires <= ?", (now,))
            while True:
                approval_id = secrets.token_hex(_ID_BYTES)
                try:
                    conn.execute(
                        "INSERT INTO approvals (id, subject, server, tool, arguments, asked, expires)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (approval_id, subject, server, tool, arguments, now, expires),
                    )
                except sqlite3.IntegrityError:  # the same id drawn twice: draw again
                    continue
                return approval_id

        return self._do(work)

    def decision(self, approval_id: str) -> str | None:
        """The call's fate: None (pending, or not there), ``allow``, ``deny`` or ``withdrawn``."""

        def work(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT decision FROM approvals WHERE id = ?", (approval_id,)).fetchone()
            return None if row is None else row[0]

        return self._do(work)

    def withdraw(self, approval_id: str, now: float) -> None:
        """The gateway settled the call otherwise: a later answer finds it expired."""
        self._do(
            lambda conn: conn.execute(
                "UPDATE approvals SET decision = 'withdrawn', answered = ? WHERE id = ? AND decision IS NULL",
                (now, approval_id),
            )
        )

    # -- the person's side (assay mcp approvals) ------------------------------------------------

    def pending(self, now: float) -> list[Pending]:
        """The calls waiting for an answer, oldest first."""

        def work(conn: sqlite3.Connection) -> list[Pending]:
            rows = conn.execute(
                "SELECT id, subject, server, tool, arguments, asked, expires FROM approvals"
                " WHERE decision IS NULL AND expires > ? ORDER BY asked, id",
                (now,),
            ).fetchall()
            return [Pending(*row) for row in rows]

        return self._do(work)

    def answer(self, approval_id: str, decision: Literal["allow", "deny"], by: str, now: float) -> Answered:
        """Answer the pending call ``approval_id``; the first answer wins."""

        def work(conn: sqlite3.Connection) -> Answered:
            done = conn.execute(
                "UPDATE approvals SET decision = ?, answered = ?, answered_by = ?"
                " WHERE id = ? AND decision IS NULL AND expires > ?",
                (decision, now, by, approval_id, now),
            ).rowcount
            if done == 1:
                return "ok"
            row = conn.execute("SELECT decision FROM approvals WHERE id = ?", (approval_id,)).fetchone()
            if row is None:
                return "unknown"
            return "answered" if row[0] in ("allow", "deny") else "expired"

        return self._do(work)
