"""wrap lifecycle (docs/wrap.md, "Lifecycle and exit status", "Logs"): no orphans, nothing lost.

Each case asserts the exit status, that no process of the run is left alive, and that every
byte the child wrote reached the client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ASSAY
from tests.wrap.conftest import (
    stop_and_close,
    RECORDER,
    Wrapper,
    call,
    exchange,
    pid_alive,
    read_pid,
    request,
    wait_dead,
)


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, bytes, bytes]:
    try:
        if proc.stdin is not None and proc.stdin.closed:
            proc.stdin = None
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop_and_close(proc)
    return proc.returncode, out, err


def test_client_eof_returns_child_exit_code(wrapper: Wrapper):
    """Client EOF closes the child's stdin; wrap exits with the child's code."""
    run = wrapper.run(request(1, "ping"), server_opts=("--exit-code", "3"))
    assert run.returncode == 3
    assert json.loads(run.stdout)["id"] == 1


def test_child_exit_first_ends_wrap_without_client_eof(wrapper: Wrapper):
    """The child exits first -> relay all it wrote, then end at once (stdin still open)."""
    pidfile = wrapper.tmp / "child.pid"
    proc = wrapper.popen(server_opts=("--exit-after", "2", "--exit-code", "5", "--pidfile", str(pidfile)))
    try:
        proc.stdin.write(request(1, "ping") + request(2, "ping"))
        proc.stdin.flush()
        started = time.monotonic()
        assert proc.wait(timeout=60) == 5
        assert time.monotonic() - started < 30
        out = proc.stdout.read()
        assert [json.loads(ln)["id"] for ln in out.splitlines()] == [1, 2]
        assert not pid_alive(read_pid(pidfile))
    finally:
        stop_and_close(proc)


def test_a_server_that_exits_or_dies_is_one_stderr_line(wrapper: Wrapper):
    """docs/wrap.md, "Lifecycle": a stdio server that ends on its own is said, with its status
    or its signal, as a remote server's loss is (docs/remote.md, "When the server fails")."""
    proc = wrapper.popen(server_opts=("--exit-after", "1", "--exit-code", "5"))
    try:
        proc.stdin.write(request(1, "ping"))
        proc.stdin.flush()
        code, _, err = finish(proc)
    finally:
        stop_and_close(proc)
    assert code == 5
    assert b"[assay] the server exited with status 5\n" in err
    pidfile = wrapper.tmp / "killed.pid"
    proc = wrapper.popen(server_opts=("--pidfile", str(pidfile)))
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1  # answered: nothing is owed
        os.kill(read_pid(pidfile), signal.SIGKILL)
        code, _, err = finish(proc)
    finally:
        stop_and_close(proc)
    assert code == 128 + signal.SIGKILL
    assert b"[assay] the server died of signal 9 (SIGKILL)\n" in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_wrap_stops_child_and_exits_128_plus_n(wrapper: Wrapper, signum):
    """SIGINT/SIGTERM to wrap: the child's group is stopped, exit 128+N."""
    pidfile = wrapper.tmp / "child.pid"
    gc_file = wrapper.tmp / "gc.pid"
    proc = wrapper.popen(server_opts=("--pidfile", str(pidfile), "--on-eof-hang", "--spawn-grandchild", str(gc_file)))
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1
        child, grandchild = read_pid(pidfile), read_pid(gc_file)
        proc.send_signal(signum)
        code, _, _ = finish(proc)
        assert code == 128 + signum
        assert wait_dead(child) and wait_dead(grandchild)
    finally:
        stop_and_close(proc)


def test_child_ignoring_sigterm_is_killed_after_grace(wrapper: Wrapper):
    """Client EOF -> grace -> SIGTERM (ignored) -> SIGKILL 0.5 s later; exit 128+9."""
    pidfile = wrapper.tmp / "child.pid"
    proc = wrapper.popen(
        "--shutdown-grace", "0.2", server_opts=("--pidfile", str(pidfile), "--ignore-term", "--on-eof-hang")
    )
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1
        started = time.monotonic()
        proc.stdin.close()
        code, _, _ = finish(proc)
        assert code == 128 + signal.SIGKILL
        assert time.monotonic() - started < 20
        assert not pid_alive(read_pid(pidfile))
    finally:
        stop_and_close(proc)


def test_child_closing_stdout_early(wrapper: Wrapper):
    """The child closes stdout but keeps reading: wrap keeps forwarding until client EOF."""
    frames = request(1, "ping") + request(2, "ping") + request(3, "ping")
    run = wrapper.run(frames, server_opts=("--close-stdout-after", "1"))
    assert run.returncode == 0
    assert [r["id"] for r in run.replies()] == [1]
    assert run.record == frames


