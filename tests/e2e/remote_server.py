"""A real MCP server over HTTP on loopback, for the end-to-end tests of `assay mcp wrap --url`
(docs/remote.md), built on the `mcp` Python SDK's `MCPServer` and served by
uvicorn on 127.0.0.1.

    python remote_server.py [--mode streamable|stateless|sse] [--call-log FILE]
                            [--fault NAME]... [--resumable] [--nodelay] [--port N]

It binds (port 0: a free port, unless `--port`), starts listening, then prints one line
`READY <url>` on stdout, so a test waits on that line (never on a sleep). Every tool it runs is
appended as one JSON line to the call log (`--call-log`, or $E2E_CALL_LOG) and printed on
stdout as `RAN <tool>`, so a test can wait on "the call reached the server" as an event.

Modes: `streamable` (the Streamable HTTP transport with sessions, answers as SSE streams, at
`/mcp`), `stateless` (Streamable HTTP without sessions, JSON answers: it also serves the
2026-07-28 era's single-exchange requests), `sse` (the legacy HTTP+SSE transport: GET `/sse`,
POST `/messages/`).

Faults (`--fault`, repeatable), each triggered by a `tools/call` of the tool of that name, which
the server never runs:
- `500`: a call of `boom` is answered `500 Internal Server Error`; later requests are served.
- `stall`: a call of `stall` is answered `200 text/event-stream`, one priming event, then
  nothing, ever (the stream stays open).
- `forget`: a call of `forget` makes the server forget the session: that request and every later
  one carrying its `Mcp-Session-Id` are answered 404.
- `badsession`, `badversion`: the `initialize` answer carries an `Mcp-Session-Id` that is not
  visible ASCII (`sess ion-\u00e9`, sent as UTF-8), or a `protocolVersion` with a line break.
- `fastbig`: a call of `big` is answered by this front at once (the tool is not run, so the
  answers come as fast as the connection takes them): `200 text/event-stream`, one event with
  the answer, a text of `size` bytes; `SENT big` is printed once it is handed to the connection.
- `dropid`: a call of `dropid` is answered `200 text/event-stream` with one event that has an
  id and no answer, then the stream ends; the server keeps no events (a GET with
  `Last-Event-ID` is answered 405: it cannot resume). With `dropbadid`, the same with an id that
  is not ASCII (`\u00e91`, as UTF-8), which cannot be sent back in a header.

`--resumable` gives the Streamable HTTP app an in-memory event store and a `retry` of 50 ms, so
a stream that drops can be resumed with a GET carrying `Last-Event-ID` (the tool `drop` closes
its own stream after a progress notification, then answers).

$E2E_EXPECT_AUTH, when set, is the `Authorization` header value every request must carry
(else 401); $E2E_EXPECT_HEADER (`Name: value`), one more header every request must carry, and
$E2E_REFUSE_HEADER (`Name`), a header no request may carry. The server never prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Annotated, Any

import anyio
import uvicorn
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import mcp.types as types
from mcp import MCPError
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

server = MCPServer("assay-e2e-remote", version="1.0.0", log_level="WARNING")
CALL_LOG = os.environ.get("E2E_CALL_LOG", "")
RELEASE = anyio.Event()


def _ran(tool: str, arguments: dict[str, Any]) -> None:
    if CALL_LOG:
        with open(CALL_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
    print(f"RAN {tool}", flush=True)


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    _ran("echo", {"message": message})
    return f"echo: {message}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _ran("add", {"a": a, "b": b})
    return a + b


@server.tool()
async def slow(ctx: Context, steps: int = 2, hold: bool = False) -> str:
    """Report `steps` progress notifications; with `hold`, then wait until `release` is called."""
    _ran("slow", {"steps": steps, "hold": hold})
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    if hold:
        await RELEASE.wait()
    return f"slow done after {steps} steps"


@server.tool()
def release() -> str:
    """Let every held `slow` call finish."""
    _ran("release", {})
    RELEASE.set()
    return "released"


class Name(BaseModel):
    name: str


def _ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def ask(answer: Annotated[ElicitationResult[Name], Resolve(_ask_name)]) -> str:
    """Ask the client for a name (elicitation/create mid-call in the 2025 era, an input_required
    result in the 2026-07-28 era) and greet it."""
    _ran("ask", {})
    if answer.action == "accept":
        return f"hello, {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool()
async def ask_client(ctx: Context, kind: str, text: str = "hi") -> str:
    """Ask the client one thing in the middle of the call (`ping`, `elicit`, `sample`, `roots`),
    then answer with what it said (`sample`: a sampling request whose message is ``text``; an
    error answer to it is said too)."""
    _ran("ask_client", {"kind": kind})
    session = ctx.session
    if kind == "ping":
        await session.send_ping()
        return "pinged"
    if kind == "roots":
        return f"{len((await session.list_roots()).roots)} roots"
    if kind == "sample":
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
        try:
            result = await session.create_message([message], max_tokens=5, related_request_id=ctx.request_id)
        except MCPError as exc:
            return f"sampling refused: {exc.error.code} {json.dumps(exc.error.data, sort_keys=True)}"
        return f"sampled {getattr(result.content, 'text', '')}"
    answer = await ctx.elicit("What is your name?", Name)
    return f"hello, {answer.data.name}" if answer.action == "accept" else f"no name ({answer.action})"


@server.tool()
def big(size: int) -> types.CallToolResult:
    """An answer of about `size` bytes: one text of `size` bytes, no structured copy."""
    _ran("big", {"size": size})
    return types.CallToolResult(content=[types.TextContent(type="text", text="x" * size)])


@server.tool()
async def drop(ctx: Context) -> str:
    """Report progress, close this call's event stream (with --resumable), then answer."""
    _ran("drop", {})
    await ctx.report_progress(1, 2, "before the drop")
    await ctx.close_sse_stream()
    return "answered after the drop"


