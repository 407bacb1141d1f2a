"""Wrap's log options in real processes: the default event source (docs/wrap.md, "Logs") and
``--log-arguments`` (docs/wrap-records.md, "Logged arguments")."""

from __future__ import annotations

import json

import pytest

from tests.wrap.conftest import call, request

GH = "ghp_" + "k" * 36


@pytest.mark.parametrize(
    "label,source",
    [
        (None, "assay://local/default-mcp-server"),
        ("files", "assay://local/files"),
        ("my server/x~é", "assay://local/my%20server%2Fx~%C3%A9"),
    ],
)
def test_without_event_source_the_events_name_the_label(wrapper, label, source):
    opts = ["--decision-log", "d.ndjson", "--audit-log", "a.ndjson", "--state-window-out", "w.json"]
    if label is not None:
        opts += ["--label", label]
    res = wrapper.run(call(1, "read_file", {"path": "/workspace/a"}), *opts)
    assert res.returncode == 0, res.stderr
    (event,) = res.log("d.ndjson")
    assert event["source"] == source
    assert json.loads((wrapper.tmp / "w.json").read_text())["session"]["event_source"] == source
    assert len(res.log("a.ndjson")) == 1


def test_log_arguments_in_both_logs_redacted_and_capped(wrapper):
    frames = (
        call(1, "read_file", {"path": "/workspace/a", "token": "t0k3n"})
        + call(2, "exec", {"cmd": f"curl -H 'Authorization: token {GH}' https://u:pw@h/x", "blob": "z" * 500})
        + call(3, "echo", {"text": "hi"})
    )
    res = wrapper.run(
        frames,
        "--decision-log",
        "d.ndjson",
        "--audit-log",
        "a.ndjson",
        "--log-arguments",
        "--log-arguments-max",
        "200",
        "--dry-run",
    )
    assert res.returncode == 0, res.stderr
    events, audits = res.log("d.ndjson"), res.log("a.ndjson")
    assert [e["data"]["arguments"] for e in events] == [a["arguments"] for a in audits]
    first, second, third = (e["data"]["arguments"] for e in events)
    assert first == {"path": "/workspace/a", "token": "[REDACTED:token]"}
    assert second["_truncated"] is True and second["bytes"] > 500 and len(second["head"].encode()) <= 200
    assert "[REDACTED:github_token]" in second["head"] and GH[:12] not in second["head"]
    assert third == {"text": "hi"}
    assert GH.encode() not in (wrapper.tmp / "d.ndjson").read_bytes() + (wrapper.tmp / "a.ndjson").read_bytes()
    assert [a["decision"] for a in audits] == ["would_deny", "would_deny", "allow"]  # read_file: no extra members
    # what the server got is the call as sent
    assert GH.encode() in res.record


def test_no_arguments_without_the_option(wrapper):
    res = wrapper.run(
        call(1, "read_file", {"path": "/workspace/a"}) + request(2, "ping"),
        "--decision-log",
        "d.ndjson",
        "--audit-log",
        "a.ndjson",
        "--event-source",
        "assay://x",
    )
    assert res.returncode == 0, res.stderr
    (event,) = res.log("d.ndjson")
    assert "arguments" not in event["data"] and "arguments" not in res.log("a.ndjson")[0]
    assert event["source"] == "assay://x"


def test_a_bad_cap_is_a_usage_error(wrapper):
    res = wrapper.run(b"", "--log-arguments-max", "0")
    assert res.returncode == 2 and res.stderr.decode().startswith("assay: error: ")
    assert "--log-arguments-max" in res.stderr.decode() and "Traceback" not in res.stderr.decode()
