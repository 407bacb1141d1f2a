"""The Recorder against the dict-builder oracle for client-chosen tool names of every kind (odd
strings, lone surrogates, long names, a called name other than the decision's) and for odd
session keys and server labels, and the byte bounds of what a recorder keeps: the template cache and the coverage aggregate
(docs/wrap-records.md, "How records are built" and "Session reports"; docs/wrap.md, "Output to
the client": memory stays bounded whatever the client sends).
"""

from __future__ import annotations

import hashlib
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import Decision, load_policy
from assay.session import records
from assay.session.effects import Sink
from assay.session.records import Coverage, coverage_name
from assay.session.records.coverage import NAME_MAX_LEN, ROUTES_MAX, TOOLS_MAX
from assay.session.reports import coverage_report
from assay.session.session import SessionOptions, WrapSession

from tests.wrap.records_oracle import coverage_of_events, decision_event, events_coverage_report
from tests.wrap.test_records import WILD_TEXT, _expected, calls, decisions

LONG_NAMES = st.builds(
    lambda head, n, tail: head + "t" * n + tail,
    WILD_TEXT,
    st.sampled_from([NAME_MAX_LEN - 1, NAME_MAX_LEN, NAME_MAX_LEN + 1, 300, 5000]),
    WILD_TEXT,
)
TOOL_NAMES = WILD_TEXT | LONG_NAMES
# session keys and labels come from the command line (a non-UTF-8 argv byte is a lone surrogate)
HOSTILE_SAMPLES = [
    '"',
    "\\",
    '\\"}',
    "a\nb",
    "\x00\x1f\x7f",
    "\u2028",
    "caf\u00e9",
    "\udcff",
    "x\ud83d",
    "😀",
    "/a/b",
    "",
]
HOSTILE = (
    WILD_TEXT | st.sampled_from(HOSTILE_SAMPLES) | st.sampled_from(HOSTILE_SAMPLES).map(lambda t: "name:" + t * 300)
)


def _recorder(**overrides) -> records.Recorder:
    options = dict(
        source="assay://org/app",
        label="default-mcp-server",
        dry_run=False,
        decision_log=True,
        audit_log=True,
        keep_events=True,
        verbose=True,
    )
    options.update(overrides)
    return records.Recorder(**options)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_recorder_bytes_equal_the_oracle_for_odd_and_long_names(data):
    valid = data.draw(st.booleans())
    tool = data.draw(TOOL_NAMES) if valid else ""
    # the engine's contract is that the called name is the decision's; a record stays right if not
    name = data.draw(st.just(tool) | TOOL_NAMES) if valid else ""
    decision = data.draw(decisions(tool))
    source = data.draw(st.sampled_from(["assay://org/app"]) | WILD_TEXT)
    label = data.draw(st.sampled_from(["default-mcp-server"]) | HOSTILE)
    session = data.draw(st.none() | HOSTILE)
    dry_run = data.draw(st.booleans())
    rec = _recorder(source=source, dry_run=dry_run, label=label, session=session)
    kept = []
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        frame, params = data.draw(calls(name, valid))
        digest = data.draw(st.sampled_from([None, "sha256:" + "5b" * 32]))
        out = rec.record(decision, frame, params, name, valid, digest)
        full, event_line, audit_line = _expected(
            decision,
            frame,
            params,
            name,
            valid,
            digest,
            out,
            source=source,
            dry_run=dry_run,
            session=session,
            server=label,
        )
        assert out.decision_line == event_line
        assert out.audit_line == audit_line
        kept.append(full)
    expected = coverage_of_events(kept)
    assert (rec.coverage.tools, rec.coverage.routes) == (expected.tools, expected.routes)


def test_recorder_refuses_an_unknown_outcome():
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    for options in ({"audit_log": False}, {"decision_log": False}):
        with pytest.raises(ValueError):
            _recorder(**options).record(Decision("would_deny", "t", typed_decision="deny"), frame, {}, "t", True, None)


# --- the template cache is bounded in bytes ------------------------------------------------------


def _cached_bytes(rec: records.Recorder) -> int:
    """What the recorder's caches hold of tool names: the length of every cached name."""
    return sum(len(t.decision.tool) for t in rec._templates.values()) + sum(len(k[1]) for k in rec._shapes)


def test_long_tool_names_are_not_kept_by_the_template_cache():
    rec = _recorder()
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
    for i in range(40):
        name = f"{i:02d}" + "x" * 100_000
        decision = Decision("allow", name, typed_decision="allow")
        for _ in range(2):
            out = rec.record(decision, frame, {"name": name}, name, True, None)
            assert json.loads(out.decision_line)["data"]["tool"] == name
            assert json.loads(out.audit_line)["tool"] == name
    assert _cached_bytes(rec) == 0
    # an ordinary name is kept, once: later calls of it are made from the template
    decision = Decision("allow", "read_file", typed_decision="allow")
    for _ in range(3):
        rec.record(decision, frame, {"name": "read_file"}, "read_file", True, None)
    assert [t.decision.tool for t in rec._templates.values()] == ["read_file"]
    assert len(rec._shapes) == 1


