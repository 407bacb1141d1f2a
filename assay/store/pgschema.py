"""The Postgres store's schema (docs/serve.md, "Several replicas"): its versions, one step each,
and the functions an attempt runs in one round trip. :meth:`assay.store.postgres.PostgresDatabase.migrate`
applies the steps above a database's version (``assay mcp serve --migrate``). Plain data."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_MIGRATE_LOCK = 0x61737361  # the advisory lock two --migrate runs take in turn

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
    (
        3,
        (
            # PostgresStore's read when its call was stale (or the session's first): lock the
            # session's row (created when absent) and hand over the totals and the part's state,
            # one statement where it was two (measured: less CPU on both sides; docs/serve.md,
            # "Several replicas"). The transaction the caller opened stays open with the lock.
            # The part is read by a statement of its own after the lock, so it is what the
            # previous holder committed (READ COMMITTED: a new snapshot per statement).
            """CREATE FUNCTION assay_load(_key text, _kind text, _pid bigint, _start text, _name text,
                _process text, _now double precision, _part text, OUT requests bigint,
                OUT tool_calls bigint, OUT version bigint, OUT state bytea) LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO sessions AS s(key, kind, pid, start, name, process, created, last)
                    VALUES (_key, _kind, _pid, _start, _name, _process, _now, _now)
                    ON CONFLICT (key) DO UPDATE SET kind = s.kind
                    RETURNING s.requests, s.tool_calls INTO requests, tool_calls;
                SELECT p.version, p.state INTO version, state FROM parts p WHERE p.key = _key AND p.part = _part;
                version := coalesce(version, 0);
            END $$""",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
