"""The process runtime on its own (issue 2 item 3; docs/library.md, "Running child
processes: `assay.proc`"; docs/wrap.md, "Lifecycle and exit status").

Every test starts real processes and checks the observable contract: deadline, cap, reap,
no leaked descriptors, no process left behind.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
import trio

from assay import proc

PY = sys.executable


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a reaped pid is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while read
        return False
    return state != "Z"


def pid_exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


async def wait_until(predicate, timeout: float = 20.0) -> bool:
    """Poll an external condition (another process's fate) until true or timeout."""
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.02)
        return True
    return False


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def test_run_bounded_collects_output_and_exit_code():
    result = await proc.run_bounded(
        [PY, "-c", "import sys; sys.stdout.write('out'); sys.stderr.write('err'); sys.exit(3)"],
        timeout=20,
        stdout_cap=8192,
        stderr_cap=8192,
    )
    assert not result.timed_out
    assert result.returncode == 3 and result.exit_code == 3
    assert (result.stdout, result.stderr) == (b"out", b"err")
    assert not result.stdout_truncated and not result.stderr_truncated
    assert not pid_exists(result.pid)  # reaped


async def test_deadline_kills_and_reaps_direct_child():
    """P11: on timeout the direct child is SIGKILLed and reaped; the call returns promptly."""
    started = time.monotonic()
    result = await proc.run_bounded(["sleep", "1000"], timeout=0.5, stdout_cap=10, stderr_cap=10)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.returncode is None and result.exit_code is None
    assert elapsed < 10
    assert not pid_exists(result.pid)


async def test_deadline_covers_a_descendant_holding_the_pipe():
    """P10: the child exits but a grandchild keeps stdout open -> still a timeout."""
    script = "import subprocess,sys; subprocess.Popen(['sleep','1000']); sys.exit(0)"
    result = await proc.run_bounded([PY, "-c", script], timeout=1.0, stdout_cap=100, stderr_cap=100)
    assert result.timed_out
    assert not pid_exists(result.pid)


@pytest.mark.parametrize("cap", [1, 8192, 100_000])
async def test_cap_bounds_memory_and_never_deadlocks(cap):
    """P9: a child writing megabytes to both streams: at most ``cap`` bytes kept, no deadlock."""
    script = textwrap.dedent(
        """
        import os
        block = b"x" * 65536
        for _ in range(80):   # 5 MiB on each stream
            os.write(1, block)
            os.write(2, block)
        """
    )
    result = await proc.run_bounded([PY, "-c", script], timeout=30, stdout_cap=cap, stderr_cap=cap)
    assert not result.timed_out
    assert len(result.stdout) == cap and len(result.stderr) == cap
    assert result.stdout_truncated and result.stderr_truncated
    # Closing our end at the cap makes the writer die of SIGPIPE (exit code 1 per P12) or exit.
    assert result.exit_code in (0, 1)
    assert not pid_exists(result.pid)


async def test_output_exactly_at_cap_is_kept_whole():
    result = await proc.run_bounded(
        [PY, "-c", "import os; os.write(1, b'a' * 8192)"], timeout=20, stdout_cap=8192, stderr_cap=8192
    )
    assert result.stdout == b"a" * 8192
    assert result.exit_code == 0