def test_the_template_cache_keeps_names_up_to_the_cache_limit():
    rec = _recorder()
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
    for length in (255, 256, 257):
        name = "n" * length
        rec.record(Decision("allow", name, typed_decision="allow"), frame, {"name": name}, name, True, None)
    assert sorted(len(t.decision.tool) for t in rec._templates.values()) == [255, 256]


# --- the coverage aggregate --------------------------------------------------------------------


def _event(tool: str, classes=()) -> dict:
    data = {"tool": tool}
    if classes:
        data["tool_classes"] = sorted(classes)
    return decision_event("assay://org/app", data, event_id="e", time="t")


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", " b ", "c", "", " ", "read_file"]),
            st.lists(st.sampled_from(["fs", "net", " ", ""]), max_size=2),
        ),
        max_size=30,
    ),
    declared=st.lists(st.sampled_from(["a", " c ", "zz", "", "read_file"]), max_size=4),
)
def test_coverage_of_an_ordinary_session_is_what_its_events_give(calls, declared):
    events = [_event(tool, classes) for tool, classes in calls]
    coverage = Coverage()
    for tool, classes in calls:
        coverage.add(tool, tuple(sorted(classes)))
    assert coverage_report(coverage, declared, generated_at="G") == events_coverage_report(
        events, declared, generated_at="G"
    )


def test_a_long_name_is_kept_as_a_bounded_stand_in():
    name = "q" * (NAME_MAX_LEN + 1)
    digest = hashlib.sha256(name.encode()).hexdigest()
    assert coverage_name(name) == f"{'q' * 32}...(cut: {NAME_MAX_LEN + 1} characters, sha256:{digest})"
    assert coverage_name("q" * NAME_MAX_LEN) == "q" * NAME_MAX_LEN
    assert coverage_name("\ud83d" * 300).endswith(
        "characters, sha256:" + hashlib.sha256(("\ud83d" * 300).encode("utf-8", "surrogatepass")).hexdigest() + ")"
    )
    coverage = Coverage()
    huge = "h" * (1 << 20)
    for tool in ("a", huge, "a", huge + "2", huge):
        coverage.add(tool, ())
    stand_in = coverage_name(huge)
    assert list(coverage.tools) == ["a", stand_in, coverage_name(huge + "2")]
    assert coverage.routes == {
        ("a", stand_in): 1,
        (stand_in, "a"): 1,
        ("a", coverage_name(huge + "2")): 1,
        (coverage_name(huge + "2"), stand_in): 1,
    }
    assert sys.getsizeof(stand_in) < 1000
    # a declared long name matches its stand-in: not unknown
    report = coverage_report(coverage, ["a", huge], generated_at="G")
    assert report["tools"]["tools_unknown"] == [coverage_name(huge + "2")]
    assert report["tools"]["tools_declared"] == sorted(["a", huge])


def test_distinct_tools_and_routes_are_capped_and_the_rest_counted():
    coverage = Coverage()
    for i in range(TOOLS_MAX + 10):
        coverage.add(f"t{i}", ())
    coverage.add("t0", ())  # a kept name: counted, but no route from the uncounted one before it
    assert len(coverage.tools) == TOOLS_MAX and coverage.uncounted_calls == 10
    assert ("t4095", "t0") not in coverage.routes and ("t4105", "t0") not in coverage.routes
    report = coverage_report(coverage, [], generated_at="G")
    truncated = [f for f in report["findings"] if f["kind"] == "coverage_truncated"]
    assert truncated == [
        {
            "kind": "coverage_truncated",
            "severity": "note",
            "message": f"calls of tools beyond the first {TOOLS_MAX} distinct names were not counted",
            "tool": "",
            "count": 10,
        }
    ]
    routes = Coverage()
    names = [f"r{i}" for i in range(200)]
    for a in names:
        for b in names:
            routes.add(a, ())
            routes.add(b, ())
    assert len(routes.routes) == ROUTES_MAX and routes.uncounted_routes > 0
    assert sum(routes.routes.values()) + routes.uncounted_routes == 2 * len(names) ** 2 - 1
    assert any(
        f["kind"] == "coverage_truncated" and f["count"] == routes.uncounted_routes
        for f in coverage_report(routes, [], generated_at="G")["findings"]
    )


# --- the session hands its aggregate to the report ---------------------------------------------

POLICY = load_policy(b'version: "2.0"\ntools:\n  deny: ["exec"]\n')


