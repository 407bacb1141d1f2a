"""The walk up the parent chain over an injected process table (docs/wrap.md, "Session keys"):
shells and launchers are known by what they execute, not by their command name; pid 1 may be
the client, an init system never is; keys carry the PID namespace and a sweep keeps a session
whose namespace it cannot see until it is idle like a named session."""

from __future__ import annotations

import pytest

from assay.policy.storeapi import Saved, SessionKey
from assay.store import keys
from assay.store.keys import ProcInfo, client_alive, find_client, identity, key_namespace
from assay.store.sqlite import NAMED_IDLE, SqliteStore
from tests.sessions.syncstore import list_sessions, sweep

T0 = 1_800_000_000.0


def P(pid, ppid, comm, exe=None, *argv):  # noqa: N802 - a table row
    return ProcInfo(pid, ppid, comm, f"{pid}0@b", exe, tuple(argv))


def walk(*rows: ProcInfo, first: int = 500) -> int | None:
    table = {r.pid: r for r in rows}
    got = find_client(first, table.get)
    return None if got is None else got.pid


@pytest.mark.parametrize(
    ("row", "name"),
    [
        (P(9, 1, "run-server.sh", "/usr/bin/dash", "/bin/sh", "/opt/run-server.sh"), "dash"),  # a shebang script
        (P(9, 1, "run-server.sh", None, "/bin/sh", "/opt/run-server.sh"), "sh"),  # exe unreadable: argv[0]
        (P(9, 1, "run-server.sh"), "run-server.sh"),  # nothing readable but comm
        (P(9, 1, "run.sh", "/bin/busybox", "/bin/sh", "/opt/run.sh"), "sh"),  # busybox as sh
        (P(9, 1, "busybox", "/bin/busybox", "busybox", "timeout"), "timeout"),
        (P(9, 1, "timeout", "/usr/lib/cargo/bin/coreutils", "timeout", "60"), "timeout"),
        (P(9, 1, "bash", "/usr/bin/bash", "-bash"), "bash"),
        (P(9, 1, "pipx", "/usr/bin/python3.12", "/usr/bin/python3", "/usr/bin/pipx"), "pipx"),
        (P(9, 1, "agent", "/usr/bin/python3.12", "/usr/bin/python3", "/opt/agent.py"), "python3.12"),
        (P(9, 1, "sh", "/usr/bin/node", "node", "/opt/sh"), "node"),  # named like a shell, runs node
    ],
)
def test_identity_is_what_a_process_executes(row, name):
    assert identity(row) == name


def test_a_shebang_wrapper_script_is_skipped_by_its_interpreter():
    client = P(400, 300, "claude", "/usr/bin/node", "node", "/opt/claude/cli.js")
    script = P(500, 400, "run-server.sh", "/usr/bin/dash", "/bin/sh", "/home/u/run-server.sh")
    assert walk(script, client) == 400
    # the same script, its exe unreadable (another user's): its argv[0] tells
    assert walk(script._replace(exe=None), client) == 400
    # a client whose command name is a shell's but which executes node stays the client
    assert walk(P(500, 400, "bash", "/usr/bin/node", "node", "x.js"), client) == 500


def test_launchers_that_stay_the_parent_are_skipped():
    chain = [
        P(500, 490, "timeout", "/usr/bin/timeout", "timeout", "3600"),
        P(490, 480, "setsid", "/usr/bin/setsid", "setsid", "-w"),
        P(480, 470, "uv", "/home/u/.local/bin/uv", "uv", "tool"),
        P(470, 400, "pipx", "/usr/bin/python3", "/usr/bin/python3", "/usr/bin/pipx"),
        P(400, 1, "node", "/usr/bin/node", "node"),
    ]
    assert walk(*chain) == 400


