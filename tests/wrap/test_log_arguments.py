"""``--log-arguments`` (docs/wrap-records.md, "Logged arguments"): each call's
``params.arguments``, redacted (docs/inspect.md) and capped, in its decision event (``data.arguments``,
the last member) and audit record (``arguments``, after ``request_id``), on every path that writes
records: enforce, dry run, approvals, a shared session. Off by default."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.policy.storeapi import MemoryStore, SessionKey
from assay.wrap import options as wrap_options
from assay.session.effects import Sink
from assay.session.records.arguments import DEFAULT_MAX_BYTES, logged_arguments
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

TOKEN = "ghp_" + "Q" * 36
POLICY = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["read_file", "deploy"]\n  deny: ["exec"]\n'
    b"enforcement: {unconstrained_tools: allow}\n"
)


def compact_size(value) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


# -- the value ----------------------------------------------------------------------------------


def test_the_default_cap_is_the_option_default():
    assert DEFAULT_MAX_BYTES == wrap_options.DEFAULT_LOG_ARGUMENTS_MAX == 4096
    assert wrap_options.BY_FLAG["--log-arguments-max"].default == 4096
    assert wrap_options.BY_FLAG["--log-arguments"].default is False


def test_small_arguments_are_kept_redacted():
    args = {"path": "/workspace/a.txt", "env": {"GITHUB_TOKEN": "x"}, "note": f"use {TOKEN}", "n": [1, 2.5, None]}
    assert logged_arguments(args) == {
        "path": "/workspace/a.txt",
        "env": {"GITHUB_TOKEN": "[REDACTED:token]"},
        "note": "use [REDACTED:github_token]",
        "n": [1, 2.5, None],
    }
    assert args["note"] == f"use {TOKEN}"  # the call's own arguments are not touched


def test_large_arguments_are_cut_and_marked():
    args = {"path": "/a", "content": "x" * 10_000}
    out = logged_arguments(args, 4096)
    assert out["_truncated"] is True and out["bytes"] == compact_size(args)
    assert len(out["head"].encode()) == 4096
    assert out["head"] == json.dumps(args, separators=(",", ":"))[:4096]
    assert list(out) == ["_truncated", "bytes", "head"]
    exact = {"a": "y" * (4096 - len('{"a":""}'))}
    assert logged_arguments(exact, 4096) == exact  # exactly the cap: kept whole
    assert logged_arguments({"a": exact["a"] + "y"}, 4096)["_truncated"] is True


def test_the_head_is_cut_on_a_character_boundary():
    out = logged_arguments({"text": "é" * 5000}, 101)
    head = out["head"]
    assert head.startswith('{"text":"é') and len(head.encode()) <= 101
    assert len(head.encode()) >= 100


@settings(max_examples=150, deadline=None)
@given(
    pad=st.integers(min_value=0, max_value=200),
    cap=st.integers(min_value=20, max_value=180),
    tail=st.text(alphabet="abc ", max_size=50),
)
def test_a_secret_across_the_cut_never_shows_in_part(pad: int, cap: int, tail: str):
    secret = "ghp_" + "Z9" * 18
    args = {"content": "p" * pad + " " + secret + " " + tail}
    text = json.dumps(logged_arguments(args, cap))
    for i in range(len(secret) - 8):  # no 8 characters of it
        assert secret[i : i + 8] not in text


def test_huge_arguments_cost_little():
    args = {"content": "a" * 32_000_000, "more": ["b" * 1000] * 10_000}
    start = time.process_time()
    out = logged_arguments(args, 4096)
    assert time.process_time() - start < 2.0  # bounded by the cap, not by 42 MB (CPU time of this process)
    assert out["_truncated"] is True and out["bytes"] == compact_size(args)


def test_lone_surrogates_and_deep_values_are_written():
    assert logged_arguments({"a": "\ud83d"}) == {"a": "\ud83d"}
    deep: object = 1
    for _ in range(120):
        deep = [deep]
    assert "[REDACTED:depth_limit]" in json.dumps(logged_arguments({"d": deep}))


# -- the records --------------------------------------------------------------------------------


def logs(**extra) -> SessionOptions:
    return SessionOptions(
        decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t", log_arguments_max=4096, **extra
    )


def call(rid, name, arguments) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def records_of(effects) -> tuple[dict, dict]:
    (event,) = effects.records(Sink.DECISION_LOG)
    (audit,) = effects.records(Sink.AUDIT_LOG)
    return json.loads(event), json.loads(audit)


@pytest.mark.parametrize("dry_run", [False, True])
def test_enforce_and_dry_run_records_carry_the_arguments(dry_run: bool):
    h = Harness(POLICY, logs(dry_run=dry_run))
    args = {"cmd": f"git push https://me:{TOKEN}@github.com/org/repo", "password": "hunter2"}
    event, audit = records_of(h.handle(call(7, "exec", args)).effects)
    logged = {
        "cmd": "git push https://me:[REDACTED:github_token]@github.com/org/repo",
        "password": "[REDACTED:password]",
    }
    assert list(event["data"])[-2:] == ["request_id", "arguments"] and event["data"]["arguments"] == logged
    assert list(audit)[-3:] == ["request_id", "arguments", "agentic"] and audit["arguments"] == logged
    assert audit["decision"] == ("would_deny" if dry_run else "deny")
    ok_event, ok_audit = records_of(h.handle(call(8, "read_file", {"path": "/a"})).effects)
    assert ok_event["data"]["arguments"] == ok_audit["arguments"] == {"path": "/a"}
    assert list(ok_audit)[-1] == "arguments"


def test_off_by_default_and_no_member_without_arguments():
    h = Harness(POLICY, SessionOptions(decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t"))
    event, audit = records_of(h.handle(call(1, "read_file", {"path": "/a"})).effects)
    assert "arguments" not in event["data"] and "arguments" not in audit
    on = Harness(POLICY, logs())
    frame = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file"}}
    event, audit = records_of(on.handle(frame).effects)
    assert "arguments" not in event["data"] and "arguments" not in audit


def test_a_lone_surrogate_in_the_arguments_writes_ascii_escaped_lines():
    """Wrap refuses such a frame (malformed_json), but the recorder writes any value it gets:
    the lines are then ASCII-escaped throughout (docs/wrap-records.md, top)."""
    from assay.policy import Decision
    from assay.session.records import Recorder

    rec = Recorder(
        source="assay://t",
        label="l",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=False,
        verbose=False,
        arguments_max=4096,
    )
    frame = call(1, "read_file", {"path": "caf\u00e9 \ud83d"})
    out = rec.record(Decision("allow", "read_file"), frame, frame["params"], "read_file", True, None)
    for line in (out.decision_line, out.audit_line):
        assert line.isascii() and b"\\u00e9" in line and b"\\ud83d" in line
        assert json.loads(line)["data" if b"specversion" in line else "timestamp"]
    assert json.loads(out.decision_line)["data"]["arguments"] == json.loads(out.audit_line)["arguments"]


APPROVALS = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["deploy"]\n  approval_required: ["deploy"]\n'
    b"  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)
APPROVAL_TOKEN = "0123456789abcdef0123456789abcdef"


def line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def test_an_approved_call_records_its_arguments():
    h = Harness(APPROVALS, logs(), approval_token=APPROVAL_TOKEN)
    h.client(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"elicitation": {}}}}))
    held = h.client(line(call(1, "deploy", {"env": "prod", "api_key": "k-123"})))
    assert held.records(Sink.DECISION_LOG) == []  # written once the person answers
    (request,) = [json.loads(x) for x in held.to_client.splitlines()]
    answered = h.client(line({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept"}}))
    event, audit = records_of(answered)
    assert event["data"]["approval_state"] == "approved"
    assert event["data"]["arguments"] == audit["arguments"] == {"env": "prod", "api_key": "[REDACTED:api_key]"}


def test_a_shared_session_records_its_arguments():
    key = SessionKey("name:agent", "named", name="agent")
    shared = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  max_tool_calls_total: 3\n')
    h = Harness(
        shared,
        logs(label="files", shared_session_key=key.key),
        shared=(MemoryStore(), key),
        wall_clock=lambda: 1_800_000_000.0,
    )
    event, audit = records_of(
        h.handle(call(1, "read_file", {"path": "/a", "auth": "Bearer abcdef0123456789xyz"})).effects
    )
    assert event["data"]["session"] == "name:agent"
    assert event["data"]["arguments"] == audit["arguments"] == {"path": "/a", "auth": "Bearer [REDACTED:bearer_token]"}
