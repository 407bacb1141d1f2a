"""What the SQLite store reads and deletes outside a call's transaction (docs/wrap.md,
"``assay mcp session list`` and ``reset``"): the rows ``session list`` shows, and the sessions a
sweep forgets. Plain functions over an open connection; :mod:`assay.store.sqlite` runs them in
its transactions."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Protocol

from assay.policy.storeapi import Alive, ServerRow, SessionKey, SessionRow, expired


class Reads(Protocol):
    """What :func:`session_rows` asks of a connection: SQLite's or psycopg's (the Postgres
    store, :mod:`assay.store.postgres`)."""

    def execute(self, sql: str, /) -> Any: ...


__all__ = ["forget", "session_rows", "sweep_expired"]


def forget(conn: sqlite3.Connection, keys: list[str]) -> None:
    for table in ("parts", "servers", "events", "sessions"):
        conn.executemany(f"DELETE FROM {table} WHERE key = ?", [(k,) for k in keys])


def sweep_expired(conn: sqlite3.Connection, now: float, alive: Alive) -> int:
    """Forget the sessions :func:`assay.policy.storeapi.expired` at ``now`` (inside the caller's
    transaction); how many."""
    gone: list[str] = []
    for key, kind, pid, start, last in conn.execute("SELECT key, kind, pid, start, last FROM sessions").fetchall():
        if expired(SessionKey(key=key, kind=kind, pid=pid, start=start), float(last), now, alive):
            gone.append(key)
    if gone:
        forget(conn, gone)
    return len(gone)


def session_rows(conn: Reads, alive: Alive) -> list[SessionRow]:
    """Every session of the database, the most recent activity first (then by key)."""
    servers: dict[str, list[ServerRow]] = {}
    for key, server, calls, last, pid in conn.execute(
        "SELECT key, server, calls, last, pid FROM servers ORDER BY key, server"
    ):
        servers.setdefault(key, []).append(ServerRow(str(server), int(calls), float(last), pid))
    armed: dict[str, set[str]] = {}
    for key, text in conn.execute("SELECT key, armed FROM parts WHERE state IS NOT NULL"):
        try:
            ids = json.loads(text) if text else []
        except ValueError:
            ids = []
        armed.setdefault(key, set()).update(str(i) for i in ids if isinstance(ids, list))
    out = []
    for key, kind, pid, start, name, process, created, last, requests, tool_calls, calls in conn.execute(
        "SELECT key, kind, pid, start, name, process, created, last, requests, tool_calls, calls "
        "FROM sessions ORDER BY last DESC, key"
    ):
        session = SessionKey(key=key, kind=kind, pid=pid, start=start, name=name, process=process)
        out.append(
            SessionRow(
                key,
                kind,
                pid,
                process,
                name,
                alive(session),
                servers.get(key, []),
                int(calls),
                int(requests),
                int(tool_calls),
                sorted(armed.get(key, ())),
                float(created),
                float(last),
            )
        )
    return out