def test_pid_1_is_the_client_unless_it_is_an_init_system():
    sh = P(500, 1, "sh", "/usr/bin/dash", "sh", "-c")
    assert walk(sh, P(1, 0, "node", "/usr/bin/node", "node", "agent.js")) == 1  # the agent of a container
    assert walk(sh, P(1, 0, "bash", "/usr/bin/bash", "bash")) == 1  # a shell at pid 1 started everything
    assert walk(sh, P(1, 0, "systemd", None, "/sbin/init", "splash")) == 500  # the host's init: never
    assert walk(sh, P(1, 0, "tini", "/usr/bin/tini", "tini", "--")) == 500
    assert walk(sh, P(1, 0, "systemd")) == 500
    assert walk(sh) == 500  # pid 1 unreadable
    # the wrap's parent is what it is, even an init system (nothing to skip)
    assert walk(P(500, 0, "tini", "/usr/bin/tini", "tini")) == 500
    # a subreaper (systemd --user) that took over orphaned shells is not their client either
    assert (
        walk(
            sh._replace(ppid=300),
            P(300, 1, "systemd", "/usr/lib/systemd/systemd", "/usr/lib/systemd/systemd", "--user"),
        )
        == 500
    )


def test_keys_carry_the_namespace_and_other_namespaces_are_not_told(monkeypatch):
    monkeypatch.setattr(keys, "_namespace", lambda: "ns11")
    monkeypatch.setattr(keys, "_first_parent", lambda: 500)
    monkeypatch.setattr(keys, "read_process", {500: P(500, 1, "agent", "/usr/bin/node", "node")}.get)
    monkeypatch.setattr(keys, "proc_info", {500: P(500, 1, "agent")}.get)
    key = keys.session_key(None, {})
    assert key is not None and key.key == "client:500:5000@b:ns11" and key_namespace(key) == "ns11"
    assert client_alive(key) is True
    assert client_alive(SessionKey(key="client:500:1@b:ns11", kind="client", pid=500, start="1@b")) is False
    other = SessionKey(key="client:500:5000@b:ns12", kind="client", pid=500, start="5000@b")
    assert client_alive(other) is None  # its pid 500 is not this /proc's pid 500
    assert client_alive(SessionKey(key="client:77:7@b:ns12", kind="client", pid=77, start="7@b")) is None
    old = SessionKey(key="client:500:5000@b", kind="client", pid=500, start="5000@b")  # an older assay's key
    assert key_namespace(old) is None and client_alive(old) is True
    assert client_alive(SessionKey(key="client:77:7@b", kind="client", pid=77, start="7@b")) is False
    assert key_namespace(SessionKey(key="name:a:b:ns1", kind="named", name="a:b:ns1")) is None


def test_a_sweep_keeps_a_session_it_cannot_see_until_it_is_idle(tmp_path):
    path = str(tmp_path / "s" / "sessions.db")
    told = {"client:1:1@b:ns1": None, "client:2:2@b:ns1": None, "client:3:3@b": False}

    def alive(key: SessionKey) -> bool | None:
        return told.get(key.key, True)

    def use(key: str, now: float) -> None:
        sweep(path, now, alive)  # a new wrap: it sweeps when it starts (assay.store.store.serving)
        store = SqliteStore(path, alive=alive)
        pid = int(key.split(":")[1])
        store.begin_blocking(SessionKey(key=key, kind="client", pid=pid, start=key.split(":")[2]), "p", "srv", now)
        store.commit_blocking(Saved(b"s", 1, 1, True), now)
        store.close()

    use("client:1:1@b:ns1", T0)
    use("client:2:2@b:ns1", T0 + NAMED_IDLE)
    use("client:3:3@b", T0 + NAMED_IDLE)
    use("client:4:4@b", T0 + NAMED_IDLE + 1)
    got = {r["key"]: r["alive"] for r in list_sessions(path)}
    assert "client:1:1@b:ns1" not in got  # idle past NAMED_IDLE, in a namespace no one here sees
    assert "client:3:3@b" not in got  # gone as far as this process can tell
    assert set(got) == {"client:2:2@b:ns1", "client:4:4@b"}


def test_the_list_says_it_cannot_tell():
    from assay.cli.session import _table

    row = {
        "key": "client:2:2@b:ns1",
        "kind": "client",
        "name": None,
        "process": "node",
        "servers": [],
        "calls": 1,
        "armed": [],
        "last": T0,
    }
    lines = [_table([{**row, "alive": alive}])[1].split()[2] for alive in (True, False, None)]
    assert lines == ["yes", "no", "?"]
