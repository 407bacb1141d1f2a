"""Response inspection benchmark (docs/policy.md, "Inspecting what comes back"). Not a test.

    .venv/bin/python bench/bench_inspect.py [--runs 7]

What one server answer costs in the wrap session (the sans-IO core the relay calls: the server
line in, the bytes for the client out), with and without inspection, measured in the same run:

- baseline: a policy without ``inspect``; the answer to a forwarded ``tools/call`` is relayed;
- on: ``inspect: {secrets: mask, injection: strip}`` covering the tool (no finding: the answer
  is read and relayed as it is);
- not named: the same policy with the tool left out by a per-tool entry (``secrets: off,
  injection: off``): the answer must cost what the baseline's does.

For results of 1 KiB (prose) and 1 MiB (prose; Python's standard library sources; the project's
own docs and sources, which hold every detector's literals: a worst case).
Each figure is the median of ``--runs`` runs; the difference to the baseline is what
inspection adds. Targets: 1 KiB <= 10 µs more, 1 MiB <= 15 ms more, not named: nothing extra.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from assay.policy import load_policy
from assay.wrap.session import SessionOptions, WrapSession

REPO = Path(__file__).resolve().parent.parent
HEAD = 'version: "2.0"\ntools: {allow: ["*"]}\nenforcement: {unconstrained_tools: allow}\n'
POLICIES = {
    "baseline": HEAD,
    "on": HEAD + "inspect: {secrets: mask, injection: strip}\n",
    "not named": HEAD + "inspect:\n  secrets: mask\n  injection: strip\n  tools:\n    - {tool: read, secrets: off, injection: off}\n",
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
    """Seconds per answer: n calls, each forwarded, then its answer read."""
    policy = load_policy(policy_text.encode())
    session = WrapSession(policy, SessionOptions(), clock=lambda: 1000.0)
    session.receive_client_data(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    session.receive_server_data(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    calls = [b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read","arguments":{}}}\n' % i
             for i in range(1, n + 1)]
    answers = [line.replace(b'"id":1,', b'"id":%d,' % i, 1) + b"\n" for i in range(1, n + 1)]
    assert all(b'"id":%d,' % i in a for i, a in zip(range(1, n + 1), answers))
    for c in calls:
        session.receive_client_data(c)
    t0 = time.perf_counter()
    for a in answers:
        session.receive_server_data(a)
    elapsed = time.perf_counter() - t0
    assert not session.owes_answers and session.dropped_responses == 0  # every answer was read as one
    return elapsed / n


def answer_line(text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}},
                      separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
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
        print(f"{label:18} baseline {base:9.2f} {unit}   on {med['on']:9.2f} {unit} (+{med['on'] - base:.2f})"
              f"   not named {med['not named']:9.2f} {unit} (+{med['not named'] - base:.2f})")


if __name__ == "__main__":
    main()
