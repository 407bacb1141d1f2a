"""Reading one log line (docs/log.md, "What it reads"), in memory: every record kind wrap writes,
and whatever else a file may hold, without raising."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from assay.logs.entries import FOREIGN, OTHER, Entry, parse_line
from assay.logs.files import Counts, LogFile
from assay.logs.view import Filter, Once, Table, json_line

T = "2026-08-22T10:15:02.123456+00:00"


def event(**data) -> bytes:
    base = {"tool": "exec", "decision": "allow", "reason_code": "P_POLICY_ALLOW", "session": None, "server": "shell"}
    doc = {
        "specversion": "1.0",
        "id": "evt_decision_1",
        "type": "assay.tool.decision",
        "source": "assay://protect/cursor/shell",
        "time": T,
        "data": {**base, **data},
    }
    return json.dumps(doc).encode()


def test_decision_event_outcomes():
    deny = parse_line(
        event(
            decision="deny",
            typed_decision="deny",
            reason_code="P_TOOL_DENIED",
            reason="no",
            matched_rule="tools.deny",
            request_id=7,
        )
    )
    assert isinstance(deny, Entry)
    assert (deny.outcome, deny.reason_code, deny.rule, deny.client, deny.request_id) == (
        "deny",
        "P_TOOL_DENIED",
        "tools.deny",
        "cursor",
        7,
    )
    dry = parse_line(event(decision="allow", typed_decision="deny", reason_code="P_TOOL_DENIED"))
    assert isinstance(dry, Entry) and dry.outcome == "would_deny"
    warned = parse_line(event(typed_decision="allow_with_obligations", reason_code="E_TOOL_UNCONSTRAINED"))
    assert isinstance(warned, Entry) and warned.outcome == "allow_with_warning"
    asked = parse_line(
        event(decision="deny", typed_decision="deny", reason_code="P_APPROVAL_DENIED", approval_state="declined")
    )
    assert isinstance(asked, Entry) and asked.approval == "declined"
    assert Filter(outcomes=("declined",)).admits(asked) and Filter(outcomes=("approval",)).admits(asked)
    assert not Filter(outcomes=("allow",)).admits(asked)
    recorded = parse_line(event(arguments={"path": "/w"}))
    assert isinstance(recorded, Entry) and recorded.has_arguments and recorded.arguments == {"path": "/w"}
    assert json.loads(json_line(recorded))["arguments"] == {"path": "/w"}


def test_audit_record_codes_are_mapped_like_the_event():
    line = json.dumps(
        {
            "timestamp": T,
            "decision": "would_deny",
            "tool": "rm",
            "reason": "r",
            "session": None,
            "server": "s",
            "agentic": {"status": "deny", "error_code": "E_ARG_SCHEMA"},
        }
    ).encode()
    e = parse_line(line)
    assert isinstance(e, Entry) and (e.outcome, e.reason_code, e.kind) == ("would_deny", "P_ARG_SCHEMA", "audit")


def test_records_that_are_not_calls_and_foreign_lines():
    assert parse_line(b'{"specversion":"1.0","type":"assay.tool.listed","data":{"tool":"x"}}') == OTHER
    assert parse_line(b'{"schema":"assay.mcp_request_receipt.v0","seq":1}') == OTHER
    for line in (
        b"",
        b"null",
        b"[1]",
        b'{"a":1}',
        b'{"specversion":"1.0","type":"other.thing"}',
        event(tool=5),
        event(decision="maybe"),
        b'{"timestamp":"x","decision":"allow","tool":3}',
    ):
        assert parse_line(line) == FOREIGN, line


@given(
    st.binary(max_size=300)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: (
            st.lists(c, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "specversion",
                        "type",
                        "data",
                        "time",
                        "tool",
                        "decision",
                        "timestamp",
                        "agentic",
                        "reason_code",
                        "x",
                    ]
                ),
                c,
                max_size=6,
            )
        ),
        max_leaves=20,
    ).map(lambda v: json.dumps(v).encode())
)
def test_no_line_makes_the_reader_raise(line):
    got = parse_line(line)
    if isinstance(got, Entry):
        Table(80, True).row(got)
        json_line(got)
        Filter(servers=("*",), tools=("a*",), since=0.0).admits(got)


def test_a_call_in_both_logs_is_shown_once_and_the_table_escapes_controls():
    e = parse_line(event(tool="a\x1b[2Kb\nc"))
    a = parse_line(
        json.dumps(
            {
                "timestamp": T,
                "decision": "allow",
                "tool": "a\x1b[2Kb\nc",
                "reason": None,
                "session": None,
                "server": "shell",
            }
        ).encode()
    )
    assert isinstance(e, Entry) and isinstance(a, Entry)
    once = Once()
    assert once.first(e) and not once.first(a)
    assert once.first(e)  # a second decision event is a second call (a retry with the same id)
    row = Table(None, False).row(e)
    assert "\x1b" not in row and "\n" not in row and "a\\x1b[2Kb\\nc" in row


def test_a_file_read_as_it_grows_keeps_a_torn_line_until_it_is_whole(tmp_path):
    path = tmp_path / "d.ndjson"
    path.write_bytes(b'{"a":1}\n{"b":')
    counts = Counts()
    reader = LogFile(str(path), counts)
    assert list(reader.lines()) == [b'{"a":1}'] and reader.torn()
    with open(path, "ab") as fh:
        fh.write(b"2}\n")
    assert list(reader.lines()) == [b'{"b":2}'] and not reader.torn()
    path.write_bytes(b'{"c":3}\n')  # truncated and rewritten: read again from the top
    assert list(reader.lines()) == [b'{"c":3}']


def test_the_viewer_fits_the_table_to_the_first_rows_then_streams():
    from assay.logs.view import Viewer

    view = Viewer(Filter(), mode="table")
    view.FIT_ROWS = 2  # type: ignore[misc]
    first = parse_line(event(tool="a_rather_long_tool_name"))
    second = parse_line(event(tool="b", decision="deny", typed_decision="deny", reason_code="P_TOOL_DENIED"))
    third = parse_line(event(tool="c"))
    assert isinstance(first, Entry) and isinstance(second, Entry) and isinstance(third, Entry)
    assert view.take(first) == ""  # held until the widths are known
    shown = view.take(second).splitlines()
    assert shown[0].startswith("TIME") and len(shown) == 3
    assert shown[1].index("allow") == shown[2].index("deny") == shown[0].index("OUTCOME")
    assert view.take(third).count("\n") == 1 and view.end_of_files() == ""
    counts = Viewer(Filter(tools=("a*",)), mode="stats")
    for e in (first, second, third):
        assert counts.take(e) == ""
    assert counts.end_of_files().splitlines()[1].split() == [
        "cursor/shell",
        "a_rather_long_tool_name",
        "1",
        "0",
        "0",
        "0",
        "1",
    ]