class MemoryEvents(EventStore):
    """Every event kept, in order (the test server lives for one test)."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> EventId:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = [i for i, (event_id, _, _) in enumerate(self.events) if event_id == last_event_id]
        if not found:
            return None
        stream = self.events[found[0]][1]
        print(f"RESUMED after {last_event_id}", flush=True)
        for event_id, stream_id, message in self.events[found[0] + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


@server.tool()
def delete_all() -> str:
    """Delete everything (the tests' policy denies it: it must never run)."""
    _ran("delete_all", {})
    return "deleted everything"


# -- faults ----------------------------------------------------------------------------------

FAULT_TOOL = {
    "500": "boom",
    "stall": "stall",
    "forget": "forget",
    "badsession": "",
    "badversion": "",
    "dropid": "dropid",
    "dropbadid": "dropid",
    "fastbig": "big",
}


class Faults:
    """ASGI middleware in front of the SDK's app: the auth check and the `--fault` answers."""

    def __init__(self, app: ASGIApp, faults: set[str], expect_auth: str | None) -> None:
        self.app = app
        self.faults = faults
        self.expect_auth = expect_auth
        self.forgotten: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.expect_auth is not None and headers.get("authorization") != self.expect_auth:
            print("AUTH missing or wrong", flush=True)
            await _plain(send, 401, b"unauthorized", [(b"www-authenticate", b'Bearer realm="e2e"')])
            return
        name, _, value = os.environ.get("E2E_EXPECT_HEADER", "").partition(":")
        if name and headers.get(name.strip().lower()) != value.strip():
            print(f"HEADER {name.strip()} missing or wrong", flush=True)
            await _plain(send, 403, b"forbidden")
            return
        refused = os.environ.get("E2E_REFUSE_HEADER", "").strip().lower()
        if refused and refused in headers:
            print(f"HEADER {refused} refused", flush=True)
            await _plain(send, 400, b"bad request")
            return
        session = headers.get("mcp-session-id")
        if session is not None and session in self.forgotten:
            await _plain(send, 404, b"session not found")
            return
        if scope["method"] == "GET" and "last-event-id" in headers and self.faults & {"dropid", "dropbadid"}:
            print("FAULT resume refused", flush=True)
            await _plain(send, 405, b"no resumption")
            return
        if scope["method"] != "POST" or not self.faults:
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        tool = _called_tool(body)
        if tool == "boom" and "500" in self.faults:
            print("FAULT 500", flush=True)
            await _plain(send, 500, b"internal server error")
            return
        if tool == "forget" and "forget" in self.faults:
            print("FAULT forget", flush=True)
            if session is not None:
                self.forgotten.add(session)
            await _plain(send, 404, b"session not found")
            return
        if tool == "big" and "fastbig" in self.faults:
            frame = json.loads(body)
            print("FAULT fastbig", flush=True)
            answer = {
                "jsonrpc": "2.0",
                "id": frame["id"],
                "result": {"content": [{"type": "text", "text": "x" * int(frame["params"]["arguments"]["size"])}]},
            }
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n",
                }
            )
            print("SENT big", flush=True)
            return
        if tool == "dropid" and self.faults & {"dropid", "dropbadid"}:
            print("FAULT dropid", flush=True)
            event_id = "\u00e91".encode() if "dropbadid" in self.faults else b"e1"
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b"id: " + event_id + b"\nretry: 10\ndata: \n\n",
                    "more_body": False,
                }
            )
            return
        if _is_initialize(body) and self.faults & {"badsession", "badversion"}:
            await self.app(scope, _replay(body), _spoiled(send, self.faults))
            return
        if tool == "stall" and "stall" in self.faults:
            print("FAULT stall", flush=True)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
                }
            )
            await send({"type": "http.response.body", "body": b"id: 0\ndata: \n\n", "more_body": True})
            await anyio.sleep_forever()
        await self.app(scope, _replay(body), send)


