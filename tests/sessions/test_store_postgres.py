"""The Postgres store beyond the shared contract (docs/serve.md, "Several replicas"), on a real
Postgres the tests start (tests/pgserver.py): several gateways ("replicas", each with its own
database object and pool) deciding for one user at the same instant are serialized on the user's
row, so a per-user limit is counted exactly; the database stopped mid-way is a StoreError (the
call is denied) and the store works again once it is back; the schema is versioned."""

from __future__ import annotations

import time

import pytest
import trio

from assay.policy.storeapi import Expect, Loaded, Saved, SessionKey, StoreError
from assay.store.postgres import DOWN_S, SCHEMA_VERSION, PostgresDatabase
from tests.pgserver import PASSWORD

T0 = 1_800_000_000.0
ALICE = SessionKey(key="user:https://issuer.test#alice", kind="user", name="alice")
BOB = SessionKey(key="user:https://issuer.test#bob", kind="user", name="bob")


async def test_replicas_deciding_at_once_count_a_per_user_limit_exactly(pg_server) -> None:
    """200 calls of one user at the same instant over three replicas (three database objects,
    each with its own pool and four store objects), with a limit of 100 calls: exactly 100 are
    allowed and the store counts 100. Each call first tries :meth:`attempt` on what it last saw
    (stale for all but the first) and decides again on the fresh state, as the session core does.
    Bob's calls meanwhile are counted apart."""
    url = pg_server.database()
    replicas = [PostgresDatabase(url, PASSWORD, pool=4, timeout=30.0) for _ in range(3)]
    stores = [[db.store() for _ in range(4)] for db in replicas]
    free = [trio.Semaphore(1) for _ in range(12)]  # a store object holds one transaction at a time
    allowed: list[int] = []
    denied: list[int] = []
    bob_allowed: list[int] = []
    go = trio.Event()

    async def call(n: int, who: SessionKey, out: list[int]) -> None:
        await go.wait()
        slot = n % 12
        store = stores[slot // 4][slot % 4]
        async with free[slot]:
            got = await store.attempt(who, "p", f"srv{slot // 4}", Expect(0, 0, 0), Saved(b"1", 1, 1, True), T0)
            if isinstance(got, int):  # the very first call of the session: written at once
                out.append(n)
                return
            if got.tool_calls < 100:
                count = got.tool_calls + 1
                await store.commit(Saved(b"%d" % count, got.requests + 1, count, True), T0)
                out.append(n)
            else:
                await store.commit(Saved(None, got.requests + 1, got.tool_calls, False), T0)
                denied.append(n)

    try:
        async with trio.open_nursery() as nursery:
            for n in range(200):
                nursery.start_soon(call, n, ALICE, allowed)
            for n in range(20):
                nursery.start_soon(call, n, BOB, bob_allowed)
            go.set()
        assert len(allowed) == 100 and len(denied) == 100 and len(bob_allowed) == 20
        rows = {r.key: r for r in await stores[1][0].sessions(T0)}
        alice = rows[ALICE.key]
        assert (alice.tool_calls, alice.requests, alice.calls) == (100, 200, 100)
        assert sum(s.calls for s in alice.servers) == 100 and len(alice.servers) == 3
        assert (rows[BOB.key].tool_calls, rows[BOB.key].calls) == (20, 20)
        loaded = await stores[2][3].begin(ALICE, "p", "srv2", T0)
        assert loaded == Loaded(100, b"100", 200, 100)  # every allowed call wrote the part once
        await stores[2][3].abort()
    finally:
        for row in stores:
            for store in row:
                await store.aclose()
        for db in replicas:
            await db.aclose()


async def test_the_database_stopped_midway_denies_and_works_again_after_a_restart(pg_server) -> None:
    """With Postgres stopped, every method raises StoreError (one line, naming the database and
    no password) within the store's timeout and leaves no transaction open; once it is started
    again, the same store objects serve the next calls and nothing written before is lost."""
    url = pg_server.database()
    db = PostgresDatabase(url, PASSWORD, timeout=1.0)
    store, other = db.store(), db.store()
    try:
        loaded = await store.begin(ALICE, "p", "srv", T0)
        assert await store.commit(Saved(b"x", loaded.requests + 1, 1, True), T0) == 1
        await other.begin(ALICE, "p", "srv", T0)  # a transaction open when the database goes
        pg_server.stop()
        try:
            with pytest.raises(StoreError) as caught:
                await other.commit(Saved(b"y", 2, 2, True), T0)
            assert "\n" not in caught.value.cause and PASSWORD not in caught.value.cause
            for attempt in (
                lambda: store.begin(ALICE, "p", "srv", T0),
                lambda: store.attempt(ALICE, "p", "srv", Expect(1, 1, 1), Saved(b"z", 2, 2, True), T0),
                lambda: store.sessions(T0),
                lambda: store.reset(ALICE.key, "t", T0),
                lambda: store.sweep(T0, lambda key: True),
            ):
                started = time.monotonic()
                with pytest.raises(StoreError) as caught:
                    await attempt()
                assert time.monotonic() - started < 10.0
                assert url.rsplit("/", 1)[1] in caught.value.cause and PASSWORD not in caught.value.cause
        finally:
            pg_server.start()
        # back: the first calls may still meet the pool reconnecting; bounded
        with trio.fail_after(30):
            while True:
                try:
                    loaded = await store.begin(ALICE, "p", "srv", T0 + 1)
                    break
                except StoreError:
                    continue
        assert loaded == Loaded(1, b"x", 1, 1)  # the open transaction's commit never landed
        assert await store.commit(Saved(b"w", 2, 2, True), T0 + 1) == 2
        assert await other.begin(ALICE, "p", "srv", T0 + 2) == Loaded(2, b"w", 2, 2)
        await other.abort()
    finally:
        await store.aclose()
        await other.aclose()
        await db.aclose()


async def test_while_the_database_refuses_connections_calls_fail_at_once_and_work_as_soon_as_it_is_back(
    pg_server,
) -> None:
    """With Postgres stopped, a call is denied at once, not after the store's timeout (2 s here):
    the idle connection the server closed is not used, the refused connection is remembered for
    DOWN_S; once the server is back, calls are judged again within DOWN_S."""
    url = pg_server.database()
    db = PostgresDatabase(url, PASSWORD, timeout=2.0)
    store = db.store()
    try:
        loaded = await store.begin(ALICE, "p", "srv", T0)
        version = await store.commit(Saved(b"x", loaded.requests + 1, 1, True), T0)
        pg_server.stop()
        try:
            for n in range(10):
                started = time.monotonic()
                with pytest.raises(StoreError) as caught:
                    if n % 3 == 2:
                        await store.sessions(T0)
                    else:
                        await store.attempt(ALICE, "p", "srv", Expect(version, 1, 1), Saved(b"y", 2, 2, True), T0)
                assert time.monotonic() - started < 0.5, n
                assert url.rsplit("/", 1)[1] in caught.value.cause
        finally:
            pg_server.start()
        back = time.monotonic()
        while True:  # denied at once until DOWN_S after the last refusal, then judged again
            try:
                got = await store.attempt(ALICE, "p", "srv", Expect(version, 1, 1), Saved(b"y", 2, 2, True), T0)
                break
            except StoreError:
                assert time.monotonic() - back < DOWN_S + 1.0
                await trio.sleep(0.01)
        assert got == version + 1  # nothing was written while it was down
    finally:
        await store.aclose()
        await db.aclose()


async def test_the_schema_is_versioned_and_migrated_once(pg_server) -> None:
    url = pg_server.database(migrated=False)
    db = PostgresDatabase(url, PASSWORD)
    assert "no schema yet" in (await db.schema_problem() or "")
    with pytest.raises(StoreError, match="no schema"):
        await db.store().sessions(T0)
    assert await db.migrate() == (0, SCHEMA_VERSION)
    assert await db.migrate() == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert await db.schema_problem() is None
    import psycopg

    with psycopg.connect(url, password=PASSWORD, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = version + 1")
    assert "newer than this assay's" in (await db.schema_problem() or "")
    with pytest.raises(StoreError, match="newer"):
        await db.migrate()
    bad = PostgresDatabase(url, "not-the-password")
    problem = await bad.schema_problem() or ""
    assert problem.startswith("cannot use the session store:") and "not-the-password" not in problem
    await db.aclose()


async def test_migrate_upgrades_a_version_2_database_to_3_and_keeps_its_sessions(pg_server) -> None:
    """A database a version-2 assay made (its steps only) is refused until ``--migrate``, which
    adds what version 3 has (``assay_load``); the session written before is read after."""
    import psycopg

    from assay.store.pgschema import MIGRATIONS

    url = pg_server.database(migrated=False)
    with psycopg.connect(url, password=PASSWORD, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version(version integer NOT NULL)")
        for version, statements in MIGRATIONS:
            if version <= 2:
                for statement in statements:
                    conn.execute(statement.encode())
        conn.execute("INSERT INTO schema_version(version) VALUES (2)")
        conn.execute(
            "INSERT INTO sessions(key, kind, name, created, last, requests, tool_calls) VALUES (%s,'user','alice',%s,%s,7,5)",
            (ALICE.key, T0, T0),
        )
        conn.execute("INSERT INTO parts(key, part, version, state, armed) VALUES (%s,'p',4,'\\x01','[]')", (ALICE.key,))
    db = PostgresDatabase(url, PASSWORD)
    try:
        assert "version 2, this assay needs 3" in (await db.schema_problem() or "")
        assert await db.migrate() == (2, 3) and SCHEMA_VERSION == 3
        assert await db.schema_problem() is None
        store = db.store()
        assert await store.begin(ALICE, "p", "srv", T0) == Loaded(4, b"\x01", 7, 5)
        assert await store.commit(Saved(b"\x02", 8, 6, True), T0) == 5
        await store.aclose()
    finally:
        await db.aclose()


async def test_a_stale_attempt_takes_five_statements(pg_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stale path (another replica wrote since this one's last call; docs/serve.md, "Several
    replicas"): ``assay_attempt`` writes nothing, ``BEGIN`` and ``assay_load`` lock and read in
    one statement, ``assay_write`` and ``COMMIT``: five statements, each one round trip."""
    import psycopg

    db = PostgresDatabase(pg_server.database(), PASSWORD)
    mine, other = db.store(), db.store()
    try:
        await mine.begin(ALICE, "p", "a", T0)
        version = await mine.commit(Saved(b"1", 1, 1, True), T0)
        await other.begin(ALICE, "p", "b", T0)
        await other.commit(Saved(b"2", 2, 2, True), T0)
        sent: list[str] = []
        execute, commit = psycopg.Cursor.execute, psycopg.Connection.commit

        def counted_execute(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
            sent.append(query if isinstance(query, str) else str(query))
            return execute(self, query, *args, **kwargs)

        def counted_commit(self):  # type: ignore[no-untyped-def]
            if self.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                sent.append("COMMIT")
            return commit(self)

        monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Connection, "commit", counted_commit)
        got = await mine.attempt(ALICE, "p", "a", Expect(version, 1, 1), Saved(b"3", 2, 2, True), T0)
        assert got == Loaded(version + 1, b"2", 2, 2)
        assert await mine.commit(Saved(b"3", 3, 3, True), T0) == version + 2
        assert [q.split("(")[0].split(" FROM ")[-1] for q in sent] == [
            "SELECT assay_attempt",
            "BEGIN",
            "assay_load",
            "SELECT assay_write",
            "COMMIT",
        ]
    finally:
        monkeypatch.undo()
        await mine.aclose()
        await other.aclose()
        await db.aclose()


async def test_readiness_reads_the_postgres_schema_and_fails_while_the_database_is_down(pg_server) -> None:
    """serve's /readyz with a Postgres store (docs/serve.md, "Health and metrics"): the probe
    reads the schema; a database without it, or stopped, is not ready (StoreError)."""
    from assay.gateway.config import ServeConfig
    from assay.serve.run import probe_of

    config = ServeConfig(base_dir="/nonexistent", policy="p.yaml", upstreams=())
    ready = PostgresDatabase(pg_server.database(), PASSWORD, pool=1, timeout=5.0)
    bare = PostgresDatabase(pg_server.database(migrated=False), PASSWORD, pool=1, timeout=5.0)
    try:
        await probe_of(config, {}, ready)()  # the schema is there: ready
        with pytest.raises(StoreError, match="migrate"):
            await probe_of(config, {}, bare)()
        pg_server.stop()
        try:
            with pytest.raises(StoreError):
                await probe_of(config, {}, ready)()
        finally:
            pg_server.start()
        await probe_of(config, {}, ready)()  # back: ready again
    finally:
        await ready.aclose()
        await bare.aclose()
