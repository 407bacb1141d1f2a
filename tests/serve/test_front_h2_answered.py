"""HTTP/2 data for a stream the front already answered (docs/serve.md, "How a request flows"):
a request refused before its body is read (401 without a token, 429 over the user's cap) whose
client goes on sending the body. hypercorn raised ``KeyError`` on that data and its trio worker
ended the whole server; now the data is dropped, its flow-control window given back, and the
connection and the server go on."""

from __future__ import annotations

import json
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx2
import trio

from tests.serve.frontfakes import FakeGateway, running

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
BASE = [(":method", "POST"), (":path", "/mcp"), (":scheme", "http"), (":authority", "x")]
JSON = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
MODERN = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call")]


def call(msg_id: int, name: str, text: str = "x") -> dict[str, Any]:
    params = {"name": name, "arguments": {"text": text}, "_meta": META}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


class H2:
    """One h2c connection (prior knowledge) driven by hand: the client's flow control is the
    h2 library's, the frames are written as the test says."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.status: dict[int, int] = {}
        self.body: dict[int, bytes] = {}
        self.ended: set[int] = set()

    async def flush(self) -> None:
        await self.stream.send_all(self.conn.data_to_send())

    async def pump(self) -> None:
        """Read once; record what the server sent."""
        raw = await self.stream.receive_some()
        assert raw, "the server ended the connection"
        for event in self.conn.receive_data(raw):
            if isinstance(event, h2.events.ResponseReceived):
                self.status[event.stream_id] = int(dict(event.headers)[b":status"])
            elif isinstance(event, h2.events.DataReceived):
                self.body[event.stream_id] = self.body.get(event.stream_id, b"") + event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise AssertionError(f"the server ended the connection: {event}")
        await self.flush()

    async def until_ended(self, stream_id: int) -> None:
        while stream_id not in self.ended:
            await self.pump()

    async def send_body(self, stream_id: int, data: bytes, end: bool) -> None:
        """``data`` on ``stream_id`` as the windows allow, waiting for the server's window
        updates when they run out."""
        while data:
            window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if window == 0:
                await self.pump()
                continue
            self.conn.send_data(stream_id, data[:window])
            data = data[window:]
            await self.flush()
        if end:
            self.conn.end_stream(stream_id)
            await self.flush()


async def test_data_after_a_401_is_dropped_and_the_connection_goes_on() -> None:
    async with running(FakeGateway()) as (bound, _stop):
        with trio.fail_after(20):
            h = H2(await trio.open_tcp_stream(bound.host, bound.port))
            h.conn.initiate_connection()
            h.conn.send_headers(1, BASE + JSON)  # no token, and the body still to come
            await h.flush()
            await h.until_ended(1)
            assert h.status[1] == 401
            # 200 KB more on the answered stream: past the connection's 64 KiB window, so it
            # only gets through if the server acknowledges the data it drops
            await h.send_body(1, b" " * 200_000, end=True)
            body = json.dumps(call(3, "echo", "after")).encode()
            h.conn.send_headers(3, BASE + JSON + MODERN + [("mcp-name", "echo"), ("authorization", "Bearer erin")])
            await h.send_body(3, body, end=True)
            await h.until_ended(3)
            assert h.status[3] == 200
            assert json.loads(h.body[3])["result"]["content"][0]["text"] == "erin:after"


async def test_requests_over_the_users_cap_on_one_http2_connection_get_429_and_the_rest_go_on() -> None:
    """32 calls held (the user's cap), 10 more on the same connection answered 429 before their
    bodies are read, the bodies sent anyway; then the 32 are let go and each is answered with
    its own id."""
    gateway = FakeGateway()
    headers = {"authorization": "Bearer dave", "accept": "application/json, text/event-stream"}
    answers: dict[int, tuple[int, Any]] = {}
    async with running(gateway) as (bound, _stop):
        async with httpx2.AsyncClient(http1=False, http2=True, timeout=30) as http:

            async def post(i: int, name: str) -> None:
                extra = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}
                response = await http.post(bound.url, json=call(i, name, f"t{i}" * 500), headers=headers | extra)
                assert response.http_version == "HTTP/2"
                answers[i] = (response.status_code, response.json())

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for i in range(32):
                        nursery.start_soon(post, i, "block")
                    await gateway.until(lambda: gateway.blocked == 32)
                    async with trio.open_nursery() as over:
                        for i in range(32, 42):
                            over.start_soon(post, i, "echo")
                    gateway.release.set()
    assert {i: status for i, (status, _) in answers.items()} == {i: 200 if i < 32 else 429 for i in range(42)}
    assert all(answer["id"] == i for i, (_, answer) in answers.items() if i < 32)
