"""A user of the gateway and their conversations (docs/serve.md, "Upstreams and the agent
session of a user"): what one user has open (links to upstreams, conversations, calls in flight,
the gateway's ids toward them, 2026-07-28 requests waiting for a retry) and how a message moves
between a conversation and a link. The gateway (:class:`assay.serve.gateway.ServeGateway`, a
:class:`Hub` here) opens the links and keeps the users."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from assay.gateway.config import Upstream
from assay.gateway.contract import Emit, Identity
from assay.gateway.http import VERSION_META
from assay.gateway.router import (
    FANOUT_KEYS,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UPSTREAM_FAILED,
    Ids,
    Names,
    Route,
    UriBook,
    error,
    for_era,
    is_modern,
    link_version,
    route_of,
    target_of,
)
from assay.policy.model import Policy
from assay.policy.storeapi import SessionKey
from assay.serve.link import Link, LinkError
from assay.serve.observe import Metrics
from assay.serve.rounds import Flight, Parked

__all__ = ["MAX_PAGES", "NO_CLIENT", "REQUEST_CANCELLED", "Call", "Conversation", "Hub", "User"]

#: pages of one upstream's list the gateway follows (``nextCursor``) before it stops
MAX_PAGES = 100
REQUEST_CANCELLED = -32800
NO_CLIENT = -32603


class Hub(Protocol):
    """What a user needs of the gateway: the upstreams and their names, its nursery, its
    metrics (or None), a warning line, a link opened for a user, and forgetting an idle user."""

    upstreams: dict[str, Upstream]
    names: Names
    nursery: trio.Nursery
    metrics: Metrics | None
    warn: Callable[[str], None]

    async def open_link(
        self, user: User, upstream: Upstream, capabilities: Mapping[str, Any], version: str
    ) -> Link: ...

    def forget_if_idle(self, user: User) -> None: ...


@dataclass(eq=False)
class Call:
    """A client request in flight on one link: where what it causes goes."""

    conversation: Conversation
    client_id: Any
    link: str
    related: Emit
    scope: trio.CancelScope
    flight: bool = False  # a 2026-07-28-era request in rounds: it outlives its conversation


@dataclass(eq=False)
class User:
    gateway: Hub
    who: Identity
    policy: Policy
    links: dict[str, Link] = field(default_factory=dict)
    starting: dict[str, trio.Event] = field(default_factory=dict)
    conversations: dict[int, Conversation] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    ids: Ids = field(default_factory=Ids)
    uris: UriBook = field(default_factory=UriBook)
    tokens: dict[str, Call] = field(default_factory=dict)
    asked: dict[str, Call] = field(default_factory=dict)
    parked: Parked = field(default_factory=Parked)  # 2026-07-28-era requests waiting for a retry

    @property
    def key(self) -> SessionKey:
        return SessionKey(key=self.who.key, kind="user", name=self.who.subject)

    async def link(self, name: str, capabilities: Mapping[str, Any], version: str) -> Link:
        """The user's live link to upstream ``name``, opened on first use. Raises LinkError."""
        while True:
            link = self.links.get(name)
            if link is not None and link.alive:
                return link
            starting = self.starting.get(name)
            if starting is None:
                break
            await starting.wait()
        event = self.starting[name] = trio.Event()
        try:
            link = await self.gateway.open_link(self, self.gateway.upstreams[name], capabilities, version)
            self.links[name] = link
            return link
        finally:
            del self.starting[name]
            event.set()
            self.gateway.forget_if_idle(self)

    def latest_call(self, link: str) -> Call | None:
        for call in reversed(self.calls):
            if call.link == link and (call.flight or not call.conversation.closed):
                return call
        return None

    async def from_link(self, link: Link, message: dict[str, Any]) -> None:
        """A message of a link that is not an answer to the gateway: the upstream's (or wrap's)
        request or notification, to the conversation it belongs to."""
        method = message.get("method")
        params = message.get("params")
        if "id" in message and isinstance(method, str):
            if method == "ping":
                link.write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                return
            call = self.latest_call(link.name)
            if call is None:
                link.write(error(message["id"], NO_CLIENT, "no request of the client is in flight to ask"))
                return
            mine = self.ids.ask(link.name, message["id"])
            self.asked[mine] = call
            while len(self.asked) > len(self.ids.asked):  # the oldest the ids forgot (bounded)
                self.asked.pop(next(iter(self.asked)))
            await call.related({**message, "id": mine})
            return
        if method == "notifications/progress":
            token = params.get("progressToken") if isinstance(params, dict) else None
            mapped = self.ids.progress(params)
            owner = self.tokens.get(token) if isinstance(token, str) else None
            if mapped is not None and owner is not None:
                await owner.related({"jsonrpc": "2.0", "method": method, "params": mapped[1]})
            return
        if method == "notifications/message":
            call = self.latest_call(link.name)
            if call is not None:
                await call.related(message)
            return
        if method == "notifications/cancelled" and isinstance(params, dict):
            for mine, (upstream, theirs) in list(self.ids.asked.items()):
                if upstream == link.name and theirs == params.get("requestId"):
                    self.ids.answered(mine)
                    call = self.asked.pop(mine, None)
                    if call is not None:
                        await call.related({**message, "params": {**params, "requestId": mine}})
            return
        if isinstance(method, str) and (
            method.endswith("/list_changed") or method == "notifications/resources/updated"
        ):
            for conversation in list(self.conversations.values()):
                conversation.tell(message)

    async def from_client(self, message: dict[str, Any]) -> None:
        """A client's answer to an upstream request: back to the link, with the upstream's id."""
        mine = message.get("id")
        mapped = self.ids.answered(mine)
        self.asked.pop(mine, None) if isinstance(mine, str) else None
        if mapped is None:
            return
        upstream, theirs = mapped
        link = self.links.get(upstream)
        if link is not None and link.alive:
            link.write({**message, "id": theirs})


