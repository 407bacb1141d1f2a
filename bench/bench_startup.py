"""Start-up benchmark: time from spawn to the first reply, the echo server alone vs. under wrap;
and the time of `assay --version` and `assay --help` against a bare `python -c pass`.

Run: .venv/bin/python bench/bench_startup.py [--runs 10] [--keep-env] [--compare DIR]

Each round spawns, back to back and in a rotating order, the echo server alone (the baseline)
and `assay mcp wrap` around it with two policies: an allowlist only, and an allowlist plus a
schema (the policy of bench/bench_relay.py). Each spawn gets one ~200-byte tools/call line at
once; the figure is the time from spawn until its reply line arrived. The CPU column is the
user+system time of the whole run (less sensitive to the load of a shared machine than wall time). The report gives the median
per command over --runs rounds and the median added start-up of wrap over the echo server alone
(the target is <= +200 ms on the 2-core dev machine). A benchmark, not a timed test.

Bytecode: an installed package has its .pyc files (pip compiles them), so by default the children
run without PYTHONDONTWRITEBYTECODE and the unmeasured warm-up run writes the caches of an
editable checkout. --keep-env keeps the environment as it is (with PYTHONDONTWRITEBYTECODE=1,
every start compiles assay's modules from source). --compare DIR adds the same two wrap runs with
the assay package of another checkout DIR (PYTHONPATH=DIR), e.g. an export of the previous commit,
so that before and after are measured in one run.

The same rounds also run, to exit, `python -c pass` (the baseline of the command line: the
interpreter's own start-up) and `assay --version` and `assay --help` (stdout a pipe, so the
help is the committed page of docs/testing.md, "Start-up of --version and --help"). The last
table gives the median of each, and of `assay mcp wrap` until its first reply, as absolute ms and
as ms over that baseline, against the target of <= +150 ms over `python -c pass`.
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ECHO = [sys.executable, str(HERE / "echo_server.py")]
sys.path.insert(0, str(HERE))
from bench_relay import POLICY as SCHEMA  # noqa: E402  (the relay bench's policy: allowlist + schema)

ALLOWLIST = SCHEMA[: SCHEMA.index("schemas:")]
FRAME = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {
                    "query": "policy guard start-up",
                    "limit": 10,
                    "lang": "en",
                    "safe": True,
                    "cursor": "abc123def456",
                },
            },
        },
        separators=(",", ":"),
    )
    + "\n"
).encode()


def first_reply(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawn until the reply line to FRAME arrived (the process is then ended by
    EOF), and the CPU seconds of the whole run (the process and every descendant it reaped)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(FRAME)
    p.stdin.flush()
    line = p.stdout.readline()
    elapsed = time.perf_counter() - t0
    p.stdin.close()
    err = p.stderr.read() if p.stderr else b""
    _pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if b'"id":1' not in line.replace(b" ", b""):
        raise SystemExit(f"no reply from {argv[:4]}...: {line[:200]!r} stderr={err[-400:]!r}")
    return elapsed, usage.ru_utime + usage.ru_stime


def to_exit(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawn until the process exited (its stdout read to the end), and its CPU
    seconds."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read()
    _pid, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    if p.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {p.returncode}: {err[-400:]!r}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keep-env", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if set")
    ap.add_argument("--compare", metavar="DIR", help="also run wrap with the assay package under DIR")
    args = ap.parse_args()
    env = dict(os.environ)
    if not args.keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    envs: dict[str, dict[str, str]] = {}
    assay = shutil.which("assay", path=os.path.dirname(sys.executable)) or "assay"
    with tempfile.TemporaryDirectory() as tmp:
        allow, schema = Path(tmp, "allow.yaml"), Path(tmp, "schema.yaml")
        allow.write_text(ALLOWLIST)
        schema.write_text(SCHEMA)
        lines = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "assay --version": [assay, "--version"],
            "assay --help": [assay, "--help"],
        }
        commands = {
            "echo alone": ECHO,
            "wrap allowlist": [assay, "mcp", "wrap", "--policy", str(allow), "--", *ECHO],
            "wrap allowlist+schema": [assay, "mcp", "wrap", "--policy", str(schema), "--", *ECHO],
        }
        if args.compare:
            other = {**env, "PYTHONPATH": os.path.abspath(args.compare)}
            for name in ("wrap allowlist", "wrap allowlist+schema"):
                commands[f"{name} [compare]"] = commands[name]
                envs[f"{name} [compare]"] = other
        times: dict[str, list[float]] = {name: [] for name in [*commands, *lines]}
        cpu: dict[str, list[float]] = {name: [] for name in [*commands, *lines]}
        names = list(commands)
        every = names + list(lines)

        def measure(name: str) -> tuple[float, float]:
            if name in lines:
                return to_exit(lines[name], tmp, env)
            return first_reply(commands[name], tmp, envs.get(name, env))

        for name in every:  # warm the page cache and .pyc files once, unmeasured
            measure(name)
        for r in range(args.runs):
            for name in every[r % len(every) :] + every[: r % len(every)]:
                wall, used = measure(name)
                times[name].append(wall)
                cpu[name].append(used)
    base = statistics.median(times["echo alone"])
    cache = "as the environment says" if args.keep_env else "with .pyc caches"
    print(f"time to first reply, median of {args.runs} runs, {cache} (machine load varies: compare within one run)")
    if args.compare:
        print(f"  [compare]: the assay package under {args.compare}")
    base_cpu = statistics.median(cpu["echo alone"])
    for name in names:
        med, used = statistics.median(times[name]), statistics.median(cpu[name])
        extra = "" if name == "echo alone" else f"   added {1000 * (med - base):+7.1f} ms"
        extra += f"   CPU {1000 * used:6.1f} ms" + (
            "" if name == "echo alone" else f" ({1000 * (used - base_cpu):+6.1f})"
        )
        print(f"  {name:34s} {1000 * med:7.1f} ms{extra}")
    for name in names[1:]:
        paired = statistics.median(w - e for w, e in zip(times[name], times["echo alone"]))
        print(f"  {name:34s} paired added median {1000 * paired:+7.1f} ms (target <= +200 ms)")
    py = statistics.median(times["python -c pass"])
    print(f"command line start-up, median of {args.runs} runs, against `python -c pass` (target <= +150 ms)")
    for name, label in (
        ("python -c pass", "python -c pass"),
        ("assay --version", "assay --version"),
        ("assay --help", "assay --help"),
        ("wrap allowlist", "assay mcp wrap, first reply"),
        ("wrap allowlist+schema", "assay mcp wrap (schema), first reply"),
    ):
        med = statistics.median(times[name])
        over = "" if name == "python -c pass" else f"   over {1000 * (med - py):+7.1f} ms"
        verdict = "" if name == "python -c pass" else ("   ok" if med - py <= 0.150 else "   MISS")
        print(f"  {label:38s} {1000 * med:7.1f} ms{over}{verdict}")


if __name__ == "__main__":
    main()
