"""Log names per client (docs/protect.md, "Log files"): a server of one name in two clients
writes its own log files, with its own event source, and wrap starts with the line."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay import clients
from assay.clients import protect as p
from assay.clients.protect.wrapline import log_name
from assay.clients.wrapped import parse_wrapped
from tests.test_wrap_args import outcome

OPTS = p.WrapOptions("/bin/assay", "/p.yaml", log_dir="/logs")
LABELS = [c.label for c in clients.CLIENTS]


def _location(label):
    return clients.client_locations(label, "linux", "/h", {}, "/w")[0]


def _logs(label, name="filesystem"):
    loc = _location(label)
    text = json.dumps({loc.servers_key: {name: {"command": "npx", "args": ["srv"]}}})
    entry = json.loads(p.protect_text(text, loc, OPTS).text)[loc.servers_key][name]
    line = parse_wrapped([entry["command"], *entry["args"]])
    assert line is not None
    return line.options


def test_the_same_server_name_in_two_clients_writes_two_logs():
    claude, cursor = _logs("claude_desktop"), _logs("cursor")
    assert claude["decision_log"] == "/logs/claude_desktop-filesystem.decisions.ndjson"
    assert claude["audit_log"] == "/logs/claude_desktop-filesystem.audit.ndjson"
    assert claude["event_source"] == "assay://protect/claude_desktop/filesystem"
    assert cursor["decision_log"] == "/logs/cursor-filesystem.decisions.ndjson"
    assert cursor["event_source"] == "assay://protect/cursor/filesystem"


def test_no_client_label_has_a_dash():
    assert all("-" not in label and label == label.lower() for label in LABELS)


_names = st.one_of(st.sampled_from(["code-x", "x", "desktop-x", "fs", "GitHub", "--", "a-b", ""]), st.text(max_size=6))


@settings(max_examples=300, deadline=None)
@given(a=st.tuples(st.sampled_from(LABELS), _names), b=st.tuples(st.sampled_from(LABELS), _names))
def test_two_servers_of_any_clients_never_share_a_log_file(a, b):
    if a != b:
        assert log_name(a[1], a[0]).lower() != log_name(b[1], b[0]).lower()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=st.sampled_from(LABELS), name=_names)
def test_wrap_starts_with_the_per_client_line(monkeypatch, label, name):
    args = p.wrapped_args(name, "npx", ["srv"], OPTS, client=label)
    for fast in (True, False):
        code, _out, err, runs = outcome(monkeypatch, args[2:], fast)
        assert (code, err) == (0, "")
        (config,) = runs
        assert config.event_source.startswith(f"assay://protect/{label}/")
        assert config.decision_log.startswith(f"/logs/{label}-")
