"""A hostile client against the front's sans-IO checks (assay/gateway/http.py; docs/serve.md,
"How a request flows"): a body the front takes is one the guard admits too (nesting, numbers),
repeated JSON members read as the MCP Python SDK reads them, routing headers given twice in any
spelling, a body framed two ways, and ``Accept`` weights."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as sdk
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from assay.gateway.http import Refusal, accepts, check_head, header_map, read_message
from assay.session.admission import Admitted, admit

SDK = TypeAdapter(sdk.JSONRPCMessage)


def _nest(depth: int, kinds: list[bool], leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if kinds[i % len(kinds)] else {"k": value}
    return value


leaves = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([10**308, 2**1024, -(2**1024), 2**1024 - 2**970, 179769313486231570 * 10**291, 0]),
    st.text(max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(depth=st.integers(0, 200), kinds=st.lists(st.booleans(), min_size=1, max_size=3), leaf=leaves)
def test_a_body_the_front_takes_is_one_the_guard_admits(depth: int, kinds: list[bool], leaf: Any) -> None:
    """The gateway hands the message, encoded again, to the guard, which reads it as wrap reads
    a client frame (docs/wrap.md, "Client frames"): a frame it refuses there is answered with a
    null id, so the request would wait for ever. The front refuses exactly those (400, -32700)."""
    args = _nest(depth, kinds, leaf)
    msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t", "arguments": args}}
    body = json.dumps(msg).encode()
    frame = msgspec.json.encode(msg) + b"\n"
    guard = admit(frame)
    try:
        read = read_message(body, {})
    except Refusal as refusal:
        assert refusal.status == 400 and refusal.code == -32700
        assert not isinstance(guard, Admitted), "the front refuses what the guard admits"
        return
    assert isinstance(guard, Admitted), f"the front takes what the guard refuses: {guard}"
    assert guard.frame == read.message == msg


def test_the_edges_of_nesting_and_numbers() -> None:
    def body(args: bytes) -> bytes:
        return b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":%s}}}' % args

    read_message(body(b"[" * 125 + b"]" * 125), {})  # 128 levels in all
    for deep in (b"[" * 126 + b"]" * 126, b'{"a":' * 126 + b"1" + b"}" * 126):
        with pytest.raises(Refusal, match="nested deeper than 128") as refused:
            read_message(body(deep), {})
        assert refused.value.code == -32700
    read_message(body(b"1" + b"0" * 308), {})  # 1e308: a double holds it
    read_message(body(b'"' + b"9" * 400 + b'"'), {})  # digits in a string are text
    with pytest.raises(Refusal, match="beyond a double"):
        read_message(body(b"9" * 309), {})
    with pytest.raises(Refusal, match="beyond a double"):
        read_message(body(b"-" + b"9" * 4000), {})


# -- repeated members: the front (msgspec) and the MCP Python SDK (pydantic) keep the same one --

member_names = st.sampled_from(["jsonrpc", "id", "method", "params"])
member_values = {
    "jsonrpc": st.sampled_from(['"2.0"', '"1.0"']),
    "id": st.sampled_from(["1", "2", '"a"', "true", "1.5", "null"]),
    "method": st.sampled_from(['"tools/call"', '"ping"', "5"]),
    "params": st.sampled_from(['{"name":"send"}', '{"name":"delete_all"}', '{"name":"a","name":"delete_all"}', "[]"]),
}
members = member_names.flatmap(lambda name: member_values[name].map(lambda value: (name, value)))


@settings(max_examples=400, deadline=None)
@given(st.lists(members, min_size=1, max_size=7))
def test_repeated_members_read_as_the_sdk_reads_them(pairs: list[tuple[str, str]]) -> None:
    body = ("{" + ",".join(f'"{name}":{value}' for name, value in pairs) + "}").encode()
    try:
        got = read_message(body, {})
    except Refusal:
        return
    try:
        theirs = SDK.validate_json(body)
    except ValidationError:
        pytest.fail(f"the front takes what the SDK refuses: {body!r}")
    assert getattr(theirs, "method", None) == got.method, body
    assert getattr(theirs, "id", None) == got.id, body
    params = getattr(theirs, "params", None)
    assert (params or None) == (got.message.get("params") or None), body


# -- the head --------------------------------------------------------------------------------


@given(
    name=st.sampled_from(["mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"]),
    cases=st.lists(st.booleans(), min_size=2, max_size=2),
    values=st.lists(st.sampled_from(["a", " a ", "\ta", "", "b", "\xe9"]), min_size=2, max_size=2),
)
def test_a_routing_header_twice_is_refused_in_any_spelling(name: str, cases: list[bool], values: list[str]) -> None:
    raw = [
        ((name.upper() if upper else name.title()).encode(), value.encode("latin-1"))
        for upper, value in zip(cases, values, strict=True)
    ]
    with pytest.raises(Refusal) as refused:
        header_map([(b"accept", b"*/*"), *raw])
    assert refused.value.status == 400 and refused.value.code in (-32600, -32020)


def test_a_body_framed_two_ways_is_refused_and_the_connection_closed() -> None:
    for method in ("POST", "GET", "DELETE"):
        headers = {"content-length": "3", "transfer-encoding": "chunked"}
        with pytest.raises(Refusal) as refused:
            check_head(method, "/mcp", headers, origins=(), max_body_bytes=100)
        assert refused.value.status == 400 and refused.value.code == -32600
        assert ("connection", "close") in refused.value.headers
    with pytest.raises(Refusal) as origin:
        check_head("POST", "/mcp", {"origin": "null"}, origins=("http://good.example",), max_body_bytes=100)
    assert origin.value.status == 403


@pytest.mark.parametrize(
    ("header", "json_ok", "sse_ok"),
    [
        ("application/json;Q=0, text/event-stream", False, True),
        ("application/json; q = 0.0000, text/event-stream", False, True),
        ("*/*;q=0", False, False),
        ("*/*;q=0.001", True, True),
        ("APPLICATION/JSON", True, False),
        ("application/json;charset=utf-8;q=0.5", True, False),
        ("application/json;q=zero", True, False),
        ("text/event-stream;Q=0.000", False, False),
        # the most specific range that names a type weighs it (RFC 9110, section 12.5.1)
        ("application/json;q=0, */*", False, True),
        ("*/*, application/json;q=0", False, True),
        ("application/*;q=0, application/json", True, False),
        ("text/*;q=0, */*", True, False),
        ("text/event-stream, text/*;q=0", False, True),
        ("application/json;q=0, application/json", True, False),
        ("image/png, */*;q=0", False, False),
    ],
)
def test_accept_weights(header: str, json_ok: bool, sse_ok: bool) -> None:
    got = accepts(header)
    assert (got.json, got.sse) == (json_ok, sse_ok)
