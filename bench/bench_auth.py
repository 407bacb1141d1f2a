"""Start-up of `assay mcp wrap --url` with a stored OAuth login (docs/auth.md): spawn to the
answer of `initialize`, and the whole process's CPU, against the test authorization server of
tests/remote/authserver.py; optionally against another checkout in the same rounds.

    .venv/bin/python bench/bench_auth.py --runs 15
    .venv/bin/python bench/bench_auth.py --runs 15 --compare /tmp/oldmain   # an export of another commit

Each checkout logs in once with its own `assay mcp auth login` (a scripted browser follows the
redirect), into its own state directory; then every round starts each checkout's wrap once, in a
rotating order, after one unmeasured warm-up run of each. The figures are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSAY = Path(sys.executable).parent / "assay"
BROWSER = f"""#!{sys.executable}
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as answer:
    answer.read()
"""
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    + "\n"
)


def env_for(checkout: str | None, browser: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ASSAY_") and k not in ("DISPLAY", "WAYLAND_DISPLAY")
    }
    env["BROWSER"] = str(browser)
    if checkout:
        env["PYTHONPATH"] = checkout
    else:
        env.pop("PYTHONPATH", None)
    return env


def one_run(url: str, state: Path, policy: Path, env: dict[str, str]) -> tuple[float, float]:
    """(ms from spawn to the initialize answer, CPU ms of the whole wrap process)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(ASSAY), "mcp", "wrap", "--policy", str(policy), "--state-dir", str(state), "--url", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT.encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    assert b'"result"' in line, line
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compare", help="a directory with another commit's assay/ (git archive)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-auth-"))
    browser = work / "browser"
    browser.write_text(BROWSER)
    browser.chmod(0o755)
    policy = work / "assay.yaml"
    policy.write_text('version: "2.0"\ntools:\n  allow: ["echo"]\n')
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/remote/authserver.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}/mcp"
        checkouts = {"this": None} | ({"compare": args.compare} if args.compare else {})
        for name, checkout in checkouts.items():
            done = subprocess.run(
                [str(ASSAY), "mcp", "auth", "login", url, "--state-dir", str(work / name)],
                env=env_for(checkout, browser),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in checkouts}
        for name, checkout in checkouts.items():
            one_run(url, work / name, policy, env_for(checkout, browser))  # warm-up
        names = list(checkouts)
        for i in range(args.runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                figures[name].append(one_run(url, work / name, policy, env_for(checkouts[name], browser)))
        load = os.getloadavg()
        print(
            f"wrap --url with a stored login, spawn to the initialize answer; {args.runs} runs, median "
            f"(load average {load[0]:.1f}; children's CPU {resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.1f} s)"
        )
        for name in names:
            wall = statistics.median(f[0] for f in figures[name])
            cpu = statistics.median(f[1] for f in figures[name])
            print(f"  {name:8} {checkouts[name] or ROOT}: {wall:7.1f} ms wall, {cpu:7.1f} ms CPU")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
