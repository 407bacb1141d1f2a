"""The client a wrap names, with real processes (docs/wrap.md, "Session keys"): a ``#!/bin/sh``
wrapper script and launchers that stay the parent (``timeout``, ``setsid -w``) are skipped by
what they execute; a client that is PID 1 (the agent of a container) is the client of the wraps
it starts through ``sh -c``; and a wrap in another PID namespace sharing the state directory
neither deletes the sessions of this one nor has its own deleted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from assay.store import keys
from tests.sessions.syncstore import list_sessions
from tests.conftest import ASSAY, REPO

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
RECORDER = REPO / "tests" / "wrap" / "fixtures" / "recording_server.py"

# the key a wrap would take, and what its parent is (so a test shows its set-up is what it says)
SHOW = textwrap.dedent("""\
    import os
    from assay.store.keys import proc_info, session_key
    try:
        os.readlink(f"/proc/{os.getppid()}/exe")
        exe = "exe"
    except OSError:
        exe = "no-exe"
    parent = proc_info(os.getppid())
    print(session_key(None, {}).key, parent.comm, exe)
""")


def _unshare_ok() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


unshare = pytest.mark.skipif(not _unshare_ok(), reason="needs unshare --pid --mount-proc (root)")
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _env(base_env: dict[str, str]) -> dict[str, str]:
    return {**base_env, "PYTHONPATH": str(REPO)}


def _mine(key: str) -> bool:
    """Whether ``key`` names this test process as the client (in this namespace)."""
    me = keys.proc_info(os.getpid())
    assert me is not None
    return key.split(":")[:3] == ["client", str(os.getpid()), me.start] and key == key_of_mine(me.start)


def key_of_mine(start: str) -> str:
    return f"client:{os.getpid()}:{start}:{keys._namespace()}"


def _show(argv: list[str], env: dict[str, str], **kw) -> list[str]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env, **kw)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@linux
@pytest.mark.parametrize("shebang", ["#!/bin/sh", "#!/bin/bash"])
def test_a_shebang_wrapper_script_is_skipped(tmp_path, base_env, shebang):
    """The client starts ``run-server.sh``, which runs the wrap as its child: the process is
    named after the script, but it executes a shell."""
    script = tmp_path / "run-server.sh"
    script.write_text(f"{shebang}\n{sys.executable} -c '{SHOW}'\nexit $?\n")
    script.chmod(0o755)
    key, parent, _exe = _show([str(script)], _env(base_env))
    assert parent == "run-server.sh"
    assert _mine(key), key


@linux
def test_a_shebang_wrapper_script_of_another_user_is_skipped_by_its_arguments(tmp_path, base_env):
    """The wrap runs as another user than the script and its client: ``/proc/<pid>/exe`` of
    theirs is unreadable, their ``argv[0]`` (the interpreter, ``/bin/sh``) tells."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the wrap as another user")
    script = tmp_path / "run-server.sh"
    script.write_text(
        f"#!/bin/sh\nsetpriv --reuid=65534 --regid=65534 --clear-groups {sys.executable} -c '{SHOW}'\nexit $?\n"
    )
    script.chmod(0o755)
    got = _show([str(script)], {**_env(base_env), "HOME": "/"}, cwd="/")
    if got[1:] != ["run-server.sh", "no-exe"]:
        pytest.skip(f"this system lets the other user read the script's exe: {got}")
    assert _mine(got[0]), got


@linux
def test_launchers_that_stay_the_parent_are_skipped(base_env):
    """``setsid -w`` (forking: the wrap's caller leads its group) and ``timeout`` stay between
    the client and the wrap; ``env``, ``nice``, ``nohup`` and ``stdbuf`` exec what follows."""
    argv = [
        "setsid",
        "-w",
        "timeout",
        "30",
        "env",
        "X=1",
        "nice",
        "-n",
        "1",
        "nohup",
        "stdbuf",
        "-o0",
        "timeout",
        "20",
        sys.executable,
        "-c",
        SHOW,
    ]
    key, parent, _exe = _show(argv, _env(base_env), start_new_session=True, stdin=subprocess.DEVNULL)
    assert parent == "timeout"
    assert _mine(key), key


CLIENT = textwrap.dedent("""\
    import os, subprocess, sys
    # PID 1 of its namespace starts two wraps through `sh -c` (the sh stays: `; true`)
    keys = [subprocess.run(["sh", "-c", sys.executable + " -c '" + sys.argv[1] + "'; true"],
                           capture_output=True, text=True, check=True).stdout.split()[0] for _ in range(2)]
    print(os.getpid(), *keys)
""")


@unshare
def test_a_client_that_is_pid_1_is_the_client(base_env):
    pid, first, second = _show([*UNSHARE, sys.executable, "-c", CLIENT, SHOW], _env(base_env))
    assert pid == "1"
    assert first.startswith("client:1:") and second.startswith("client:1:"), (first, second)
    assert first == second
    assert keys.key_namespace(keys.SessionKey(first, "client")) not in (None, keys._namespace())


