"""What log rotation costs (docs/wrap.md, "Log rotation"). Not a test.

    .venv/bin/python bench/bench_log_sink.py [--runs 5] [--writes 20000] [--rounds 2000]

Two parts, each interleaved run by run so every case sees the same machine load; medians:

  in process  one write of a decision event and its audit record (~2.3 KB, what a call's read
              gives each log) into a file: the plain sink (``RecordSink``: one ``write``)
              against the rotating sink (``RotatingSink``: ``fstat``, shared ``flock``,
              ``lstat``, ``write``, unlock) with a limit never reached; process CPU per write.
  wrap        ``assay mcp wrap`` with --decision-log and --audit-log in front of
              bench/echo_server.py, --rounds sequential ``tools/call`` round trips: wrap's own
              CPU per call (schedstat, not its children) with ``--log-max-bytes 0`` (never
              rotates: the plain sink, as before rotation), the default (16 MiB: the rotating
              sink, no rotation in the run) and ``--log-max-bytes 65536`` (a rotation every ~25
              calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_relay import ECHO, POLICY, Proc, cpu_ns, frame  # noqa: E402

from assay.shells.stdio.pipes import RecordSink  # noqa: E402
from assay.shells.stdio.rotation import RotatingSink  # noqa: E402

RECORD = b'{"specversion":"1.0","id":"evt_decision_' + b"x" * 2000 + b'"}\n' + b'{"timestamp":"' + b"y" * 280 + b'"}\n'
CASES = {"never rotates (0)": "0", "default (16 MiB)": None, "64 KiB": "65536"}


def _sink(path: Path, rotating: bool) -> RecordSink:
    fh = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), "ab", buffering=0)
    return RotatingSink("audit log", fh, str(path), 1 << 40) if rotating else RecordSink("audit log", fh)


def in_process(root: Path, writes: int) -> dict[str, float]:
    out = {}
    for name, rotating in (("plain", False), ("rotating", True)):
        path = root / f"{name}.ndjson"
        sink = _sink(path, rotating)
        start = time.process_time()
        for _ in range(writes):
            sink.write(RECORD)
        out[name] = (time.process_time() - start) / writes * 1e6
        sink.close()
        path.unlink()
    return out


def wrap_cpu(root: Path, assay: str, rounds: int) -> dict[str, float]:
    policy = root / "policy.yaml"
    policy.write_text(POLICY)
    out = {}
    for name, limit in CASES.items():
        scratch = Path(tempfile.mkdtemp(dir=root))
        argv = [
            assay,
            "mcp",
            "wrap",
            "--policy",
            str(policy),
            "--decision-log",
            str(scratch / "d.ndjson"),
            "--audit-log",
            str(scratch / "a.ndjson"),
            *(["--log-max-bytes", limit] if limit else []),
            "--",
            *ECHO,
        ]
        proc = Proc(argv, scratch, name)
        for i in range(20):
            proc.round_trip(frame(i))
        before = cpu_ns(proc.pid)
        for i in range(rounds):
            proc.round_trip(frame(100 + i))
        out[name] = (cpu_ns(proc.pid) - before) / rounds / 1000
        proc.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--writes", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2000)
    args = ap.parse_args()
    assay = str(Path(sys.executable).parent / "assay")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    sink_runs: list[dict[str, float]] = []
    wrap_runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for _ in range(args.runs):
            sink_runs.append(in_process(root, args.writes))
            wrap_runs.append(wrap_cpu(root, assay, args.rounds))
    print(f"in process, CPU us per write (median of {args.runs}):")
    for name in ("plain", "rotating"):
        print(f"  {name:10} {statistics.median(r[name] for r in sink_runs):7.2f}")
    print(f"  +{statistics.median(r['rotating'] - r['plain'] for r in sink_runs):.2f} us per write")
    print(f"wrap + logs, wrap CPU us per call over {args.rounds} round trips (median of {args.runs}):")
    base = "never rotates (0)"
    for name in CASES:
        delta = statistics.median(r[name] - r[base] for r in wrap_runs)
        print(f"  {name:18} {statistics.median(r[name] for r in wrap_runs):7.1f}   {delta:+6.1f} vs {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
