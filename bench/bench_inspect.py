"""Response inspection benchmark (docs/policy.md, "Inspecting what comes back"). Not a test.

    .venv/bin/python bench/bench_inspect.py [--runs 7]                 # in the session
    .venv/bin/python bench/bench_inspect.py --process [--runs 5]       # whole wrap process
    .venv/bin/python bench/bench_inspect.py --process --assay PATH     # another wrap's
    .venv/bin/python bench/bench_inspect.py --process --compare PATH   # and another's, same runs

What one server answer costs, with and without inspection, measured in the same run:

- baseline: a policy without ``inspect``; the answer to a forwarded ``tools/call`` is relayed;
- on: ``inspect: {secrets: mask, injection: strip}`` covering the tool (no finding: the answer
  is read and relayed as it is);
- not named: the same policy with the tool left out by a per-tool entry (``secrets: off,
  injection: off``): the answer must cost what the baseline's does (in the session only).

By default in the wrap session (the sans-IO core the relay calls: the client's call and the
server's answer in, the bytes for each side out; both halves timed). With ``--process``, through
real processes: ``assay mcp wrap`` (the ``assay`` next to this Python, or ``--assay``) in front of
bench/answer_server.py, which answers every call with the same line, and a client that sends
``initialize`` and then one ``tools/call`` at a time, waiting for each answer, as a model does.
The figure is wrap's own process CPU per call (every thread's ``schedstat``; the keeper and the
server are other processes) over ``--calls`` calls after a warm-up; ``first answer`` is wrap's
CPU from its start to the end of the first answer (start-up, the first inspection's imports and
compiles). Each run starts every policy's wrap anew, in a rotating order.

For results of 1 KiB (prose) and 1 MiB (prose; Python's standard library sources; the project's
own docs and sources, which hold every detector's literals: a worst case). Each figure is the
median of ``--runs`` runs; the difference to the baseline is what inspection adds. Targets
(whole process): 1 KiB <= 10 µs more, 1 MiB <= 15 ms more.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from assay.policy import load_policy
from assay.session.session import SessionOptions, WrapSession

REPO = Path(__file__).resolve().parent.parent
HEAD = 'version: "2.0"\ntools: {allow: ["*"]}\nenforcement: {unconstrained_tools: allow}\n'
POLICIES = {
    "baseline": HEAD,
    "on": HEAD + "inspect: {secrets: mask, injection: strip}\n",
    "not named": HEAD
    + "inspect:\n  secrets: mask\n  injection: strip\n  tools:\n    - {tool: read, secrets: off, injection: off}\n",
}


def corpus(size: int) -> str:
    text = "".join(p.read_text() for p in sorted((REPO / "docs").glob("*.md")))
    text += "".join(p.read_text() for p in sorted((REPO / "assay").rglob("*.py")))
    while len(text) < size:
        text += text
    return text[:size]


def stdlib_code(size: int) -> str:
    """Python's own standard library sources: ordinary code (the project's sources hold every
    detector's own literals, which makes them a worst case)."""
    import sysconfig

    lib = Path(sysconfig.get_paths()["stdlib"])
    text = "".join(p.read_text(errors="replace") for p in sorted(lib.glob("*.py"))[:400])
    while len(text) < size:
        text += text
    return text[:size]


def prose(size: int) -> str:
    base = ("The quick brown fox jumps over the lazy dog; the report is due on Monday, 1234 units. ") * 20
    while len(base) < size:
        base += base
    return base[:size]


