"""Decision micro-benchmark for the policy engine (issue 3). Not a test.

    .venv/bin/python bench/bench_decisions.py [--runs 5] [--seconds 1.0]

(a) name-only allow/deny over a 50-pattern policy (a mix of exact, prefix, suffix and substring
    patterns, tools cycling through allowed, denied and not-allowed names, with session state);
(b) one tool with a 5-property object schema and valid arguments;
(c) flow rules (docs/policy.md, "Flow rules"): 10 rules of mixed kinds (one with args_match) over
    a 10,000-call session, each call decided as wrap does: ``evaluate``, then the flow check,
    then ``enter`` for a call that goes to the server. The baseline, ``evaluate`` alone over the
    same calls, is measured in the same run.
Prints decisions/s per run and the median. Targets on the 2-core dev machine: (a) >= 300,000/s,
(b) >= 150,000/s, (c) >= 100,000/s.
"""

from __future__ import annotations

import argparse
import statistics
import time

from assay.policy import SessionState, evaluate, load_policy
from assay.policy.flows import FlowTracker


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
    args = {
        "repo": "acme/widgets",
        "title": "Crash on start",
        "body": "Steps: ...",
        "labels": ["bug", "p1"],
        "priority": 2,
    }
    state = SessionState()
    assert evaluate(policy, "create_issue", args, state).outcome == "allow"

    def loop(count: int) -> None:
        for _ in range(count):
            evaluate(policy, "create_issue", args, state)

    return _run(loop, seconds)


_POLICY_C = b"""version: "2.0"
tools: {allow: ["*"], deny: [exec]}
enforcement: {unconstrained_tools: allow}
aliases:
  secret_readers: [read_secret, "*_secret", "vault_*"]
  network_sinks: ["send_*", "http_*", "*post*"]
sequences:
  - {type: never_after, trigger: secret_readers, forbidden: network_sinks, id: no-exfil}
  - type: never_after
    id: no-exfil-files
    trigger: {tool: read_file, args_match: {path: "^/secrets/"}}
    forbidden: network_sinks
  - {type: before, first: run_tests, then: deploy}
  - {type: max_calls, tool: deploy, max: 1000000}
  - {type: require, tool: init}
  - {type: eventually, tool: init, within: 5}
  - {type: after, trigger: open_tx, then: commit_tx, within: 3}
  - {type: sequence, tools: [init, run_tests, deploy]}
  - {type: blocklist, pattern: drop_}
  - {type: max_calls, tool: "list_*", max: 1000000}
"""
SESSION_CALLS = 10_000


def _session_c() -> list[tuple[str, dict]]:
    """10,000 calls: init, then a cycle of reads, lists, transactions, tests, deploys and network
    calls; from the middle on a secret is read, so the network calls after it are denied (about
    one call in 12 is denied from then on, plus a blocklisted one now and then)."""
    cycle = [
        ("read_file", {"path": "/workspace/a.txt"}),
        ("list_dir", {"path": "/workspace"}),
        ("open_tx", {"id": 1}),
        ("search", {"q": "x"}),
        ("commit_tx", {"id": 1}),
        ("run_tests", {}),
        ("deploy", {"target": "staging"}),
        ("http_get", {"url": "https://example.com"}),
        ("read_file", {"path": "/workspace/b.txt"}),
        ("list_files", {}),
        ("drop_table", {"t": "x"}),
        ("echo", {"m": "hi"}),
    ]
    calls = [("init", {})]
    while len(calls) < SESSION_CALLS:
        if len(calls) == SESSION_CALLS // 2:
            calls.append(("read_secret", {"name": "k"}))
        calls.extend(cycle)
    return calls[:SESSION_CALLS]


def bench_c(runs: int) -> dict[str, list[float]]:
    """Rates per run (one fresh session each): ``flows`` and ``baseline`` by the wall clock,
    ``flows_cpu`` and ``baseline_cpu`` by this process's CPU time (what a shared, loaded machine
    does not inflate); ``denied`` holds the denied calls of a session."""
    policy = load_policy(_POLICY_C)
    assert len(policy.sequences) == 10
    calls = _session_c()
    out: dict[str, list[float]] = {"flows": [], "baseline": [], "flows_cpu": [], "baseline_cpu": [], "denied": []}
    wall, cpu = time.perf_counter, time.process_time
    for _ in range(runs):
        state = SessionState()
        start, start_cpu = wall(), cpu()
        for name, args in calls:
            evaluate(policy, name, args, state)
        out["baseline"].append(len(calls) / (wall() - start))
        out["baseline_cpu"].append(len(calls) / max(cpu() - start_cpu, 1e-9))

        state = SessionState()
        tracker = FlowTracker.for_policy(policy)
        assert tracker is not None
        check, enter = tracker.check, tracker.enter
        denied = 0
        start, start_cpu = wall(), cpu()
        for name, args in calls:  # as WrapSession._tool_call, _gate and _enter do
            decision = evaluate(policy, name, args, state)
            if decision.outcome != "deny":
                flow = check(name, args, decision)
                if flow is not None:
                    decision = flow
            if decision.outcome != "deny":
                enter(name, args)
            else:
                denied += 1
        out["flows"].append(len(calls) / (wall() - start))
        out["flows_cpu"].append(len(calls) / max(cpu() - start_cpu, 1e-9))
        out["denied"].append(denied)
        assert tracker.n == len(calls) - denied
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    opts = ap.parse_args()
    for label, fn, target in (
        ("a) name-only, 50 patterns", bench_a, 300_000),
        ("b) 5-property schema", bench_b, 150_000),
    ):
        rates = [fn(opts.seconds) for _ in range(opts.runs)]
        med = statistics.median(rates)
        runs = ", ".join(f"{r:,.0f}" for r in rates)
        print(
            f"{label}: median {med:,.0f} decisions/s (target {target:,}) {'OK' if med >= target else 'BELOW'} [{runs}]"
        )
    c = bench_c(max(opts.runs, 1) * 3)
    target = 100_000
    med = statistics.median(c["flows"])

    def fmt(rates: list[float]) -> str:
        return f"median {statistics.median(rates):,.0f} [{', '.join(f'{r:,.0f}' for r in rates)}]"

    print(
        f"c) 10 flow rules, {SESSION_CALLS:,}-call session ({c['denied'][0]} denied), evaluate + flow check + enter: "
        f"{fmt(c['flows'])} decisions/s (target {target:,}) {'OK' if med >= target else 'BELOW'}\n"
        f"   baseline, evaluate alone: {fmt(c['baseline'])} decisions/s\n"
        f"   by CPU time: flows median {statistics.median(c['flows_cpu']):,.0f}/s, "
        f"baseline median {statistics.median(c['baseline_cpu']):,.0f}/s"
    )


if __name__ == "__main__":
    main()