AGENT = textwrap.dedent("""\
    import json, subprocess, sys
    assay, policy, state, recorder, record = sys.argv[1:6]
    def wrap(label):
        line = (f"{assay} mcp wrap --policy {policy} --state-dir {state} --label {label} "
                f"-- {sys.executable} {recorder} {record}.{label}; true")
        return subprocess.Popen(["sh", "-c", line], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def ask(proc, rid, method, params):
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())
    files, web = wrap("files"), wrap("web")
    for proc in (files, web):
        ask(proc, 0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "agent", "version": "1"}})
    read = ask(files, 1, "tools/call", {"name": "read_file", "arguments": {"path": "/ws/secrets/token.env"}})
    sent = ask(web, 1, "tools/call", {"name": "fetch", "arguments": {"url": "http://127.0.0.1:9/x"}})
    for proc in (files, web):
        proc.stdin.close()
        proc.wait()
    print(json.dumps({"read": read, "sent": sent}))
""")

FLOW = """\
version: "2.0"
tools:
  allow: ["*"]
sequences:
  - { type: never_after, id: no-send-after-secret, trigger: "read_*", forbidden: fetch }
"""


@unshare
def test_a_pid_1_agent_has_one_session_across_its_servers(tmp_path, base_env):
    """End to end: the agent is PID 1 of its namespace and starts two real wraps through
    ``sh -c``; a read through one forbids the send through the other (two sessions, the send
    allowed, was the failure)."""
    policy = tmp_path / "assay.yaml"
    policy.write_text(FLOW)
    state = tmp_path / "state"
    argv = [
        *UNSHARE,
        sys.executable,
        "-c",
        AGENT,
        str(ASSAY),
        str(policy),
        str(state),
        str(RECORDER),
        str(tmp_path / "record"),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=base_env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["read"]["result"].get("isError") is not True, got
    assert got["sent"]["result"].get("isError") is True, got  # the send was allowed: two sessions
    assert json.loads(got["sent"]["result"]["content"][1]["text"])["rule"] == "no-send-after-secret"
    rows = list_sessions(str(state / "sessions.db"))
    assert len(rows) == 1 and rows[0]["key"].startswith("client:1:"), rows
    assert sorted(s["server"] for s in rows[0]["servers"]) == ["files", "web"]


# a wrap's use of the store: it sweeps when it starts (assay.store.store.serving), then its
# client's session, counted once
USE = textwrap.dedent("""\
    import sys, time
    import trio
    from assay.policy.storeapi import Saved
    from assay.store.keys import client_alive, session_key
    from assay.store.sqlite import SqliteStore
    store = SqliteStore(sys.argv[1])
    trio.run(store.sweep, time.time(), client_alive)
    key = session_key(None, {})
    store.begin_blocking(key, "p", "srv", time.time())
    store.commit_blocking(Saved(b"s", 1, 1, True), time.time())
    store.close()
    print(key.key, flush=True)
""")
# a client that starts one such wrap, says its key, and runs until its stdin closes
HOLD = textwrap.dedent("""\
    import subprocess, sys
    done = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], capture_output=True, text=True)
    print(done.stdout.strip() or "failed: " + done.stderr.replace("\\n", " | "), flush=True)
    sys.stdin.read()
""")


@unshare
def test_wraps_in_two_pid_namespaces_keep_each_others_sessions(tmp_path, base_env):
    db = str(tmp_path / "state" / "sessions.db")
    env = _env(base_env)

    def hold(prefix: list[str]) -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-c", HOLD, USE, db],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        return proc, proc.stdout.readline().strip()

    def sweep() -> str:  # a wrap of this test process starts (and sweeps)
        return subprocess.run(
            [sys.executable, "-c", USE, db], capture_output=True, text=True, env=env, timeout=30, check=True
        ).stdout.strip()

    outside, outside_key = hold([])
    inside, inside_key = hold(UNSHARE)
    try:
        assert outside_key.startswith(f"client:{outside.pid}:"), outside_key
        assert inside_key.startswith("client:1:"), inside_key
        # the wrap inside swept when it started: the outside session is still there
        alive = {r["key"]: r["alive"] for r in list_sessions(db)}
        assert set(alive) == {outside_key, inside_key}
        assert alive[outside_key] is True and alive[inside_key] is None  # not seen from here
        mine = sweep()  # a wrap out here sweeps: the inside session is kept
        assert set(r["key"] for r in list_sessions(db)) == {outside_key, inside_key, mine}
        # a client gone in this namespace is still forgotten
        outside.communicate("")
        sweep()
        assert set(r["key"] for r in list_sessions(db)) == {inside_key, mine}
        assert outside_key.split(":")[3] != inside_key.split(":")[3]  # each its own namespace
    finally:
        for proc in (outside, inside):
            if proc.poll() is None:
                proc.communicate("", timeout=30)
