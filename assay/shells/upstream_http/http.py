"""Streamable HTTP, the transport of ``assay mcp wrap --url`` (docs/remote.md, "Transports").

One POST per client frame, its bytes as the body; the answer comes as a JSON body or as an
event stream (which may carry the server's requests and notifications first:
:mod:`assay.shells.upstream_http.streams`). In the 2025 era the ``initialize`` answer may bring an
``Mcp-Session-Id``, sent from then on with the negotiated ``MCP-Protocol-Version``, a GET stream
carries what the server sends on its own, and the session is DELETEd at the end. In the
2026-07-28 era each request carries its own ``MCP-Protocol-Version``, ``Mcp-Method`` and
``Mcp-Name`` (:func:`assay.shells.upstream_http.messages.outgoing`), and there is no session and no GET
stream. A stream that ends before its answer is resumed when it can be
(:mod:`assay.shells.upstream_http.resume`); a server that refuses the first POST the way an older one does is
spoken to with the legacy HTTP+SSE transport (:mod:`assay.shells.upstream_http.legacy`). The session's state,
its headers and the reading of an answer, which those two use as well, are
:class:`assay.shells.upstream_http.httpsession.HttpSession`.

At most :data:`MAX_INFLIGHT` requests are POSTed at once; more wait in a queue, bounded in bytes,
and never hold up the reading of the client: its answers to the server's requests, its
notifications and cancellations go out at once (at most :data:`MAX_SIDE` at a time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import httpx2
import trio

from assay.shells.upstream_http import legacy, resume
from assay.shells.upstream_http.httpsession import HttpSession, status_text
from assay.shells.upstream_http.messages import Outgoing, as_line, header_safe, incoming, outgoing, visible_ascii
from assay.shells.upstream_http.sockets import ack_promptly
from assay.shells.upstream_http.streams import StreamEnd, read_body
from assay.shells.upstream_http.target import Target, shown_url
from assay.session.pending import id_key

__all__ = ["HttpServer", "MAX_INFLIGHT", "MAX_SIDE", "WAITING_LIMIT", "status_text"]

MAX_INFLIGHT = 48  # requests POSTed at once; more wait in the queue
WAITING_LIMIT = 16 << 20  # bytes of requests waiting for a place; a request past it is refused
MAX_SIDE = 256  # answers and notifications POSTed at once (each finishes on its own)
FALLBACK_STATUS = (400, 404, 405)


class HttpServer(HttpSession):
    def __init__(
        self,
        target: Target,
        client: httpx2.AsyncClient,
        *,
        cap: int,
        warn: Callable[[str], None],
        needs_login: tuple[type[BaseException], ...] = (),
        connect_timeout: float = 15.0,
    ) -> None:
        super().__init__(target, client, cap=cap, warn=warn, needs_login=needs_login, connect_timeout=connect_timeout)
        self._ready = trio.Event()  # the first request's answer has its headers (session id)
        self._first = True
        self._requests = 0  # requests POSTed and not done
        self._waiting: deque[tuple[bytes, Outgoing, Any]] = deque()  # requests waiting for a place
        self._waiting_bytes = 0
        self._side = trio.Semaphore(MAX_SIDE)
        self._streams: dict[Any, list[trio.CancelScope]] = {}  # id key -> the POSTs of that request
        self._get_started = False

    # -- sending -----------------------------------------------------------------------------

    async def send(self, line: bytes) -> None:
        out = outgoing(line)
        request = out.kind == "request"
        key = self.sent(out.id, out.method) if request else None
        body = line.rstrip(b"\r\n")
        if self._first:
            self._first = False
            self._requests += request
            self.start(self._post_first, body, out, key, request)
        elif request:
            self._request(body, out, key)
        elif out.method == "notifications/cancelled" and self._unqueue(out.arguments):
            return  # the request never left: the server has nothing to cancel
        else:
            if out.method == "notifications/initialized" and self.get_opened is None:
                self.get_opened = trio.Event()  # the requests after it wait for the GET stream
            await self._side.acquire()
            self.start(self._post_later, body, out, key, False)

    def _request(self, body: bytes, out: Outgoing, key: Any) -> None:
        """POST a request now, or queue it behind the others (never waiting here)."""
        if self._requests < MAX_INFLIGHT and not self._waiting:
            self._requests += 1
            self.start(self._post_later, body, out, key, True)
        elif self._waiting_bytes + len(body) > WAITING_LIMIT:
            self.warn_once(
                "waiting",
                f"[assay] upstream: more than {WAITING_LIMIT} bytes of requests wait for the server; refusing more",
            )
            self.answer_error(
                key,
                f"assay: upstream error: more than {WAITING_LIMIT} bytes of requests already wait "
                "for the server; this one was not sent",
            )
        else:
            self._waiting.append((body, out, key))
            self._waiting_bytes += len(body)

    def _next_waiting(self) -> None:
        while self._waiting and self._requests < MAX_INFLIGHT:
            body, out, key = self._waiting.popleft()
            self._waiting_bytes -= len(body)
            self._requests += 1
            self.start(self._post_later, body, out, key, True)

    def _unqueue(self, request_id: Any) -> bool:
        """Take a cancelled request out of the queue (True), if it is still there."""
        key = id_key(request_id)
        for i, (body, _out, waiting) in enumerate(self._waiting):
            if key is not None and waiting == key:
                del self._waiting[i]
                self._waiting_bytes -= len(body)
                self.answered(key)
                return True
        return False

    async def _post_first(self, body: bytes, out: Outgoing, key: Any, request: bool) -> None:
        try:
            await self._post(body, out, key, first=True)
        finally:
            self._ready.set()
            if request:  # (a first message that is not a request took no place)
                self._done(True)

    async def _post_later(self, body: bytes, out: Outgoing, key: Any, request: bool) -> None:
        scope = trio.CancelScope()
        if key is not None:
            self._streams.setdefault(key, []).append(scope)
        try:
            with scope:
                await self._ready.wait()
                if out.method == "notifications/initialized":
                    self._open_get_stream()
                elif request and self.get_opened is not None:
                    # what the server sends on its own goes on that stream: not before it is open
                    with trio.move_on_after(self.connect_timeout):
                        await self.get_opened.wait()
                    self.get_opened.set()  # waited once long enough: no request waits again
                await self._post(body, out, key, first=False)
        finally:
            if key is not None:
                scopes = self._streams.get(key, [])
                if scope in scopes:
                    scopes.remove(scope)
                if not scopes:
                    self._streams.pop(key, None)
            self._done(request)
        if out.method == "notifications/cancelled":
            self._cancelled(out.arguments)

    def _done(self, request: bool) -> None:
        if request:
            self._requests -= 1
            self._next_waiting()
        else:
            self._side.release()

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

    async def _post(self, body: bytes, out: Outgoing, key: Any, *, first: bool) -> None:
        if self.mode == "sse":
            await legacy.post(self, body, out, key)
            return
        try:
            async with self.client.stream("POST", self.target.url, content=body, headers=self.headers(out)) as resp:
                ack_promptly(resp)
                status = resp.status_code
                if first and not self.settled:
                    if status in FALLBACK_STATUS and not await self._is_jsonrpc(resp):
                        await legacy.fall_back(self, body, out, key)
                        return
                    self.settled = True
                if out.method == "initialize" and 200 <= status < 300 and not self._take_session(resp):
                    return
                if status == 404 and self.session_id is not None and out.method != "initialize":
                    self.fail("the server's session expired (HTTP 404)", {"status": 404})
                    return
                end = await self.read_answer(resp, out, key)
        except self.needs_login as exc:
            self.login_needed(str(exc), key)
            return
        except httpx2.TransportError as exc:
            self.fail(f"connection to {shown_url(self.target.url)} lost ({type(exc).__name__})")
            return
        if end is not None:
            await self._after_stream(end, out, key)

    def _open_get_stream(self) -> None:
        """The client sent ``notifications/initialized``: open the session's GET stream now (the
        requests the client sent after it wait until its head came, so that nothing the server
        sends on its own is sent before that stream is there to take it)."""
        if self._get_started:
            return
        self._get_started = True
        if self.mode != "streamable":
            if self.get_opened is not None:
                self.get_opened.set()
            return
        self.start(resume.get_stream, self, counted=False)

    def _take_session(self, resp: httpx2.Response) -> bool:
        """Keep the session id of an ``initialize`` answer; False (and the run failed) for one
        that cannot be sent back as it is."""
        sid = resp.headers.get("mcp-session-id")
        if sid is None:
            return True
        if not visible_ascii(sid):
            self.fail(
                "the server's Mcp-Session-Id header is not visible ASCII (0x21-0x7E), so wrap cannot send it back"
            )
            return False
        self.session_id = sid
        return True

    async def _is_jsonrpc(self, resp: httpx2.Response) -> bool:
        """Whether a refused first POST carries a JSON-RPC answer (then it is relayed: the server
        speaks Streamable HTTP). Reads the body (bounded) and keeps it for :meth:`read_answer`."""
        body = await read_body(self, resp)
        resp._assay_body = body  # type: ignore[attr-defined]
        if body is None:
            return False
        line = as_line(body)
        return line is not None and incoming(line).kind == "response"

    async def _after_stream(self, end: StreamEnd, out: Outgoing, key: Any) -> None:
        """A request's event stream ended: resumed, or the request answered with wrap's error
        (docs/remote.md, "When the server fails")."""
        if not self.is_pending(key):
            return
        if end.too_long:
            self.answer_error(key, f"assay: upstream error: the server's answer is longer than {self.cap} bytes")
        elif end.last_id is not None and header_safe(end.last_id):  # an id to resume from
            await resume.resume(self, out, key, end)
        elif end.broken:
            self.fail(f"connection to {shown_url(self.target.url)} lost (its event stream broke)")
        else:
            self.warn_once("stream", "[assay] upstream: an event stream ended before its answer")
            self.answer_error(key, "assay: upstream error: the server's event stream ended before its answer")

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
