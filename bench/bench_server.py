"""Server benchmark: `assay-mcp-server` tool calls against an echo-server baseline.

Run: .venv/bin/python bench/bench_server.py [--frames 20000] [--rounds 2000] [--runs 5]
                                            [--baseline-tree DIR]

Each run measures, in the same process and back to back (interleaved, so drift in machine load
hits every setup alike):
  echo           client <-> bench/echo_server.py (the cost of the pipes and of a Python process)
  check_args     client <-> assay-mcp-server, `assay_check_args` against a 5-property schema
  policy_decide  client <-> assay-mcp-server, `assay_policy_decide` against a blocklist
Throughput: N pipelined tools/call frames, time until every reply arrived.
Latency: M sequential round trips (send one, wait for its reply), p50 and p99.
CPU per call: the server process's user+system time over the throughput phase, from
/proc/<pid>/stat (Linux, 10 ms ticks), divided by N; calls/cpu-s is its inverse, the rate the
server would reach with a core to itself (the steadier figure on a loaded machine).
--baseline-tree DIR adds the two server setups once more, run from another checkout of assay
(e.g. `git archive <commit> | tar -x -C DIR`, put first on PYTHONPATH), interleaved in the same runs: a
before/after comparison under the same machine load.
Each figure is the median over --runs runs. Targets (2-core dev machine): both tools >= 8,000
calls/s pipelined and p50 <= 400 us. On a shared machine the absolute figures are noisy; the
ratio to the echo baseline of the same run is the steadier number.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ECHO = [sys.executable, str(HERE / "echo_server.py")]
sys.path.insert(0, str(HERE))
from bench_relay import POLICY as CHECK_POLICY  # noqa: E402  (one bench policy: allowlist + schema)

BLOCK_POLICY = "blocklist: [exec, rm, dangerous_tool, drop_table]\n"


def check_args_frame(i: int) -> bytes:
    arguments = {
        "tool": "search",
        "arguments": {
            "query": "policy guard benchmark q%06d" % i,
            "limit": 10,
            "lang": "en",
            "safe": True,
            "cursor": "abc123def456",
        },
        "policy": "check.yaml",
    }
    return _frame(i, "assay_check_args", arguments)


def policy_decide_frame(i: int) -> bytes:
    return _frame(i, "assay_policy_decide", {"tool": "search_%d" % (i % 7), "policy": "block.yaml"})


def _frame(i: int, name: str, arguments: dict) -> bytes:
    msg = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env
    )


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (Linux); 0.0 where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _read_lines(proc: subprocess.Popen, n: int) -> None:
    got = 0
    fd = proc.stdout.fileno()
    while got < n:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise RuntimeError("EOF before all replies arrived")
        got += chunk.count(b"\n")


def _stop(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()


def throughput(cmd: list[str], env: dict[str, str], make, n: int) -> tuple[float, float]:
    """(calls/s, CPU microseconds per call)."""
    frames = b"".join(make(i) for i in range(n))
    proc = start(cmd, env)
    # Warm up: a few round trips, so start-up and the first policy read are not measured.
    for i in range(3):
        proc.stdin.write(make(-1 - i))
        _read_lines(proc, 1)
    cpu0 = _cpu_seconds(proc.pid)
    t0 = time.perf_counter()
    writer = threading.Thread(target=proc.stdin.write, args=(frames,))
    writer.start()
    _read_lines(proc, n)
    elapsed = time.perf_counter() - t0
    cpu = _cpu_seconds(proc.pid) - cpu0
    writer.join()
    _stop(proc)
    return n / elapsed, cpu / n * 1e6


def latency(cmd: list[str], env: dict[str, str], make, rounds: int) -> tuple[float, float]:
    proc = start(cmd, env)
    fd = proc.stdout.fileno()
    samples = []
    for i in range(rounds + 20):
        line = make(i)
        t0 = time.perf_counter()
        proc.stdin.write(line)
        buf = b""
        while not buf.endswith(b"\n"):
            buf += os.read(fd, 1 << 16)
        if i >= 20:  # warm-up rounds are not counted
            samples.append(time.perf_counter() - t0)
    _stop(proc)
    samples.sort()
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline-tree", help="another assay checkout, measured as extra setups in the same runs")
    args = ap.parse_args()
    server = shutil.which("assay-mcp-server") or str(Path(sys.executable).parent / "assay-mcp-server")
    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-server-"))
    (tmp / "check.yaml").write_text(CHECK_POLICY)
    (tmp / "block.yaml").write_text(BLOCK_POLICY)
    # A deployed policy is old: the server trusts a file's identity and times (and skips the
    # read) only once the file is more than a second older than the read that saw it.
    time.sleep(1.2)
    env = dict(os.environ)
    env.pop("ASSAY_LOG", None)
    serve = [server, "--policy-root", str(tmp)]
    setups = {
        "echo": (ECHO, check_args_frame, env),
        "check_args": (serve, check_args_frame, env),
        "policy_decide": (serve, policy_decide_frame, env),
    }
    if args.baseline_tree:
        tree = str(Path(args.baseline_tree).resolve())
        base_env = dict(env, PYTHONPATH=os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p))
        setups["check_args@base"] = (serve, check_args_frame, base_env)
        setups["policy_decide@base"] = (serve, policy_decide_frame, base_env)
    print(
        f"{args.frames} pipelined calls, {args.rounds} round trips, median of {args.runs} runs; "
        f"check_args frame {len(check_args_frame(12345))} bytes"
    )
    results = {k: {"tput": [], "cpu": [], "p50": [], "p99": []} for k in setups}
    for _ in range(args.runs):
        for name, (cmd, make, setup_env) in setups.items():
            tput, cpu = throughput(cmd, setup_env, make, args.frames)
            p50, p99 = latency(cmd, setup_env, make, args.rounds)
            for key, value in (("tput", tput), ("cpu", cpu), ("p50", p50), ("p99", p99)):
                results[name][key].append(value)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in results.items()}
    base = med["echo"]
    print(
        f"{'setup':19} {'calls/s':>9} {'vs echo':>8} {'p50 us':>8} {'p99 us':>8} {'cpu us/call':>12} "
        f"{'calls/cpu-s':>12}"
    )
    for name, m in med.items():
        per_cpu = f"{1e6 / m['cpu']:12.0f}" if m["cpu"] > 0 else f"{'-':>12}"
        print(
            f"{name:19} {m['tput']:9.0f} {m['tput'] / base['tput']:8.1%} {m['p50']:8.0f} {m['p99']:8.0f} "
            f"{m['cpu']:12.1f} {per_cpu}"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