def _called_tool(body: bytes) -> str | None:
    try:
        frame = json.loads(body)
    except ValueError:
        return None
    if isinstance(frame, dict) and frame.get("method") == "tools/call":
        params = frame.get("params")
        if isinstance(params, dict) and isinstance(params.get("name"), str):
            return params["name"]
    return None


def _is_initialize(body: bytes) -> bool:
    try:
        frame = json.loads(body)
    except ValueError:
        return False
    return isinstance(frame, dict) and frame.get("method") == "initialize"


def _spoiled(send: Send, faults: set[str]) -> Send:
    """`send` with the faults of an `initialize` answer: a session id that is not visible ASCII,
    a protocol version with a line break."""

    async def spoiled(message: Message) -> None:
        if message["type"] == "http.response.start" and "badsession" in faults:
            print("FAULT badsession", flush=True)
            headers = [(k, v) for k, v in message["headers"] if k.lower() != b"mcp-session-id"]
            message = {**message, "headers": [*headers, (b"mcp-session-id", "sess ion-\u00e9".encode())]}
        if (
            message["type"] == "http.response.body"
            and "badversion" in faults
            and b"protocolVersion" in message.get("body", b"")
        ):
            print("FAULT badversion", flush=True)
            body = message["body"].replace(b'"protocolVersion":"', b'"protocolVersion":"2025-11-25\\r\\nX-Evil: 1')
            message = {**message, "body": body}
        await send(message)

    return spoiled


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


async def _plain(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- running ---------------------------------------------------------------------------------


def _app(mode: str, resumable: bool) -> ASGIApp:
    if mode == "sse":
        return server.sse_app()
    store = MemoryEvents() if resumable else None
    return server.streamable_http_app(
        stateless_http=mode == "stateless",
        json_response=mode == "stateless",
        event_store=store,
        retry_interval=50 if resumable else None,
    )


def main() -> None:
    global CALL_LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["streamable", "stateless", "sse"], default="streamable")
    parser.add_argument("--call-log", default=CALL_LOG)
    parser.add_argument("--fault", action="append", choices=sorted(FAULT_TOOL), default=[])
    parser.add_argument("--resumable", action="store_true")
    parser.add_argument("--nodelay", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    CALL_LOG = args.call_log

    # proto 0, not IPPROTO_TCP, on purpose: asyncio then leaves Nagle's algorithm on for the
    # connections (as behind a front end that does), and each answer's body waits for the
    # client's acknowledgement of its head (tests/e2e/test_e2e_remote_stall.py relies on it);
    # with --nodelay, IPPROTO_TCP: asyncio sets TCP_NODELAY on each connection
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP if args.nodelay else 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    app = Faults(_app(args.mode, args.resumable), set(args.fault), os.environ.get("E2E_EXPECT_AUTH"))
    path = "/sse" if args.mode == "sse" else "/mcp"
    print(f"READY http://127.0.0.1:{port}{path}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
