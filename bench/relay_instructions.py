"""Relay cost in instructions, not seconds: wrap under valgrind's callgrind, for a figure that a
noisy machine cannot move (bench/README.md says when to use it). Not a test.

Run: .venv/bin/python bench/relay_instructions.py [--compare PATH] [--frames 1000,5000]

For each setup (enforce, dry-run, both logs) wrap relays N1 and then N2 pipelined ~200-byte
tools/call frames (the frames and policy of bench_relay.py) to bench/echo_server.py, reading them
from a file; the figure is (instructions(N2) - instructions(N1)) / (N2 - N1), counted in wrap's
own process only (the server and the keeper are other processes). Start-up is the count of a
run with no frames, after one run that writes the bytecode caches. PYTHONHASHSEED is fixed (the
count moves with it by about 1%); how reads batch frames still depends on timing, so compare two
builds in one invocation on a quiet machine (bench/README.md).

--compare PATH: another checkout (its folder); it is run with this venv, PYTHONPATH set to it.
Needs valgrind (`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_relay import POLICY, frame  # noqa: E402  (the same frames and policy)

SETUPS = {
    "enforce": [],
    "dry-run": ["--dry-run"],
    "logs": ["--decision-log", "{tmp}/d.log", "--audit-log", "{tmp}/a.log", "--event-source", "assay://bench/relay"],
}


def instructions(tree: Path, frames: Path, extra: list[str], tmp: Path) -> int:
    """Instructions of wrap's own process relaying ``frames`` (callgrind's summary)."""
    out = tmp / "cg"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name in ("d.log", "a.log"):
        (tmp / name).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONHASHSEED="0", PYTHONPATH=str(tree))
    argv = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}/cg.%p",
        str(Path(sys.executable).parent / "assay"),
        "mcp",
        "wrap",
        "--policy",
        str(tmp / "policy.yaml"),
        *(a.format(tmp=tmp) for a in extra),
        "--",
        sys.executable,
        str(HERE / "echo_server.py"),
    ]
    with open(frames, "rb") as stdin:
        subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    files = sorted(glob.glob(f"{out}/cg.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    if not files:
        raise SystemExit("valgrind wrote no profile (is valgrind installed?)")
    text = Path(files[0]).read_text(errors="replace")  # the lowest pid: wrap itself
    found = re.search(r"^summary:\s+(\d+)", text, re.M)
    if found is None:
        raise SystemExit(f"no summary in {files[0]}")
    return int(found.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="another checkout, run with PYTHONPATH set to it")
    ap.add_argument("--frames", default="1000,5000", help="N1,N2 (default 1000,5000)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("relay_instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    n1, n2 = (int(x) for x in args.frames.split(","))
    trees = [("this", ROOT)] + ([("compare", args.compare.resolve())] if args.compare else [])
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "policy.yaml").write_text(POLICY)
        files = {}
        for n in (0, n1, n2):
            path = tmp / f"frames{n}.ndjson"
            init = b'{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}\n' if n else b""
            path.write_bytes(init + b"".join(frame(i) for i in range(n)))
            files[n] = path
        print(f"instructions per frame (wrap's process; frames {n1} -> {n2}; PYTHONHASHSEED=0)")
        for name, extra in SETUPS.items():
            row = []
            for label, tree in trees:
                a = instructions(tree, files[n1], extra, tmp)
                b = instructions(tree, files[n2], extra, tmp)
                row.append(f"{label} {(b - a) // (n2 - n1):>7}")
            print(f"  {name:<8} " + "   ".join(row))
        row = []
        for label, tree in trees:
            instructions(tree, files[0], [], tmp)  # writes the bytecode caches
            row.append(f"{label} {instructions(tree, files[0], [], tmp) / 1e6:>7.1f}M")
        print(f"  {'start-up':<8} " + "   ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
