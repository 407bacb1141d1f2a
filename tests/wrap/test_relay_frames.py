"""wrap over a real recording child: the trio shell performs what the session decides.

Admission, enforcement, deny replies and records are checked effect by effect in memory in
tests/wrap/test_session_frames.py. Here one real process per mode checks that the shell turns
those effects into I/O: admitted frames arrive at the child byte for byte (terminators kept),
rejected and denied frames never arrive, wrap's replies and the child's answers both reach the
client, decision events and audit records reach their files, and dry run says so on stderr
(docs/wrap.md, "Client frames", "Enforcement", "Logs").
"""

from __future__ import annotations

import json

import pytest

from tests.wrap.conftest import Wrapper, call
from tests.wrap.test_admission import BAD, GOOD


@pytest.mark.parametrize("dry_run", [False, True], ids=["enforce", "dry_run"])
def test_frames_reach_a_real_child_byte_for_byte(wrapper: Wrapper, dry_run):
    good = [line if line.endswith(b"\n") else line + b"\n" for line in GOOD]
    denied, allowed = call(7, "exec", {}), call(8, "read_file", {"path": "/workspace/a"})
    stream = b"".join(good[:3]) + b"".join(line for line, _ in BAD) + denied + b"".join(good[3:]) + allowed
    opts = ["--event-source", "assay://t/x", "--decision-log", "d.ndjson", "--audit-log", "a.ndjson"]
    run = wrapper.run(stream, *opts, *(["--dry-run"] if dry_run else []))
    assert run.returncode == 0, run.stderr
    assert run.record == b"".join(good[:3]) + (denied if dry_run else b"") + b"".join(good[3:]) + allowed
    out = run.stdout.splitlines(keepends=True)
    rejections = [ln for ln in out if ln.startswith(b'{"jsonrpc":"2.0","id":null,"error"')]
    assert [json.loads(ln)["error"]["data"]["reason"] for ln in rejections] == [reason for _, reason in BAD]
    answers = {r["id"]: r["result"] for r in map(json.loads, out) if "result" in r}
    if dry_run:
        assert answers[7]["content"] == [{"type": "text", "text": "ok"}]  # the child answered it
        assert "[assay] DRY RUN MODE: No actions will be blocked." in run.stderr.decode()
    else:
        assert answers[7]["isError"] is True and answers[7]["structuredContent"]["error_code"] == "E_TOOL_DENIED"
        assert b"DRY RUN" not in run.stderr
    assert answers[8]["content"] == [{"type": "text", "text": "ok"}]
    decisions = [
        e for e in run.log("d.ndjson") if e["type"] == "assay.tool.decision"
    ]  # docs/wrap-records.md, "The client"
    assert [(e["data"]["tool"], e["data"]["request_id"]) for e in decisions] == [("exec", 7), ("read_file", 8)]
    assert [a["decision"] for a in run.log("a.ndjson")] == ["would_deny" if dry_run else "deny", "allow"]
