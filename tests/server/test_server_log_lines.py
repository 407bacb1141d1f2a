"""The log lines of the hot path (docs/server.md, "Logging"): events built from prepared text are
byte for byte the lines the generic encoder writes, whatever the values (ids that need escapes,
lone surrogates, integers beyond 64 bits), and a tool call's lines keep their exact text."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.server.config import ServerConfig
from assay.server.log import TARGET_SERVER, Logger, Preencoded, Prepared, encode_event
from assay.server.protocol import ServerProtocol

_STAMP = re.compile(rb'^\{"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",')


def masked(lines: bytes) -> list[bytes]:
    """The lines with their timestamp cut out (checked to have the documented form)."""
    out = []
    for line in lines.splitlines(keepends=True):
        match = _STAMP.match(line)
        assert match, line
        out.append(line[match.end() :])
    return out


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 80), max_value=1 << 80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
plain_ids = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12),
    st.sampled_from(["r-1", 'a"b', "a\\b", "é", "\ud800", "%s", "%(x)s", "1e-07"]),
    st.none(),
    st.booleans(),
    st.floats(),
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(plain_ids, json_values), min_size=0, max_size=4), pre=st.booleans())
def test_prepared_event_is_exactly_the_generic_line(values, pre):
    """Logger.emit against Logger.event for the same fields: identical lines (timestamp aside),
    also when a value is non-ASCII, a lone surrogate, huge, a float or a nested value, and for
    names and values containing `%`."""
    names = tuple(f"k{i}%s" for i in range(len(values)))
    prepared = Prepared("INFO", TARGET_SERVER, "ev%d", names)
    fast = Logger(None, "info", buffered=True)
    slow = Logger(None, "info", buffered=True)
    given_values = [Preencoded(v) if pre and isinstance(v, str) else v for v in values]
    fast.emit(prepared, *given_values)
    slow.event("INFO", TARGET_SERVER, "ev%d", **dict(zip(names, values)))
    assert masked(fast.drain()) == masked(slow.drain())


@settings(max_examples=200, deadline=None)
@given(
    first=st.lists(st.one_of(plain_ids, json_values), max_size=3),
    second=st.lists(st.one_of(plain_ids, json_values), max_size=3),
    spec=st.sampled_from(["info", "assay_billing=off", "assay_mcp_server=off", "warn"]),
)
def test_prepared_pair_is_exactly_two_generic_lines(first, second, spec):
    """Logger.emit_pair against two Logger.event calls, under filters that drop either line."""
    from assay.server.log import TARGET_BILLING

    a = Prepared("INFO", TARGET_BILLING, "a", tuple(f"x{i}" for i in range(len(first))))
    b = Prepared("INFO", TARGET_SERVER, "b", tuple(f"y{i}" for i in range(len(second))))
    fast = Logger(None, spec, buffered=True)
    slow = Logger(None, spec, buffered=True)
    fast.emit_pair(a, tuple(first), b, tuple(second))
    slow.event("INFO", TARGET_BILLING, "a", **dict(zip(a.names, first)))
    slow.event("INFO", TARGET_SERVER, "b", **dict(zip(b.names, second)))
    got = fast.drain()
    assert masked(got) == masked(slow.drain())
    assert got.count(b"\n") == len(masked(got))  # one event per line


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(plain_ids, json_values), max_size=3), fixed=st.lists(plain_ids, max_size=2))
def test_fixed_fields_are_written_as_given_fields(values, fixed):
    """Fixed fields are baked into the prepared text; the line is the generic one with those
    fields first, and a value that is not plain is refused when preparing."""
    from assay.server.log import _plain

    fixed_fields = tuple((f"f{i}", v) for i, v in enumerate(fixed))
    if any(_plain(v) is None for _, v in fixed_fields):
        with pytest.raises(ValueError):
            Prepared("INFO", TARGET_SERVER, "e", (), fixed_fields)
        return
    names = tuple(f"k{i}" for i in range(len(values)))
    prepared = Prepared("INFO", TARGET_SERVER, "e", names, fixed_fields)
    fast = Logger(None, "info", buffered=True)
    slow = Logger(None, "info", buffered=True)
    kept = Logger(None, "info", buffered=True)
    kept.records = []
    fast.emit(prepared, *values)
    kept.emit(prepared, *values)
    slow.event("INFO", TARGET_SERVER, "e", **dict(fixed_fields), **dict(zip(names, values)))
    assert masked(fast.drain()) == masked(slow.drain()) == masked(kept.drain())
    assert kept.records[0]["fields"] == {"event": "e", **dict(fixed_fields), **dict(zip(names, values))}


def test_prepared_event_keeps_records_and_the_filter():
    """With records kept, emit stores the same fields as event; a filtered-out level writes
    nothing."""
    logger = Logger(None, "info", buffered=True)
    logger.records = []
    decision = Preencoded('{"a":1}')
    logger.emit(Prepared("INFO", TARGET_SERVER, "tool_decision", ("rid", "decision")), "r-1", decision)
    logger.emit(Prepared("DEBUG", TARGET_SERVER, "cache_hit", ("key",)), "k")
    assert logger.records == [
        {
            "level": "INFO",
            "target": TARGET_SERVER,
            "fields": {"event": "tool_decision", "rid": "r-1", "decision": '{"a":1}'},
        }
    ]
    assert masked(logger.drain()) == [
        b'"level":"INFO","fields":{"event":"tool_decision","rid":"r-1","decision":"{\\"a\\":1}"},'
        b'"target":"assay_mcp_server::server"}\n'
    ]


def _serve(root, frames, *, records):
    logger = Logger(None, "debug", buffered=True)
    if records:
        logger.records = []  # forces the generic encoder for every line
    proto = ServerProtocol(str(root), ServerConfig(), logger, clock=lambda: 0.0)
    replies = [proto.handle_blocking(frame) for frame in frames]
    return replies, masked(proto.pending_log())


def _frames():
    ids = [1, "abc", "é-id", "\ud800", 1 << 70, 1.5, None, True, 'q"uote', "1e-07"]
    frames = []
    for rpc_id in ids:
        for name, arguments in (
            ("assay_policy_decide", {"tool": "exec", "policy": "block.yaml"}),
            ("assay_policy_decide", {"tool": "search", "policy": "block.yaml"}),
            ("assay_check_args", {"tool": "search", "arguments": {"q": "x"}, "policy": "check.yaml"}),
            ("assay_check_args", {"tool": "search", "arguments": {"q": 1}, "policy": "check.yaml"}),
            ("assay_check_args", {"tool": "search", "arguments": {}, "policy": "missing.yaml"}),
            ("assay_server_identity", {}),
            ("no_such_tool", {"x": "é"}),
        ):
            msg = {
                "jsonrpc": "2.0",
                "id": rpc_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
            frames.append(json.dumps(msg).encode())
    return frames


def test_tool_call_lines_and_replies_match_the_generic_encoder(tmp_path):
    """A run of calls (allowed, denied, errors, the identity tool, unknown tools; ids of every
    JSON kind) writes the same log lines and replies through the prepared events as through the
    generic encoder."""
    (tmp_path / "block.yaml").write_text("blocklist: [exec]\n")
    (tmp_path / "check.yaml").write_text(
        "schemas:\n  search:\n    type: object\n    properties:\n      q: {type: string}\n"
    )
    frames = _frames()
    fast_replies, fast_lines = _serve(tmp_path, frames, records=False)
    slow_replies, slow_lines = _serve(tmp_path, frames, records=True)
    assert fast_replies == slow_replies
    assert fast_lines == slow_lines
    assert len(fast_lines) > 4 * len(frames) // 2


def test_tool_call_lines_keep_their_text(tmp_path):
    """The exact text of the four lines of an allowed call (timestamp aside)."""
    (tmp_path / "block.yaml").write_text("blocklist: [exec]\n")
    frame = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "assay_policy_decide", "arguments": {"tool": "ls", "policy": "block.yaml"}},
        }
    ).encode()
    logger = Logger(None, "info", buffered=True)
    proto = ServerProtocol(str(tmp_path), ServerConfig(), logger, clock=lambda: 0.0)
    reply = proto.handle_blocking(frame)
    record = (
        '{"schema":"assay.tool_decision_surface.v0","tool":{"name":"assay_policy_decide"},"server":{"id":"mcp"},'
        '"decision":{"effect":"allow"},"response":{"status":"success","side_effect_verified":false},'
        '"redaction":{"arguments_redacted":true,"secret_material_stored":false},"correlation":{"source":"none"}}'
    )
    assert masked(proto.pending_log()) == [
        b'"level":"INFO","fields":{"event":"assay.usage.metered","usage_type":"policy_check","count":1},'
        b'"target":"assay_billing"}\n',
        b'"level":"INFO","fields":{"event":"tool_call_start","rid":"r-000001","rpc_id":7,"bytes_in":%d,'
        b'"args_bytes":35},"target":"assay_mcp_server::server"}\n' % len(frame),
        b'"level":"INFO","fields":{"event":"tool_call_done","rid":"r-000001","rpc_id":7,"duration_ms":0,'
        b'"outcome":"ok","allowed":true},"target":"assay_mcp_server::server"}\n',
        b'"level":"INFO","fields":{"event":"tool_decision","rid":"r-000001","rpc_id":7,"decision":'
        + json.dumps(record).encode()
        + b'},"target":"assay_mcp_server::server"}\n',
    ]
    assert reply == (
        b'{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\\n  \\"allowed\\": true,\\n  '
        b'\\"reason\\": \\"Allowed by policy\\"\\n}"}],"isError":false},"id":7}\n'
    )


def test_generic_encoder_reference():
    """The reference the prepared events are held to: encode_event's own layout."""
    line = encode_event("INFO", TARGET_SERVER, {"event": "x", "rid": "r-1", "rpc_id": "é"})
    assert line.endswith(
        b'"fields":{"event":"x","rid":"r-1","rpc_id":"\xc3\xa9"},"target":"assay_mcp_server::server"}\n'
    )


