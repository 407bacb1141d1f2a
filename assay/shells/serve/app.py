"""The ASGI application of the HTTP front (docs/serve.md, "How a request flows").

A minimal ASGI app of its own: each request is checked by the sans-IO core
(:mod:`assay.gateway.http`), authenticated, counted against its user's cap, read under the body
cap and the read deadline, and handed to the :class:`~assay.gateway.contract.Gateway`. Answers
are JSON, or an event stream when messages related to a request come before its response. The
``Authorization`` header is read once, handed to ``authenticate`` and never logged or echoed.

With a :class:`~assay.gateway.sealed.Sealer` (the config's ``session_key``), 2025-era session
ids are sealed, and an id this process has not seen (one another replica answered, or one whose
conversation idled out here) opens its conversation again for its user (docs/serve.md, "Several
replicas").
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from assay.gateway.config import Limits
from assay.gateway.contract import (
    AuthFailure,
    Authenticate,
    Conversation,
    Emit,
    Gateway,
    GatewayError,
    Identity,
    request_headers,
)
from assay.gateway.http import (
    INTERNAL_ERROR,
    MCP_PATH,
    METHOD_NOT_FOUND,
    REFUSED,
    Accepts,
    Era,
    Message,
    Refusal,
    Route,
    accepts,
    check_head,
    discover_result,
    encode,
    error_message,
    header_map,
    read_message,
    sse_event,
    synthesized_initialize,
)
from assay.gateway.sessiontable import InFlight, Session, Sessions
from assay.gateway.sealed import Sealer
from assay.shells.serve.asgi import (
    JSON,
    SSE_HEADERS,
    EventStream,
    Receive,
    Scope,
    Send,
    drop,
    encoded,
    lifespan,
    respond,
    watch_client,
)

__all__ = ["Front"]

#: sealed ids ended by DELETE that a front remembers (docs/serve.md, "Several replicas")
MAX_ENDED = 100_000


class _Disconnected(Exception):
    """The client went away before its request was read."""


class Front:
    """The ASGI app: the endpoint /mcp (both eras) and the protected-resource metadata."""

    def __init__(
        self,
        *,
        gateway: Gateway,
        authenticate: Authenticate,
        limits: Limits,
        tasks: trio.Nursery,
        origins: Iterable[str] = (),
        resource_path: str = MCP_PATH,
        resource_metadata: Mapping[str, Any] | None = None,
        sealer: Sealer | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.gateway = gateway
        self.authenticate = authenticate
        # a gateway that reads the request's headers (the traces: docs/serve.md, "Traces") gets
        # them in this context variable; for any other, nothing is set
        self._headers = request_headers if getattr(gateway, "wants_headers", False) else None
        #: where the tasks beside a request run (the watch for the client going away, an event
        #: stream's writer): spawning into a nursery that lives as long as the server costs less
        #: than opening one per request
        self._tasks = tasks
        self.limits = limits
        self.origins = frozenset(origins)
        self.resource_path = resource_path
        self.metadata = None if resource_metadata is None else encode(dict(resource_metadata))
        self.sessions: Sessions[Conversation] = Sessions(limits.session_idle_s)
        self.in_flight = InFlight(limits.per_user_concurrency)
        self.sealer = sealer
        self.wall = wall
        self._resuming: dict[str, trio.Event] = {}  # sealed ids whose conversation is being opened
        self._ended: dict[str, int] = {}  # sealed ids ended by DELETE here -> when they expire
        self.draining = False
        self._streams: set[trio.CancelScope] = set()
        self._requests: set[trio.CancelScope] = set()  # the POSTed requests waiting for their answer
        self._listening: set[str] = set()

    # -- the lifecycle, driven by serve_http ----------------------------------------------------

    def drain(self) -> None:
        """Stop taking requests (503); the GET streams end; pending requests go on."""
        self.draining = True
        for scope in list(self._streams):
            scope.cancel()

    def cancel_requests(self) -> None:
        """The drain deadline: every request still waiting for its answer is cancelled (the
        upstream is told) and answered with an error (docs/serve.md, "Stopping")."""
        for scope in list(self._requests):
            scope.cancel()

    async def close_sessions(self) -> None:
        for session in self.sessions.clear():
            await _close(session.conversation)

    async def expire_sessions(self) -> None:
        """Closes the sessions idle past the limit, for ever (run in the server's nursery)."""
        while True:
            due = self.sessions.next_expiry()
            if due is None:
                due = trio.current_time() + self.limits.session_idle_s
            await trio.sleep_until(max(due, trio.current_time() + 0.05))
            for session in self.sessions.expired(trio.current_time()):
                await _close(session.conversation)
            if self._ended:
                now = self.wall()
                self._ended = {sid: exp for sid, exp in self._ended.items() if exp > now}

    # -- ASGI ---------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            await self._http(scope, receive, send)
        except Refusal as refusal:
            await respond(send, refusal.status, refusal.body(), [JSON, *encoded(refusal.headers)])
        except _Disconnected:
            return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_map(scope.get("headers", ()))
        if self._headers is not None:
            self._headers.set(headers)
        method: str = scope["method"]
        if self.draining:
            raise Refusal(503, INTERNAL_ERROR, "Shutting down", headers=(("retry-after", "1"), ("connection", "close")))
        route = check_head(
            method,
            scope["path"],
            headers,
            origins=self.origins,
            max_body_bytes=self.limits.max_body_bytes,
            resource_path=self.resource_path,
        )
        if route is Route.METADATA:
            if self.metadata is None:
                raise Refusal(404, REFUSED, "Not found")
            await respond(send, 200, self.metadata if method == "GET" else b"", [JSON], len(self.metadata))
            return
        who = await self._identity(headers.get("authorization"))
        if method == "GET":
            await self._listen(headers, who, receive, send)
        elif method == "DELETE":
            session = await self._session(headers, who, None)
            self.sessions.remove(session.id)
            self._end(session.id, who)
            await _close(session.conversation)
            await respond(send, 204, b"", [])
        else:
            self.in_flight.acquire(who.key)
            try:
                await self._post(headers, who, receive, send)
            finally:
                self.in_flight.release(who.key)

    async def _identity(self, authorization: str | None) -> Identity:
        try:
            return await self.authenticate(authorization)
        except AuthFailure as failure:
            raise Refusal(
                failure.status, REFUSED, failure.reason, headers=(("www-authenticate", failure.www_authenticate),)
            ) from None

    async def _session(self, headers: Mapping[str, str], who: Identity, msg_id: Any) -> Session[Conversation]:
        session_id = headers.get("mcp-session-id")
        if not session_id:
            raise Refusal(400, -32600, "Bad Request: Mcp-Session-Id header is required", msg_id)
        if self.sealer is None:
            return self.sessions.find(session_id, who.key, trio.current_time(), msg_id)
        while True:
            session = self.sessions.get(session_id, who.key, trio.current_time())
            if session is not None:
                return session
            pending = self._resuming.get(session_id)
            if pending is None:
                return await self._resume(session_id, who, msg_id)
            await pending.wait()  # another request of the session is opening it: then look again

    async def _resume(self, session_id: str, who: Identity, msg_id: Any) -> Session[Conversation]:
        """A sealed id this process has no conversation for: opened again for its user (the
        version, capabilities and client it began with), or a 404 when it does not open for this
        user, has expired, or was ended here."""
        assert self.sealer is not None
        state = self.sealer.open(session_id, who.key, self.wall())
        if state is None or session_id in self._ended:
            raise Refusal(404, REFUSED, "Session not found", msg_id)
        done = self._resuming[session_id] = trio.Event()
        try:
            try:
                conversation, _ = await self.gateway.open(who, state.initialize())
            except GatewayError:
                raise Refusal(404, REFUSED, "Session not found", msg_id) from None
            return self.sessions.add(who.key, conversation, trio.current_time(), session_id)
        finally:
            del self._resuming[session_id]
            done.set()

    def _end(self, session_id: str, who: Identity) -> None:
        """A sealed id ended by DELETE is not opened again here until it expires (a bounded
        memory: past :data:`MAX_ENDED` the oldest are forgotten)."""
        if self.sealer is None:
            return
        state = self.sealer.open(session_id, who.key, self.wall())
        if state is not None:
            self._ended[session_id] = state.expires
            while len(self._ended) > MAX_ENDED:
                del self._ended[next(iter(self._ended))]

    async def _read_body(self, receive: Receive) -> bytes:
        cap = self.limits.max_body_bytes
        chunks: list[bytes] = []
        total = 0
        with trio.move_on_after(self.limits.read_timeout_s):
            while True:
                event = await receive()
                if event["type"] == "http.disconnect":
                    raise _Disconnected
                chunk = event.get("body", b"")
                total += len(chunk)
                if total > cap:
                    raise Refusal(413, -32600, f"Request body over {cap} bytes", headers=(("connection", "close"),))
                chunks.append(chunk)
                if not event.get("more_body", False):
                    return b"".join(chunks)
        raise Refusal(408, -32600, "Request body not received in time", headers=(("connection", "close"),))

    # -- POST ---------------------------------------------------------------------------------

    async def _post(self, headers: Mapping[str, str], who: Identity, receive: Receive, send: Send) -> None:
        body = await self._read_body(receive)
        message = read_message(body, headers)
        accept = accepts(headers.get("accept"))
        if message.era is Era.MODERN:
            await self._modern(message, who, accept, receive, send)
            return
        if message.kind == "request" and message.method == "initialize":
            try:
                conversation, result = await self.gateway.open(who, message.message)
            except GatewayError as error:
                await self._answer_now(send, accept, error_message(message.id, error.code, error.message), [])
                return
            sealed = None
            if self.sealer is not None:
                params = message.message.get("params")
                sealed = self.sealer.seal(
                    who.key,
                    str(result.get("protocolVersion")),
                    params if isinstance(params, dict) else {},
                    self.wall(),
                )
            session = self.sessions.add(who.key, conversation, trio.current_time(), sealed)
            reply = {"jsonrpc": "2.0", "id": message.id, "result": result}
            await self._answer_now(send, accept, reply, [(b"mcp-session-id", session.id.encode())])
            return
        session = await self._session(headers, who, message.id)
        session.busy += 1
        try:
            if message.kind == "request":
                conversation = session.conversation
                await self._answer(message, accept, conversation.request, receive, send)
            else:
                await session.conversation.notify(message.message)
                await respond(send, 202, b"", [])
        finally:
            session.busy -= 1
            session.last_used = trio.current_time()

    async def _modern(self, message: Message, who: Identity, accept: Accepts, receive: Receive, send: Send) -> None:
        if message.kind != "request":
            await respond(send, 202, b"", [])  # no 2026-07-28 client notification has a use here
            return
        try:
            conversation, result = await self.gateway.open(who, synthesized_initialize(message))
        except GatewayError as error:
            status = 404 if error.code == METHOD_NOT_FOUND else 200
            await self._answer_now(send, accept, error_message(message.id, error.code, error.message), [], status)
            return
        try:
            if message.method == "server/discover":
                reply = {"jsonrpc": "2.0", "id": message.id, "result": discover_result(result)}
                await self._answer_now(send, accept, reply, [])
            else:
                await self._answer(message, accept, conversation.request, receive, send)
        finally:
            await _close(conversation)

    async def _answer_now(
        self, send: Send, accept: Accepts, reply: dict[str, Any], extra: list[tuple[bytes, bytes]], status: int = 200
    ) -> None:
        if accept.json:
            await respond(send, status, encode(reply), [JSON, *extra])
        else:
            await respond(send, status, sse_event(reply), [*SSE_HEADERS, *extra])

    async def _answer(
        self,
        message: Message,
        accept: Accepts,
        request: Callable[[dict[str, Any], Emit], Awaitable[dict[str, Any]]],
        receive: Receive,
        send: Send,
    ) -> None:
        """The request's answer: JSON when its response comes first (and JSON is accepted), else
        an event stream of the related messages, then the response. The client going away
        cancels the request (the 2026-07-28 era's cancellation). In that era a method the gateway
        does not know is a 404.

        The request runs in this task; one task of the front's nursery watches for the client
        going away, and an event stream, when a related message starts one, is written by
        another (:class:`EventStream`): a related message comes from the upstream's link, which
        must not wait on this client's socket. At the drain deadline the request is cancelled
        and answered with an error."""
        stream = EventStream(send) if accept.sse else None
        related = stream.related(self._tasks) if stream is not None else drop
        gone = trio.CancelScope()
        watching = watch_client(self._tasks, receive, gone)
        try:
            with gone:
                reply = error_message(
                    message.id, INTERNAL_ERROR, "Shutting down: not answered within the drain timeout"
                )
                with trio.CancelScope() as drained:  # cancelled at the drain deadline: answered with that error
                    self._requests.add(drained)
                    try:
                        reply = await request(message.message, related)
                    except GatewayError as error:
                        reply = error_message(message.id, error.code, error.message)
                    finally:
                        self._requests.discard(drained)
                if stream is not None and (stream.started or not accept.json):
                    await stream.finish(reply)
                else:
                    if stream is not None:
                        stream.closed = True  # answered as JSON: a late related message is dropped
                    failed = reply.get("error") if message.era is Era.MODERN else None
                    status = 404 if isinstance(failed, dict) and failed.get("code") == METHOD_NOT_FOUND else 200
                    await respond(send, status, encode(reply), [JSON])
        finally:
            watching.cancel()
            if stream is not None:
                stream.scope.cancel()

    # -- GET: the session's stream --------------------------------------------------------------

    async def _listen(self, headers: Mapping[str, str], who: Identity, receive: Receive, send: Send) -> None:
        session = await self._session(headers, who, None)
        if session.id in self._listening:
            raise Refusal(409, -32600, "Conflict: one GET stream per session")
        self._listening.add(session.id)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})

            async def emit(msg: dict[str, Any]) -> None:
                await send({"type": "http.response.body", "body": sse_event(msg), "more_body": True})

            async def watch(nursery: trio.Nursery) -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            with trio.CancelScope() as scope:
                self._streams.add(scope)
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(watch, nursery)
                        await session.conversation.listen(emit)
                        nursery.cancel_scope.cancel()
                finally:
                    self._streams.discard(scope)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._listening.discard(session.id)


async def _close(conversation: Conversation) -> None:
    """Ends a conversation, even from a cancelled task, within a bound."""
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        await conversation.aclose()