async def test_signal_death_counts_as_exit_code_one():
    """P12: a child ended by a signal counts as exit code 1."""
    result = await proc.run_bounded(
        [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
        timeout=20,
        stdout_cap=10,
        stderr_cap=10,
    )
    assert result.returncode == -signal.SIGTERM
    assert result.exit_code == 1


async def test_not_found_and_spawn_error_are_distinguished(tmp_path):
    """ENOENT -> ProgramNotFound; EACCES, ENOEXEC, missing interpreter -> SpawnError (docs/library.md)."""
    with pytest.raises(proc.ProgramNotFound):
        await proc.run_bounded([str(tmp_path / "nope")], timeout=5, stdout_cap=1, stderr_cap=1)
    not_exec = tmp_path / "not-exec"
    not_exec.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(proc.SpawnError) as info:
        await proc.run_bounded([str(not_exec)], timeout=5, stdout_cap=1, stderr_cap=1)
    assert not isinstance(info.value, proc.ProgramNotFound)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\x01\x02 not a program")
    garbage.chmod(0o755)
    with pytest.raises(proc.SpawnError) as info:
        await proc.run_bounded([str(garbage)], timeout=5, stdout_cap=1, stderr_cap=1)
    assert not isinstance(info.value, proc.ProgramNotFound)
    bad_interp = tmp_path / "bad-interp"
    bad_interp.write_text("#!/nonexistent/interpreter\n")
    bad_interp.chmod(0o755)
    env = dict(os.environ, PATH=str(tmp_path))
    with pytest.raises(proc.SpawnError) as info:
        await proc.run_bounded(["bad-interp"], timeout=5, stdout_cap=1, stderr_cap=1, env=env)
    assert not isinstance(info.value, proc.ProgramNotFound)


async def test_no_descriptor_leaks_across_many_runs(tmp_path):
    before = open_fds()
    for _ in range(20):
        await proc.run_bounded(["true"], timeout=10, stdout_cap=10, stderr_cap=10)
        await proc.run_bounded(["sleep", "100"], timeout=0.05, stdout_cap=10, stderr_cap=10)
        with pytest.raises(proc.ProgramNotFound):
            await proc.run_bounded([str(tmp_path / "missing")], timeout=1, stdout_cap=1, stderr_cap=1)
    assert open_fds() == before


async def test_cancellation_from_outside_still_reaps():
    """A caller's cancel scope firing mid-run must not leave the child behind."""
    pids: list[int] = []
    with trio.move_on_after(0.5):
        child = proc.spawn(["sleep", "1000"], stdin=proc.DEVNULL, stdout=proc.PIPE, stderr=proc.PIPE)
        pids.append(child.pid)
        try:
            await child.wait()
        finally:
            await child.kill_and_reap()
            await child.aclose_streams()
    assert pids and not pid_exists(pids[0])


async def test_spawned_child_relays_pipes_both_ways():
    child = proc.spawn(["cat"], stdin=proc.PIPE, stdout=proc.PIPE, stderr=proc.INHERIT)
    await child.stdin.send_all(b"hello\n")
    await child.stdin.aclose()
    data = bytearray()
    while chunk := await child.stdout.receive_some():
        data += chunk
    assert bytes(data) == b"hello\n"
    assert await child.wait() == 0
    await child.aclose_streams()


async def test_stop_group_reaches_descendants_and_escalates_to_kill(tmp_path):
    """A child in its own group that ignores SIGTERM, with a grandchild: stop() ends both
    (docs/library.md, `Child.stop`)."""
    pidfile = tmp_path / "grandchild.pid"
    script = textwrap.dedent(
        f"""
        import signal, subprocess, sys
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        gc = subprocess.Popen(['sleep', '1000'])
        open({str(pidfile)!r}, 'w').write(str(gc.pid))
        print('ready', flush=True)
        signal.pause()
        """
    )
    child = proc.spawn([PY, "-c", script], stdin=proc.DEVNULL, stdout=proc.PIPE, stderr=proc.INHERIT, own_group=True)
    assert os.getpgid(child.pid) == child.pid
    line = await child.stdout.receive_some()
    assert line.startswith(b"ready")
    grandchild = int(pidfile.read_text())
    started = time.monotonic()
    code = await child.stop(term_grace=0.3)
    assert code == -signal.SIGKILL  # SIGTERM was ignored, so it took the kill
    assert time.monotonic() - started < 10
    assert not pid_exists(child.pid)
    # The grandchild is not ours to reap; it must be dead (reaped by init) soon.
    assert await wait_until(lambda: not pid_alive(grandchild))
    await child.aclose_streams()


async def test_die_with_parent_kills_child_when_parent_is_sigkilled(tmp_path):
    """PR_SET_PDEATHSIG: a relay child cannot outlive a SIGKILLed parent (docs/library.md)."""
    script = textwrap.dedent(
        """
        import sys, trio
        from assay import proc
        async def main():
            child = proc.spawn(['sleep', '1000'], stdin=proc.DEVNULL, stdout=proc.DEVNULL,
                               stderr=proc.DEVNULL, own_group=True, die_with_parent=True)
            # A worker thread that comes and goes must not matter (we fork on the trio thread).
            await trio.to_thread.run_sync(lambda: None)
            print(child.pid, flush=True)
            await trio.sleep_forever()
        trio.run(main)
        """
    )
    parent = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE)
    try:
        grandchild = int(parent.stdout.readline())
        assert pid_alive(grandchild)
        parent.kill()
        parent.wait()
        assert await wait_until(lambda: not pid_alive(grandchild))
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()


def test_candidate_check_respects_exec_bits_only_through_exec(tmp_path):
    """A non-executable file on PATH is a candidate (exists) -> SpawnError, not not-found."""
    f = tmp_path / "tool"
    f.write_text("#!/bin/sh\n")
    f.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert proc._candidate_exists("tool", {"PATH": str(tmp_path)})
    assert not proc._candidate_exists("other", {"PATH": str(tmp_path)})