def test_fixed_payloads_are_read_only_and_keep_their_text(tmp_path):
    """The shared allow payloads: their text is the pretty JSON of their content, they refuse
    every change, and an allowed `assay_check_args` reply keeps its exact bytes."""
    from assay.server.jsontext import FixedPayload, pretty_json

    fixed = FixedPayload({"allowed": True, "violations": [], "suggested_fix": None, "é": "x"})
    assert fixed.text == pretty_json(dict(fixed)) == json.dumps(dict(fixed), indent=2, ensure_ascii=False)
    for change in (
        lambda: fixed.__setitem__("allowed", False),
        lambda: fixed.__delitem__("allowed"),
        lambda: fixed.update(allowed=False),
        lambda: fixed.pop("allowed"),
        lambda: fixed.setdefault("k", 1),
        lambda: fixed.clear(),
        lambda: fixed.popitem(),
    ):
        try:
            change()
        except TypeError:
            pass
        else:
            raise AssertionError("a fixed payload changed")
    assert fixed["allowed"] is True and len(fixed) == 4
    (tmp_path / "check.yaml").write_text("schemas:\n  search:\n    type: object\n")
    frame = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "a-1",
            "method": "tools/call",
            "params": {
                "name": "assay_check_args",
                "arguments": {"tool": "search", "arguments": {}, "policy": "check.yaml"},
            },
        }
    ).encode()
    proto = ServerProtocol(str(tmp_path), ServerConfig(), Logger(None, "info", buffered=True))
    for _ in range(2):  # parsed, then cached
        assert proto.handle_blocking(frame) == (
            b'{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\\n  \\"allowed\\": true,\\n  '
            b'\\"violations\\": [],\\n  \\"suggested_fix\\": null\\n}"}],"isError":false},"id":"a-1"}\n'
        )
