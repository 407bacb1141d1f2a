"""The sans-IO listing conversation (docs/tools.md, "How it talks to a server")."""

from __future__ import annotations

import json

import pytest

from assay.mcpclient.protocol import PROTOCOL_VERSION, ListingClient, ListingError
from assay.mcpclient.tooldefs import describe, text_lines


def line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def init_result(version="2025-06-18", caps=None):
    return line(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}} if caps is None else caps,
                "serverInfo": {"name": "s", "version": "1"},
            },
        }
    )


def test_initialize_then_every_page():
    c = ListingClient()
    first = json.loads(c.start())
    assert first["method"] == "initialize" and first["params"]["protocolVersion"] == PROTOCOL_VERSION
    # noise a server may write first: a log line on stdout, a notification, a request of its own
    assert c.receive(b"starting up...\n") == []
    assert c.receive(line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})) == []
    assert json.loads(c.receive(line({"jsonrpc": "2.0", "id": "p", "method": "ping"}))[0]) == {
        "jsonrpc": "2.0",
        "id": "p",
        "result": {},
    }
    assert (
        json.loads(c.receive(line({"jsonrpc": "2.0", "id": 9, "method": "roots/list"}))[0])["error"]["code"] == -32601
    )
    sent = [json.loads(x) for x in c.receive(init_result())]
    assert [m["method"] for m in sent] == ["notifications/initialized", "tools/list"]
    assert c.listing.protocol_version == "2025-06-18"  # the server's version is taken as it is
    out = c.receive(
        line({"jsonrpc": "2.0", "id": sent[1]["id"], "result": {"tools": [{"name": "a"}], "nextCursor": "p2"}})
    )
    nxt = json.loads(out[0])
    assert nxt["params"] == {"cursor": "p2"}
    assert c.receive(line({"jsonrpc": "2.0", "id": nxt["id"], "result": {"tools": [{"name": "b"}]}})) == []
    assert c.done and [t["name"] for t in c.listing.tools] == ["a", "b"] and c.listing.pages == 2


def test_a_server_without_tools_is_done_after_initialize():
    c = ListingClient()
    c.start()
    assert [json.loads(x)["method"] for x in c.receive(init_result(caps={}))] == ["notifications/initialized"]
    assert c.done and c.listing.tools == []


@pytest.mark.parametrize(
    "answer, message",
    [
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad\nversion"}},
            "the server answered initialize with error -32602: bad version",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}},
            "the server's initialize result has no protocolVersion",
        ),
        ({"jsonrpc": "2.0", "id": 1, "result": 5}, "the server's answer to initialize has no result object"),
    ],
)
def test_failures_are_one_line(answer, message):
    c = ListingClient()
    c.start()
    with pytest.raises(ListingError) as info:
        c.receive(line(answer))
    assert str(info.value) == message


def test_pages_and_tools_are_bounded():
    c = ListingClient(max_pages=3)
    c.start()
    c.receive(init_result())
    with pytest.raises(ListingError, match="goes on past 3 pages"):
        for i in range(2, 10):
            c.receive(line({"jsonrpc": "2.0", "id": i, "result": {"tools": [], "nextCursor": "again"}}))
    c = ListingClient(max_tools=2)
    c.start()
    c.receive(init_result())
    with pytest.raises(ListingError, match="more than 2 tools"):
        c.receive(line({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "a"}] * 3}}))
    c = ListingClient()
    c.start()
    c.receive(init_result())
    with pytest.raises(ListingError, match="without a string name"):
        c.receive(line({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": 5}]}}))


def test_describe_reads_odd_shapes_and_escapes_text():
    info = describe(
        {
            "name": "x\x1b[2J",
            "annotations": {"readOnlyHint": "yes", "destructiveHint": True, "title": "T"},
            "inputSchema": {
                "type": "object",
                "required": ["a"],
                "properties": {
                    "a": {"type": "string", "enum": ["r", "w"]},
                    "b": {"type": "array", "items": {"type": "integer"}},
                    "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "d": 5,
                },
            },
        }
    )
    assert info.annotations == {"read_only": None, "destructive": True, "idempotent": None, "open_world": None}
    assert info.title == "T"
    assert [(a.name, a.type, a.required) for a in info.arguments] == [
        ("a", 'string ("r"|"w")', True),
        ("b", "array of integer", False),
        ("c", "string|null", False),
        ("d", "any", False),
    ]
    lines = text_lines(info, None)
    assert lines[0] == "x\\x1b[2J - T [destructive]"
    assert describe({"name": "n", "inputSchema": "nope"}).arguments == ()


def test_an_over_long_line_ends_the_listing_and_the_server():
    """The shell's framing cap (docs/tools.md, "How it talks to a server"): the line is never
    held whole, the error names its size, and the server is ended."""
    import sys

    import trio

    from assay.mcpclient.run import list_tools

    script = (
        "import sys; sys.stdin.readline(); sys.stdout.write('x' * 5000 + '\\n'); sys.stdout.flush(); sys.stdin.read()"
    )
    with pytest.raises(ListingError, match="a line of 5000 bytes from the server is over the frame limit"):
        trio.run(lambda: list_tools([sys.executable, "-c", script], timeout=60, max_line_bytes=100))
