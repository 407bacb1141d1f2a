"""What a decision costs on the Postgres store against the SQLite store (docs/serve.md, "Several
replicas").

    .venv/bin/python bench/bench_pgstore.py              # ~1 min: 5 runs x 500 calls at 100 calls/s

Each call is what a gateway does around one decision of a user whose policy shares state (a flow
rule and a per-tool rate limit; docs/architecture.md, "The shared session's store"): the
session core decides on what it last saw and the store's ``attempt`` compares and writes in one
go (``begin`` and ``commit`` on the first call only), awaited from trio as the gateway awaits it
(the store's own thread does the blocking work). The calls are paced at ``--rate`` a second, as
a served user's would be, not back to back. Each run measures, one store after the other, the
SQLite store in a fresh directory and the Postgres store in a fresh database of a Postgres the
bench starts itself (tests/pgserver.py: initdb into a temporary directory, loopback, fsync off as
in the tests). A figure is the median over the runs of each run's p50 (p99); the difference is
formed within each run first. ``cpu/call`` is this process's CPU time (every thread) per call:
less sensitive to a loaded machine than the latencies (the Postgres server's CPU is not in it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


async def decisions(store: Any, calls: int, rate: float) -> tuple[list[float], float]:
    """Each decision's time (decide + the store's attempt, awaited) and the CPU per call."""
    from assay.policy import load_policy
    from assay.policy.flows import FlowTracker
    from assay.policy.guards import Part
    from assay.policy.pipeline import Call, FlowGuard, Pipeline, RateGuard
    from assay.policy.rates import tracker_for
    from assay.policy.shared import SharedSession, part_of
    from assay.policy.state import SessionState
    from assay.policy.storeapi import SessionKey

    policy = load_policy(POLICY.encode())
    state = SessionState()
    flows = FlowTracker(policy.sequences, policy.aliases, server="bench")
    rates = tracker_for(policy)
    assert rates is not None
    parts = [
        Part("flows", flows.export_state, flows.restore_state, flows.armed),
        Part("rates", rates.export_state, rates.restore_state),
    ]
    key = SessionKey("user:https://issuer.bench#alice", "user", name="alice")
    shared = SharedSession(store, key, part_of(policy), "bench", state, parts, time.time)
    pipeline = Pipeline(policy, state, [RateGuard(rates), FlowGuard(flows)], clock=time.time, shared=shared)
    warm = 50
    out: list[float] = []
    cpu = 0.0
    start = trio.current_time()
    for i in range(calls + warm):
        await trio.sleep_until(start + i / rate)
        if i == warm:
            cpu = time.process_time()
        t = time.perf_counter()
        call = Call("read_file", {"path": f"/ws/notes/{i}.txt"}, "bench")
        now = time.time()
        expect = shared.expecting()
        if expect is None:
            shared.loaded(await store.begin(shared.key, shared.part, shared.server, now))
        pipeline.decide(call, now)
        pipeline.enter(call, now)
        saved = shared.saving(True)
        if expect is None:
            shared.committed(saved, await store.commit(saved, now))
        else:
            got = await store.attempt(shared.key, shared.part, shared.server, expect, saved, now)
            assert isinstance(got, int)  # nobody else writes here
            shared.committed(saved, got)
        if i >= warm:
            out.append(time.perf_counter() - t)
    return out, (time.process_time() - cpu) / calls


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rate", type=float, default=100.0, help="calls a second (default 100)")
    args = ap.parse_args()

    from assay.store.postgres import PostgresDatabase
    from assay.store.sqlite import SqliteStore
    from tests.pgserver import PASSWORD, start_server, stop_server

    server = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-pgstore-"))
    rows: dict[str, list[float]] = {}
    loads: list[float] = []
    try:
        for run in range(args.runs):
            sqlite = SqliteStore(str(tmp / f"sessions-{run}.db"))
            database = PostgresDatabase(server.database(), PASSWORD)
            postgres = database.store()

            async def one(store: Any, name: str) -> None:
                took, cpu = await decisions(store, args.calls, args.rate)
                rows.setdefault(f"{name} p50", []).append(statistics.median(took))
                rows.setdefault(f"{name} p99", []).append(p(took, 0.99))
                rows.setdefault(f"{name} cpu/call", []).append(cpu)
                await store.aclose()

            async def both() -> None:
                await one(sqlite, "sqlite")
                await one(postgres, "postgres")
                await database.aclose()

            trio.run(both)
            loads.append(os.getloadavg()[0])
            for what in ("p50", "p99", "cpu/call"):
                rows.setdefault(f"added {what}", []).append(rows[f"postgres {what}"][-1] - rows[f"sqlite {what}"][-1])
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{args.runs} runs x {args.calls} decisions at {args.rate:g} calls/s, one user; "
        f"load average {min(loads):.2f}-{max(loads):.2f}"
    )
    for name, values in rows.items():
        print(
            f"  {name:20} {statistics.median(values) * 1e3:7.3f} ms   "
            f"(runs: {', '.join(f'{v * 1e3:.3f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
