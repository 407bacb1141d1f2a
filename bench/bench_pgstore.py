"""What a decision costs on the Postgres store against the SQLite store (docs/serve.md, "Several
replicas").

    .venv/bin/python bench/bench_pgstore.py              # ~1 min: 5 runs x 500 calls at 100 calls/s
    .venv/bin/python bench/bench_pgstore.py --stale      # every call finds another replica's write
    .venv/bin/python bench/bench_pgstore.py --code /tmp/old   # the assay package in /tmp/old/assay

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
less sensitive to a loaded machine than the latencies; ``server cpu/call`` is the Postgres
server's (the postmaster and its children, from /proc).

``--stale`` is the path of replicas balanced round robin (docs/serve.md, "Several replicas"):
before each call another writer bumps the part's version (one ``UPDATE`` on a connection of its
own, outside the timed part; its CPU on this side is taken out of ``cpu/call``, its server CPU
is in ``server cpu/call``, the same for every code compared), so every ``attempt`` finds a
write it did not make: it writes nothing, the store loads the fresh state in a transaction it
keeps open, the call is decided again and ``commit`` writes. ``--code DIR`` imports the
``assay`` package from DIR (e.g. ``git archive main assay | tar -x -C DIR``) to compare two
versions of the store on one machine, run after run.
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


def server_cpu(pid: int) -> float:
    """CPU seconds of the Postgres server: the postmaster ``pid`` and its children."""
    clk = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / clk
    return total


async def decisions(
    store: Any, calls: int, rate: float, bump: Any = None, server: int = 0
) -> tuple[list[float], float, float]:
    """Each decision's time (decide + the store's attempt, awaited), the CPU per call and the
    Postgres server's CPU per call. ``bump``: a psycopg connection that makes every attempt
    stale."""
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
    served = 0.0
    bumping = 0.0  # the other writer's CPU on this side
    start = trio.current_time()
    for i in range(calls + warm):
        await trio.sleep_until(start + i / rate)
        if i == warm:
            cpu = time.process_time()
            served = server_cpu(server) if server else 0.0
            bumping = 0.0
        if bump is not None and i > 0:
            b = time.thread_time()
            bump.execute("UPDATE parts SET version = version + 1 WHERE key = %s", (shared.key.key,))
            bumping += time.thread_time() - b
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
            if isinstance(got, int):
                assert bump is None  # nobody else writes here
                shared.committed(saved, got)
            else:  # another writer: decided again on the fresh state, then written
                assert bump is not None
                shared.conflicted()
                shared.loaded(got)
                pipeline.decide(call, now)
                pipeline.enter(call, now)
                saved = shared.saving(True)
                shared.committed(saved, await store.commit(saved, now))
        if i >= warm:
            out.append(time.perf_counter() - t)
    served = (server_cpu(server) - served) / calls if server else 0.0
    return out, (time.process_time() - cpu - bumping) / calls, served


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rate", type=float, default=100.0, help="calls a second (default 100)")
    ap.add_argument("--stale", action="store_true", help="every attempt finds another writer's write")
    ap.add_argument("--code", default="", help="import the assay package from this directory")
    args = ap.parse_args()
    if args.code:
        sys.path.insert(0, os.path.abspath(args.code))

    import psycopg

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
            url = server.database()
            database = PostgresDatabase(url, PASSWORD)
            postgres = database.store()

            async def one(store: Any, name: str, url: str = "") -> None:
                bump = psycopg.connect(url, password=PASSWORD, autocommit=True) if url and args.stale else None
                pid = server.process.pid if url and server.process is not None else 0
                try:
                    took, cpu, served = await decisions(store, args.calls, args.rate, bump, pid)
                finally:
                    if bump is not None:
                        bump.close()
                rows.setdefault(f"{name} p50", []).append(statistics.median(took))
                rows.setdefault(f"{name} p99", []).append(p(took, 0.99))
                rows.setdefault(f"{name} cpu/call", []).append(cpu)
                if url:
                    rows.setdefault(f"{name} server cpu/call", []).append(served)
                await store.aclose()

            async def both() -> None:
                if not args.stale:  # (SQLite has one writer per file here: no stale path)
                    await one(sqlite, "sqlite")
                await one(postgres, "postgres", url)
                await database.aclose()

            trio.run(both)
            loads.append(os.getloadavg()[0])
            for what in () if args.stale else ("p50", "p99", "cpu/call"):
                rows.setdefault(f"added {what}", []).append(rows[f"postgres {what}"][-1] - rows[f"sqlite {what}"][-1])
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)
    code = Path(sys.modules[PostgresDatabase.__module__].__file__ or "").parent.parent.parent
    print(
        f"{args.runs} runs x {args.calls} decisions at {args.rate:g} calls/s, one user"
        f"{', every attempt stale' if args.stale else ''}; code {code}; "
        f"load average {min(loads):.2f}-{max(loads):.2f}"
    )
    for name, values in rows.items():
        print(
            f"  {name:20} {statistics.median(values) * 1e3:7.3f} ms   "
            f"(runs: {', '.join(f'{v * 1e3:.3f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