def test_child_flooding_stderr_passes_through(wrapper: Wrapper):
    """Child stderr is inherited: 5 MiB of it flows straight through and relaying goes on."""
    frames = b"".join(request(i, "ping") for i in range(1, 51))
    run = wrapper.run(frames, server_opts=("--stderr-flood", str(5 * 1024 * 1024)))
    assert run.returncode == 0
    assert run.stderr.count(b"E") >= 5 * 1024 * 1024
    assert [r["id"] for r in run.replies()] == list(range(1, 51))


def test_grandchild_is_swept_when_child_exits(wrapper: Wrapper):
    """No orphans: whatever the child left in its process group dies with the run."""
    gc_file = wrapper.tmp / "gc.pid"
    run = wrapper.run(request(1, "ping"), server_opts=("--spawn-grandchild", str(gc_file)))
    assert run.returncode == 0
    assert wait_dead(read_pid(gc_file))


def test_sigkill_of_wrap_takes_the_child_down(wrapper: Wrapper):
    """PR_SET_PDEATHSIG: the child cannot outlive a SIGKILLed wrap."""
    pidfile = wrapper.tmp / "child.pid"
    proc = wrapper.popen(server_opts=("--pidfile", str(pidfile), "--on-eof-hang"))
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1
        child = read_pid(pidfile)
        proc.kill()
        proc.wait()
        assert wait_dead(child)
    finally:
        stop_and_close(proc)


def test_ten_thousand_pipelined_calls_each_answered_once(wrapper: Wrapper):
    """Nothing lost: 10,000 pipelined tools/call (allowed and denied) -> every id answered once."""
    wrapper.policy.write_text('version: "2.0"\ntools:\n  deny: ["exec"]\nenforcement:\n  unconstrained_tools: allow\n')
    n = 10_000
    frames = b"".join(call(i, "exec" if i % 10 == 0 else "search", {"q": i}) for i in range(n))
    run = wrapper.run(frames, timeout=300)
    assert run.returncode == 0
    replies = run.replies()
    ids = sorted(r["id"] for r in replies)
    assert ids == list(range(n))
    denied = [r["id"] for r in replies if r["result"].get("isError")]
    assert sorted(denied) == list(range(0, n, 10))
    assert run.record.count(b"\n") == n - n // 10


def test_unterminated_last_server_line_is_relayed(tmp_path):
    """Every byte the child wrote reaches the client, even a final line without newline."""
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    script = "import sys; sys.stdout.write('first\\nno newline at end'); sys.stdout.flush()"
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--", sys.executable, "-c", script],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 0
    assert res.stdout == b"first\nno newline at end"


def test_child_killed_by_signal_maps_to_128_plus_n(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    script = "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--", sys.executable, "-c", script],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 128 + signal.SIGUSR1


# -- startup failures: fatal before spawn (docs/wrap.md, "Logs", "Exit status") ------------------


def run_wrap_argv(tmp_path, *args: str) -> subprocess.CompletedProcess:
    pidfile = tmp_path / "spawned.pid"
    argv = [
        str(ASSAY),
        "mcp",
        "wrap",
        *args,
        "--",
        sys.executable,
        str(RECORDER),
        str(tmp_path / "r"),
        "--pidfile",
        str(pidfile),
    ]
    res = subprocess.run(argv, input=b"", capture_output=True, timeout=60, cwd=tmp_path)
    res.spawned = pidfile.exists()  # type: ignore[attr-defined]
    return res


def test_missing_policy_is_fatal_never_allow_all(tmp_path):
    res = run_wrap_argv(tmp_path, "--policy", "nope.yaml")
    assert res.returncode == 2 and not res.spawned
    assert res.stderr.decode().strip().splitlines()[-1] == (
        "fatal: Policy file not found at nope.yaml. Aborting instead of using insecure default (allow-all) policy."
    )


def test_default_policy_path_is_assay_yaml(tmp_path):
    res = run_wrap_argv(tmp_path)
    assert res.returncode == 2 and "Policy file not found at assay.yaml" in res.stderr.decode()
    (tmp_path / "assay.yaml").write_text('version: "2.0"\n')
    res = run_wrap_argv(tmp_path)
    assert res.returncode == 0 and res.spawned


