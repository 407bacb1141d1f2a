"""How the front's answers reach the socket (docs/serve.md, "How a request flows"): on HTTP/1.1 a
response's head goes out with its body, in one write."""

from __future__ import annotations

import socket
from typing import Any

import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve

from tests.serve.frontfakes import FakeGateway, running


def _post(body: bytes) -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json, text/event-stream\r\n"
        b"content-type: application/json\r\nauthorization: Bearer alice\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )


async def _hypercorn(nursery: trio.Nursery, app: Any) -> int:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    binds: list[str] = await nursery.start(lambda task_status: serve(app, config, task_status=task_status, mode="asgi"))
    return int(binds[0].rsplit(":", 1)[1])


async def test_a_head_is_written_with_its_body() -> None:
    """An app that starts its response and sends the body only when told: nothing of the
    response is on the socket before the body, and then head and body come in one read."""
    started, go = trio.Event(), trio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        started.set()
        await go.wait()
        await send({"type": "http.response.body", "body": b"{}", "more_body": False})

    # serve's front installs the held heads (for every hypercorn of the process)
    async with running(FakeGateway()), trio.open_nursery() as nursery:
        port = await _hypercorn(nursery, app)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setblocking(False)
            sock.send(_post(b"{}"))
            await started.wait()
            await trio.testing.wait_all_tasks_blocked()  # whatever the start wrote is on the socket now
            try:
                early = sock.recv(65536)
            except BlockingIOError:
                early = b""
            assert early == b"", early  # the head waits for the body
            go.set()
            await trio.lowlevel.wait_readable(sock)
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"\r\n\r\n{}"), first
        nursery.cancel_scope.cancel()
