"""Which shared session a wrap belongs to (docs/wrap.md, "Shared sessions"): the client found up
the parent chain past shells, identified by pid and start time; named sessions; ``none``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from assay.store import keys
from assay.store.keys import client_alive, parse_stat, session_key
from tests.conftest import REPO

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _stat(pid: int, comm: str, ppid: int, start: int) -> str:
    rest = ["S", str(ppid)] + ["0"] * 17 + [str(start)] + ["0"] * 30
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


def test_parse_stat_takes_the_fields_after_the_last_parenthesis():
    assert parse_stat(_stat(7, "a) (b) S 9 ", 42, 12345)) == ("a) (b) S 9 ", 42, 12345)
    assert parse_stat(_stat(7, "", 1, 0)) == ("", 1, 0)
    for bad in ("", "7 comm S 1", "7 (x) S", "7 (x) S one 2", _stat(7, "x", -3, 1)):
        with pytest.raises(ValueError):
            parse_stat(bad)


@pytest.fixture
def fake_proc(tmp_path, monkeypatch):
    """A /proc of our own: ``write(pid, comm, ppid, start)``; the wrap's parent is 500, its PID
    namespace ``ns7``."""
    root = tmp_path / "proc"
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text("0123abcd-0000-1111-2222-333344445555\n")

    def info(pid: int):
        try:
            comm, ppid, start = parse_stat((root / str(pid) / "stat").read_text())
        except (OSError, ValueError):
            return None
        return keys.ProcInfo(pid, ppid, comm, f"{start}@boot")

    def write(pid: int, comm: str, ppid: int, start: int) -> None:
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(_stat(pid, comm, ppid, start))

    monkeypatch.setattr(keys, "proc_info", info)
    monkeypatch.setattr(keys, "read_process", info)
    monkeypatch.setattr(keys, "_first_parent", lambda: 500)
    monkeypatch.setattr(keys, "_namespace", lambda: "ns7")
    return write


def test_shells_are_skipped_and_a_reused_pid_is_a_new_session(fake_proc):
    fake_proc(500, "sh", 450, 30)
    fake_proc(450, "env", 400, 20)
    fake_proc(400, "my (client) app", 1, 111)
    key = session_key("client", {})
    assert key is not None
    assert (key.key, key.kind, key.pid, key.start, key.process) == (
        "client:400:111@boot:ns7",
        "client",
        400,
        "111@boot",
        "my (client) app",
    )
    assert client_alive(key)
    fake_proc(400, "my (client) app", 1, 222)  # pid 400 reused by a later process
    again = session_key("client", {})
    assert again is not None and again.key == "client:400:222@boot:ns7" != key.key
    assert not client_alive(key) and client_alive(again)


def test_launchers_are_skipped_but_node_and_python_are_clients(fake_proc):
    fake_proc(500, "uv", 450, 30)  # uvx assay mcp wrap ... (uvx runs uv, uv runs assay)
    fake_proc(450, "uvx", 400, 20)
    fake_proc(400, "node", 1, 111)  # a TypeScript host is a node process: the client
    key = session_key("client", {})
    assert key is not None and key.key == "client:400:111@boot:ns7"
    fake_proc(500, "python3", 1, 5)  # a Python host
    assert session_key("client", {}).key == "client:500:5@boot:ns7"


def test_all_shells_up_to_init_name_the_last_one(fake_proc):
    fake_proc(500, "sh", 450, 30)
    fake_proc(450, "bash", 1, 20)
    key = session_key(None, {})
    assert key is not None and key.key == "client:450:20@boot:ns7"


def test_a_looping_parent_chain_ends(fake_proc):
    fake_proc(500, "sh", 450, 30)
    fake_proc(450, "sh", 500, 20)
    key = session_key(None, {})
    assert key is not None and key.pid in (450, 500)


def test_unknown_process_falls_back_to_its_pid(fake_proc):
    key = session_key(None, {})  # no /proc entry for 500
    assert key is not None and key.key == "client:500:unknown:ns7"


def test_none_named_and_the_environment(monkeypatch):
    assert session_key("none", {}) is None
    assert session_key(None, {"ASSAY_SHARED_SESSION": "none"}) is None
    named = session_key(None, {"ASSAY_SHARED_SESSION": "team one"})
    assert named is not None and (named.key, named.kind, named.name, named.pid) == (
        "name:team one",
        "named",
        "team one",
        None,
    )
    assert session_key("x", {"ASSAY_SHARED_SESSION": "none"}).key == "name:x"  # the option wins
    assert session_key("é" * 128, {}).key == "name:" + "é" * 128
    assert client_alive(named)


@pytest.mark.parametrize("bad", ["", "a" * 129, "a\nb", "\x1b[31mred", "tab\there", "nul\x00", "\u2028"])
def test_bad_names_are_one_line_value_errors(bad):
    with pytest.raises(ValueError) as info:
        session_key(bad, {})
    assert "\n" not in str(info.value)


SHOW = textwrap.dedent("""\
    from assay.store.keys import session_key
    key = session_key(None, {})
    print(key.pid, key.key)
""")


@linux
def test_real_shells_between_the_client_and_the_wrap_are_skipped(tmp_path, base_env):
    """This test process runs ``sh -c "bash -c 'python show.py; true'; true"`` (the trailing
    commands keep each shell from exec'ing): the key names this process, two shells up."""
    import os
    import shutil

    script = tmp_path / "show.py"
    script.write_text(SHOW)
    env = {**base_env, "PYTHONPATH": str(REPO)}
    inner = "bash" if shutil.which("bash") else "sh"
    line = f"{inner} -c '{sys.executable} {script}; true'; true"
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    pid, key = out.stdout.split()
    assert int(pid) == os.getpid()
    me = keys.proc_info(os.getpid())
    assert me is not None and key == f"client:{os.getpid()}:{me.start}:{keys._namespace()}"
    # control: a parent that is not a shell is the client itself
    via = textwrap.dedent(f"""\
        import subprocess, sys, os
        r = subprocess.run([sys.executable, {str(script)!r}], capture_output=True, text=True)
        print(os.getpid(), r.stdout.strip())
    """)
    out = subprocess.run([sys.executable, "-c", via], capture_output=True, text=True, timeout=60, env=env)
    parent, pid, _key = out.stdout.split()
    assert parent == pid != str(os.getpid())


@linux
def test_client_alive_follows_a_real_process():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        info = keys.proc_info(child.pid)
        assert info is not None
        key = keys.SessionKey(key=f"client:{child.pid}:{info.start}", kind="client", pid=child.pid, start=info.start)
        assert client_alive(key)
        stale = keys.SessionKey(key="k", kind="client", pid=child.pid, start="1@" + info.start.split("@")[1])
        assert not client_alive(stale)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert not client_alive(key)
