"""Decision micro-benchmark for the policy engine (issue 3). Not a test.

    .venv/bin/python bench/bench_decisions.py [--runs 5] [--seconds 1.0]

(a) name-only allow/deny over a 50-pattern policy (a mix of exact, prefix, suffix and substring
    patterns, tools cycling through allowed, denied and not-allowed names, with session state);
(b) one tool with a 5-property object schema and valid arguments.
Prints decisions/s per run and the median. Targets on the 2-core dev machine: (a) >= 300,000/s,
(b) >= 150,000/s.
"""

from __future__ import annotations

import argparse
import statistics
import time

from assay.policy import SessionState, evaluate, load_policy


def _policy_a() -> bytes:
    allow = [f"tool_{i}" for i in range(20)] + [f"read_{i}_*" for i in range(5)] + [f"*_{i}_list" for i in range(5)]
    deny = [f"exec_{i}" for i in range(10)] + [f"*danger{i}*" for i in range(5)] + [f"shell{i}*" for i in range(5)]
    assert len(allow) + len(deny) == 50
    lines = ['version: "2.0"', "enforcement: {unconstrained_tools: allow}", "tools:"]
    lines.append("  allow: [" + ", ".join(f'"{p}"' for p in allow) + "]")
    lines.append("  deny: [" + ", ".join(f'"{p}"' for p in deny) + "]")
    return ("\n".join(lines) + "\n").encode()


_POLICY_B = b"""version: "2.0"
tools: {allow: [create_issue]}
schemas:
  create_issue:
    type: object
    additionalProperties: false
    required: [repo, title, body, labels, priority]
    properties:
      repo: {type: string, pattern: "^[a-z0-9-]+/[a-z0-9-]+$"}
      title: {type: string, minLength: 1, maxLength: 200}
      body: {type: string, maxLength: 10000}
      labels: {type: array, items: {type: string}, maxItems: 10}
      priority: {type: integer, minimum: 1, maximum: 5}
"""


def _run(fn, seconds: float) -> float:
    n = 0
    batch = 2000
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        fn(batch)
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def bench_a(seconds: float) -> float:
    policy = load_policy(_policy_a())
    names = ["tool_3", "exec_4", "read_2_file", "x_1_list", "big_danger3_op", "shell2run", "unknown_tool", "tool_19"]
    state = SessionState()
    args: dict = {}

    def loop(count: int) -> None:
        k = len(names)
        for i in range(count):
            evaluate(policy, names[i % k], args, state)

    return _run(loop, seconds)


def bench_b(seconds: float) -> float:
    policy = load_policy(_POLICY_B)
    args = {"repo": "acme/widgets", "title": "Crash on start", "body": "Steps: ...", "labels": ["bug", "p1"], "priority": 2}
    state = SessionState()
    assert evaluate(policy, "create_issue", args, state).outcome == "allow"

    def loop(count: int) -> None:
        for _ in range(count):
            evaluate(policy, "create_issue", args, state)

    return _run(loop, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    opts = ap.parse_args()
    for label, fn, target in (("a) name-only, 50 patterns", bench_a, 300_000), ("b) 5-property schema", bench_b, 150_000)):
        rates = [fn(opts.seconds) for _ in range(opts.runs)]
        med = statistics.median(rates)
        runs = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{label}: median {med:,.0f} decisions/s (target {target:,}) {'OK' if med >= target else 'BELOW'} [{runs}]")


if __name__ == "__main__":
    main()
