"""A hostile client against the front on a real socket (docs/serve.md, "How a request flows"):
bodies framed two ways, framing the HTTP server refuses, requests pipelined and smuggled on one
connection (each judged on its own), the same over h2c, and slow bodies against a user's cap.
Every answer is a refusal with its documented status, or the one a request of its own gets; nothing
refused reaches the gateway."""

from __future__ import annotations

import json
from typing import Any

import h2.config
import h2.connection
import h2.events
import trio

from tests.serve.frontfakes import FakeGateway, running

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()
CALL = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}'
HEAD = b"host: x\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"


def post(body: bytes, *extra: bytes, user: str | None = "alice", length: int | None = None) -> bytes:
    lines = [b"POST /mcp HTTP/1.1\r\n", HEAD, *(line + b"\r\n" for line in extra)]
    if user is not None:
        lines.append(b"authorization: Bearer %s\r\n" % user.encode())
    if length is not None:
        lines.append(b"content-length: %d\r\n" % length)
    return b"".join(lines) + b"\r\n" + body


def sized(body: bytes, *extra: bytes, user: str | None = "alice") -> bytes:
    return post(body, *extra, user=user, length=len(body))


class Wire:
    """One HTTP/1.1 connection: writes raw bytes, reads answers (status, headers, body) framed
    by their Content-Length, and whether the server closed the connection."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def _more(self) -> bool:
        data = await self.stream.receive_some()
        self.buffer += data
        return bool(data)

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert await self._more(), f"closed before an answer: {self.buffer!r}"
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *fields = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert await self._more(), "closed inside a body"
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status_line.split()[1]), headers, body

    async def closed(self) -> bool:
        """The server ends the connection (waits for it; nothing is pending to be answered)."""
        return self.buffer == b"" and not await self._more()


async def connect(bound: Any) -> Wire:
    return Wire(await trio.open_tcp_stream(bound.host, bound.port))


def code(body: bytes) -> int:
    error: dict[str, Any] = json.loads(body)["error"]
    return int(error["code"])


async def test_a_body_framed_by_length_and_chunks_is_refused_and_the_connection_closed() -> None:
    """RFC 9112, section 6.1: a request with both Content-Length and Transfer-Encoding is
    smuggling-shaped (a proxy in front may frame it by the length); refused, connection closed."""
    gateway = FakeGateway()
    with trio.fail_after(20):
        async with running(gateway) as (bound, _):
            for method in (b"POST", b"DELETE"):
                wire = await connect(bound)
                chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(INIT), INIT)
                request = post(chunked, b"transfer-encoding: chunked", length=3).replace(b"POST", method, 1)
                await wire.stream.send_all(request)
                status, headers, body = await wire.answer()
                assert (status, code(body)) == (400, -32600), body
                assert headers.get("connection") == "close"
                assert await wire.closed()
            assert gateway.opened == [] and gateway.requests == []


async def test_framing_the_http_server_refuses_closes_the_connection() -> None:
    gateway = FakeGateway()
    cases = [
        (sized(INIT, b"content-length: 5"), 400),  # two lengths that differ
        (post(b"5\r\nhello\r\n0\r\n\r\n", b"transfer-encoding: chunked, identity"), 501),
        (post(INIT, b"transfer-encoding: identity"), 501),
        (post(INIT, b"content-length: +%d" % len(INIT)), 400),
        (post(INIT, b"content-length: -1"), 400),
        (sized(INIT, b"authorization : Bearer bob"), 400),  # whitespace before the colon
        (sized(INIT, b"x-a: a\x00b"), 400),
    ]
    with trio.fail_after(20):
        async with running(gateway) as (bound, _):
            for request, status in cases:
                wire = await connect(bound)
                await wire.stream.send_all(request)
                got, headers, _ = await wire.answer()
                assert (got, headers.get("connection")) == (status, "close"), request
                assert await wire.closed()
            # the same length given twice is one length
            wire = await connect(bound)
            await wire.stream.send_all(sized(INIT, b"content-length: %d" % len(INIT)))
            assert (await wire.answer())[0] == 200
    assert len(gateway.opened) == 1 and gateway.requests == []


async def test_pipelined_and_smuggled_requests_are_judged_each_on_its_own() -> None:
    gateway = FakeGateway()
    with trio.fail_after(20):
        async with running(gateway) as (bound, _):
            wire = await connect(bound)
            await wire.stream.send_all(sized(INIT))
            status, headers, _ = await wire.answer()
            sid = b"mcp-session-id: " + headers["mcp-session-id"].encode()
            # one write: another user's request on alice's session, alice's, one without a
            # token, one from a foreign origin, and one smuggled inside a body's excess bytes
            smuggled = sized(CALL, sid, user=None)
            await wire.stream.send_all(
                sized(CALL, sid, user="bob")
                + sized(CALL, sid)
                + sized(CALL, sid, user=None)
                + sized(CALL, sid, b"origin: http://evil.example")
                + post(CALL + smuggled, sid, length=len(CALL))
            )
            answers = [await wire.answer() for _ in range(6)]
            assert [a[0] for a in answers] == [404, 200, 401, 403, 200, 401], answers
            assert [code(a[2]) for a in answers if a[0] != 200] == [-32001, -32001, -32600, -32001]
            assert [key for key, _ in gateway.requests] == ["user:test#alice", "user:test#alice"]


async def _h2(bound: Any, headers: list[tuple[str, str]], body: bytes) -> tuple[str, int, bytes]:
    """One request over h2c (prior knowledge), its headers unchecked by the client: ("answer",
    status, body) or ("refused", error code, b"") when the server resets the stream or ends the
    connection."""
    stream = await trio.open_tcp_stream(bound.host, bound.port)
    config = h2.config.H2Configuration(
        client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False
    )
    conn = h2.connection.H2Connection(config)
    conn.initiate_connection()
    base = [(":method", "POST"), (":path", "/mcp"), (":scheme", "http"), (":authority", "x")]
    conn.send_headers(1, base + headers)
    conn.send_data(1, body, end_stream=True)
    await stream.send_all(conn.data_to_send())
    status, data = 0, b""
    try:
        while True:
            raw = await stream.receive_some()
            assert raw, "closed without an answer or a reset"
            for event in conn.receive_data(raw):
                if isinstance(event, h2.events.ResponseReceived):
                    status = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.StreamEnded):
                    return "answer", status, data
                elif isinstance(event, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                    return "refused", int(event.error_code or 0), b""
            await stream.send_all(conn.data_to_send())
    finally:
        await stream.aclose()


async def test_h2c_refuses_framing_and_repeated_routing_headers() -> None:
    gateway = FakeGateway()
    common = [("accept", "application/json"), ("content-type", "application/json"), ("authorization", "Bearer alice")]
    with trio.fail_after(20):
        async with running(gateway) as (bound, _):
            for bad in (
                [("content-length", str(len(INIT))), ("transfer-encoding", "chunked")],
                [("content-length", "5")],  # shorter than the body
                [("content-length", str(len(INIT))), ("content-length", "5")],
                [("Mcp-Session-Id", "a")],  # upper case: not HTTP/2
                [("connection", "keep-alive")],
            ):
                kind, error, _ = await _h2(bound, common + bad, INIT)
                assert (kind, error) == ("refused", 1), bad  # PROTOCOL_ERROR
            kind, status, body = await _h2(bound, [*common, ("mcp-session-id", "a"), ("mcp-session-id", "a")], CALL)
            assert (kind, status, code(body)) == ("answer", 400, -32600)
            kind, status, _ = await _h2(bound, common, INIT)
            assert (kind, status) == ("answer", 200)
    assert len(gateway.opened) == 1 and gateway.requests == []


async def test_slow_bodies_hold_only_their_users_slots() -> None:
    """A body sent slowly counts against its user's cap while it is read (bounded by
    limits.read_timeout_s); another user is served, and a request refused before its body is
    read ends its connection rather than wait for the body."""
    gateway = FakeGateway()
    with trio.fail_after(30):
        async with running(gateway, per_user_concurrency=2, read_timeout_s=20) as (bound, _):
            slow = []
            for _ in range(2):
                wire = await connect(bound)
                # the front reads the body once the request holds a slot: the 100 says so
                await wire.stream.send_all(post(b"{", b"expect: 100-continue", length=len(INIT)))
                assert (await wire.answer())[0] == 100
                slow.append(wire)
            over = await connect(bound)
            await over.stream.send_all(sized(INIT))
            status, headers, body = await over.answer()
            assert (status, headers.get("retry-after"), code(body)) == (429, "1", -32600)
            bob = await connect(bound)
            await bob.stream.send_all(sized(INIT, user="bob"))
            assert (await bob.answer())[0] == 200
            for user in (None, "bad"):
                stranger = await connect(bound)
                await stranger.stream.send_all(post(b"{", user=user, length=10_000))
                assert (await stranger.answer())[0] == 401
                assert await stranger.closed()  # its body is not waited for
            await slow[0].stream.send_all(INIT[1:])  # a slow body that arrives in time is served
            assert (await slow[0].answer())[0] == 200
