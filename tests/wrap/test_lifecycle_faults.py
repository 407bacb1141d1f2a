"""wrap under fault timing (docs/wrap.md, "Lifecycle"): nothing lost, no process left, no wedge.

Each test runs `assay mcp wrap` around a small server script written for the case. Every case
asserts the exit status, that all the bytes the server wrote arrived, and that no process of the
run is left.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ASSAY
from tests.wrap.conftest import call, read_line, request, stop_and_close, wait_dead

POLICY = 'version: "2.0"\ntools:\n  deny: ["exec"]\nenforcement:\n  unconstrained_tools: allow\n'


def script(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return path


def wrap_argv(tmp: Path, server: list[str], *opts: str) -> list[str]:
    policy = tmp / "assay.yaml"
    if not policy.exists():
        policy.write_text(POLICY)
    return [str(ASSAY), "mcp", "wrap", "--policy", str(policy), *opts, "--", *server]


def popen(argv: list[str], tmp: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=kw.pop("stderr", subprocess.PIPE), cwd=tmp, **kw
    )


def read_all(stream, timeout: float = 120, pace: float = 0.0, chunk: int = 65536) -> bytes:
    """Read to EOF (optionally slowly: at most ``chunk`` bytes per ``pace`` seconds)."""
    fd = stream.fileno()
    out = bytearray()
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        assert left > 0, f"no EOF within {timeout}s ({len(out)} bytes read)"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        data = os.read(fd, chunk)
        if not data:
            return bytes(out)
        out += data
        if pace:
            time.sleep(pace)  # the client reads slowly on purpose (not a synchronisation)


def notifications(n: int, pad: int, char: str = "x") -> list[bytes]:
    return [
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": i, "pad": char * pad}},
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i in range(n)
    ]


# -- the child exits first ---------------------------------------------------------------------


def test_child_exit_delivers_every_byte_to_a_slow_client(tmp_path):
    """The server writes 400 lines (400 KiB, more than the pipes hold) and exits while the client
    reads slowly: all 400 lines arrive whole, whatever the grace period."""
    server = script(
        tmp_path,
        "s.py",
        """
        import json, os, sys
        for i in range(400):
            line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"n": i, "pad": "x" * 1000}}, separators=(",", ":"))
            os.write(1, (line + "\\n").encode())
    """,
    )
    proc = popen(wrap_argv(tmp_path, [sys.executable, str(server)], "--shutdown-grace", "0.1"), tmp_path)
    try:
        out = read_all(proc.stdout, pace=0.02, chunk=4096)
        assert proc.wait(timeout=60) == 0
    finally:
        stop_and_close(proc)
    assert out == b"".join(notifications(400, 1000))


def test_child_exit_while_the_client_still_sends(tmp_path):
    """The server reads one line, writes 201 lines and exits 7 while the client keeps sending:
    a failed write to the server is the child-exit path (exit 7, all 201 lines), never fatal."""
    server = script(
        tmp_path,
        "s.py",
        """
        import json, os, sys
        sys.stdin.buffer.readline()
        for i in range(201):
            line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"n": i, "pad": "y" * 300}}, separators=(",", ":"))
            os.write(1, (line + "\\n").encode())
        os._exit(7)
    """,
    )
    flood = b"".join(request(i, "ping") for i in range(20000))
    for _ in range(4):
        proc = popen(wrap_argv(tmp_path, [sys.executable, str(server)]), tmp_path)
        try:
            out, err = proc.communicate(flood, timeout=120)
        except BrokenPipeError:
            out, err = proc.stdout.read(), proc.stderr.read()
            proc.wait(timeout=60)
        finally:
            stop_and_close(proc)
        assert proc.returncode == 7, err.decode()
        assert b"fatal" not in err
        assert out == b"".join(notifications(201, 300, "y"))


# -- no process of the run survives -------------------------------------------------------------


FORKER = """
    import os, subprocess, sys, time
    out, mark = sys.argv[1], sys.argv[2]
    same_group = subprocess.Popen(["sleep", mark])
    detached = subprocess.Popen(["sleep", mark], start_new_session=True)
    pid = os.fork()  # a double fork: the grandchild is re-parented when its parent exits
    if pid == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", mark])
        os._exit(0)
    os.waitpid(pid, 0)
    with open(out + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} {same_group.pid} {detached.pid}")
    os.rename(out + ".tmp", out)
    sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"ready":true}}\\n')
    sys.stdout.flush()
    for line in sys.stdin:
        pass
    if len(sys.argv) > 3:
        time.sleep(1000)
