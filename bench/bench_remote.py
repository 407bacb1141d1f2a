"""What `assay mcp wrap --url` adds over a direct client (docs/remote.md). Not a test.

    .venv/bin/python bench/bench_remote.py [--runs 5] [--calls 300] [--inflight 200]
                                           [--servers NAME,...] [--stdio-ref] [--json PATH]
                                           [--assay PATH]

One real MCP server per entry of the server matrix runs on 127.0.0.1 (each with one `echo`
tool):

  py sse             the SDK's MCPServer as `run("streamable-http")` serves it: uvicorn,
                     sessions, each POST answered with an event stream (the SDK's default)
  py json            the same with JSON answers (json_response)
  py sse stateless   no sessions (stateless_http), event-stream answers
  py json stateless  no sessions, JSON answers
  ts sse             the TypeScript SDK v1 (StreamableHTTPServerTransport on node:http),
                     sessions, event-stream answers (tests/e2e/ts_remote_server.mjs)
  hypercorn sse      the SDK's MCPServer served by hypercorn, sessions, event-stream answers
  py sse nagle       `py sse` with Nagle's algorithm left on for its connections (a socket
                     without TCP_NODELAY: docs/remote.md, "Connections")

(bench/http_echo_server.py serves the Python ones.) Against each, with the `mcp` Python SDK's
ClientSession:

  direct     the SDK's streamable HTTP client, talking to the server itself (the baseline)
  wrap       the SDK's stdio client, talking to `assay mcp wrap --policy P --url URL` (a real
             process: the `assay` next to this Python, or --assay PATH); P allows `echo`
  stdio ref  (with --stdio-ref; reference, not a target) the SDK's stdio client to the Python
             server over stdio, so the cost of the client's transport can be told from wrap's

Per setup and run, on one session: `--warmup` calls (not measured), then `--calls` sequential
`tools/call`s (each timed: p50, p90), then one unmeasured batch and `--batches` batches of
`--inflight` calls in flight at once (an anyio task group): calls per second over the batches.
`client/wrap cpu us/call`: the CPU time of the benchmark's own process (the SDK client) and of
wrap's process (/proc/<pid>/task/*/schedstat) over the batches, per call. Each run measures every setup back to back, in an order that rotates from run to run;
a figure is the median over `--runs` runs, and a difference or ratio is formed within each run
first. Targets: wrap adds <= 1 ms to the p50 of a call; its throughput is >= 0.8 of direct's.

Start-up (`--startup-runs`, default 10, rotating order after one unmeasured warm-up each): spawn
until the answer to an `initialize` line, for `assay mcp wrap --policy P -- bench/echo_server.py`
(stdio; echo_server.py alone is the floor) and for `wrap --url` against the `py json` server. To see
whether stdio start-up grew, run the same script against an older checkout (`--assay`).

A setup that fails (wrap exits, an answer is an error, a phase hangs for `--timeout` s) is
reported as FAILED and not measured again; the exit status is then 1.

`--profile DIR` runs wrap under cProfile (`python -m cProfile -o DIR/wrap-*.prof`), one file per
session; its figures are then not wrap's (read them with `python -m pstats`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
PY = sys.executable
SERVER = [PY, str(HERE / "http_echo_server.py")]
TS_SERVER = ["node", str(HERE.parent / "tests" / "e2e" / "ts_remote_server.mjs")]
SERVERS: dict[str, list[str]] = {  # the server matrix (see the docstring)
    "py sse": [*SERVER, "--sse"],
    "py json": SERVER,
    "py sse stateless": [*SERVER, "--sse", "--stateless"],
    "py json stateless": [*SERVER, "--stateless"],
    "ts sse": TS_SERVER,
    "hypercorn sse": [*SERVER, "--sse", "--hypercorn"],
    "py sse nagle": [*SERVER, "--sse", "--nagle"],
}
ECHO = [PY, str(HERE / "echo_server.py")]
POLICY = 'version: "2.0"\ntools:\n  allow: ["echo"]\n'
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
    )
    + "\n"
).encode()
SETUPS = ("direct", "wrap", "stdio ref")  # stdio ref with --stdio-ref only


class SetupFailed(Exception):
    pass


def cpu_ns(pid: int) -> int:
    """CPU time of a process so far, from the first field of each thread's schedstat."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def wrap_pid() -> int | None:
    """The pid of our child that is `assay mcp wrap` (stdio_client does not expose it)."""
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"wrap" in cmd and b"mcp" in cmd:
                return int(pid)
    return None


