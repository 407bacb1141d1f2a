"""Reading what a remote server sends (docs/remote.md, "Answers and streams"): a JSON body
whole, or an event stream's messages one by one, each relayed as a line as soon as it is read.

Both read under the cap (a body or an event longer than ``--max-frame-bytes`` is dropped
unread past it) and under the budget of what wrap holds for the client
(:mod:`assay.shells.upstream_http.budget`): before each read from the connection, a stream waits while the
budget is over.

An event stream is read until it ends, and once the answer of its request came, on for at most
:data:`AFTER_ANSWER_S` (a server ends it there; its connection can then carry the next request):
only the wait for the next piece is bounded, a message being relayed is never cut off.
:func:`read_events` says how the stream ended (:class:`StreamEnd`): answered, cut at a message
too long, broken (the connection failed before the stream's end), and the id of the last event
and the server's ``retry``, which a resumption needs (:mod:`assay.shells.upstream_http.resume`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2
import trio

from assay.shells.upstream_http.budget import Holding
from assay.shells.upstream_http.messages import as_line
from assay.shells.upstream_http.sse import Event, SSEDecoder, TooLong

if TYPE_CHECKING:
    from assay.shells.upstream_http.upstream import RemoteServer

__all__ = ["AFTER_ANSWER_S", "StreamEnd", "read_body", "read_events"]

AFTER_ANSWER_S = 1.0  # how long a request's stream is read on after its answer came


@dataclass
class StreamEnd:
    """How the reading of one event stream ended."""

    answered: bool = False  # the answer of its request came
    too_long: bool = False  # an event longer than the cap was dropped
    broken: bool = False  # the connection failed before the stream's end
    events: int = 0  # messages relayed from it
    last_id: str | None = None  # the id of the last event received whole
    retry_ms: int | None = None  # the server's reconnection time


async def read_body(server: RemoteServer, resp: httpx2.Response) -> bytes | None:
    """The whole body, or None when it is longer than the cap."""
    budget = server.budget
    holding = budget.holding()
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > server.cap:
                return None
            chunks.append(chunk)
            budget.hold(holding, size)
            await budget.room(holding)
        return b"".join(chunks)
    finally:
        budget.drop(holding)


async def read_events(
    server: RemoteServer,
    resp: httpx2.Response,
    key: Any,
    *,
    endpoint: Callable[[Event], None] | None = None,
    last_id: str | None = None,
    retry_ms: int | None = None,
) -> StreamEnd:
    """Relay a stream's messages until it ends, or a little after ``key``'s answer came (see the
    module docstring). ``endpoint`` takes the legacy transport's ``endpoint`` events;
    ``last_id`` and ``retry_ms`` carry on from the stream this one resumes."""
    decoder = SSEDecoder(server.cap, last_id, retry_ms)
    end = StreamEnd()
    budget = server.budget
    holding = budget.holding()
    chunks = resp.aiter_bytes()
    deadline = float("inf")
    try:
        while True:
            if end.answered and budget.over():
                break  # reading on is for the connection's sake only: not over the budget
            await budget.room(holding)
            with trio.move_on_at(deadline) as waiting:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
            if waiting.cancelled_caught:
                break
            _feed(server, decoder, holding, chunk, end, endpoint)
            chunk = b""  # nothing of it kept while this stream waits for the next
            if not end.answered and key is not None and not server.is_pending(key):
                end.answered = True
                deadline = trio.current_time() + AFTER_ANSWER_S
    except httpx2.TransportError:
        end.broken = True
    finally:
        budget.drop(holding)
    end.last_id, end.retry_ms = decoder.last_id, decoder.retry_ms
    return end


def _feed(
    server: RemoteServer,
    decoder: SSEDecoder,
    holding: Holding,
    chunk: bytes,
    end: StreamEnd,
    endpoint: Callable[[Event], None] | None,
) -> None:
    """Decode one piece and relay the messages it completes (in a frame of its own, so that no
    message outlives this call in the reading loop, which waits between pieces)."""
    events = decoder.feed(chunk)
    server.budget.hold(holding, decoder.holding)
    for event in events:
        _relay(server, event, end, endpoint)


def _relay(
    server: RemoteServer, event: Event | TooLong, end: StreamEnd, endpoint: Callable[[Event], None] | None
) -> None:
    if isinstance(event, TooLong):
        server.warn_once("long", f"[assay] upstream: an event longer than {server.cap} bytes was dropped")
        end.too_long = True
    elif endpoint is not None and event.type == "endpoint":
        endpoint(event)
    elif event.type == "message":
        line = as_line(event.data)
        if line is not None:
            server.emit(line)
            end.events += 1
