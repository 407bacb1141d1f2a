"""Relay benchmark: pipelined tools/call throughput and round-trip latency, direct vs. wrap.

Run: .venv/bin/python bench/bench_relay.py [--frames 20000] [--rounds 2000] [--runs 5]

Each run measures, in the same process and back to back:
  direct        client <-> echo server
  byte relay    client <-> a trio relay that only copies bytes (bench/byte_relay.py) <-> echo server
  wrap enforce  client <-> assay mcp wrap (allowlist + a 5-property schema) <-> echo server
  wrap dry-run  the same with --dry-run
Throughput: N pipelined ~200-byte tools/call frames, time until every reply arrived.
Latency: M sequential round trips (send one, wait for its reply), p50 and p99.
Each figure is the median over --runs runs. Targets (2-core dev machine): wrap >= 50% of direct
throughput; wrap adds <= 100 us to the median round trip.
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
POLICY = """version: "2.0"
tools:
  allow: ["search", "read_file"]
  deny: ["exec", "*delete*"]
schemas:
  search:
    type: object
    additionalProperties: false
    required: [query, limit]
    properties:
      query: {type: string, maxLength: 200}
      limit: {type: integer, minimum: 1, maximum: 100}
      lang: {type: string, enum: [en, de, fr, nl]}
      safe: {type: boolean}
      cursor: {type: string, pattern: "^[a-z0-9]*$"}
"""


def frame(i: int) -> bytes:
    msg = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {
            "name": "search",
            "arguments": {"query": "policy guard benchmark q%06d" % i, "limit": 10, "lang": "en", "safe": True,
                          "cursor": "abc123def456"},
        },
    }
    line = json.dumps(msg, separators=(",", ":")).encode()
    return line + b"\n"


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)


def throughput(cmd: list[str], n: int) -> float:
    frames = b"".join(frame(i) for i in range(n))
    proc = start(cmd)
    # Warm up: one round trip, so process start-up is not measured.
    proc.stdin.write(frame(-1))
    _read_lines(proc, 1)
    t0 = time.perf_counter()
    writer = threading.Thread(target=proc.stdin.write, args=(frames,))
    writer.start()
    _read_lines(proc, n)
    elapsed = time.perf_counter() - t0
    writer.join()
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    return n / elapsed


def _read_lines(proc: subprocess.Popen, n: int) -> None:
    got = 0
    fd = proc.stdout.fileno()
    while got < n:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise RuntimeError("EOF before all replies arrived")
        got += chunk.count(b"\n")


def latency(cmd: list[str], rounds: int) -> tuple[float, float]:
    proc = start(cmd)
    fd = proc.stdout.fileno()
    samples = []
    for i in range(rounds + 20):
        t0 = time.perf_counter()
        proc.stdin.write(frame(i))
        buf = b""
        while not buf.endswith(b"\n"):
            buf += os.read(fd, 1 << 16)
        if i >= 20:  # warm-up rounds are not counted
            samples.append(time.perf_counter() - t0)
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    samples.sort()
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    assay = shutil.which("assay") or str(Path(sys.executable).parent / "assay")
    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-"))
    policy = tmp / "assay.yaml"
    policy.write_text(POLICY)
    setups = {
        "direct": ECHO,
        "byte relay": [sys.executable, str(HERE / "byte_relay.py"), *ECHO],
        "wrap enforce": [assay, "mcp", "wrap", "--policy", str(policy), "--", *ECHO],
        "wrap dry-run": [assay, "mcp", "wrap", "--policy", str(policy), "--dry-run", "--", *ECHO],
    }
    print(f"frame size: {len(frame(12345))} bytes; {args.frames} pipelined frames, {args.rounds} round trips, "
          f"median of {args.runs} runs")
    results: dict[str, dict[str, list[float]]] = {k: {"tput": [], "p50": [], "p99": []} for k in setups}
    for _ in range(args.runs):
        for name, cmd in setups.items():  # interleaved, so drift in machine load hits all alike
            results[name]["tput"].append(throughput(cmd, args.frames))
            p50, p99 = latency(cmd, args.rounds)
            results[name]["p50"].append(p50)
            results[name]["p99"].append(p99)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in results.items()}
    base = med["direct"]
    print(f"{'setup':14} {'frames/s':>10} {'vs direct':>9} {'p50 us':>8} {'p99 us':>8} {'+p50 us':>8}")
    for name, m in med.items():
        print(f"{name:14} {m['tput']:10.0f} {m['tput'] / base['tput']:8.0%} {m['p50']:8.0f} {m['p99']:8.0f} "
              f"{m['p50'] - base['p50']:8.0f}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
