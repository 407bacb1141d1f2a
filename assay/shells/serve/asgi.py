"""How the HTTP front writes its answers in ASGI (docs/serve.md, "How a request flows"): a whole
answer with its ``Content-Length`` (:func:`respond`), an event stream of the messages related to
a request and then its response (:class:`EventStream`), the task that watches for the client
going away (:func:`watch_client`), and the lifespan protocol. No gateway, no identity: what
:mod:`assay.shells.serve.app` decides, written out."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from assay.gateway.contract import Emit
from assay.gateway.http import sse_event

__all__ = [
    "JSON",
    "SSE_HEADERS",
    "EventStream",
    "Receive",
    "Scope",
    "Send",
    "drop",
    "encoded",
    "lifespan",
    "respond",
    "watch_client",
]

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON = (b"content-type", b"application/json")
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


async def drop(msg: dict[str, Any]) -> None:
    """A related message for a client that accepts only JSON: not deliverable."""


def watch_client(tasks: trio.Nursery, receive: Receive, gone: trio.CancelScope) -> trio.CancelScope:
    """Cancels ``gone`` when the client goes away (``http.disconnect``), from a task of
    ``tasks``; the scope returned ends the watch."""
    scope = trio.CancelScope()

    async def watch() -> None:
        with scope:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            except Exception:  # the server's receive failing: the client cannot be reached either
                pass
            gone.cancel()

    tasks.start_soon(watch)
    return scope


class EventStream:
    """The event-stream answer of one request: the related messages, then the response. Started
    by the first related message, written by a task of the front's nursery; once the response is
    decided (:attr:`closed`), a related message is dropped."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.closed = False
        self.scope = trio.CancelScope()
        self._error: Exception | None = None

    def related(self, tasks: trio.Nursery) -> Emit:
        async def emit(msg: dict[str, Any]) -> None:
            if self.closed:
                return
            if not self.started:  # the channel and the writer only now: most answers need neither
                self.started = True
                self._done = trio.Event()
                self._out, self._in = trio.open_memory_channel[tuple[bool, dict[str, Any]]](math.inf)
                tasks.start_soon(self._write)
            self._out.send_nowait((False, msg))

        return emit

    async def finish(self, reply: dict[str, Any]) -> None:
        """The response, last on the stream (which starts now if nothing related came)."""
        self.closed = True
        if not self.started:
            await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await self._send({"type": "http.response.body", "body": sse_event(reply), "more_body": False})
            return
        self._out.send_nowait((True, reply))
        await self._done.wait()
        if self._error is not None:
            raise self._error

    async def _write(self) -> None:
        try:
            with self.scope:
                await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                final = False
                while not final:
                    final, msg = await self._in.receive()
                    await self._send({"type": "http.response.body", "body": sse_event(msg), "more_body": True})
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception as exc:  # raised in the request's task (finish), as if written there
            self._error = exc
        finally:
            self._done.set()


def encoded(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], length: int | None = None
) -> None:
    """A whole answer. Its ``Content-Length`` (``length``, for a HEAD: the GET's) spares the
    chunked framing and the write that ends it."""
    if status != 204:
        headers = [*headers, (b"content-length", b"%d" % (len(body) if length is None else length))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
