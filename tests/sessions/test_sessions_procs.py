"""Real processes on one database (docs/wrap.md, "Shared sessions"): concurrent wraps never
count past a limit together, and a wrap killed in the middle of a commit leaves a sound
database holding exactly the commits that returned."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import REPO

RACE = """
import sys, time
from assay.policy.storeapi import Saved, SessionKey
from assay.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1], timeout=30)
key = SessionKey(key="name:race", kind="named", name="race")
sys.stdin.read(1)  # wait for the start signal, so all processes run at once
counted = 0
for _ in range(200):
    loaded = store.begin_blocking(key, "p", "srv" + sys.argv[2], time.time())
    if loaded.tool_calls < 50:
        store.commit_blocking(Saved(None, loaded.requests + 1, loaded.tool_calls + 1, True), time.time())
        counted += 1
    else:
        store.commit_blocking(Saved(None, loaded.requests + 1, loaded.tool_calls, False), time.time())
print(counted)
"""

CRASH = """
import sys
from assay.policy.storeapi import Saved, SessionKey
from assay.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1], timeout=30)
key = SessionKey(key="name:crash", kind="named", name="crash")
for i in range(int(sys.argv[2])):
    loaded = store.begin_blocking(key, "p", "srv", 1.8e9 + i)
    state = (b"%d;" % (loaded.tool_calls + 1)) * 300
    store.commit_blocking(Saved(state, loaded.requests + 1, loaded.tool_calls + 1, True, ("r",)), 1.8e9 + i)
    sys.stdout.write("ok\\n")
    sys.stdout.flush()
"""


def _env(base_env: dict[str, str], **extra: str) -> dict[str, str]:
    return {**base_env, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.parametrize("procs", [2, 3, 4])
def test_concurrent_wraps_never_pass_a_limit_together(tmp_path, base_env, procs):
    path = str(tmp_path / "state" / "sessions.db")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, path, str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(base_env),
            text=True,
        )
        for i in range(procs)
    ]
    for child in children:
        child.stdin.write("g")
        child.stdin.close()
        child.stdin = None  # communicate() below reads only
    counted = 0
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        counted += int(out)
    assert counted == 50
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT requests, tool_calls, calls FROM sessions").fetchall() == [(200 * procs, 50, 50)]
    assert conn.execute("SELECT SUM(calls) FROM servers").fetchone() == (50,)


def test_killed_in_commit_leaves_the_commits_that_returned(tmp_path, base_env):
    path = str(tmp_path / "state" / "sessions.db")
    rng = random.Random(22)
    returned = 0
    for _ in range(30):
        kill_at = rng.randint(1, 12)
        child = subprocess.run(
            [sys.executable, "-c", CRASH, path, "12"],
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(base_env, ASSAY_TEST_KILL_IN_COMMIT=str(kill_at)),
        )
        assert child.returncode == -9, child.stderr
        assert child.stdout.count("ok\n") == kill_at - 1
        returned += kill_at - 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
    assert conn.execute("SELECT requests, tool_calls, calls FROM sessions").fetchall() == [
        (returned, returned, returned)
    ]
    version, state = conn.execute("SELECT version, state FROM parts").fetchone()
    assert version == returned and state == (b"%d;" % returned) * 300