def _drive(options: SessionOptions) -> WrapSession:
    session = WrapSession(POLICY, options)
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}] + [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {}}}
        for i, name in enumerate(["read_file", "exec", "read_file", "x" * 1000], start=1)
    ]
    session.receive_client_data(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    return session


def test_the_session_keeps_a_coverage_aggregate_not_events():
    session = _drive(
        SessionOptions(event_source="assay://org/app", keep_events=True, decision_sinks=(Sink.DECISION_LOG,))
    )
    assert not hasattr(session, "events")
    coverage = session.coverage
    assert list(coverage.tools) == ["read_file", "exec", coverage_name("x" * 1000)]
    assert coverage.routes == {
        ("read_file", "exec"): 1,
        ("exec", "read_file"): 1,
        ("read_file", coverage_name("x" * 1000)): 1,
    }
    with pytest.raises(AttributeError):
        session.coverage = Coverage()  # read-only
    assert _drive(SessionOptions()).coverage is None


# --- which session and which server (docs/wrap-records.md, "Decision event", "Audit record") ------


@pytest.mark.parametrize("session", [None, "client:4242:8613312", *HOSTILE_SAMPLES])
@pytest.mark.parametrize("label", ["default-mcp-server", *HOSTILE_SAMPLES])
def test_every_record_names_its_session_and_server(label, session):
    """Both members parse back to exactly what was given whatever they hold, on every path: the
    first call (template made), later ones (template reused), a twin of the decision, a called
    name other than the decision's, and a request id that makes the line ASCII-escaped."""
    rec = _recorder(label=label, session=session, keep_events=False, verbose=False)
    deny = Decision(
        "deny", "t", reason_code="E_TOOL_DENIED", reason="no", contract={"status": "deny"}, typed_decision="deny"
    )
    twin = Decision(
        "deny",
        "t",
        reason_code="E_TOOL_DENIED",
        reason="no",
        contract={"status": "deny", "n": 2},
        typed_decision="deny",
    )
    utf8 = "\udcff" not in label + (session or "") and "\ud83d" not in label + (session or "")
    for decision, rid, name in (
        (deny, 1, "t"),
        (deny, "r", "t"),
        (twin, 2, "t"),
        (deny, 3, "other"),
        (deny, "\ud83d", "t"),
    ):
        frame = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}}
        out = rec.record(decision, frame, frame["params"], name, True, None)
        event, audit = json.loads(out.decision_line), json.loads(out.audit_line)
        assert (event["data"]["session"], event["data"]["server"]) == (session, label)
        assert (audit["session"], audit["server"]) == (session, label)
        keys = list(event["data"])
        assert keys[keys.index("reason_code") + 1 :][:4] == (["error_code", "reason", "session", "server"])
        assert event["data"]["error_code"] == "E_TOOL_DENIED"  # the code the client got
        assert keys[keys.index("server") + 1] == "tool_call_id"
        assert list(audit)[3:7] == ["reason", "session", "server", "request_id"]
        for line in (out.decision_line, out.audit_line):
            assert line.count(b"\n") == 1  # a label cannot break the line
            ascii_only = not utf8 or rid == "\ud83d"
            assert line.isascii() or not ascii_only
        _full, event_line, audit_line = _expected(
            decision,
            frame,
            frame["params"],
            name,
            True,
            None,
            out,
            source="assay://org/app",
            dry_run=False,
            session=session,
            server=label,
        )
        assert (out.decision_line, out.audit_line) == (event_line, audit_line)


def test_session_and_server_are_encoded_once_per_template_not_per_call(monkeypatch):
    """The members are part of the template: a later call of the same decision encodes
    neither (the per-call work stays the ids and the time)."""
    from assay.session.records import parts

    made = []
    real = parts.origin_members
    monkeypatch.setattr(parts, "origin_members", lambda origin: made.append(origin) or real(origin))
    rec = _recorder(label="files", session="name:team", keep_events=False, verbose=False)
    decision = Decision("allow", "read_file", typed_decision="allow")
    for i in range(5):
        frame = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "read_file"}}
        out = rec.record(decision, frame, frame["params"], "read_file", True, None)
        assert b'"session":"name:team","server":"files"' in out.decision_line
        assert b'"session":"name:team","server":"files"' in out.audit_line
    assert len(made) == 2  # the event parts and the audit parts of the one template


class _SharedOptions(SessionOptions):
    shared_session_key: str | None = None


def test_the_session_passes_its_key_and_label_to_the_records():
    """``label`` and the shared session's key (null without one) reach both records."""
    for options, key in (
        (
            SessionOptions(
                event_source="assay://org/app", label="files", audit=True, decision_sinks=(Sink.DECISION_LOG,)
            ),
            None,
        ),
        (
            _SharedOptions(
                event_source="assay://org/app", label="files", audit=True, decision_sinks=(Sink.DECISION_LOG,)
            ),
            "client:4242:8613312",
        ),
    ):
        if key is not None:
            options.shared_session_key = key
        session = WrapSession(POLICY, options)
        effects = session.receive_client_data(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{}}}\n'
        )
        lines = [json.loads(e.data) for e in effects if getattr(e, "sink", None) in (Sink.DECISION_LOG, Sink.AUDIT_LOG)]
        assert len(lines) == 2
        event, audit = lines
        assert (event["data"]["session"], event["data"]["server"]) == (key, "files")
        assert (audit["session"], audit["server"]) == (key, "files")