@asynccontextmanager
async def connect(
    setup: str, url: str, assay: str, policy: Path, env: dict[str, str], errlog: Any, profile: str | None = None
) -> AsyncIterator[ClientSession]:
    if setup == "direct":
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            yield session
        return
    if setup == "wrap":
        argv = [assay, "mcp", "wrap", "--policy", str(policy), "--url", url]
        if profile:  # the whole run of wrap under cProfile; one file per session
            out = Path(profile, f"wrap-{time.monotonic_ns()}.prof")
            argv = [PY, "-m", "cProfile", "-o", str(out), *argv]
    else:
        argv = [*SERVER, "--stdio"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        yield session


async def call(session: ClientSession, text: str) -> None:
    result = await session.call_tool("echo", {"text": text})
    got = "".join(getattr(block, "text", "") for block in getattr(result, "content", []))
    if getattr(result, "is_error", True) or got != text:
        raise SetupFailed(f"echo({text!r}) answered {result!r:.300}")


async def measure(
    setup: str, url: str, args: argparse.Namespace, policy: Path, env: dict[str, str], errlog: Any
) -> dict[str, Any]:
    """One setup, one run: latency of sequential calls, then pipelined throughput."""
    with anyio.fail_after(args.timeout):
        async with connect(setup, url, args.assay, policy, env, errlog, args.profile) as session:
            await session.initialize()
            for i in range(args.warmup):
                await call(session, f"w{i}")
            lat = []
            for i in range(args.calls):
                t = time.perf_counter()
                await call(session, f"s{i}")
                lat.append(time.perf_counter() - t)

            async def batch(tag: str) -> None:
                async with anyio.create_task_group() as tg:
                    for i in range(args.inflight):
                        tg.start_soon(call, session, f"{tag}{i}")

            await batch("u")  # unmeasured: the connection pool and the server warm up
            pid = wrap_pid() if setup == "wrap" else None
            cpu0 = cpu_ns(pid) if pid else 0
            mine0 = time.process_time()
            t = time.perf_counter()
            for b in range(args.batches):
                await batch(f"b{b}.")
            took = time.perf_counter() - t
            mine = (time.process_time() - mine0) * 1e6 / (args.batches * args.inflight)
            cpu = (cpu_ns(pid) - cpu0) / 1e3 / (args.batches * args.inflight) if pid else None
    lat.sort()
    return {
        "p50_ms": 1e3 * statistics.median(lat),
        "p90_ms": 1e3 * lat[int(0.9 * (len(lat) - 1))],
        "calls_per_s": args.batches * args.inflight / took,
        "cpu_us_per_call": cpu,
        "client_cpu_us_per_call": mine,
    }


def start_server(name: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(SERVERS[name], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != b"PORT":
        proc.kill()
        raise SystemExit(f"bench server ({name}) did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line[1])}/mcp"


def first_answer(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn until the answer to an initialize line arrived; then EOF ends it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdin is not None and p.stdout is not None and p.stderr is not None
    p.stdin.write(INIT)
    p.stdin.flush()
    line = p.stdout.readline()
    took = time.perf_counter() - t0
    p.stdin.close()
    err = p.stderr.read()
    p.wait(timeout=60)
    if b'"id":0' not in line.replace(b" ", b""):
        why = err[-400:].decode(errors="replace").strip().replace("\n", " / ")
        raise SetupFailed(f"no answer to initialize {line[:200]!r}; stderr: {why}")
    return took


def startup(args: argparse.Namespace, policy: Path, env: dict[str, str], url: str) -> dict[str, Any]:
    commands = {
        "echo_server.py alone": ECHO,
        "wrap -- echo_server.py": [args.assay, "mcp", "wrap", "--policy", str(policy), "--", *ECHO],
        "wrap --url (py json)": [args.assay, "mcp", "wrap", "--policy", str(policy), "--url", url],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    failed: dict[str, str] = {}

    def once(name: str) -> float | None:
        if name in failed:
            return None
        try:
            return first_answer(commands[name], env)
        except (SetupFailed, subprocess.TimeoutExpired) as exc:
            failed[name] = str(exc)
            return None

    names = list(commands)
    for name in names:  # page cache and .pyc files, unmeasured
        once(name)
    for r in range(args.startup_runs):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            took = once(name)
            if took is not None:
                times[name].append(took)
    return {
        name: (
            {"ms": 1e3 * statistics.median(v), "runs_ms": [1e3 * x for x in v]}
            if v and name not in failed
            else {"failed": failed.get(name, "no sample")}
        )
        for name, v in times.items()
    }


def summarize(runs: list[dict[str, dict[str, Any]]], setups: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setup in setups:
        per = [r[setup] for r in runs if setup in r and "failed" not in r[setup]]
        if not per:
            out[setup] = {"failed": next((r[setup]["failed"] for r in runs if setup in r), "not run")}
            continue
        row = {
            k: statistics.median(p[k] for p in per)
            for k in ("p50_ms", "p90_ms", "calls_per_s", "client_cpu_us_per_call")
        }
        cpus = [p["cpu_us_per_call"] for p in per if p["cpu_us_per_call"] is not None]
        row["cpu_us_per_call"] = statistics.median(cpus) if cpus else None
        if setup != "direct":
            pairs = [r for r in runs if "failed" not in r.get(setup, {"failed": 1}) and "failed" not in r["direct"]]
            row["added_p50_ms"] = statistics.median(r[setup]["p50_ms"] - r["direct"]["p50_ms"] for r in pairs)
            row["vs_direct"] = statistics.median(r[setup]["calls_per_s"] / r["direct"]["calls_per_s"] for r in pairs)
        row["runs"] = per
        out[setup] = row
    return out


def print_mode(mode: str, summary: dict[str, Any], setups: tuple[str, ...]) -> list[str]:
    print(
        f"\n{mode}: median of runs{' ' * (26 - len(mode))}p50 ms  p90 ms  +p50 ms    calls/s  vs direct  client/wrap cpu us/call"
    )
    for setup in setups:
        row = summary[setup]
        if "failed" in row:
            print(f"  {setup:36} FAILED: {row['failed'][:300]}")
            continue
        added = f"{row['added_p50_ms']:+8.3f}" if "added_p50_ms" in row else " " * 8
        ratio = f"{row['vs_direct']:9.2f}" if "vs_direct" in row else " " * 9
        cpu = f"{row['client_cpu_us_per_call']:8.0f}" + (
            f" /{row['cpu_us_per_call']:5.0f}" if row["cpu_us_per_call"] is not None else ""
        )
        print(
            f"  {setup:36} {row['p50_ms']:7.3f} {row['p90_ms']:7.3f} {added} {row['calls_per_s']:10.0f} {ratio}  {cpu}"
        )
    wrap = summary["wrap"]
    if "failed" in wrap:
        return [f"{mode}: wrap failed"]
    misses = []
    for label, ok, figure in (
        ("added p50 <= 1 ms", wrap["added_p50_ms"] <= 1.0, f"{wrap['added_p50_ms']:+.3f} ms"),
        ("throughput >= 0.8 of direct", wrap["vs_direct"] >= 0.8, f"{wrap['vs_direct']:.2f}"),
    ):
        print(f"  target {label:30} {figure:>12}  {'ok' if ok else 'MISS'}")
        if not ok:
            misses.append(f"{mode}: {label}")
    return misses


async def run_mode(
    mode: str,
    url: str,
    args: argparse.Namespace,
    policy: Path,
    env: dict[str, str],
    errlog: Any,
    log: Callable[[str], None],
    setups: tuple[str, ...],
) -> list[dict[str, dict[str, Any]]]:
    runs: list[dict[str, dict[str, Any]]] = []
    failed: dict[str, str] = {}
    for r in range(args.runs):
        row: dict[str, dict[str, Any]] = {}
        for setup in setups[r % len(setups) :] + setups[: r % len(setups)]:
            if setup in failed:
                row[setup] = {"failed": failed[setup]}
                continue
            errlog.flush()
            start = errlog.tell()
            try:
                row[setup] = await measure(setup, url, args, policy, env, errlog)
            except Exception as exc:  # noqa: BLE001  (a failing setup is reported, the others go on)
                errlog.flush()
                errlog.seek(start)
                tail = errlog.read()[-600:].strip().replace("\n", " / ")
                errlog.seek(0, 2)
                leaf: BaseException = exc
                while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                    leaf = leaf.exceptions[0]
                failed[setup] = f"{type(leaf).__name__}: {leaf!s:.200} | stderr: {tail}"
                row[setup] = {"failed": failed[setup]}
                log(f"FAILED {mode} {setup}: {failed[setup]}")
                if setup == "direct":
                    raise SystemExit(f"the baseline failed: {failed[setup]}") from exc
        runs.append(row)
        log(
            f"{mode} run {r + 1}/{args.runs}: "
            + ", ".join(
                f"{s} {v['p50_ms']:.2f} ms {v['calls_per_s']:.0f}/s" for s, v in row.items() if "failed" not in v
            )
        )
    return runs


def setups_of(server: str, args: argparse.Namespace) -> tuple[str, ...]:
    """The setups measured against ``server``: the stdio reference only for a Python server."""
    ref = args.stdio_ref and SERVERS[server][:2] == SERVER
    return SETUPS if ref else SETUPS[:2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=300, help="sequential calls timed per setup and run")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--inflight", type=int, default=200, help="calls in flight at once")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--servers", default=",".join(SERVERS), help="which of the server matrix, comma-separated")
    ap.add_argument(
        "--stdio-ref", action="store_true", help="also the SDK's stdio client to the Python server over stdio"
    )
    ap.add_argument("--startup-runs", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a setup's run counts as hung")
    ap.add_argument("--backend", default="trio", choices=("trio", "asyncio"))
    ap.add_argument("--assay", default=str(Path(PY).parent / "assay"))
    ap.add_argument("--profile", metavar="DIR", help="run wrap under cProfile, a .prof file per session in DIR")
    ap.add_argument("--json", metavar="PATH", help="also write every figure and per-run value as JSON")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    modes = [m.strip() for m in args.servers.split(",") if m.strip()]
    unknown = [m for m in modes if m not in SERVERS]
    if unknown:
        raise SystemExit(f"unknown server(s) {unknown}; the matrix: {', '.join(SERVERS)}")
    report: dict[str, Any] = {"args": vars(args), "load_before": os.getloadavg()[0], "modes": {}}
    misses: list[str] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="assay-bench-remote-") as tmp:
        policy = Path(tmp, "assay.yaml")
        policy.write_text(POLICY)
        servers = {mode: start_server(mode) for mode in modes}
        try:
            with open(Path(tmp, "stderr.log"), "w+") as errlog:

                def log(line: str) -> None:
                    print(line, file=sys.stderr, flush=True)

                for mode in modes:
                    setups = setups_of(mode, args)
                    runs = anyio.run(
                        run_mode, mode, servers[mode][1], args, policy, env, errlog, log, setups, backend=args.backend
                    )
                    report["modes"][mode] = summarize(runs, setups)
            url = servers["py json"][1] if "py json" in servers else servers[modes[0]][1]
            report["startup"] = startup(args, policy, env, url) if args.startup_runs else {}
        finally:
            for proc, _url in servers.values():
                proc.terminate()
                proc.wait(timeout=30)
    report["load_after"] = os.getloadavg()[0]
    print(
        f"assay: {args.assay}; {args.runs} runs x ({args.calls} sequential + {args.batches} x {args.inflight} "
        f"in flight) per setup; client backend {args.backend}; load {report['load_before']:.2f} -> "
        f"{report['load_after']:.2f}"
    )
    for mode in modes:
        summary = report["modes"][mode]
        misses += print_mode(mode, summary, setups_of(mode, args))
        failed = failed or any("failed" in summary[s] for s in setups_of(mode, args))
    if report.get("startup"):
        print(f"\nstart-up: spawn to the answer of initialize, median of {args.startup_runs} runs")
        for name, fig in report["startup"].items():
            print(f"  {name:36} " + (f"{fig['ms']:7.1f} ms" if "ms" in fig else f"FAILED: {fig['failed'][:300]}"))
            failed = failed or "failed" in fig
    if misses:
        print("MISS: " + "; ".join(misses))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
