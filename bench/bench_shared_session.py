"""What a shared agent session costs (docs/wrap.md, "Shared sessions").

    .venv/bin/python bench/bench_shared_session.py              # ~1 min: latency, 5 runs
    .venv/bin/python bench/bench_shared_session.py --db-calls 1000000   # + the database size (~2 min more)

Latency: a real `assay mcp wrap` (the `assay` next to this Python) around bench/echo_server.py,
one request at a time (send, wait for the answer), with a policy that has a flow rule and a
per-tool rate limit. Each run measures, back to back, the same policy with
`--shared-session none` (the baseline: every wrap alone) and with a named shared session in a
fresh state directory (every tools/call decided in one SQLite write transaction), for
`tools/call` and for `ping` (a frame that is not a call). A figure is the median over the runs
of each run's median; the difference is formed within each run first. The ``cpu/request`` rows
are the wrap process's CPU time (every thread, from /proc) over the measured requests: less
sensitive to a loaded machine than the latencies.

Size: ``--db-calls N`` commits N calls of that policy through the store itself (in process,
the same SharedSession and SqliteStore wrap uses) and prints the database's size on disk.
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
ASSAY = Path(sys.executable).parent / "assay"
POLICY = """\
version: "2.0"
tools:
  allow: ["*"]
limits:
  tools:
    - { id: burst, tools: ["read_*"], max_calls: 1000, per: 100ms }
sequences:
  - { type: never_after, id: no-send-after-secret, trigger: { tool: "read_*", args_match: { path: "secrets/" } }, forbidden: "send_*", for: 1h }
  - { type: max_calls, id: budget, tool: "*", max: 100000000 }
"""


def frame(rid: int, method: str) -> bytes:
    if method == "tools/call":
        params = {"name": "read_file", "arguments": {"path": f"/ws/notes/{rid}.txt"}}
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method}).encode() + b"\n"


def cpu_of(pid: int) -> float:
    """The CPU time (user + system, every thread) process ``pid`` used so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latencies(policy: Path, state: Path, session: str, method: str, n: int) -> tuple[list[float], float]:
    """Each request's round trip after the warm-up, and the wrap's CPU time per request."""
    argv = [
        str(ASSAY),
        "mcp",
        "wrap",
        "--policy",
        str(policy),
        "--state-dir",
        str(state),
        "--shared-session",
        session,
        "--",
        sys.executable,
        str(HERE / "echo_server.py"),
    ]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    out: list[float] = []
    cpu = 0.0
    try:
        for rid in range(1, n + 51):
            if rid == 51:
                cpu = cpu_of(proc.pid)
            data = frame(rid, method)
            t = time.perf_counter()
            proc.stdin.write(data)
            line = proc.stdout.readline()
            took = time.perf_counter() - t
            if not line:
                raise SystemExit("wrap ended early")
            if rid > 50:  # warm-up: imports, caches, the database's first open
                out.append(took)
        cpu = (cpu_of(proc.pid) - cpu) / n
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return out, cpu


def db_size(calls: int) -> tuple[int, float]:
    from assay.policy import load_policy
    from assay.policy.flows import FlowTracker
    from assay.policy.guards import Part
    from assay.policy.pipeline import Call, FlowGuard, Pipeline, RateGuard
    from assay.policy.rates import tracker_for
    from assay.policy.shared import SharedSession, part_of
    from assay.policy.storeapi import SessionKey
    from assay.policy.state import SessionState
    from assay.store.sqlite import SqliteStore

    policy = load_policy(POLICY.encode())
    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-db-"))
    try:
        store = SqliteStore(str(tmp / "sessions.db"))
        state = SessionState()
        flows = FlowTracker(policy.sequences, policy.aliases, server="bench")
        rates = tracker_for(policy)
        assert rates is not None
        parts = [
            Part("flows", flows.export_state, flows.restore_state, flows.armed),
            Part("rates", rates.export_state, rates.restore_state),
        ]
        shared = SharedSession(
            store, SessionKey("name:bench", "named", name="bench"), part_of(policy), "bench", state, parts, time.time
        )
        pipeline = Pipeline(policy, state, [RateGuard(rates), FlowGuard(flows)], clock=time.time, shared=shared)
        t = time.perf_counter()
        for i in range(calls):  # what wrap's call path does around each decision (docs/architecture.md)
            call = Call("read_file", {"path": f"/ws/{i}"}, "bench")
            now = time.time()
            expect = shared.expecting()  # after the first call: decided at once, one attempt
            if expect is None:
                shared.loaded(store.begin_blocking(shared.key, shared.part, shared.server, now))
            pipeline.decide(call, now)
            pipeline.enter(call, now)
            saved = shared.saving(True)
            if expect is None:
                shared.committed(saved, store.commit_blocking(saved, now))
            else:
                got = store.attempt_blocking(shared.key, shared.part, shared.server, expect, saved, now)
                assert isinstance(got, int)  # nobody else writes here
                shared.committed(saved, got)
        took = time.perf_counter() - t
        store.close()
        size = sum(p.stat().st_size for p in tmp.iterdir())
        return size, took / calls
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--db-calls", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-shared-") as tmp:
        policy = Path(tmp) / "assay.yaml"
        policy.write_text(POLICY)
        rows: dict[str, list[float]] = {}
        for run in range(args.runs):
            for method in ("tools/call", "ping"):
                for session in ("none", "bench"):
                    state = Path(tmp) / f"state-{run}-{method.replace('/', '_')}-{session}"
                    took, cpu = latencies(policy, state, session, method, args.calls)
                    rows.setdefault(f"{method} {session}", []).append(statistics.median(took))
                    rows.setdefault(f"{method} {session} cpu", []).append(cpu)
            for method in ("tools/call", "ping"):
                for what in ("", " cpu"):
                    rows.setdefault(f"{method} added{what}", []).append(
                        rows[f"{method} bench{what}"][-1] - rows[f"{method} none{what}"][-1]
                    )
        print(f"assay: {ASSAY}; {args.runs} runs x {args.calls} requests, one at a time; load {os.getloadavg()[0]:.2f}")
        for name, values in sorted(rows.items(), key=lambda item: item[0].endswith(" cpu")):
            what = "cpu/request" if name.endswith(" cpu") else "p50"
            print(
                f"  {name.removesuffix(' cpu'):22} {what:11} {statistics.median(values) * 1e6:8.1f} us   "
                f"(runs: {', '.join(f'{v * 1e6:.0f}' for v in values)})"
            )
    if args.db_calls:
        size, per = db_size(args.db_calls)
        print(
            f"  database after {args.db_calls:,} calls: {size / 1e6:.2f} MB on disk ({per * 1e6:.1f} us a call in process)"
        )


if __name__ == "__main__":
    main()
