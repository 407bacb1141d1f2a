"""``assay.tool.listed`` events (docs/wrap-records.md, "Tools seen"): with a decision log, one
per tool the first time a tools/list answer shows it and again when its identity changes,
exactly when ``--verbose`` prints its ``[assay] TOOL`` line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.session.effects import Sink
from assay.session.records.listed import PROPERTIES_MAX
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\n')

WRITE = {
    "name": "write_file",
    "title": "Write a file",
    "description": "Writes.",
    "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": "yes", "title": "ignored"},
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "mode": {"type": ["string", "null"]}, "content": {}},
        "required": ["path"],
    },
}
READ = {
    "name": "read_file",
    "annotations": {"title": "Read", "readOnlyHint": True, "openWorldHint": False},
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
BARE = {"name": "ping_tool", "inputSchema": {"type": "object"}}


def options(**extra) -> SessionOptions:
    return SessionOptions(event_source="assay://t", label="files", **extra)


def listing(h: Harness, rid: int, tools: list) -> object:
    assert h.handle({"jsonrpc": "2.0", "id": rid, "method": "tools/list"}).disposition == "forwarded"
    return h.server(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}).encode() + b"\n")


def tool_names(warnings: list[str]) -> list[str]:
    """The names of the ``[assay] TOOL "<name>" ...`` lines (a JSON string, then the rest)."""
    prefix = "[assay] TOOL "
    return [json.JSONDecoder().raw_decode(w[len(prefix) :])[0] for w in warnings if w.startswith(prefix)]


def listed(effects, sink=Sink.DECISION_LOG) -> list[dict]:
    return [json.loads(r) for r in effects.records(sink)]


def test_each_new_tool_is_recorded_once_and_again_when_it_changes():
    h = Harness(POLICY, options(decision_sinks=(Sink.DECISION_LOG, Sink.DECISION_LOG_NEW), verbose=True))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    first = listing(h, 1, [WRITE, READ, BARE])
    events = listed(first)
    assert listed(first, Sink.DECISION_LOG_NEW) == events
    assert [e["type"] for e in events] == ["assay.tool.listed"] * 3
    assert [e["data"]["tool"] for e in events] == ["write_file", "read_file", "ping_tool"]
    tool_lines = [w for w in first.warnings if w.startswith("[assay] TOOL ")]
    assert tool_names(first.warnings) == [e["data"]["tool"] for e in events]
    assert all(e["source"] == "assay://t" and e["id"].startswith("evt_tool_listed_") for e in events)
    assert list(events[0]) == ["specversion", "id", "type", "source", "time", "data"]
    write = events[0]["data"]
    assert write == {
        "tool": "write_file",
        "title": "Write a file",
        "annotations": {"readOnlyHint": False, "destructiveHint": True},  # as given; "yes" is no boolean
        "input_properties": {"path": "string", "mode": ["string", "null"], "content": None},
        "tool_definition_digest": write["tool_definition_digest"],
        "schema_hash": write["schema_hash"],
        "meta_hash": write["meta_hash"],
        "session": None,
        "server": "files",
    }
    assert events[1]["data"]["title"] == "Read"  # annotations.title when the tool has none
    assert events[1]["data"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert "annotations" not in events[2]["data"] and "input_properties" not in events[2]["data"]  # no properties
    # the hashes are the TOOL line's
    assert f"schema_hash={write['schema_hash']}" in tool_lines[0] and f"meta_hash={write['meta_hash']}" in tool_lines[0]
    # the digest is the one decision events carry for the tool
    call = h.handle(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "write_file", "arguments": {}}}
    )
    (decision,) = listed(call.effects)
    assert decision["type"] == "assay.tool.decision"
    assert decision["data"]["tool_definition_digest"] == write["tool_definition_digest"]

    assert listed(listing(h, 2, [WRITE, READ, BARE])) == []  # nothing new
    changed = dict(
        READ, inputSchema={"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}}
    )
    again = listing(h, 3, [WRITE, changed])
    (event,) = listed(again)
    assert event["data"]["tool"] == "read_file" and event["data"]["input_properties"] == {
        "path": "string",
        "n": "integer",
    }
    assert len([w for w in again.warnings if w.startswith("[assay] TOOL ")]) == 1


def test_no_event_without_a_decision_log():
    h = Harness(POLICY, options(audit=True, verbose=True))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    out = listing(h, 1, [WRITE])
    assert out.records(Sink.AUDIT_LOG) == [] and out.records(Sink.DECISION_LOG) == []
    assert any(w.startswith("[assay] TOOL ") for w in out.warnings)


def test_one_name_listed_twice_with_two_definitions_records_both():
    h = Harness(POLICY, options(decision_sinks=(Sink.DECISION_LOG,)))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    other = dict(READ, inputSchema={"type": "object", "properties": {"q": {"type": "string"}}})
    events = listed(listing(h, 1, [READ, "junk", {"name": " "}, other]))
    assert [e["data"]["input_properties"] for e in events] == [{"path": "string"}, {"q": "string"}]


def test_a_hostile_definition_gives_a_bounded_record():
    props = {f"p{i}" + "x" * 500: {"type": ["string"] * 50} for i in range(1000)}
    tool = {
        "name": "n" * 100_000,
        "title": "t" * 100_000,
        "annotations": {"destructiveHint": True, "x": "y" * 10_000},
        "inputSchema": {"type": "object", "properties": props},
    }
    h = Harness(POLICY, options(decision_sinks=(Sink.DECISION_LOG,)))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    out = listing(h, 1, [tool])
    (line,) = out.records(Sink.DECISION_LOG)
    assert len(line) < 60_000
    data = json.loads(line)["data"]
    assert data["tool"] == "n" * 256 + "…(cut: 100000 characters)" and data["title"].startswith("t" * 256 + "…(cut")
    assert len(data["input_properties"]) == PROPERTIES_MAX and data["input_properties_omitted"] == 1000 - PROPERTIES_MAX
    assert all(len(types) == 8 for types in data["input_properties"].values())


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"name": st.text(max_size=10)},
            optional={
                "title": st.none() | st.text(max_size=5) | st.integers(),
                "annotations": st.none()
                | st.dictionaries(
                    st.sampled_from(["readOnlyHint", "destructiveHint", "title"]),
                    st.none() | st.booleans() | st.text(max_size=3),
                ),
                "inputSchema": st.none()
                | st.just({"type": "object"})
                | st.fixed_dictionaries(
                    {
                        "properties": st.none()
                        | st.dictionaries(
                            st.text(max_size=4),
                            st.none()
                            | st.fixed_dictionaries(
                                {},
                                optional={
                                    "type": st.none()
                                    | st.text(max_size=4)
                                    | st.lists(st.integers() | st.text(max_size=3), max_size=3)
                                },
                            ),
                        )
                    }
                ),
            },
        ),
        max_size=5,
    )
)
def test_any_listing_is_recorded_as_verbose_prints_it(tools):
    h = Harness(POLICY, options(decision_sinks=(Sink.DECISION_LOG,), verbose=True))
    h.handle({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    out = listing(h, 1, tools)
    assert [e["data"]["tool"] for e in listed(out)] == tool_names(out.warnings)
