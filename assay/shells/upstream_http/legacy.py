"""The legacy HTTP+SSE transport of ``assay mcp wrap --url`` (the 2024-11-05 one:
docs/remote.md, "Transports"), used with ``--transport sse``, or with ``auto`` when the first
POST gets a 400, 404 or 405 that is not a JSON-RPC answer.

A GET opens the event stream, whose ``endpoint`` event names the URL to POST frames to (it must
be on the URL's own origin); every message of the server comes on that stream, and a POST's own
answer only says whether the frame was taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import httpx2
import trio

from assay.shells.upstream_http.messages import Outgoing
from assay.shells.upstream_http.sockets import ack_promptly
from assay.shells.upstream_http.sse import Event
from assay.shells.upstream_http.streams import read_events
from assay.shells.upstream_http.target import shown_url

if TYPE_CHECKING:
    from assay.shells.upstream_http.httpsession import HttpSession

__all__ = ["fall_back", "open_legacy", "post"]


async def fall_back(server: HttpSession, body: bytes, out: Outgoing, key: Any) -> None:
    """The first POST was refused as by a server of the legacy transport: speak that."""
    server.mode = "sse"
    server.settled = True
    server.warn("[assay] the server does not take Streamable HTTP; using the HTTP+SSE transport")
    if not await open_legacy(server):
        server.fail("the server speaks neither Streamable HTTP nor HTTP+SSE")
        return
    await post(server, body, out, key)


async def open_legacy(server: HttpSession) -> bool:
    """Open the legacy event stream and wait for its endpoint (at most ``--connect-timeout``)."""
    server.start(_stream, server, counted=False)
    with trio.move_on_after(server.connect_timeout):
        await server.endpoint_set.wait()
    return server.endpoint is not None


async def _stream(server: HttpSession) -> None:
    url = server.target.url
    try:
        async with server.client.stream("GET", url, headers={"Accept": "text/event-stream"}) as resp:
            ack_promptly(resp)
            if resp.status_code != 200:
                server.endpoint_set.set()
                server.fail(f"the server's event stream answered HTTP {resp.status_code}")
                return
            end = await read_events(server, resp, None, endpoint=lambda event: _set_endpoint(server, event))
    except server.needs_login as exc:
        server.endpoint_set.set()
        server.fail(str(exc))
        return
    except httpx2.TransportError as exc:
        server.endpoint_set.set()
        server.fail(f"connection to {shown_url(url)} lost ({type(exc).__name__})")
        return
    server.endpoint_set.set()
    server.fail(
        f"connection to {shown_url(url)} lost (its event stream broke)"
        if end.broken
        else "the server's event stream ended"
    )


def _set_endpoint(server: HttpSession, event: Event) -> None:
    if server.endpoint is not None:
        return
    url = urljoin(server.target.url, event.data.decode("utf-8", "replace").strip())
    here, there = urlsplit(server.target.url), urlsplit(url)
    if (here.scheme, here.netloc) != (there.scheme, there.netloc):
        server.fail("the server's event stream named an endpoint on another origin")
    else:
        server.endpoint = url
    server.endpoint_set.set()


async def post(server: HttpSession, body: bytes, out: Outgoing, key: Any) -> None:
    """POST one frame to the endpoint; its answer comes on the event stream (an error status is
    the request's answer)."""
    assert server.endpoint is not None
    try:
        async with server.client.stream(
            "POST", server.endpoint, content=body, headers={"Content-Type": "application/json"}
        ) as resp:
            ack_promptly(resp)
            if resp.status_code >= 300:
                await server.read_answer(resp, out, key)
            # 2xx: the answer comes on the event stream
    except server.needs_login as exc:
        server.login_needed(str(exc), key)
    except httpx2.TransportError as exc:
        server.fail(f"connection to {shown_url(server.target.url)} lost ({type(exc).__name__})")