"""


def mark_of(tmp: Path) -> str:
    """A sleep duration no other test uses: the processes of this test are found by it."""
    return f"{9000 + abs(hash(str(tmp))) % 100000}.{os.getpid()}"


def sleeping_pids(marker: str) -> list[int]:
    """Pids of processes whose command line is exactly `sleep <marker>`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if fh.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                        found.append(int(name))
            except OSError:
                pass
    return found


def wait_sleepers(marker: str, count: int, timeout: float = 30) -> list[int]:
    """The run's `sleep` processes once all ``count`` have started (a double fork is async)."""
    end = time.monotonic() + timeout
    while True:
        found = sleeping_pids(marker)
        if len(found) >= count or time.monotonic() > end:
            return found
        time.sleep(0.02)


def all_dead(pids: list[int], timeout: float = 30) -> bool:
    return all(wait_dead(p, timeout) for p in pids)


@pytest.mark.parametrize("via_shell", [False, True])
def test_sigkill_of_wrap_leaves_no_process(tmp_path, via_shell):
    """SIGKILL of wrap: the server, a grandchild in its group, one that called setsid and a
    double-forked daemon all die (directly and behind `sh -c`)."""
    server = script(tmp_path, "forker.py", FORKER)
    pids_file = tmp_path / "pids"
    mark = mark_of(tmp_path)
    cmd = [sys.executable, str(server), str(pids_file), mark, "hang"]
    if via_shell:
        cmd = ["sh", "-c", " ".join(cmd)]
    proc = popen(wrap_argv(tmp_path, cmd), tmp_path)
    try:
        assert b"ready" in read_line(proc.stdout)
        pids = [int(p) for p in pids_file.read_text().split()]
        daemons = wait_sleepers(mark, 3)
        assert len(daemons) == 3  # same group, setsid, and the double-forked daemon
        proc.kill()
        proc.wait(timeout=30)
        assert all_dead(pids + daemons)
    finally:
        stop_and_close(proc)


def test_client_eof_leaves_no_setsid_grandchild(tmp_path):
    """A clean client EOF: the server exits, and what it left behind outside its process group
    (setsid, double fork) is killed before wrap exits."""
    server = script(tmp_path, "forker.py", FORKER)
    pids_file = tmp_path / "pids"
    mark = mark_of(tmp_path)
    proc = popen(wrap_argv(tmp_path, [sys.executable, str(server), str(pids_file), mark]), tmp_path)
    try:
        assert b"ready" in read_line(proc.stdout)
        pids = [int(p) for p in pids_file.read_text().split()]
        daemons = wait_sleepers(mark, 3)
        assert len(daemons) == 3
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        for pid in pids[1:] + daemons:  # already gone when wrap has exited
            assert not os.path.exists(f"/proc/{pid}") or wait_dead(pid, 0.5), pid
    finally:
        stop_and_close(proc)


def test_sighup_is_handled_like_sigterm(tmp_path):
    """SIGHUP: the server's group gets SIGTERM, wrap exits 129 and writes the stop record."""
    server = script(tmp_path, "forker.py", FORKER)
    pids_file = tmp_path / "pids"
    mark = mark_of(tmp_path)
    proc = popen(
        wrap_argv(
            tmp_path, [sys.executable, str(server), str(pids_file), mark, "hang"], "--session-stop-out", "stop.json"
        ),
        tmp_path,
    )
    try:
        proc.stdin.write(request(1, "ping"))
        proc.stdin.flush()
        assert b"ready" in read_line(proc.stdout)
        pids = [int(p) for p in pids_file.read_text().split()] + wait_sleepers(mark, 3)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 129
        assert all_dead(pids)
    finally:
        stop_and_close(proc)
    stop = json.loads((tmp_path / "stop.json").read_text())
    assert stop["stop_cause"] == "signal" and stop["wrap_signal"] == signal.SIGHUP


# -- client EOF: replies still owed are delivered ----------------------------------------------