def per_answer(policy_text: str, line: bytes, n: int) -> float:
    """Seconds per call in the session: n calls, each forwarded and its answer read, one after
    the other (the call and the answer both timed)."""
    policy = load_policy(policy_text.encode())
    session = WrapSession(policy, SessionOptions(), clock=lambda: 1000.0)
    session.receive_client_data(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    session.receive_server_data(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    calls = [
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read","arguments":{}}}\n' % i
        for i in range(1, n + 1)
    ]
    answers = [line.replace(b'"id":1,', b'"id":%d,' % i, 1) + b"\n" for i in range(1, n + 1)]
    assert all(b'"id":%d,' % i in a for i, a in zip(range(1, n + 1), answers))
    clock = time.perf_counter
    elapsed = 0.0
    for c, a in zip(calls, answers):
        t0 = clock()
        session.receive_client_data(c)
        session.receive_server_data(a)
        elapsed += clock() - t0
    assert not session.owes_answers and session.dropped_responses == 0  # every answer was read as one
    return elapsed / n


def answer_line(text: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}, separators=(",", ":")
    ).encode()


# -- whole process (--process) --------------------------------------------------------------------

HERE = Path(__file__).resolve().parent
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # .pyc as installed
STALL_S = 60.0


def cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU of every live thread of ``pid`` (the first field of each task's
    schedstat); other processes (the keeper, the server) are not counted."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path, "rb") as handle:
                total += int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def _call(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read","arguments":{}}}\n' % i


class Wrap:
    """``assay mcp wrap --policy P -- python answer_server.py ANSWER``, talked to over pipes."""

    def __init__(
        self, assay: str, policy: Path, answer: Path, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> None:
        argv = [
            *prefix,
            assay,
            "mcp",
            "wrap",
            "--policy",
            str(policy),
            "--",
            sys.executable,
            str(HERE / "answer_server.py"),
            str(answer),
        ]
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            env=env or CHILD_ENV,
        )
        assert self.p.stdin is not None and self.p.stdout is not None
        self.inp, self.out = self.p.stdin.fileno(), self.p.stdout.fileno()
        self.buf = b""

    def round_trip(self, line: bytes) -> bytes:
        view = memoryview(line)
        while view:
            view = view[os.write(self.inp, view) :]
        while b"\n" not in self.buf:
            if not select.select([self.out], [], [], STALL_S)[0]:
                self.p.kill()
                raise SystemExit("bench_inspect: wrap gave no answer for a minute")
            chunk = os.read(self.out, 1 << 20)
            if not chunk:
                raise SystemExit(f"bench_inspect: wrap ended early (status {self.p.wait()})")
            self.buf += chunk
        answer, self.buf = self.buf.split(b"\n", 1)
        return answer

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait()


def whole_process(assay: str, policy: Path, answer: Path, calls: int) -> tuple[float, float]:
    """(wrap's CPU seconds per call over ``calls`` calls after a warm-up, wrap's CPU seconds from
    its start to the end of the first answer)."""
    wrap = Wrap(assay, policy, answer)
    try:
        wrap.round_trip(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n'
        )
        os.write(wrap.inp, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        first = json.loads(wrap.round_trip(_call(1)))
        if "result" not in first or first["result"].get("isError"):
            raise SystemExit(f"bench_inspect: the answer was refused: {json.dumps(first)[:300]}")
        start_up = cpu_ns(wrap.p.pid)
        for i in range(2, 22):  # warm-up
            wrap.round_trip(_call(i))
        before = cpu_ns(wrap.p.pid)
        for i in range(22, 22 + calls):
            wrap.round_trip(_call(i))
        spent = cpu_ns(wrap.p.pid) - before
    finally:
        wrap.close()
    return spent / calls / 1e9, start_up / 1e9


def instructions(assay: str, policy: Path, answer: Path, calls: int, tmp: Path) -> int:
    """Instructions of wrap's own process (callgrind) from its start to its exit, with
    ``calls`` calls after ``initialize``; the hash seed fixed."""
    out = tmp / "cg"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = {**CHILD_ENV, "PYTHONHASHSEED": "0"}
    wrap = Wrap(assay, policy, answer, ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p"), env)
    try:
        wrap.round_trip(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n'
        )
        os.write(wrap.inp, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for i in range(1, calls + 1):
            wrap.round_trip(_call(i))
    finally:
        wrap.close()
    files = sorted(glob.glob(f"{out}/cg.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    if not files:
        raise SystemExit("bench_inspect: valgrind wrote no profile (is valgrind installed?)")
    found = re.search(r"^summary:\s+(\d+)", Path(files[0]).read_text(errors="replace"), re.M)  # the lowest pid: wrap
    if found is None:
        raise SystemExit(f"bench_inspect: no summary in {files[0]}")
    return int(found.group(1))


def instructions_main(args: argparse.Namespace, builds: list[tuple[str, str]], tmp: Path) -> None:
    """Wrap's instructions per 1 KiB answer: the difference between ``--calls`` N1 and N2."""
    n1, n2 = 100, 100 + args.calls
    answer = tmp / "answer.json"
    answer.write_bytes(answer_line(prose(1024)).replace(b'"id":1,', b'"id":0,', 1) + b"\n")
    print(f"wrap's own instructions per 1 KiB answer (callgrind; calls {n1} -> {n2}; PYTHONHASHSEED=0)")
    for tag, assay in builds:
        per = {}
        for name in ("baseline", "on"):
            instructions(assay, tmp / f"{name}.yaml", answer, 1, tmp)  # bytecode caches written
            a = instructions(assay, tmp / f"{name}.yaml", answer, n1, tmp)
            b = instructions(assay, tmp / f"{name}.yaml", answer, n2, tmp)
            per[name] = (b - a) / (n2 - n1)
        print(
            f"1 KiB prose{tag:12} baseline {per['baseline']:9.0f}   on {per['on']:9.0f}   "
            f"+{per['on'] - per['baseline']:.0f}"
        )


def process_main(args: argparse.Namespace) -> None:
    builds = [("", args.assay or str(Path(sys.executable).parent / "assay"))]
    if args.compare:
        builds.append((" @cmp", args.compare))
    cases = [
        ("1 KiB prose", prose(1024), args.calls, 1e6, "µs"),
        ("1 MiB prose", prose(1 << 20), 20, 1e3, "ms"),
        ("1 MiB stdlib code", stdlib_code(1 << 20), 20, 1e3, "ms"),
        ("1 MiB docs+code", corpus(1 << 20), 20, 1e3, "ms"),
    ]
    names = ("baseline", "on")
    tmp = Path(tempfile.mkdtemp())
    try:
        for name in names:
            (tmp / f"{name}.yaml").write_text(POLICIES[name])
        if args.instructions:
            instructions_main(args, builds, tmp)
            return
        print("; ".join(f"wrap{tag}: {assay}" for tag, assay in builds))
        print(
            f"wrap's own CPU per call after a warm-up (the difference paired within each run), and from its start "
            f"to its first answer; median of {args.runs} runs"
        )
        for label, text, n, scale, unit in cases:
            answer = tmp / "answer.json"
            answer.write_bytes(answer_line(text).replace(b'"id":1,', b'"id":0,', 1) + b"\n")
            setups = [(tag, assay, name) for tag, assay in builds for name in names]
            per: dict[tuple[str, str], list[float]] = {(tag, name): [] for tag, _a, name in setups}
            first: dict[tuple[str, str], list[float]] = {(tag, name): [] for tag, _a, name in setups}
            for run in range(args.runs):
                for tag, assay, name in setups[run % len(setups) :] + setups[: run % len(setups)]:  # rotate the order
                    cost, start_up = whole_process(assay, tmp / f"{name}.yaml", answer, n)
                    per[tag, name].append(cost * scale)
                    first[tag, name].append(start_up * 1e3)
            for tag, _assay in builds:
                base, on = per[tag, "baseline"], per[tag, "on"]
                diff = statistics.median([a - b for a, b in zip(on, base)])
                print(
                    f"{label + tag:23} baseline {statistics.median(base):9.2f} {unit}   on {statistics.median(on):9.2f} "
                    f"{unit}   +{diff:.2f} {unit}   lowest {min(base):.2f} / {min(on):.2f}   first answer "
                    f"{statistics.median(first[tag, 'baseline']):.0f} / {statistics.median(first[tag, 'on']):.0f} ms"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--process", action="store_true", help="through real processes: wrap's own CPU")
    parser.add_argument("--assay", help="the assay script to run (--process); default: the one next to this Python")
    parser.add_argument("--calls", type=int, default=2000, help="calls per run of the 1 KiB case (--process)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with --process: wrap's instructions per 1 KiB answer under callgrind (--calls more calls)",
    )
    parser.add_argument(
        "--compare", metavar="ASSAY", help="another build's assay script, measured in the same runs (--process)"
    )
    args = parser.parse_args()
    if args.process:
        process_main(args)
        return
    cases = [
        ("1 KiB prose", answer_line(prose(1024)), 2000, 1e6, "µs"),
        ("1 MiB prose", answer_line(prose(1 << 20)), 5, 1e3, "ms"),
        ("1 MiB stdlib code", answer_line(stdlib_code(1 << 20)), 5, 1e3, "ms"),
        ("1 MiB docs+code", answer_line(corpus(1 << 20)), 5, 1e3, "ms"),
    ]
    for label, line, n, scale, unit in cases:
        figures: dict[str, list[float]] = {k: [] for k in POLICIES}
        for _ in range(args.runs):
            for name, text in POLICIES.items():
                figures[name].append(per_answer(text, line, n) * scale)
        med = {k: statistics.median(v) for k, v in figures.items()}
        base = med["baseline"]
        print(
            f"{label:18} baseline {base:9.2f} {unit}   on {med['on']:9.2f} {unit} (+{med['on'] - base:.2f})"
            f"   not named {med['not named']:9.2f} {unit} (+{med['not named'] - base:.2f})"
        )


if __name__ == "__main__":
    main()
