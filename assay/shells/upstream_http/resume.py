"""The GET streams of Streamable HTTP (docs/remote.md, "Transports", "Answers and streams"):
the stream a 2025-era session keeps open for what the server sends on its own, and the
resumption of a request's stream that ended before its answer.

A request's stream whose events carried ids is resumed as the server asks: wait its ``retry``
(:data:`DEFAULT_RETRY_MS` when it gave none, at most :data:`MAX_RETRY_MS`), then GET with
``Last-Event-ID``; the server sends what came after that event, answer included. A resumed
stream that ends again is resumed again; :data:`RESUME_ATTEMPTS` attempts in a row that bring
nothing (no connection, nothing new) end it, and so does a server that refuses the GET (any
status but 200 with an event stream: it cannot resume). The request is then answered with
wrap's error. An id that cannot be sent back as a header is no id: the stream is not resumed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import trio

from assay.shells.upstream_http.messages import Outgoing, header_safe
from assay.shells.upstream_http.sockets import ack_promptly
from assay.shells.upstream_http.streams import StreamEnd, read_events

if TYPE_CHECKING:
    from assay.shells.upstream_http.httpsession import HttpSession

__all__ = ["DEFAULT_RETRY_MS", "GET_RETRIES", "MAX_RETRY_MS", "RESUME_ATTEMPTS", "get_stream", "resume"]

GET_RETRIES = 3  # the session's GET stream is opened again this many times in a row at most
RESUME_ATTEMPTS = 3  # GETs in a row that bring nothing before a request's stream is given up
DEFAULT_RETRY_MS = 1000  # the wait before a resumption when the server named none
MAX_RETRY_MS = 10_000  # the longest wait before a resumption, whatever the server names


def _wait_s(retry_ms: int | None) -> float:
    return min(DEFAULT_RETRY_MS if retry_ms is None else retry_ms, MAX_RETRY_MS) / 1000


async def resume(server: HttpSession, out: Outgoing, key: Any, end: StreamEnd) -> None:
    """Resume the stream of request ``key``, which ended before its answer (see the module
    docstring); the request is answered by the server, or with wrap's error."""
    last_id, retry_ms = end.last_id, end.retry_ms
    attempts = 0
    refused = ""
    while server.is_pending(key) and last_id is not None and header_safe(last_id) and attempts < RESUME_ATTEMPTS:
        await trio.sleep(_wait_s(retry_ms))
        headers = server.headers(None)
        for name, value in out.headers or ():
            if name == "MCP-Protocol-Version":
                headers[name] = value
        headers["Last-Event-ID"] = last_id
        try:
            async with server.client.stream("GET", server.target.url, headers=headers) as resp:
                ack_promptly(resp)
                kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if resp.status_code == 404 and server.session_id is not None:
                    server.fail("the server's session expired (HTTP 404)", {"status": 404})
                    return
                if resp.status_code != 200 or kind != "text/event-stream":
                    refused = f" (the server answered HTTP {resp.status_code})"
                    break
                again = await read_events(server, resp, key, last_id=last_id, retry_ms=retry_ms)
        except server.needs_login as exc:
            server.login_needed(str(exc), key)
            return
        except httpx2.TransportError:
            attempts += 1
            continue
        if again.too_long and server.is_pending(key):
            server.answer_error(key, f"assay: upstream error: the server's answer is longer than {server.cap} bytes")
            return
        attempts = 0 if again.events or again.last_id != last_id else attempts + 1
        last_id, retry_ms = again.last_id, again.retry_ms
    if server.is_pending(key):
        server.warn_once("resume", "[assay] upstream: an event stream ended before its answer and could not be resumed")
        server.answer_error(
            key,
            "assay: upstream error: the server's event stream ended before its answer "
            f"and could not be resumed{refused}",
        )


async def get_stream(server: HttpSession) -> None:
    """The session's own stream (2025 era): what the server sends outside any request. A server
    without one answers 405, and that is fine; a stream that drops is opened again (with
    ``Last-Event-ID`` when its events had ids), :data:`GET_RETRIES` times in a row at most
    (a stream that brought messages starts the count again)."""
    try:
        await _get_stream(server)
    finally:
        if server.get_opened is not None:
            server.get_opened.set()


async def _get_stream(server: HttpSession) -> None:
    failures = 0
    last_id: str | None = None
    retry_ms: int | None = None
    while failures < GET_RETRIES:
        headers = server.headers(None)
        if last_id is not None and header_safe(last_id):
            headers["Last-Event-ID"] = last_id
        try:
            async with server.client.stream("GET", server.target.url, headers=headers) as resp:
                ack_promptly(resp)
                if server.get_opened is not None:
                    server.get_opened.set()
                if resp.status_code == 404 and server.session_id is not None:
                    server.fail("the server's session expired (HTTP 404)", {"status": 404})
                    return
                if resp.status_code != 200:
                    return  # 405: the server has no GET stream
                end = await read_events(server, resp, None, last_id=last_id, retry_ms=retry_ms)
                if end.events:
                    failures = 0
                last_id, retry_ms = end.last_id, end.retry_ms
        except server.needs_login:
            return
        except httpx2.TransportError:
            pass
        failures += 1
        await trio.sleep(_wait_s(retry_ms) if retry_ms is not None else 0.2 * failures)
