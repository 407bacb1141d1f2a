"""The sans-IO request checks of the front (assay/gateway/http.py) over random heads and bodies:
they answer a route or a message, or refuse with one of the documented statuses and JSON-RPC
codes (docs/serve.md, "How a request flows"); nothing else ever escapes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from assay.gateway.http import (
    Era,
    Refusal,
    accepts,
    check_head,
    header_map,
    read_message,
)
from assay.gateway.sessiontable import InFlight, Sessions

STATUSES = {400, 403, 404, 405, 406, 413, 415}
CODES = {-32700, -32600, -32602, -32020, -32022}
NAMES = ["origin", "accept", "content-type", "content-length", "mcp-protocol-version", "mcp-method", "mcp-name"]
values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["2026-07-28", "2025-11-25", "tools/call", "echo", "=?base64?ZWNobw==?=", "application/json"]),
)
heads = st.lists(st.tuples(st.sampled_from(NAMES), values), max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"])},
    optional={
        "id": st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()),
        "method": st.one_of(st.sampled_from(["tools/call", "initialize", "server/discover"]), st.integers()),
        "params": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {"name": st.sampled_from(["echo", "other"])},
                optional={
                    "_meta": st.dictionaries(
                        st.sampled_from(
                            ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
                        ),
                        st.sampled_from(["2026-07-28", "2025-11-25", {}]),
                    )
                },
            ),
        ),
        "result": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=60),
    messages.map(lambda m: json.dumps(m).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
)


def _encoded(pairs: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(n.encode(), v.encode("utf-8", "surrogatepass")) for n, v in pairs]


@given(
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT", "HEAD"]),
    path=st.sampled_from(["/mcp", "/", "/mcp/", "/.well-known/oauth-protected-resource/mcp", "/x"]),
    head=heads,
    body=bodies,
)
def test_checks_answer_or_refuse_as_documented(
    method: str, path: str, head: list[tuple[str, str]], body: bytes
) -> None:
    try:
        headers = header_map(_encoded(head))
        check_head(method, path, headers, origins=("http://ok.example",), max_body_bytes=40)
        message = read_message(body, headers)
    except Refusal as refusal:
        assert refusal.status in STATUSES, refusal
        assert refusal.code in CODES, refusal
        decoded = json.loads(refusal.body())
        assert decoded["error"]["code"] == refusal.code and decoded["jsonrpc"] == "2.0"
        return
    assert message.kind in ("request", "notification", "response")
    if message.era is Era.MODERN:
        assert message.version == "2026-07-28"
        assert headers.get("mcp-method") == message.method


@given(st.text(max_size=40))
def test_accept_never_raises(header: str) -> None:
    accepts(header)


def test_accept_reading() -> None:
    assert accepts(None) == accepts("*/*") == accepts("application/json, text/event-stream")
    only_json = accepts("application/json")
    assert only_json.json and not only_json.sse
    assert not accepts("text/event-stream;q=0, application/json").sse


def test_sessions_bound_and_expiring() -> None:
    ids = iter(["a", "b"])
    sessions: Sessions[str] = Sessions(10.0, make_id=lambda: next(ids))
    first = sessions.add("user:x#alice", "conv", now=0.0)
    assert sessions.find(first.id, "user:x#alice", now=5.0).conversation == "conv"
    for who, sid in (("user:x#bob", first.id), ("user:x#alice", "zzz")):
        try:
            sessions.find(sid, who, now=5.0)
        except Refusal as refusal:
            assert refusal.status == 404
        else:
            raise AssertionError("found another user's session")
    first.busy = 1
    assert sessions.expired(now=100.0) == []  # a request in flight keeps it
    first.busy = 0
    assert [s.id for s in sessions.expired(now=100.0)] == ["a"]
    assert len(sessions) == 0


def test_in_flight_cap() -> None:
    cap = InFlight(2)
    cap.acquire("a")
    cap.acquire("a")
    cap.acquire("b")
    try:
        cap.acquire("a")
    except Refusal as refusal:
        assert refusal.status == 429 and ("retry-after", "1") in refusal.headers
    else:
        raise AssertionError("over the cap")
    cap.release("a")
    cap.acquire("a")
