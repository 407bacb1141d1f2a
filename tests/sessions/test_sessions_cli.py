"""`assay mcp session list|reset` on a real database (docs/wrap.md, "Shared sessions")."""

from __future__ import annotations

import json
import os
import subprocess
import time

from assay.policy.storeapi import Loaded, Saved, SessionKey
from assay.store.keys import proc_info
from assay.store.sqlite import SqliteStore
from tests.conftest import ASSAY, REPO

TEAM = SessionKey(key="name:team", kind="named", name="team")


def run(base_env, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ASSAY), "mcp", "session", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base_env, "PYTHONPATH": str(REPO), **env},
    )


def _fill(state) -> tuple[str, SessionKey]:
    path = str(state / "sessions.db")
    me = proc_info(os.getpid())
    start = me.start if me is not None else "unknown"
    client = SessionKey(
        key=f"client:{os.getpid()}:{start}", kind="client", pid=os.getpid(), start=start, process="python"
    )
    store = SqliteStore(path)
    now = time.time()
    for key, server in ((TEAM, "github"), (TEAM, "files"), (TEAM, "files"), (client, "web\x1b[2J")):
        loaded = store.begin_blocking(key, "p", server, now)
        store.commit_blocking(Saved(b"s", loaded.requests + 1, loaded.tool_calls + 1, True, ("exfil",)), now)
    store.close()
    return path, client


