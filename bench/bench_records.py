"""Record micro-benchmark: the cost of one evaluated call's records with --decision-log and
--audit-log (issue 13, "Speed"). Not a test.

    .venv/bin/python bench/bench_records.py [--runs 7] [--calls 5000]

For each case it times, interleaved run by run so both see the same machine load:
  generic   decision_data + decision_event + encode_line, and audit_record_for + encode_line
            (the plain dict builders, kept as the tests' oracle in tests/wrap/records_oracle.py;
            what the session did per call before the Recorder), fresh uuid4 id and clock time
  recorder  records.Recorder.record (templates per decision, batched ids, cached clock)
Cases: the bench relay's allowed `search` call (allowlist + 5-property schema, see
bench/bench_relay.py), a deny by name (`exec`) and a schema deny (a fresh Decision per call).
Prints CPU microseconds per record (process time, so other processes on a loaded machine
count less): the median and the best of --runs runs. Target: recorder <= 15 us on the allow.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' record oracle

from bench_relay import POLICY  # noqa: E402

from assay.policy import SessionState, evaluate, load_policy  # noqa: E402
from assay.session import records  # noqa: E402
from tests.wrap import records_oracle as oracle  # noqa: E402

ARGS = {"query": "policy guard benchmark q000001", "limit": 10, "lang": "en", "safe": True, "cursor": "abc123def456"}


def _generic(decision, frame, params, name, valid, digest, *, source: str, dry_run: bool) -> tuple[bytes, bytes]:
    request_id = frame["id"] if "id" in frame else records.ABSENT
    delegated_from, delegation_depth = records.delegation_of(params)
    data = oracle.decision_data(
        decision,
        dry_run=dry_run,
        tool_call_id=records.tool_call_id_for(params, request_id),
        request_id=request_id,
        delegated_from=delegated_from,
        delegation_depth=delegation_depth,
        tool_definition_digest=digest,
    )
    event = oracle.decision_event(source, data)
    audit = oracle.audit_record_for(
        decision, dry_run=dry_run, request_id=request_id, tool=name if valid or decision.outcome != "allow" else None
    )
    return records.encode_line(event), records.encode_line(audit)


def _cases():
    policy = load_policy(POLICY.encode(), warn=lambda _line: None)
    state = SessionState()
    digest = "sha256:" + "5b" * 32

    def allow(i: int):
        params = {"name": "search", "arguments": ARGS}
        frame = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        return evaluate(policy, "search", ARGS, state), frame, params, "search", True, digest

    def deny(i: int):
        params = {"name": "exec", "arguments": {"cmd": "rm -rf /"}}
        frame = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        return evaluate(policy, "exec", params["arguments"], state), frame, params, "exec", True, None

    def schema_deny(i: int):
        params = {"name": "search", "arguments": {"query": 5}}
        frame = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        return evaluate(policy, "search", params["arguments"], state), frame, params, "search", True, digest

    return (("allow (bench relay call)", allow), ("deny by name", deny), ("schema deny (fresh Decision)", schema_deny))


def _time(fn, calls: list) -> float:
    start = time.process_time()
    for call in calls:
        fn(*call)
    return (time.process_time() - start) / len(calls) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5000)
    opts = ap.parse_args()
    source = "assay://org/app"
    for label, make in _cases():
        calls = [make(i) for i in range(opts.calls)]
        recorder = records.Recorder(
            source=source,
            label="default-mcp-server",
            dry_run=False,
            decision_log=True,
            audit_log=True,
            keep_events=False,
            verbose=False,
        )

        def generic(*call):
            return _generic(*call, source=source, dry_run=False)

        got = {"generic": [], "recorder": []}
        for _ in range(opts.runs):
            got["generic"].append(_time(generic, calls))
            got["recorder"].append(_time(recorder.record, calls))
        g, r = statistics.median(got["generic"]), statistics.median(got["recorder"])
        print(
            f"{label}: generic median {g:.1f} us (best {min(got['generic']):.1f}), "
            f"recorder median {r:.1f} us (best {min(got['recorder']):.1f}), x{g / r:.1f}"
        )


if __name__ == "__main__":
    main()
