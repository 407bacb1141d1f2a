"""Records of `assay mcp serve` carry the user (docs/serve.md, "Records"; docs/wrap-records.md,
"Audit record"), and `assay mcp log --subject` shows one user's calls (docs/log.md, "Options")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from assay.policy.decision import Decision
from assay.session.records.recorder import Recorder

ASSAY = str(Path(sys.executable).parent / "assay")


def _records(subject: str | None) -> tuple[dict, dict]:
    rec = Recorder(
        source="assay://test",
        label="files",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=False,
        verbose=False,
        session="user:https://issuer.example#alice",
        subject=subject,
    )
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read_file", "arguments": {}}}
    out = rec.record(Decision("allow", "read_file"), frame, frame["params"], "read_file", True, None)
    assert out.decision_line is not None and out.audit_line is not None
    return json.loads(out.decision_line), json.loads(out.audit_line)


def test_records_carry_the_subject_after_the_server():
    event, audit = _records("alice")
    keys = list(audit)
    assert keys[keys.index("server") + 1] == "subject" and audit["subject"] == "alice"
    data = event["data"]
    dkeys = list(data)
    assert dkeys[dkeys.index("server") + 1] == "subject" and data["subject"] == "alice"


def test_wrap_records_have_no_subject_member():
    event, audit = _records(None)
    assert "subject" not in audit and "subject" not in event["data"]


def test_log_subject_shows_one_users_calls(tmp_path):
    lines = []
    for who, rid in (("alice", 1), ("bob", 2), (None, 3)):
        rec = {
            "timestamp": f"2026-12-06T10:00:0{rid}.000000+00:00",
            "decision": "allow",
            "tool": "read_file",
            "reason": None,
            "session": f"user:i#{who}" if who else None,
            "server": "files",
        }
        if who:
            rec["subject"] = who
            rec["client_name"], rec["client_version"] = "cursor", "1.2"
        rec["request_id"] = rid
        lines.append(json.dumps(rec))
    log = tmp_path / "audit.ndjson"
    log.write_text("\n".join(lines) + "\n")
    run = subprocess.run(
        [ASSAY, "mcp", "log", str(log), "--json", "--subject", "bob"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    shown = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(e["subject"], e["request_id"]) for e in shown] == [("bob", 2)]
    assert (shown[0]["client_name"], shown[0]["client_version"]) == ("cursor", "1.2")
    assert list(shown[0])[-3:] == ["subject", "client_name", "client_version"]
    every = subprocess.run([ASSAY, "mcp", "log", str(log), "--json"], capture_output=True, text=True, timeout=60)
    assert [json.loads(line)["subject"] for line in every.stdout.splitlines()] == ["alice", "bob", None]


def test_each_call_is_recorded_with_the_client_its_request_id_names():
    # a gateway's link records the calls of several clients (docs/serve.md, "Records"): the
    # client is asked per call, and one decision's cached parts never carry another's client
    clients = {1: ("cursor", "1.2"), 2: ("claude-code", None)}
    rec = Recorder(
        source="assay://test",
        label="files",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=False,
        verbose=False,
        session="user:https://issuer.example#alice",
        subject="alice",
        client_of=clients.get,
    )
    decision = Decision("allow", "read_file")
    got = []
    for rid in (1, 2, 1, 3, 2):
        frame = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "read_file"}}
        out = rec.record(decision, frame, frame["params"], "read_file", True, None)
        assert out.decision_line is not None and out.audit_line is not None
        event, audit = json.loads(out.decision_line)["data"], json.loads(out.audit_line)
        assert (event.get("client_name"), event.get("client_version")) == (
            audit.get("client_name"),
            audit.get("client_version"),
        )
        got.append((audit.get("client_name"), audit.get("client_version")))
        keys = list(audit)
        if rid != 3:
            assert keys[keys.index("subject") + 1 : keys.index("subject") + 3] == ["client_name", "client_version"]
    assert got == [("cursor", "1.2"), ("claude-code", None), ("cursor", "1.2"), (None, None), ("claude-code", None)]
