"""The two HTTP transports of ``assay mcp wrap --url`` (docs/remote.md, "Transports").

Streamable HTTP: one POST per client frame, its bytes as the body; the answer comes as a JSON
body or as an event stream (which may carry the server's requests and notifications first).
In the 2025 era the ``initialize`` answer may bring an ``Mcp-Session-Id``, sent from then on
with the negotiated ``MCP-Protocol-Version``, a GET stream carries what the server sends on its
own, and the session is DELETEd at the end. In the 2026-07-28 era each request carries its own
``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` (:func:`assay.remote.messages.
outgoing`), and there is no session and no GET stream.

The legacy HTTP+SSE transport (``--transport sse``, or ``auto`` when the first POST gets a
400, 404 or 405 that is not a JSON-RPC answer): a GET opens the event stream, whose
``endpoint`` event names the URL to POST frames to (it must be on the same origin); every
message of the server comes on that stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2
import trio

from assay.remote.messages import Incoming, Outgoing, as_line, incoming, outgoing
from assay.remote.params import header_map, param_headers
from assay.remote.sockets import ack_promptly
from assay.remote.sse import Event, SSEDecoder, TooLong
from assay.remote.target import Target, shown_url
from assay.remote.upstream import RemoteServer
from assay.wrap.pending import id_key

__all__ = ["ENDPOINT_TIMEOUT", "HttpServer", "MAX_INFLIGHT"]

AFTER_ANSWER_S = 1.0  # how long a request's stream is read on after its answer came
HELD_LIMIT = 256 << 20  # bytes of bodies and events held at once over all streams (or the cap)
MAX_MARKED_TOOLS = 10000  # tools whose x-mcp-header marks are kept
MAX_INFLIGHT = 48  # requests POSTed at once; more wait (answers and notifications never do)
ENDPOINT_TIMEOUT = 15.0  # seconds the legacy stream gets to name its endpoint
GET_RETRIES = 3  # the GET stream is reopened this many times in a row before it is given up
FALLBACK_STATUS = (400, 404, 405)
ACCEPT_BOTH = "application/json, text/event-stream"


def _status_text(status: int) -> str:
    if status == 401:
        return "the server refused the request (HTTP 401: authorization needed)"
    if status == 403:
        return "the server refused the request (HTTP 403: forbidden)"
    return f"the server answered HTTP {status}"


class HttpServer(RemoteServer):
    def __init__(self, target: Target, client: httpx2.AsyncClient, *,
                 cap: int, warn: Callable[[str], None], needs_login: tuple[type[BaseException], ...] = ()) -> None:
        super().__init__(cap=cap, warn=warn)
        self.target = target
        self.client = client
        self.needs_login = needs_login
        self.mode = "sse" if target.transport == "sse" else "streamable"
        self.settled = target.transport != "auto"  # the transport is known
        self.session_id: str | None = None
        self.version: str | None = None  # the negotiated version (2025 era)
        self.endpoint: str | None = None  # where the legacy transport POSTs
        self._ready = trio.Event()  # the first request's answer has its headers (session id)
        self._first = True
        self._slots = trio.Semaphore(MAX_INFLIGHT)
        self._streams: dict[Any, list[trio.CancelScope]] = {}  # id key -> the POSTs of that request
        self._get_started = False
        self._warned: set[str] = set()
        self.held = 0  # bytes of bodies and events held now, over every stream
        self.marks: dict[str, dict[tuple[str, ...], str]] = {}  # tool -> its x-mcp-header marks

    def on_answer(self, method: str | None, seen: Incoming) -> None:
        """Learn the ``x-mcp-header`` marks of the tools a ``tools/list`` answer lists."""
        if method != "tools/list" or not isinstance(seen.result, dict):
            return
        tools = seen.result.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            marks = header_map(tool.get("inputSchema"))
            if marks and (tool["name"] in self.marks or len(self.marks) < MAX_MARKED_TOOLS):
                self.marks[tool["name"]] = marks
            else:
                self.marks.pop(tool["name"], None)

    # -- sending -----------------------------------------------------------------------------

    async def send(self, line: bytes) -> None:
        out = outgoing(line)
        key = self.sent(out.id, out.method) if out.kind == "request" else None
        body = line.rstrip(b"\r\n")
        if self._first:
            self._first = False
            self.start(self._post_first, body, out, key)
            return
        if out.kind == "request":
            await self._slots.acquire()  # back-pressure on the client, as a full pipe
        self.start(self._post_later, body, out, key)

    async def _post_first(self, body: bytes, out: Outgoing, key: Any) -> None:
        try:
            await self._post(body, out, key, first=True)
        finally:
            self._ready.set()

    async def _post_later(self, body: bytes, out: Outgoing, key: Any) -> None:
        scope = trio.CancelScope()
        if key is not None:
            self._streams.setdefault(key, []).append(scope)
        try:
            with scope:
                await self._ready.wait()
                await self._post(body, out, key, first=False)
        finally:
            if key is not None:
                scopes = self._streams.get(key, [])
                if scope in scopes:
                    scopes.remove(scope)
                if not scopes:
                    self._streams.pop(key, None)
            if out.kind == "request":
                self._slots.release()
        if out.method == "notifications/cancelled":
            self._cancelled(out.arguments)

    def _cancelled(self, request_id: Any) -> None:
        """The client cancelled a request and the server was told: its stream is closed (as the
        SDK clients abort theirs), and it is no longer owed an answer."""
        key = id_key(request_id)
        scopes = self._streams.pop(key, None) if key is not None else None
        if not scopes:
            return
        for scope in scopes:
            scope.cancel()
        while self.is_pending(key):
            self.answered(key)

    def _headers(self, out: Outgoing) -> dict[str, str]:
        headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if out.headers:
            headers.update(out.headers)
            marks = self.marks.get(out.name) if out.name is not None else None
            if marks:
                headers.update(param_headers(marks, out.arguments))
        elif self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    async def _post(self, body: bytes, out: Outgoing, key: Any, *, first: bool) -> None:
        if self.mode == "sse":
            await self._post_legacy(body, out, key)
            return
        try:
            async with self.client.stream("POST", self.target.url, content=body, headers=self._headers(out)) as resp:
                ack_promptly(resp)
                status = resp.status_code
                if first and not self.settled:
                    if status in FALLBACK_STATUS and not await self._is_jsonrpc(resp, key):
                        await self._fall_back(body, out, key)
                        return
                    self.settled = True
                sid = resp.headers.get("mcp-session-id")
                if sid is not None and out.method == "initialize" and 200 <= status < 300:
                    self.session_id = sid
                if status == 404 and self.session_id is not None and out.method != "initialize":
                    self.fail("the server's session expired (HTTP 404)", {"status": 404})
                    return
                await self._read_answer(resp, out, key)
        except self.needs_login as exc:
            self._login_needed(str(exc), key)
            return
        except httpx2.TransportError as exc:
            self.fail(f"connection to {shown_url(self.target.url)} lost ({type(exc).__name__})")
            return
        if out.method == "notifications/initialized" and not self._get_started:
            self._get_started = True
            self.start(self._get_stream, counted=False)

    async def _is_jsonrpc(self, resp: httpx2.Response, key: Any) -> bool:
        """Whether a refused first POST carries a JSON-RPC answer (then it is relayed: the server
        speaks Streamable HTTP). Reads the body (bounded) and keeps it for :meth:`_read_answer`."""
        body = await self._read_body(resp)
        resp._assay_body = body  # type: ignore[attr-defined]
        if body is None:
            return False
        line = as_line(body)
        return line is not None and incoming(line).kind == "response"

    def _over_budget(self) -> bool:
        """Whether the bodies and events held at once, over every stream, pass the budget."""
        return self.held > max(HELD_LIMIT, self.cap)

    async def _read_body(self, resp: httpx2.Response) -> bytes | None:
        """The whole body, or None when it is longer than the cap (or the held budget)."""
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                self.held += len(chunk)
                if size > self.cap or self._over_budget():
                    return None
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            self.held -= size

    async def _read_answer(self, resp: httpx2.Response, out: Outgoing, key: Any) -> None:
        status = resp.status_code
        kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream" and 200 <= status < 300:
            dropped_long = await self._read_events(resp, key, out)
            if self.is_pending(key) and dropped_long:
                self.answer_error(key, f"assay: upstream error: the server's answer is longer than {self.cap} bytes")
            elif self.is_pending(key):
                self._warn_once("stream", "[assay] upstream: an event stream ended before its answer")
                self.answer_error(key, "assay: upstream error: the server's event stream ended before its answer")
            return
        body = getattr(resp, "_assay_body", None)
        if body is None:
            body = await self._read_body(resp)
        if body is None:
            self.answer_error(key, f"assay: upstream error: the server's answer is longer than {self.cap} bytes")
            return
        line = as_line(body) if kind == "application/json" or status >= 300 else None
        seen = incoming(line) if line is not None else None
        if line is not None and seen is not None and (seen.kind == "response" or 200 <= status < 300):
            await self.emit(line, seen)
            if out.method == "initialize" and not out.headers and seen.kind == "response":
                self.version = seen.protocol_version or self.version
        if self.is_pending(key) and status >= 300:
            text = _status_text(status)
            self._warn_once(f"http{status}", f"[assay] upstream: {text}")
            self.answer_error(key, f"assay: upstream error: {text}", {"status": status})
        elif self.is_pending(key) and kind not in ("application/json",):
            self.answer_error(key, f"assay: upstream error: the server answered {kind or 'no content'} without the answer")

    async def _read_events(self, resp: httpx2.Response, key: Any, out: Outgoing | None = None, *,
                           legacy: bool = False) -> bool:
        """Relay a stream's events until it ends or ``key``'s answer came; whether an event
        longer than the cap was dropped."""
        decoder = SSEDecoder(self.cap)
        dropped: list[bool] = []
        held = 0
        chunks = resp.aiter_bytes()
        # Once the answer came, the stream is read on to its end (a server ends it there) for at
        # most AFTER_ANSWER_S, relaying what else comes, so that its connection can carry the
        # next request instead of a new one being opened each time. Only the wait for the next
        # chunk is bounded: a message being relayed is never cut off.
        deadline = float("inf")
        try:
            while True:
                with trio.move_on_at(deadline) as waiting:
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        break
                if waiting.cancelled_caught:
                    break
                events = decoder.feed(chunk)
                self.held += decoder.holding - held
                held = decoder.holding
                if self._over_budget():
                    self._warn_once("budget", "[assay] upstream: more answers held at once than wrap keeps; a stream was dropped")
                    self.answer_error(key, "assay: upstream error: the server's answers held at once are too large")
                    break
                if await self._events(events, key, out, legacy, dropped) and deadline == float("inf"):
                    deadline = trio.current_time() + AFTER_ANSWER_S
        finally:
            self.held -= held
        return bool(dropped)

    async def _events(self, events: list[Event | TooLong], key: Any, out: Outgoing | None, legacy: bool,
                      dropped: list[bool]) -> bool:
        """Relay a stream's events; True once ``key`` is answered."""
        for event in events:
            if isinstance(event, TooLong):
                self._warn_once("long", f"[assay] upstream: an event longer than {self.cap} bytes was dropped")
                dropped.append(True)
                continue
            if legacy and event.type == "endpoint":
                self._set_endpoint(event)
                continue
            if event.type != "message":
                continue
            line = as_line(event.data)
            if line is not None:
                seen = await self.emit(line)
                if out is not None and out.method == "initialize" and not out.headers and seen.kind == "response":
                    self.version = seen.protocol_version or self.version
        return key is not None and not self.is_pending(key)

    def _login_needed(self, text: str, key: Any) -> None:
        self._warn_once("login", f"[assay] {text}")
        self.answer_error(key, f"assay: upstream error: {text}")

    def _warn_once(self, what: str, text: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            self.warn(text)

    # -- the GET stream (2025 era) ------------------------------------------------------------

    async def _get_stream(self) -> None:
        failures = 0
        while failures < GET_RETRIES:
            headers = {"Accept": "text/event-stream"}
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
            if self.version is not None:
                headers["MCP-Protocol-Version"] = self.version
            try:
                async with self.client.stream("GET", self.target.url, headers=headers) as resp:
                    ack_promptly(resp)
                    if resp.status_code == 404 and self.session_id is not None:
                        self.fail("the server's session expired (HTTP 404)", {"status": 404})
                        return
                    if resp.status_code != 200:
                        return  # 405: the server has no GET stream
                    failures = 0
                    await self._read_events(resp, None)
            except self.needs_login:
                return
            except httpx2.TransportError:
                pass
            failures += 1
            await trio.sleep(0.2 * failures)

    # -- the legacy HTTP+SSE transport --------------------------------------------------------

    async def _fall_back(self, body: bytes, out: Outgoing, key: Any) -> None:
        self.mode = "sse"
        self.settled = True
        self.warn("[assay] the server does not take Streamable HTTP; using the HTTP+SSE transport")
        if not await self.open_legacy():
            self.fail("the server speaks neither Streamable HTTP nor HTTP+SSE")
            return
        await self._post_legacy(body, out, key)

    async def open_legacy(self) -> bool:
        """Open the legacy event stream and wait for its endpoint (bounded)."""
        self._endpoint_set = trio.Event()
        self.start(self._legacy_stream, counted=False)
        with trio.move_on_after(ENDPOINT_TIMEOUT):
            await self._endpoint_set.wait()
        return self.endpoint is not None

    async def _legacy_stream(self) -> None:
        try:
            async with self.client.stream("GET", self.target.url, headers={"Accept": "text/event-stream"}) as resp:
                ack_promptly(resp)
                if resp.status_code != 200:
                    self._endpoint_set.set()
                    self.fail(f"the server's event stream answered HTTP {resp.status_code}")
                    return
                await self._read_events(resp, None, legacy=True)
        except self.needs_login as exc:
            self._endpoint_set.set()
            self.fail(str(exc))
            return
        except httpx2.TransportError as exc:
            self._endpoint_set.set()
            self.fail(f"connection to {shown_url(self.target.url)} lost ({type(exc).__name__})")
            return
        self._endpoint_set.set()
        self.fail("the server's event stream ended")

    def _set_endpoint(self, event: Event) -> None:
        if self.endpoint is not None:
            return
        url = urljoin(self.target.url, event.data.decode("utf-8", "replace").strip())
        here, there = urlsplit(self.target.url), urlsplit(url)
        if (here.scheme, here.netloc) != (there.scheme, there.netloc):
            self.fail("the server's event stream named an endpoint on another origin")
        else:
            self.endpoint = url
        self._endpoint_set.set()

    async def _post_legacy(self, body: bytes, out: Outgoing, key: Any) -> None:
        assert self.endpoint is not None
        try:
            async with self.client.stream("POST", self.endpoint, content=body,
                                          headers={"Content-Type": "application/json"}) as resp:
                ack_promptly(resp)
                status = resp.status_code
                if status >= 300:
                    await self._read_answer(resp, out, key)
                # 2xx: the answer comes on the event stream
        except self.needs_login as exc:
            self._login_needed(str(exc), key)
        except httpx2.TransportError as exc:
            self.fail(f"connection to {shown_url(self.target.url)} lost ({type(exc).__name__})")

    # -- the end -------------------------------------------------------------------------------

    async def close_upstream(self) -> None:
        if self.goodbye and self.session_id is not None and self.mode == "streamable":
            headers = {"Mcp-Session-Id": self.session_id}
            if self.version is not None:
                headers["MCP-Protocol-Version"] = self.version
            try:
                await self.client.delete(self.target.url, headers=headers)
            except httpx2.HTTPError:
                pass
            except self.needs_login:
                pass
        await self.client.aclose()