def test_client_eof_waits_for_a_server_still_answering(tmp_path):
    """2,000 pipelined calls, then client EOF: a slow server that keeps answering (slower than
    the grace period in total) gets to deliver every answer: the grace counts from its last
    output while it owes replies."""
    server = script(
        tmp_path,
        "slow.py",
        """
        import json, sys, time
        ids = [json.loads(line)["id"] for line in sys.stdin if line.strip()]
        for i, rid in enumerate(ids):
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}) + "\\n")
            if i % 100 == 0:
                sys.stdout.flush()
                time.sleep(0.1)  # the server is slow: 2 s in all, against a 0.5 s grace
        sys.stdout.flush()
    """,
    )
    frames = b"".join(call(i, "search", {"q": i}) for i in range(2000))
    res = subprocess.run(
        wrap_argv(tmp_path, [sys.executable, str(server)], "--shutdown-grace", "0.5"),
        input=frames,
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr.decode()
    ids = [json.loads(line)["id"] for line in res.stdout.splitlines()]
    assert ids == list(range(2000))


def test_huge_reply_at_client_eof_arrives_whole(tmp_path):
    """A reply longer than wrap holds in memory (streamed through) is delivered whole after
    client EOF, and ends the run cleanly."""
    size = 80 << 20
    server = script(
        tmp_path,
        "big.py",
        f"""
        import json, os, sys, time
        req = json.loads(sys.stdin.readline())
        sys.stdin.read()  # wait for the client's EOF, then answer
        head = ('{{"jsonrpc":"2.0","id":%d,"result":{{"content":[{{"type":"text","text":"' % req["id"]).encode()
        os.write(1, head)
        block = b"z" * (1 << 20)
        for _ in range({size} >> 20):
            os.write(1, block)
            time.sleep(0.04)  # a slow producer: 3 s in all, never silent for the 1 s grace
        os.write(1, b'"}}]}}}}\\n')
    """,
    )
    proc = popen(wrap_argv(tmp_path, [sys.executable, str(server)], "--shutdown-grace", "1"), tmp_path)
    try:
        proc.stdin.write(call(1, "search", {"q": 1}))
        proc.stdin.close()
        out = read_all(proc.stdout, timeout=300)
        assert proc.wait(timeout=60) == 0
    finally:
        stop_and_close(proc)
    assert out.endswith(b'"}]}}\n') and out.count(b"\n") == 1
    assert len(out) > size
    assert json.loads(out)["id"] == 1


# -- records are written whole or not at all ------------------------------------------------


def test_short_decision_log_write_fails_closed(tmp_path):
    """A decision-log write that comes up short (file size limit) is retried, fails, and stops
    the run before the call is forwarded; the log holds no fragment."""
    record = tmp_path / "seen.bin"
    server = script(
        tmp_path,
        "rec.py",
        f"""
        import sys
        with open({str(record)!r}, "ab", buffering=0) as fh:
            for line in sys.stdin.buffer:
                fh.write(line[:60])
    """,
    )
    log = tmp_path / "decisions.jsonl"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

    res = subprocess.run(
        wrap_argv(tmp_path, [sys.executable, str(server)], "--decision-log", str(log), "--event-source", "assay://t/x"),
        input=call(1, "search", {"q": "a"}),
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        preexec_fn=small_files,
    )
    assert res.returncode == 2
    assert res.stderr.decode().strip().splitlines()[-1].startswith("fatal: cannot write decision log")
    assert res.stdout == b""
    assert log.read_bytes() == b""  # the partial record was cut off again
    assert not record.exists() or b"tools/call" not in record.read_bytes()


# -- no wedge ---------------------------------------------------------------------------------


def test_half_written_server_line_does_not_block_denies_or_forwarding(tmp_path):
    """The server writes 2 MiB of a line and stops mid-line: wrap's deny replies still reach the
    client, and client frames are still forwarded (the server answers them once it finishes)."""
    marker = tmp_path / "written"
    server = script(
        tmp_path,
        "half.py",
        f"""
        import json, os, sys
        os.write(1, b'{{"jsonrpc":"2.0","method":"notifications/message","params":{{"pad":"' + b"h" * (2 << 20))
        open({str(marker)!r}, "w").write("1")  # all 2 MiB left us: wrap has read them
        for line in sys.stdin:
            msg = json.loads(line)
            if msg.get("method") == "ping":
                os.write(1, b'"}}}}\\n' + json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": {{}}}}).encode() + b"\\n")
    """,
    )
    proc = popen(wrap_argv(tmp_path, [sys.executable, str(server)]), tmp_path)
    try:
        read_pid_like(marker)
        proc.stdin.write(call(1, "exec", {"command": "x"}))
        proc.stdin.flush()
        deny = json.loads(read_line(proc.stdout, timeout=30))
        assert deny["id"] == 1 and deny["result"]["isError"] is True
        proc.stdin.write(request(2, "ping"))
        proc.stdin.flush()
        long_line = read_line(proc.stdout, timeout=60)
        assert long_line.endswith(b'"}}\n') and len(long_line) > (2 << 20)
        assert json.loads(read_line(proc.stdout, timeout=30))["id"] == 2
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        stop_and_close(proc)


def read_pid_like(path: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


# -- startup ----------------------------------------------------------------------------------


def test_fifo_and_endless_policy_are_refused_at_once(tmp_path):
    fifo = tmp_path / "policy.fifo"
    os.mkfifo(fifo)
    for policy, needle in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file")):
        res = subprocess.run(
            [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--", "true"],
            input=b"",
            capture_output=True,
            timeout=30,
            cwd=tmp_path,
        )
        err = res.stderr.decode()
        assert res.returncode == 2 and needle in err and "Traceback" not in err
        assert err.strip().count("\n") == 0


def test_policy_over_the_byte_ceiling_is_refused(tmp_path):
    policy = tmp_path / "big.yaml"
    policy.write_text('version: "2.0"\n' + "#" * 2000 + "\n")
    env = {**os.environ, "ASSAY_MCP_MAX_POLICY_BYTES": "1000"}
    res = subprocess.run(
        [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--", "true"],
        input=b"",
        capture_output=True,
        timeout=30,
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 2 and "larger than the 1000-byte limit" in res.stderr.decode()


def test_fifo_decision_log_without_reader_is_refused(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    res = subprocess.run(
        wrap_argv(tmp_path, ["true"], "--decision-log", str(fifo), "--event-source", "assay://t/x"),
        input=b"",
        capture_output=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert "FIFO with no reader" in res.stderr.decode()


@pytest.mark.parametrize(
    ("args", "token"),
    [
        (["--verbos", "--", "true"], "--verbos"),
        (["--polcy", "p.yaml", "--", "true"], "--polcy"),
        (["echo", "--", "hi"], "echo"),
    ],
)
def test_tokens_before_double_dash_must_be_wrap_options(tmp_path, args, token):
    """Every token before -- is a wrap option or its value: anything else is a usage error that
    names it, and nothing is spawned."""
    marker = tmp_path / "spawned"
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    argv = [str(ASSAY), "mcp", "wrap", "--policy", str(policy), *args]
    argv = [a if a != "true" else "touch" for a in argv] + ([str(marker)] if argv[-1] == "true" else [])
    res = subprocess.run(argv, input=b"", capture_output=True, timeout=30, cwd=tmp_path)
    err = res.stderr.decode()
    assert res.returncode == 2
    assert token in err and err.count("\n") == 1
    assert not marker.exists()


def test_forged_answers_are_dropped_and_counted_in_the_stop_record(tmp_path):
    """An answer for an id that was never sent, and a second answer, never reach the client;
    the stop record counts them."""
    server = script(
        tmp_path,
        "forger.py",
        """
        import json, sys
        sys.stdout.write('{"jsonrpc":"2.0","id":99,"result":{"forged":true}}\\n')
        for line in sys.stdin:
            rid = json.loads(line)["id"]
            answer = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}) + "\\n"
            sys.stdout.write(answer + answer)  # the second one answers nothing
            sys.stdout.flush()
    """,
    )
    res = subprocess.run(
        wrap_argv(tmp_path, [sys.executable, str(server)], "--session-stop-out", "stop.json"),
        input=request(1, "ping"),
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr.decode()
    assert [json.loads(line) for line in res.stdout.splitlines()] == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    stop = json.loads((tmp_path / "stop.json").read_text())
    assert stop["frames"]["dropped_responses"] == 2
    assert b'"forged"' not in res.stderr  # no content echoed
