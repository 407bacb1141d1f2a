"""Sessions expire (docs/wrap.md, "Shared sessions"): a client session when its client is gone,
at the next open of the database; a named session after NAMED_IDLE without a call."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from assay.policy.shared import Loaded, Saved, SessionKey
from assay.sessions.keys import proc_info
from assay.sessions.sqlite import NAMED_IDLE, SWEEP_EVERY, SqliteStore, list_sessions, reset

T0 = 1_800_000_000.0
OTHER = SessionKey(key="name:other", kind="named", name="other")


def _use(store: SqliteStore, key: SessionKey, now: float) -> None:
    store.begin_blocking(key, "p", "srv", now)
    store.commit_blocking(Saved(b"state", 1, 1, True, ("r",)), now)


def _keys(path: str) -> set[str]:
    return {r["key"] for r in list_sessions(path)}


def _counts(path: str) -> tuple[int, ...]:
    conn = sqlite3.connect(path)
    return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "parts", "servers", "events"))


def test_a_gone_client_is_forgotten_at_the_next_open(tmp_path):
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
    _use(first, OTHER, T0 + 1)  # the same process within SWEEP_EVERY: no sweep yet
    assert dead.key in _keys(path)
    _use(SqliteStore(path), OTHER, T0 + 2)  # another process opens the file
    assert _keys(path) == {live.key, OTHER.key}
    assert _counts(path) == (2, 2, 2, 0)  # its parts, servers and events went with it


def test_named_sessions_expire_when_idle(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    team = SessionKey(key="name:team", kind="named", name="team")
    _use(SqliteStore(path), team, T0)
    _use(SqliteStore(path), OTHER, T0 + NAMED_IDLE - 1)
    assert team.key in _keys(path)
    store = SqliteStore(path)
    _use(store, OTHER, T0 + NAMED_IDLE + 1)
    assert _keys(path) == {OTHER.key}
    assert _counts(path) == (1, 1, 1, 0)
    # an expired session used again starts afresh
    assert store.begin_blocking(team, "p", "srv", T0 + NAMED_IDLE + 2) == Loaded(0, None, 0, 0)
    store.abort_blocking()


def test_sweeps_inside_one_process_at_most_every_minute(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    team = SessionKey(key="name:team", kind="named", name="team")
    seen: list[str] = []

    def alive(key: SessionKey) -> bool:
        seen.append(key.key)
        return True

    store = SqliteStore(path, alive=alive)
    client = SessionKey(key="client:1:1@x", kind="client", pid=1, start="1@x")
    _use(store, client, T0)
    _use(store, team, T0)
    assert seen == []  # the first sweep ran before the client existed
    late = T0 + NAMED_IDLE + 10
    _use(store, OTHER, T0 + SWEEP_EVERY - 1)
    assert seen == [] and team.key in _keys(path)
    _use(store, OTHER, late)  # more than a minute since the last sweep (and the team idle)
    assert seen == [client.key]
    assert team.key not in _keys(path)
