"""Sessions expire (docs/wrap.md, "The state directory and its database"): a client session when
its client is gone, a named session after NAMED_IDLE without a call, at the next sweep; a wrap
sweeps through its store's interface when it starts and then every SWEEP_EVERY seconds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import trio

from assay.policy.storeapi import Loaded, MemoryStore, Saved, SessionKey
from assay.store.keys import proc_info
from assay.store.sqlite import NAMED_IDLE, SqliteStore
from assay.store.store import SWEEP_EVERY, serving
from tests.sessions.syncstore import list_sessions, reset, sweep

T0 = 1_800_000_000.0
OTHER = SessionKey(key="name:other", kind="named", name="other")


def _use(store: SqliteStore, key: SessionKey, now: float) -> None:
    store.begin_blocking(key, "p", "srv", now)
    store.commit_blocking(Saved(b"state", 1, 1, True, ("r",)), now)


def _keys(path: str) -> set[str]:
    return {r["key"] for r in list_sessions(path)}


def _counts(path: str) -> tuple[int, ...]:
    conn = sqlite3.connect(path)
    return tuple(
        conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "parts", "servers", "events")
    )


def test_a_gone_client_is_forgotten_at_the_next_sweep(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(child.stdout)
    dead = SessionKey(key=f"client:{dead_pid}:5@x", kind="client", pid=dead_pid, start="5@x")
    me = proc_info(os.getpid())
    start = me.start if me is not None else "unknown"
    live = SessionKey(key=f"client:{os.getpid()}:{start}", kind="client", pid=os.getpid(), start=start)
    first = SqliteStore(path)
    _use(first, dead, T0)
    _use(first, live, T0)
    assert reset(path, dead.key, "t", now=T0)
    assert _keys(path) == {dead.key, live.key}
    _use(first, OTHER, T0 + 1)  # a call never sweeps
    assert dead.key in _keys(path)
    assert sweep(path, T0 + 2) == 1  # another wrap starts
    assert _keys(path) == {live.key, OTHER.key}
    assert _counts(path) == (2, 2, 2, 0)  # its parts, servers and events went with it
    assert sweep(path, T0 + 3) == 0


def test_named_sessions_expire_when_idle(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    team = SessionKey(key="name:team", kind="named", name="team")
    _use(SqliteStore(path), team, T0)
    _use(SqliteStore(path), OTHER, T0 + NAMED_IDLE - 1)
    assert sweep(path, T0 + NAMED_IDLE - 1) == 0
    assert team.key in _keys(path)
    store = SqliteStore(path)
    assert sweep(path, T0 + NAMED_IDLE + 1) == 1
    _use(store, OTHER, T0 + NAMED_IDLE + 1)
    assert _keys(path) == {OTHER.key}
    assert _counts(path) == (1, 1, 1, 0)
    # an expired session used again starts afresh
    assert store.begin_blocking(team, "p", "srv", T0 + NAMED_IDLE + 2) == Loaded(0, None, 0, 0)
    store.abort_blocking()


def test_a_sweep_of_no_database_creates_nothing(tmp_path):
    assert sweep(str(tmp_path / "none" / "sessions.db"), T0) == 0
    assert not (tmp_path / "none").exists()


class _Watched(MemoryStore):
    """A store that says when it is swept and closed."""

    def __init__(self) -> None:
        super().__init__()
        self.swept: list[float] = []
        self.closed = 0

    async def sweep(self, now, alive):
        self.swept.append(now)
        return await super().sweep(now, alive)

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_wrap_sweeps_when_it_starts_then_every_minute_and_closes_its_store(autojump_clock):
    store = _Watched()
    start = trio.current_time()
    async with serving(store, clock=trio.current_time):
        await trio.sleep(2.5 * SWEEP_EVERY)
        assert store.closed == 0
    assert [t - start for t in store.swept] == [0, SWEEP_EVERY, 2 * SWEEP_EVERY]
    assert store.closed == 1
    await trio.sleep(2 * SWEEP_EVERY)
    assert len(store.swept) == 3  # no sweep after the wrap


async def test_what_the_wrap_raises_comes_out_as_itself_and_the_store_is_closed(autojump_clock):
    store = _Watched()
    try:
        async with serving(store, clock=trio.current_time):
            raise KeyError("x")
    except KeyError:
        pass
    assert store.closed == 1 and len(store.swept) <= 1
    with trio.move_on_after(1):  # a cancelled wrap closes its store too
        async with serving(store, clock=trio.current_time):
            await trio.sleep_forever()
    assert store.closed == 2
