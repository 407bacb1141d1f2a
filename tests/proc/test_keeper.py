"""proc.spawn_kept: the keeper that owns a wrap run's process tree (docs/wrap.md, "The keeper").

Real processes throughout: exit statuses, signals through the control pipe, spawn errors, and
that nothing of the run is left once the child is stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap

import pytest
import trio

from assay import proc
from assay.proc import keeper

pytestmark = pytest.mark.skipif(not proc.keeper_available(), reason="the keeper needs Linux")

PY = sys.executable


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while read
        return False


async def gone(pid: int, timeout: float = 20) -> bool:
    with trio.move_on_after(timeout):
        while alive(pid):
            await trio.sleep(0.01)
    return not alive(pid)


@pytest.mark.parametrize("code", [0, 3])
async def test_exit_status_even_when_the_child_exits_at_once(code):
    """A child that exits before spawn_kept returns (its exit report arrives with its pid) is
    still seen to exit: this once hung wrap around `true`."""
    for _ in range(20):
        child = proc.spawn_kept([PY, "-c", f"raise SystemExit({code})"] if code else ["true"])
        with trio.fail_after(20):
            await child.wait_exit()
        assert child.returncode == code
        await child.stop()
        await child.aclose_streams()


async def test_death_by_signal_is_negative():
    child = proc.spawn_kept([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    with trio.fail_after(20):
        await child.wait_exit()
    assert child.returncode == -signal.SIGTERM
    await child.stop()


async def test_pipes_both_ways_and_stdin_eof():
    child = proc.spawn_kept(["cat"])
    await child.stdin.send_all(b"hello\n")
    assert await child.stdout.receive_some(100) == b"hello\n"
    await child.stdin.aclose()
    with trio.fail_after(20):
        await child.wait_exit()
    assert child.returncode == 0
    assert await child.stdout.receive_some(100) == b""  # nobody else holds the write end
    await child.stop()


async def test_stop_kills_group_and_detached_descendants(tmp_path):
    script = tmp_path / "s.py"
    pids = tmp_path / "pids"
    script.write_text(
        textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        a = subprocess.Popen(["sleep", "977"])
        b = subprocess.Popen(["sleep", "977"], start_new_session=True)
        open({str(pids)!r}, "w").write(f"{{a.pid}} {{b.pid}}")
        print("ready", flush=True)
        time.sleep(1000)
    """)
    )
    child = proc.spawn_kept([PY, str(script)])
    assert (await child.stdout.receive_some(100)).startswith(b"ready")
    others = [int(p) for p in pids.read_text().split()]
    with trio.fail_after(30):
        await child.stop(term_grace=0.2)  # SIGTERM is ignored: SIGKILL, then the sweep
    assert child.returncode == -signal.SIGKILL
    for pid in [child.pid, *others]:
        assert await gone(pid), pid
    assert not alive(child.keeper_pid)


async def test_signals_reach_the_child_through_the_keeper():
    child = proc.spawn_kept([PY, "-c", "import time; print('up', flush=True); time.sleep(100)"])
    assert (await child.stdout.receive_some(100)).startswith(b"up")
    child.signal_group(signal.SIGINT)
    with trio.fail_after(20):
        await child.wait_exit()
    assert child.returncode == 1 or child.returncode == -signal.SIGINT  # KeyboardInterrupt
    await child.stop()


async def test_spawn_errors_are_classified(tmp_path):
    with pytest.raises(proc.ProgramNotFound):
        proc.spawn_kept([str(tmp_path / "missing")])
    script = tmp_path / "bad"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    with pytest.raises(proc.SpawnError) as info:
        proc.spawn_kept([str(script)])
    assert not isinstance(info.value, proc.ProgramNotFound)
    noexec = tmp_path / "noexec"
    noexec.write_text("x")
    with pytest.raises(proc.SpawnError):
        proc.spawn_kept([str(noexec)])


async def test_no_descriptor_leak_across_runs():
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        child = proc.spawn_kept(["true"])
        await child.stop()
        await child.aclose_streams()
    assert len(os.listdir("/proc/self/fd")) <= before + 2


def test_a_keeper_forked_before_trio_and_abandoned_leaves_nothing_running():
    """wrap forks the keeper before it imports trio (assay.proc.keeper.fork_keeper, no trio in
    the probe at the fork); a run that ends before it took the server over abandons it, and
    when abandon returns the server and every process it started are gone."""
    probe = textwrap.dedent("""\
        import sys
        from assay.proc import keeper
        forked = keeper.fork_keeper([sys.executable, "-c",
            "import subprocess, sys, time; p = subprocess.Popen(['sleep', '100']); print(p.pid, flush=True); time.sleep(100)"])
        assert forked.first[:1] == b"P", forked.first
        server = int.from_bytes(forked.first[1:5], "big")
        import os
        grandchild = int(os.read(forked.stdout, 100).split()[0])
        loaded = "trio" in sys.modules
        forked.abandon()
        forked.abandon()  # once only
        print(loaded, forked.pid, server, grandchild)
    """)
    import subprocess

    res = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    loaded, *pids = res.stdout.split()
    assert loaded == "False"
    assert [pid for pid in map(int, pids) if alive(pid)] == []


async def test_an_abandoned_keeper_is_not_taken_over():
    forked = keeper.fork_keeper(["true"])
    forked.abandon()
    with pytest.raises(RuntimeError):
        proc.adopt_kept(forked)
