"""The front's reading of a POST body against the MCP Python SDK's (docs/serve.md, "How a
request flows"): for generated JSON-RPC-shaped bodies, every message the front accepts, the
SDK's own JSON-RPC model reads as the same kind, with the same id and method. So the gateway
never acts on a message a real MCP peer would read as something else."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as sdk
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from assay.gateway.http import Refusal, read_message

SDK = TypeAdapter(sdk.JSONRPCMessage)
KINDS = {
    "request": sdk.JSONRPCRequest,
    "notification": sdk.JSONRPCNotification,
}

ids = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=1),
)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=6,
)
members = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2.0]),
        "id": ids,
        "method": st.one_of(st.sampled_from(["tools/call", "ping", "notifications/initialized"]), st.integers()),
        "params": st.one_of(st.dictionaries(st.sampled_from(["name", "x"]), values, max_size=2), values),
        "result": values,
        "error": st.one_of(
            st.fixed_dictionaries({"code": st.integers(-32700, 0), "message": st.text(max_size=5)}), values
        ),
    },
)


def sdk_read(body: bytes) -> Any:
    try:
        return SDK.validate_json(body)
    except ValidationError:
        return None


@settings(max_examples=600, deadline=None)
@given(members)
def test_what_the_front_accepts_the_sdk_reads_the_same_way(doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    try:
        got = read_message(body, {})
    except Refusal:
        return
    theirs = sdk_read(body)
    assert theirs is not None, f"the front accepts what the SDK refuses: {doc}"
    if got.kind == "response":
        assert isinstance(theirs, (sdk.JSONRPCResponse, sdk.JSONRPCError)), (doc, theirs)
        assert theirs.id == got.id, (doc, theirs)
        return
    assert isinstance(theirs, KINDS[got.kind]), (doc, theirs)
    assert theirs.method == got.method, (doc, theirs)
    if got.kind == "request":
        assert isinstance(theirs, sdk.JSONRPCRequest) and theirs.id == got.id, (doc, theirs)