class Conversation:
    """One MCP session of one user (the contract's :class:`~assay.gateway.contract.Conversation`)."""

    def __init__(
        self,
        user: User,
        number: int,
        version: str,
        capabilities: Mapping[str, Any],
        client: tuple[str, str | None] | None = None,
    ) -> None:
        self.user = user
        self.number = number
        self.version = version
        #: the client's name and version, as its calls' records carry them (docs/serve.md, "Records")
        self.client = client
        self.modern = is_modern(version)
        self.capabilities = dict(capabilities)
        self.closed = False
        self._send, self._receive = trio.open_memory_channel[dict[str, Any]](math.inf)
        self._told: set[str] = set()  # list changes queued and not yet delivered (merged)
        self._calls: dict[Any, Call] = {}

    # -- the contract --------------------------------------------------------------------------

    async def request(self, message: dict[str, Any], related: Emit) -> dict[str, Any]:
        msg_id = message.get("id")
        method = message.get("method")
        params = message.get("params", {})
        if not isinstance(method, str) or not isinstance(params, dict):
            return error(msg_id, INVALID_PARAMS, "params must be an object")
        if self.closed:
            return error(msg_id, UPSTREAM_FAILED, "the session has ended")
        route = route_of(method)
        if route is Route.LOCAL:
            return {"jsonrpc": "2.0", "id": msg_id, "result": for_era({}, method, self.modern)}
        if route is Route.UNKNOWN:
            return error(msg_id, METHOD_NOT_FOUND, f"Method not found: {method:.200}")
        params = _for_link(params)
        with trio.CancelScope() as scope:
            if route is Route.FANOUT:
                answer = await self._fanout(method, params, msg_id, related, scope)
            else:
                target = target_of(method, params, self.user.gateway.names, self.user.uris)
                if isinstance(target, str):
                    return error(msg_id, INVALID_PARAMS, target)
                if self.modern and self.user.parked.claims(target[1]):
                    answer = await self._resume(method, target[1], related)
                else:
                    answer = await self._forward(target[0], method, target[1], msg_id, related, scope)
        if scope.cancelled_caught:
            return error(msg_id, REQUEST_CANCELLED, "Request cancelled")
        answer = {**answer, "id": msg_id}
        if isinstance(answer.get("result"), dict):
            answer["result"] = for_era(answer["result"], method, self.modern)
        return answer

    async def notify(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            await self.user.from_client(message)
            return
        params = message.get("params")
        if method == "notifications/cancelled" and isinstance(params, dict):
            request_id = params.get("requestId")
            # a JSON-RPC id (a string or an integer, as the client's requests are checked): an
            # object or a list is no key, and true or 1.0 would find the call of id 1
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
                call = self._calls.get(request_id)
                if call is not None:
                    call.scope.cancel()
        elif method == "notifications/roots/list_changed":
            for link in list(self.user.links.values()):
                link.write(message)

    async def listen(self, emit: Emit) -> None:
        async for message in self._receive:
            self._told.discard(str(message.get("method")))
            await emit(message)

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.user.conversations.pop(self.number, None)
        for call in list(self._calls.values()):
            call.scope.cancel()
        self._send.close()
        self.user.gateway.forget_if_idle(self.user)

    # -- the gateway's side ---------------------------------------------------------------------

    def tell(self, message: dict[str, Any]) -> None:
        """A message for the GET stream; list changes merged while one is not yet delivered."""
        method = str(message.get("method"))
        if self.closed or (method.endswith("/list_changed") and method in self._told):
            return
        if method.endswith("/list_changed"):
            self._told.add(method)
            message = {"jsonrpc": "2.0", "method": method}
        try:
            self._send.send_nowait(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _forward(
        self,
        upstream: str,
        method: str,
        params: dict[str, Any],
        client_id: Any,
        related: Emit,
        scope: trio.CancelScope,
        rounds: bool = True,
    ) -> dict[str, Any]:
        user = self.user
        try:
            link = await user.link(upstream, self.capabilities, link_version(self.version))
        except LinkError as exc:
            user.gateway.warn(f"[assay] {exc}")
            if user.gateway.metrics is not None:
                user.gateway.metrics.upstream_error(upstream, "unavailable")
            return error(client_id, UPSTREAM_FAILED, f"upstream {upstream} is not available")
        if self.modern and rounds:  # a list's pages are not asked in rounds
            return await self._flight(link, method, params, client_id, related)
        params, token = user.ids.map_token(self.number, params)
        call = Call(self, client_id, upstream, related, scope)
        user.calls.append(call)
        self._calls[client_id] = call
        if token is not None:
            user.tokens[token] = call
        try:
            # a 2026-07-28-era request: the link's session is told so (its approvals answer
            # with input_required), though the link itself is a 2025-era session
            return await link.request(
                method, params, era=self.capabilities if self.modern else None, client=self.client, client_id=client_id
            )
        finally:
            user.calls.remove(call)
            if self._calls.get(client_id) is call:
                del self._calls[client_id]
            if token is not None:
                user.tokens.pop(token, None)
                user.ids.tokens.pop(token, None)

    async def _flight(
        self, link: Link, method: str, params: dict[str, Any], client_id: Any, related: Emit
    ) -> dict[str, Any]:
        """A 2026-07-28-era request: a flight of the gateway's own, asked in rounds
        (:mod:`assay.serve.rounds`); this is its first round."""
        user = self.user
        flight = Flight(method, params)
        mapped, token = user.ids.map_token(self.number, params)
        call = Call(self, client_id, link.name, flight.related, flight.scope, flight=True)
        user.calls.append(call)
        if token is not None:
            user.tokens[token] = call

        def end() -> None:
            user.calls.remove(call)
            user.parked.drop(flight)
            if token is not None:
                user.tokens.pop(token, None)
                user.ids.tokens.pop(token, None)

        async def send() -> dict[str, Any]:
            return await link.request(method, mapped, era=self.capabilities, client=self.client, client_id=client_id)

        user.gateway.nursery.start_soon(flight.run, send, end)
        return await flight.round(related, user.parked.park)

    async def _resume(self, method: str, params: dict[str, Any], related: Emit) -> dict[str, Any]:
        """A retry of a 2026-07-28-era request whose upstream asked something: the answers go
        to the upstream's requests, and the round waits for what comes next."""
        user = self.user
        got = user.parked.take(params.get("requestState"), method, params)
        if isinstance(got, dict):
            return got
        for response in got.resume(params):
            await user.from_client(response)
        return await got.round(related, user.parked.park)

    async def _fanout(
        self, method: str, params: dict[str, Any], client_id: Any, related: Emit, scope: trio.CancelScope
    ) -> dict[str, Any]:
        gateway = self.user.gateway
        key = FANOUT_KEYS[method]
        pages: dict[str, list[Any]] = {}
        base = {k: v for k, v in params.items() if k != "cursor"}

        async def one(name: str) -> None:
            got: list[Any] = []
            cursor: Any = None
            for _ in range(MAX_PAGES):
                asked = base if cursor is None else {**base, "cursor": cursor}
                answer = await self._forward(name, method, asked, client_id, related, scope, rounds=False)
                result = answer.get("result")
                if not isinstance(result, dict):
                    if cursor is None:
                        return  # this upstream has none to give (or is down): the others go on
                    break
                page = result.get(key)
                got.extend(page if isinstance(page, list) else [])
                cursor = result.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
            pages[name] = got

        async with trio.open_nursery() as nursery:
            for name in gateway.upstreams:
                nursery.start_soon(one, name)
        items: list[Any] = []
        for name in gateway.upstreams:
            if name in pages:
                self.user.uris.learn(method, name, pages[name])
                items.extend(gateway.names.prefixed(method, name, pages[name]))
        return {"jsonrpc": "2.0", "id": client_id, "result": {key: items}}


def _for_link(params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request's params as a link (a session of the 2025 era) takes them: without
    the per-request ``io.modelcontextprotocol/`` members of ``_meta``."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or VERSION_META not in meta:
        return params
    rest = {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/")}
    out = {k: v for k, v in params.items() if k != "_meta"}
    if rest:
        out["_meta"] = rest
    return out
