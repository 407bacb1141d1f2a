"""The Store interface's contract (docs/architecture.md, "The Store interface"), the same tests
for every store: MemoryStore, the SQLite store on a file, the Postgres store on a real Postgres
(tests/pgserver.py; docs/serve.md, "Several replicas"), and a slow store with latency and lock
waits (tests/sessions/slowstore.py) standing in for a networked one. Two store objects on one
backing are two processes on one database. ``assay mcp session`` takes the slow store as it
takes the SQLite one: a new store is one class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from assay.policy.storeapi import NAMED_IDLE, Expect, Loaded, MemoryStore, Saved, SessionKey, StoreError
from assay.store.sqlite import SqliteStore
from tests.sessions.slowstore import Backing, SlowStore

T0 = 1_800_000_000.0
A = SessionKey(key="name:a", kind="named", name="a")
B = SessionKey(key="name:b", kind="named", name="b")


def _told(key: SessionKey) -> bool | None:
    """The liveness the tests' stores are built with: what the key's pid says (1: alive, 2: gone,
    else cannot tell); a named session is alive."""
    if key.kind != "client":
        return True
    return {1: True, 2: False}.get(key.pid or 0)


Factory = Callable[[], Any]


@pytest.fixture(params=["memory", "sqlite", "postgres", "slow"])
def stores(request, tmp_path) -> Factory:
    """A maker of store objects on one backing (each call: another process)."""
    if request.param == "memory":
        first = MemoryStore(_told)
        made = [0]

        def memory() -> MemoryStore:
            made[0] += 1
            return first if made[0] == 1 else first.twin()

        return memory
    if request.param == "sqlite":
        path = str(tmp_path / "state" / "sessions.db")
        return lambda: SqliteStore(path, timeout=5.0, alive=_told)
    if request.param == "postgres":
        from assay.store.postgres import PostgresDatabase
        from tests.pgserver import PASSWORD

        database = PostgresDatabase(request.getfixturevalue("pg_server").database(), PASSWORD, timeout=5.0, alive=_told)
        request.addfinalizer(database.close)
        return database.store
    backing = Backing(_told)
    return lambda: SlowStore(backing, latency=0.005)


async def use(
    store: Any,
    key: SessionKey,
    now: float,
    *,
    state: bytes | None = b"s",
    part: str = "p",
    server: str = "srv",
    armed: tuple[str, ...] = ("r",),
    entered: bool = True,
) -> int:
    """One judged call: begin, count it, commit."""
    loaded = await store.begin(key, part, server, now)
    version: int = await store.commit(Saved(state, loaded.requests + 1, loaded.tool_calls + 1, entered, armed), now)
    return version


# -- begin / commit ------------------------------------------------------------------------------


async def test_a_commit_is_seen_by_another_store_object(stores) -> None:
    one, two = stores(), stores()
    assert await one.begin(A, "p", "s1", T0) == Loaded(0, None, 0, 0)
    assert await one.commit(Saved(b"x", 3, 2, True, ("r",)), T0) == 1
    assert await two.begin(A, "p", "s2", T0 + 1) == Loaded(1, b"x", 3, 2)
    await two.abort()
    assert await two.begin(B, "p", "s2", T0 + 1) == Loaded(0, None, 0, 0)  # another session: nothing
    await two.commit(Saved(None, 1, 1, False), T0 + 1)
    await one.aclose()
    await two.aclose()


async def test_an_abort_writes_nothing(stores) -> None:
    one, two = stores(), stores()
    await one.begin(A, "p", "s", T0)
    await one.abort()
    assert await two.sessions(T0) == []
    await two.begin(A, "p", "s", T0)
    await two.commit(Saved(b"x", 1, 1, True), T0)
    await one.begin(A, "p", "s", T0)
    await one.abort()
    assert await one.begin(A, "p", "s", T0) == Loaded(1, b"x", 1, 1)
    await one.abort()


async def test_a_second_writer_waits_for_the_first(stores, request) -> None:
    """Isolation: a begin while another store object's transaction is open returns after that
    commit, and reads what it wrote (MemoryStore is one process: it never waits)."""
    if request.node.callspec.params["stores"] == "memory":
        pytest.skip("MemoryStore is one process: its transactions never overlap")
    one, two = stores(), stores()
    await one.begin(A, "p", "s", T0)
    got: list[Loaded] = []

    async def second() -> None:
        got.append(await two.begin(A, "p", "s", T0))
        await two.commit(Saved(b"y", 9, 9, True), T0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.sleep(0.2)
        assert got == []  # still waiting for the write lock
        await one.commit(Saved(b"x", 5, 5, True), T0)
    assert got == [Loaded(1, b"x", 5, 5)]
    await one.aclose()
    await two.aclose()


# -- attempt: begin and commit in one round trip ------------------------------------------------


async def test_an_attempt_on_what_the_last_commit_left_writes_at_once(stores) -> None:
    one, two = stores(), stores()
    assert await use(one, A, T0) == 1  # the part at version 1, the totals (1, 1)
    got = await one.attempt(A, "p", "srv", Expect(1, 1, 1), Saved(b"y", 2, 2, True, ("r",)), T0 + 1)
    assert got == 2
    assert await two.begin(A, "p", "srv", T0 + 2) == Loaded(2, b"y", 2, 2)  # written and ended
    await two.abort()
    assert await one.attempt(A, "p", "srv", Expect(2, 2, 2), Saved(None, 3, 2, False), T0 + 3) == 2  # no state
    assert (await two.sessions(T0 + 4))[0].calls == 2
    await one.aclose()
    await two.aclose()


async def test_an_attempt_after_another_write_hands_over_the_fresh_state_and_stays_open(stores, request) -> None:
    one, two = stores(), stores()
    await use(one, A, T0)
    await use(two, A, T0 + 1)  # another wrap: the part at version 2, the totals (2, 2)
    got = await one.attempt(A, "p", "srv", Expect(1, 1, 1), Saved(b"stale", 2, 2, True), T0 + 2)
    assert got == Loaded(2, b"s", 2, 2)  # nothing written; the transaction is open
    if request.node.callspec.params["stores"] != "memory":  # another writer waits for it
        begun: list[Loaded] = []

        async def second() -> None:
            begun.append(await two.begin(A, "p", "srv", T0 + 3))
            await two.abort()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.sleep(0.2)
            assert begun == []
            assert await one.commit(Saved(b"z", 3, 3, True), T0 + 2) == 3
        assert begun == [Loaded(3, b"z", 3, 3)]
    else:
        assert await one.commit(Saved(b"z", 3, 3, True), T0 + 2) == 3
    # a write to another part moves only the totals: that is another wrap's write too
    await two.begin(A, "q", "other", T0 + 4)
    await two.commit(Saved(b"q", 4, 4, True), T0 + 4)
    assert await one.attempt(A, "p", "srv", Expect(3, 3, 3), Saved(b"w", 4, 4, True), T0 + 5) == Loaded(3, b"z", 4, 4)
    await one.abort()
    await one.aclose()
    await two.aclose()


async def test_an_attempt_after_a_reset_or_a_sweep_sees_it(stores) -> None:
    one, two = stores(), stores()
    await use(one, A, T0)
    assert await two.reset(A.key, "cli", T0 + 1) is True  # every part's version moves on
    got = await one.attempt(A, "p", "srv", Expect(1, 1, 1), Saved(b"y", 2, 2, True), T0 + 2)
    assert got == Loaded(2, None, 0, 0)
    await one.commit(Saved(b"y", 1, 1, True), T0 + 2)
    assert await two.sweep(T0 + 3 + NAMED_IDLE, _told) == 1  # forgotten: the session starts afresh
    got = await one.attempt(A, "p", "srv", Expect(3, 1, 1), Saved(b"x", 2, 2, True), T0 + 4 + NAMED_IDLE)
    assert got == Loaded(0, None, 0, 0)
    assert await one.commit(Saved(b"x", 1, 1, True), T0 + 4 + NAMED_IDLE) == 1
    assert [(r.key, r.tool_calls) for r in await two.sessions(T0)] == [(A.key, 1)]
    await one.aclose()
    await two.aclose()


async def test_a_cancelled_attempt_writes_nothing_and_leaves_nothing_open(stores, request) -> None:
    """Cancelled while another store object holds the write lock: the attempt stops waiting,
    nothing of it is written, and the store object is usable at once."""
    if request.node.callspec.params["stores"] == "memory":
        pytest.skip("MemoryStore is one process: its transactions never overlap")
    one, two = stores(), stores()
    await use(one, A, T0)
    await use(two, A, T0)  # two's object is open on the file, its cache at version 2
    await one.begin(A, "p", "srv", T0 + 1)  # holds the lock
    with trio.move_on_after(0.3) as scope:
        await two.attempt(A, "p", "srv", Expect(2, 2, 2), Saved(b"never", 3, 3, True), T0 + 1)
    assert scope.cancelled_caught
    assert await one.commit(Saved(b"one", 3, 3, True), T0 + 1) == 3
    assert await two.begin(A, "p", "srv", T0 + 2) == Loaded(3, b"one", 3, 3)
    await two.abort()
    await one.aclose()
    await two.aclose()


# -- sessions, reset, sweep, aclose --------------------------------------------------------------


async def test_nothing_is_listed_or_reset_in_an_empty_store(stores, tmp_path) -> None:
    store = stores()
    assert await store.sessions(T0) == []
    assert await store.reset("name:a", "t", T0) is False
    assert await store.sweep(T0, _told) == 0
    assert not (tmp_path / "state").exists()  # the SQLite store created nothing
    await store.aclose()


async def test_the_list_shows_the_totals(stores) -> None:
    one, two = stores(), stores()
    await use(one, A, T0, server="files", armed=("exfil",))
    await use(two, A, T0 + 1, server="web", armed=("exfil", "again"))
    await use(two, A, T0 + 2, server="web", state=None, entered=False)  # a denied call: not a server's
    await use(one, B, T0 + 3, state=None)
    rows = await two.sessions(T0 + 4)
    assert [r.key for r in rows] == ["name:b", "name:a"]  # the most recent first
    a = rows[1]
    assert (a.kind, a.name, a.pid, a.alive) == ("named", "a", None, True)
    assert (a.requests, a.tool_calls, a.calls) == (3, 3, 2)
    assert [(s.server, s.calls, s.last) for s in a.servers] == [("files", 1, T0), ("web", 1, T0 + 2)]
    assert a.armed == ["again", "exfil"]
    assert (a.created, a.last) == (T0, T0 + 2)
    assert rows[0].armed == [] and rows[0].calls == 1
    await one.aclose()
    await two.aclose()


async def test_reset_then_begin_sees_no_state(stores) -> None:
    one, two = stores(), stores()
    version = await use(one, A, T0)
    await use(one, B, T0)
    assert await two.reset("name:a", "tester", T0 + 1) is True
    assert await one.begin(A, "p", "srv", T0 + 2) == Loaded(version + 1, None, 0, 0)
    await one.abort()
    assert await one.begin(B, "p", "srv", T0 + 2) == Loaded(1, b"s", 1, 1)  # untouched
    await one.abort()
    rows = {r.key: r for r in await one.sessions(T0 + 2)}
    assert rows["name:a"].armed == [] and (rows["name:a"].requests, rows["name:a"].calls) == (0, 1)
    assert rows["name:b"].armed == ["r"]
    assert await two.reset("name:nobody", "tester", T0) is False
    await one.aclose()
    await two.aclose()


def _client(pid: int, ns: str = "") -> SessionKey:
    return SessionKey(key=f"client:{pid}:{pid}@b{ns}", kind="client", pid=pid, start=f"{pid}@b")


async def test_a_sweep_keeps_live_and_unseen_sessions(stores) -> None:
    """A sweep forgets a gone client and what is idle past NAMED_IDLE; a client it cannot see
    (another PID namespace) is kept until it is idle as long, whatever its pid says."""
    live, gone, unseen, unseen_idle = _client(1), _client(2), _client(3, ":ns9"), _client(4, ":ns9")
    team, idle_team = SessionKey(key="name:team", kind="named", name="team"), A
    store = stores()
    late = T0 + NAMED_IDLE + 10
    for key, when in ((live, T0), (gone, late), (unseen_idle, T0), (idle_team, T0), (unseen, late), (team, late)):
        await use(store, key, when)
    seen: list[str] = []

    def alive(key: SessionKey) -> bool | None:  # the sweeping process's view: ns9 is not its own
        seen.append(key.key)
        return None if key.key.endswith(":ns9") else _told(key)

    other = stores()
    assert await other.sweep(late, alive) == 3
    assert {r.key for r in await store.sessions(late)} == {live.key, unseen.key, team.key}
    assert set(seen) >= {live.key, gone.key, unseen.key, unseen_idle.key}
    assert await other.sweep(late, alive) == 0
    # a session swept away starts afresh
    assert await store.begin(idle_team, "p", "srv", late) == Loaded(0, None, 0, 0)
    await store.abort()
    await store.aclose()
    await other.aclose()


async def test_aclose_is_idempotent_and_the_store_opens_again(stores) -> None:
    store = stores()
    await store.aclose()
    await use(store, A, T0)
    await store.aclose()
    await store.aclose()
    assert [r.key for r in await store.sessions(T0)] == ["name:a"]
    await use(store, A, T0 + 1)
    assert (await store.sessions(T0))[0].calls == 2
    await store.aclose()


async def test_a_failing_slow_store_raises_store_error() -> None:
    store = SlowStore(Backing())
    store.fail = "connection refused: db.example:5432"
    for call in (
        store.sessions(T0),
        store.reset("name:a", "t", T0),
        store.sweep(T0, _told),
        store.begin(A, "p", "s", T0),
    ):
        with pytest.raises(StoreError, match="connection refused"):
            await call
    await store.aclose()


# -- the CLI takes any store ---------------------------------------------------------------------


def test_session_list_and_reset_take_any_store(monkeypatch, capsys, tmp_path) -> None:
    """`assay mcp session list|reset` through the slow store: open_store is the one place that
    names the store class."""
    from assay.cli.app import main
    from assay.store import store as store_mod

    backing = Backing(_told)
    store = SlowStore(backing)
    trio.run(use, store, A, T0)
    asked: list[str] = []

    def open_store(directory: str, timeout: float = 2.0) -> SlowStore:
        asked.append(directory)
        return SlowStore(backing)

    monkeypatch.setattr(store_mod, "open_store", open_store)
    state = str(tmp_path / "st")
    assert main(["mcp", "session", "list", "--json", "--state-dir", state]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{"key":"name:a","kind":"named","pid":null,') and '"calls":1' in out
    assert main(["mcp", "session", "reset", "name:a", "--state-dir", state]) == 0
    assert capsys.readouterr().out.startswith("reset name:a:")
    assert main(["mcp", "session", "reset", "name:x", "--state-dir", state]) == 2
    assert "no such shared session: name:x (in slow store in memory)" in capsys.readouterr().err
    backing_failing = SlowStore(backing)
    backing_failing.fail = "connection refused"
    monkeypatch.setattr(store_mod, "open_store", lambda directory, timeout=2.0: backing_failing)
    assert main(["mcp", "session", "list", "--state-dir", state]) == 2
    assert capsys.readouterr().err == "fatal: connection refused\n"
    assert asked == [state, state, state]
