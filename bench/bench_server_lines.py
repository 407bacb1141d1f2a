"""What reading the server's lines costs in the wrap session, this checkout against another in
the same run (docs/inspect.md, "Where wrap looks", "Blobs", "Malformed answers"). Not a test.

    .venv/bin/python bench/bench_server_lines.py --baseline DIR [--runs 7]

``DIR`` holds another commit's ``assay`` package (``git archive <commit> assay | tar -x -C DIR``).
Each run starts one process per implementation (in turns, the order rotating), which feeds the
sans-IO session (the server line in, the bytes for the client out) under
``inspect: {secrets: mask, injection: strip}`` and, as the floor, a policy without ``inspect``:

- a 1 KiB and a 1 MiB answer (prose) to a forwarded ``tools/call``;
- a ``notifications/progress`` (about 150 bytes) and a ``sampling/createMessage`` request
  (1 KiB of prose): the baseline relays them unread, this checkout reads them;
- an answer with an embedded resource whose ``blob`` is 64 KiB of text (base64).

Prints the median CPU time per line (the worker's process time, so that the other processes of a
loaded machine count less) of each implementation and policy, and the difference.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAD = 'version: "2.0"\ntools: {allow: ["*"]}\nenforcement: {unconstrained_tools: allow}\n'
POLICIES = {"floor": HEAD, "on": HEAD + "inspect: {secrets: mask, injection: strip}\n"}


def prose(size: int) -> str:
    base = ("The quick brown fox jumps over the lazy dog; the report is due on Monday, 1234 units. ") * 20
    while len(base) < size:
        base += base
    return base[:size]


def answer(result: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, separators=(",", ":")).encode()


CASES = {
    "answer 1 KiB": ("answer", answer({"content": [{"type": "text", "text": prose(1024)}]}), 3000),
    "answer 1 MiB": ("answer", answer({"content": [{"type": "text", "text": prose(1 << 20)}]}), 8),
    "progress note": (
        "note",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1, "total": 10, "message": "Copied 10 of 100 files"},
            }
        ).encode(),
        5000,
    ),
    "sampling 1 KiB": (
        "note",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "s",
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": prose(1024)}}],
                    "maxTokens": 10,
                },
            }
        ).encode(),
        3000,
    ),
    "blob 64 KiB": (
        "answer",
        answer(
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "file:///a.txt",
                            "mimeType": "text/plain",
                            "blob": base64.b64encode(prose(64 << 10).encode()).decode(),
                        },
                    }
                ]
            }
        ),
        300,
    ),
}


def per_line(policy_text: str, kind: str, line: bytes, n: int) -> float:
    from assay.policy import load_policy
    from assay.session.session import SessionOptions, WrapSession

    session = WrapSession(load_policy(policy_text.encode()), SessionOptions(), clock=lambda: 1000.0)
    session.receive_client_data(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    session.receive_server_data(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    if kind == "answer":
        for i in range(1, n + 1):
            session.receive_client_data(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read","arguments":{}}}\n' % i
            )
        lines = [line.replace(b'"id":1,', b'"id":%d,' % i, 1) + b"\n" for i in range(1, n + 1)]
    else:
        lines = [line + b"\n"] * n
    t0 = time.process_time()  # the process's CPU time: what other processes on the machine take is not in it
    for data in lines:
        session.receive_server_data(data)
    elapsed = time.process_time() - t0
    if kind == "answer":
        assert not session.owes_answers and session.dropped_responses == 0
    return elapsed / n


def worker() -> None:
    print(
        json.dumps(
            {
                case: {name: per_line(text, kind, line, n) for name, text in POLICIES.items()}
                for case, (kind, line, n) in CASES.items()
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    impls = {"baseline": str(args.baseline.resolve()), "this": str(REPO)}
    runs: dict[str, list[dict]] = {k: [] for k in impls}
    for i in range(args.runs):
        order = list(impls) if i % 2 == 0 else list(reversed(impls))
        for name in order:
            env = {**os.environ, "PYTHONPATH": impls[name]}
            out = subprocess.run(
                [sys.executable, __file__, "--baseline", str(args.baseline), "--worker"],
                env=env,
                cwd=impls[name],
                capture_output=True,
                check=True,
                text=True,
            ).stdout
            runs[name].append(json.loads(out))
    for case in CASES:
        med = {(impl, pol): statistics.median(r[case][pol] for r in runs[impl]) for impl in impls for pol in POLICIES}
        scale, unit = (1e3, "ms") if med[("this", "on")] > 1e-3 else (1e6, "µs")
        cells = "   ".join(f"{impl} {pol} {med[(impl, pol)] * scale:8.2f}" for impl in impls for pol in POLICIES)
        added = (med[("this", "on")] - med[("baseline", "on")]) * scale
        print(f"{case:15} {cells}   this-baseline (on) {added:+.2f} {unit}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        main()