def test_list_table_and_json(tmp_path, base_env):
    path, client = _fill(tmp_path / "state")
    res = run(base_env, "list", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["KEY", "CLIENT", "ALIVE", "SERVERS", "CALLS", "ARMED", "LAST"]
    team = next(line for line in lines if line.startswith("name:team"))
    assert team.split()[:6] == ["name:team", "team", "yes", "files(2),github(1)", "3", "exfil"]
    mine = next(line for line in lines if line.startswith("client:"))
    assert mine.split()[:3] == [client.key, "python", "yes"]
    assert "\x1b" not in res.stdout and "web\\x1b[2J(1)" in mine  # a label cannot drive the terminal
    res = run(base_env, "list", "--json", ASSAY_STATE_DIR=str(tmp_path / "state"))
    assert res.returncode == 0, res.stderr
    rows = {r["key"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert rows["name:team"]["calls"] == 3 and rows["name:team"]["armed"] == ["exfil"]
    assert {s["server"]: s["calls"] for s in rows["name:team"]["servers"]} == {"github": 1, "files": 2}
    assert rows[client.key]["alive"] is True and rows[client.key]["pid"] == os.getpid()


def test_reset_then_wraps_read_it_again(tmp_path, base_env):
    path, _client = _fill(tmp_path / "state")
    res = run(base_env, "reset", "name:team", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1 and "name:team" in res.stdout
    store = SqliteStore(path)
    assert store.begin_blocking(TEAM, "p", "files", time.time()) == Loaded(4, None, 0, 0)
    store.abort_blocking()
    rows = {
        r["key"]: r
        for r in map(
            json.loads, run(base_env, "list", "--json", "--state-dir", str(tmp_path / "state")).stdout.splitlines()
        )
    }
    assert rows["name:team"]["armed"] == [] and rows["name:team"]["tool_calls"] == 0


def test_unknown_key_is_one_line_exit_2(tmp_path, base_env):
    _fill(tmp_path / "state")
    res = run(base_env, "reset", "name:nobody", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("fatal: no such shared session: name:nobody")


def test_no_database_creates_nothing(tmp_path, base_env):
    res = run(base_env, "list", "--state-dir", str(tmp_path / "absent"))
    assert res.returncode == 0 and res.stdout == "" and res.stderr.count("\n") == 1
    res = run(base_env, "reset", "name:x", "--state-dir", str(tmp_path / "absent"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    res = run(base_env, "list", "--json", XDG_STATE_HOME=str(tmp_path / "xdg"))
    assert res.returncode == 0 and res.stdout == ""
    assert not (tmp_path / "absent").exists() and not (tmp_path / "xdg").exists()


def test_corrupt_database_is_one_line_exit_2(tmp_path, base_env):
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "sessions.db").write_bytes(b"\x00garbage" * 1000)
    for args in (("list",), ("list", "--json"), ("reset", "name:team")):
        res = run(base_env, *args, "--state-dir", str(tmp_path / "state"))
        assert res.returncode == 2, args
        assert res.stderr.count("\n") == 1 and "not a database" in res.stderr and "Traceback" not in res.stderr


def test_mcp_help_lists_session(base_env):
    res = subprocess.run(
        [str(ASSAY), "mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base_env, "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 0 and " session " in res.stdout


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path, base_env):
    store = SqliteStore(str(tmp_path / "state" / "sessions.db"))
    for i in range(1500):
        key = SessionKey(key=f"name:s{i}", kind="named", name=f"s{i}")
        store.begin_blocking(key, "p", "a-long-server-label-" * 4, time.time())
        store.commit_blocking(Saved(None, 1, 1, True), time.time())
    store.close()
    for args in (("list", "--json"), ("list",)):
        child = subprocess.Popen(
            [str(ASSAY), "mcp", "session", *args, "--state-dir", str(tmp_path / "state")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**base_env, "PYTHONPATH": str(REPO)},
        )
        assert child.stdout.readline()
        child.stdout.close()  # like `| head -1`
        err = child.stderr.read()
        assert child.wait(timeout=60) == 0 and b"Traceback" not in err, err


def test_list_and_reset_through_a_serve_configs_postgres_store(tmp_path, base_env, pg_server):
    """`--config serve.yaml` reads the store the serve config names, here its Postgres database
    (docs/serve.md, "Several replicas"): the users' sessions are listed, one is reset, the
    other keeps its totals; a config that cannot be used and two stores named are one line each,
    exit 2."""
    import sys

    from assay.store.postgres import PostgresDatabase
    from tests.pgserver import PASSWORD

    url = pg_server.database()
    db = PostgresDatabase(url, PASSWORD)
    store = db.store()
    alice = SessionKey(key="user:https://issuer.test#alice", kind="user", name="alice")
    bob = SessionKey(key="user:https://issuer.test#bob", kind="user", name="bob")
    now = time.time()
    for key, server in ((alice, "github"), (alice, "files"), (bob, "files")):
        loaded = store.begin_blocking(key, "p", server, now)
        store.commit_blocking(Saved(b"s", loaded.requests + 1, loaded.tool_calls + 1, True, ("exfil",)), now)
    store.close()
    db.close()
    (tmp_path / "policy.yaml").write_text('version: "2.0"\ntools:\n  allow: ["*"]\n')
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"policy: policy.yaml\nlisten: 127.0.0.1:0\nidentity: {{none: true}}\n"
        f"upstreams:\n  local:\n    command: [{json.dumps(sys.executable)}, -c, pass]\n"
        f"store: {{url: {json.dumps(url)}, password: {{env: PGPASSWORD_ASSAY}}}}\n"
    )
    res = run(base_env, "list", "--config", str(config), PGPASSWORD_ASSAY=PASSWORD)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert next(line for line in lines if line.startswith(alice.key)).split()[:5] == [
        alice.key,
        "alice",
        "yes",
        "files(1),github(1)",
        "2",
    ]
    res = run(base_env, "reset", alice.key, "--config", str(config), PGPASSWORD_ASSAY=PASSWORD)
    assert res.returncode == 0 and res.stdout.startswith(f"reset {alice.key}"), res.stderr
    res = run(base_env, "list", "--json", "--config", str(config), PGPASSWORD_ASSAY=PASSWORD)
    rows = {r["key"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert (rows[alice.key]["tool_calls"], rows[alice.key]["armed"]) == (0, [])
    assert (rows[bob.key]["tool_calls"], rows[bob.key]["armed"]) == (1, ["exfil"])
    # the password's variable not set: one line naming it, never a traceback
    res = run(base_env, "list", "--config", str(config))
    assert (res.returncode, res.stderr.count("\n")) == (2, 1) and "PGPASSWORD_ASSAY" in res.stderr
    res = run(base_env, "list", "--config", str(tmp_path / "absent.yaml"))
    assert (res.returncode, res.stderr.count("\n")) == (2, 1)
    res = run(base_env, "reset", "x", "--config", str(config), "--state-dir", str(tmp_path))
    assert (res.returncode, res.stderr.count("\n")) == (2, 1) and "give one" in res.stderr