def test_invalid_policy_is_fatal_one_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("tools:\n  allow: [a\n")
    res = run_wrap_argv(tmp_path, "--policy", "bad.yaml")
    assert res.returncode == 2 and not res.spawned
    last = res.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("fatal: ") and "bad.yaml" in last
    assert "Traceback" not in res.stderr.decode()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--event-source", "did:x"], "invalid --event-source"),
        (["--event-source", "urn:x"], "invalid --event-source"),
        (["--event-source", "://x"], "invalid --event-source"),
        (["--event-source", "1ab://x"], "invalid --event-source"),
        (["--event-source", "a b://x"], "invalid --event-source"),
        (["--event-source", "assay://x", "--decision-log", "/nonexistent-dir/d.ndjson"], "cannot open decision log"),
        (["--event-source", "assay://x", "--audit-log", "."], "cannot open audit log"),
    ],
)
def test_fatal_startup_errors_spawn_nothing(tmp_path, args, needle):
    """A bad event source or an unopenable log -> exit 2, no child."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\n')
    res = run_wrap_argv(tmp_path, *args)
    assert res.returncode == 2, res.stderr
    assert not res.spawned
    last = res.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("fatal: ") and needle in last


def test_valid_event_sources_accepted(tmp_path):
    (tmp_path / "assay.yaml").write_text('version: "2.0"\n')
    for source in ("assay://org/app", "https://h/p", "  x+y.z-1://a  "):
        res = run_wrap_argv(tmp_path, "--event-source", source)
        assert res.returncode == 0, (source, res.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["--max-frame-bytes", "0", "--", "true"],
        ["--max-frame-bytes", "abc", "--", "true"],
        ["--shutdown-grace", "-1", "--", "true"],
        ["--policy", "a", "--policy", "b", "--", "true"],
        ["--bogus", "--", "true"],
        [],
        ["--"],
        ["true"],  # the command must follow a literal --
        ["--dry-run", "python", "server.py"],
    ],
)
def test_usage_errors_exit_2(tmp_path, args):
    res = subprocess.run([str(ASSAY), "mcp", "wrap", *args], capture_output=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.decode().count("\n") == 1 and "Traceback" not in res.stderr.decode()


def test_arguments_after_double_dash_go_to_child_untouched(tmp_path):
    """Everything after -- is the child's, even option-looking values."""
    (tmp_path / "assay.yaml").write_text('version: "2.0"\n')
    script = "import sys, json; print(json.dumps(sys.argv[1:]))"
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--", sys.executable, "-c", script, "--policy", "x", "--", "-v", "--dry-run"],
        input=b"",
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == ["--policy", "x", "--", "-v", "--dry-run"]


def test_spawn_failure_is_fatal(tmp_path):
    (tmp_path / "assay.yaml").write_text('version: "2.0"\n')
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--", str(tmp_path / "no-such-server")],
        input=b"",
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert res.stderr.decode().strip().splitlines()[-1].startswith("fatal: cannot start ")


def test_log_write_error_is_fatal_and_frame_not_forwarded(wrapper: Wrapper):
    """A write error on a log during the run is fatal (fail closed): the frame whose record
    failed is not forwarded, the child is stopped, the stop record says output_error, exit 2."""
    if not os.path.exists("/dev/full"):
        pytest.fail("this test needs /dev/full (Linux)")
    pidfile = wrapper.tmp / "child.pid"
    proc = wrapper.popen(
        "--event-source",
        "assay://t/x",
        "--decision-log",
        "/dev/full",
        "--session-stop-out",
        "stop.json",
        server_opts=("--pidfile", str(pidfile), "--on-eof-hang"),
    )
    try:
        assert exchange(proc, request(1, "ping"))["id"] == 1  # no record needed: relayed
        code, out, err = finish_with_input(proc, call(2, "read_file", {"path": "/workspace/a"}) + request(3, "ping"))
    finally:
        stop_and_close(proc)
    assert code == 2
    assert err.decode().strip().splitlines()[-1].startswith("fatal: cannot write decision log")
    assert out == b""  # no reply for the failed frame nor anything after it
    assert wrapper.record.read_bytes() == request(1, "ping")  # the tools/call never reached the server
    assert wait_dead(read_pid(pidfile))
    stop = json.loads((wrapper.tmp / "stop.json").read_text())
    assert stop["stop_cause"] == "output_error"


def finish_with_input(proc: subprocess.Popen, data: bytes, timeout: float = 60) -> tuple[int, bytes, bytes]:
    out, err = proc.communicate(data, timeout=timeout)
    return proc.returncode, out, err
