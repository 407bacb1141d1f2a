"""The records glue on its own (docs/wrap-records.md): a decision goes to every decision sink
and the audit log, receipts start with the session, counts cover the session only."""

from __future__ import annotations

import json

from assay.policy import SessionState, load_policy
from assay.policy.pipeline import Call, Pipeline
from assay.session import records
from assay.session.admission import RejectReason, Rejected
from assay.session.effects import Effect, Record, Sink
from assay.session.ledger import Ledger

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["echo"]\n')


def ledger(*, sinks: tuple[Sink, ...] = (), audit: bool = False, receipts: bool = False) -> Ledger:
    recorder = records.Recorder(
        source="assay://t",
        label="srv",
        dry_run=False,
        decision_log=bool(sinks),
        audit_log=audit,
        keep_events=True,
        verbose=False,
        new_event_id=lambda: "evt-1",
        now=lambda: "2026-01-01T00:00:00Z",
    )
    return Ledger(recorder, sinks, receipts)


def test_a_decision_goes_to_every_sink_and_is_kept():
    led = ledger(sinks=(Sink.DECISION_LOG, Sink.DECISION_LOG_NEW), audit=True)
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
    decision = Pipeline(POLICY, SessionState()).decide(Call("echo", None, "srv", frame), 0.0)
    out: list[Effect] = []
    event_id = led.record(decision, frame, frame["params"], "echo", True, None, out)
    sinks = [e.sink for e in out if isinstance(e, Record)]
    assert sinks == [Sink.DECISION_LOG, Sink.DECISION_LOG_NEW, Sink.AUDIT_LOG]
    assert led.coverage is not None and list(led.coverage.tools) == ["echo"] and event_id is not None


def test_receipts_start_with_the_session_and_counts_reset():
    led = ledger(receipts=True)
    led.forwarded = 3
    assert not led.receipting
    led.begin()
    assert led.receipting and led.counts == {"forwarded": 0, "blocked": 0, "rejected": 0, "dropped": 0}
    out: list[Effect] = []
    led.receipt(b"{}\n", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, True, None, out)
    led.receipt_rejected(Rejected(b"[1]\n", RejectReason.BATCH), out)
    first, second = (json.loads(e.data) for e in out if isinstance(e, Record))
    assert (first["seq"], first["kind"], first["disposition"]) == (1, "request", "forwarded")
    assert (second["seq"], second["reject_reason"]) == (2, "batch")


def test_without_receipts_asked_the_session_writes_none():
    led = ledger()
    led.begin()
    assert not led.receipting
