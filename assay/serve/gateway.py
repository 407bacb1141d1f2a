"""The gateway behind ``assay mcp serve``'s HTTP front: one agent session per user across the
upstreams (docs/serve.md, "Upstreams and the agent session of a user").

:class:`ServeGateway` is the contract's :class:`~assay.gateway.contract.Gateway`. Per user
(:attr:`Identity.key`) and upstream it keeps one guarded :class:`~assay.serve.link.Link` (wrap's
session and relay, the user's policy, the upstream's name as the label), all of a user's links
sharing one agent session in the store (``SessionKey(kind="user")``), so flow rules, rates,
totals and taint span the user's upstreams and conversations, and a second user never shares a
link, a process or a session. The routing itself is :mod:`assay.gateway.router` (sans-IO); this
module moves the messages between a user's conversations and links.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import trio

from assay.gateway.config import ServeConfig, Upstream
from assay.gateway.contract import Emit, GatewayError, Identity
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
    client_info,
    error,
    for_era,
    initialize_result,
    is_modern,
    link_version,
    negotiate,
    route_of,
    target_of,
)
from assay.policy.model import Policy
from assay.policy.shared import shares_state
from assay.policy.storeapi import SessionKey, Store
from assay.policy.users import for_user
from assay.auth.upstream_auth import UpstreamTokens, auth_for_upstream
from assay.auth.upstream_creds import UpstreamCredError
from assay.serve.link import Link, LinkError
from assay.serve.observe import Metrics, Watch
from assay.serve.rounds import Flight, Parked
from assay.serve.traces import Tracing
from assay.session.effects import Sink
from assay.session.session import SessionOptions, WrapSession
from assay.shells.stdio.pipes import RecordSink
from assay.shells.stdio.relay import Approver

__all__ = ["MAX_PAGES", "REQUEST_CANCELLED", "ServeGateway", "open_gateway"]

#: pages of one upstream's list the gateway follows (``nextCursor``) before it stops
MAX_PAGES = 100
REQUEST_CANCELLED = -32800
NO_CLIENT = -32603


@dataclass(eq=False)
class _Call:
    """A client request in flight on one link: where what it causes goes."""

    conversation: _Conversation
    client_id: Any
    link: str
    related: Emit
    scope: trio.CancelScope
    flight: bool = False  # a 2026-07-28-era request in rounds: it outlives its conversation


@dataclass(eq=False)
class _User:
    gateway: ServeGateway
    who: Identity
    policy: Policy
    links: dict[str, Link] = field(default_factory=dict)
    starting: dict[str, trio.Event] = field(default_factory=dict)
    conversations: dict[int, _Conversation] = field(default_factory=dict)
    calls: list[_Call] = field(default_factory=list)
    ids: Ids = field(default_factory=Ids)
    uris: UriBook = field(default_factory=UriBook)
    tokens: dict[str, _Call] = field(default_factory=dict)
    asked: dict[str, _Call] = field(default_factory=dict)
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
            link = await self.gateway._open_link(self, self.gateway.upstreams[name], capabilities, version)
            self.links[name] = link
            return link
        finally:
            del self.starting[name]
            event.set()
            self.gateway.forget_if_idle(self)

    def latest_call(self, link: str) -> _Call | None:
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


class _Conversation:
    """One MCP session of one user (the contract's :class:`~assay.gateway.contract.Conversation`)."""

    def __init__(
        self,
        user: _User,
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
        self._calls: dict[Any, _Call] = {}

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
            call = self._calls.get(params.get("requestId"))
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
        call = _Call(self, client_id, upstream, related, scope)
        user.calls.append(call)
        self._calls[client_id] = call
        if token is not None:
            user.tokens[token] = call
        try:
            # a 2026-07-28-era request: the link's session is told so (its approvals answer
            # with input_required), though the link itself is a 2025-era session
            return await link.request(
                method, params, era=self.capabilities if self.modern else None, client=self.client
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
        call = _Call(self, client_id, link.name, flight.related, flight.scope, flight=True)
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
            return await link.request(method, mapped, era=self.capabilities, client=self.client)

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


def _asks_approval(policy: Policy) -> bool:
    tools = policy.tools
    return tools.approval_required is not None or tools.approval_required_classes is not None


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


class ServeGateway:
    """The gateway (:class:`~assay.gateway.contract.Gateway`); build it with :func:`open_gateway`."""

    def __init__(
        self,
        config: ServeConfig,
        policy: Policy,
        nursery: trio.Nursery,
        *,
        store_for: Callable[[], Store] | None = None,
        sinks: dict[Sink, RecordSink] | None = None,
        warn: Callable[[str], None],
        environ: Mapping[str, str] | None = None,
        max_frame_bytes: int = 16 << 20,
        approval_key: bytes | None = None,
        approver: Approver | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.config = config
        # docs/serve.md, "Health and metrics": kept only with the config's admin_listen
        self.metrics = metrics
        self.tracing = tracing  # docs/serve.md, "Traces": kept only with the config's otel
        # signs 2026-07-28-era approvals (docs/serve.md, "Approvals"): the config's, or one of
        # this process's own (an approval asked then is taken by this process only)
        self.approval_key = approval_key if approval_key is not None else secrets.token_bytes(32)
        self.approver = approver  # the config's approvals (docs/serve.md, "Out-of-band approvers")
        self.policy = policy
        self.nursery = nursery
        self.store_for = store_for
        self.sinks = sinks if sinks is not None else {}
        self.warn = warn
        self.environ = os.environ if environ is None else environ
        self.max_frame_bytes = max_frame_bytes
        self.upstreams: dict[str, Upstream] = {up.name: up for up in config.upstreams}
        self.names = Names(tuple(self.upstreams), config.separator)
        self.users: dict[str, _User] = {}
        self._conversations = 0
        # tokens for url upstreams (client credentials, per-user token exchange), kept per key
        # until shortly before they expire (docs/serve.md, "Credentials to upstreams")
        self.tokens = UpstreamTokens(environ=self.environ)

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[_Conversation, dict[str, Any]]:
        params = initialize.get("params")
        if not isinstance(params, dict):
            raise GatewayError(INVALID_PARAMS, "initialize needs params")
        version = negotiate(params.get("protocolVersion"))
        user = self.users.get(who.key)
        if user is None:
            user = self.users[who.key] = _User(self, who, for_user(self.policy, who.claims))
        else:
            user.who = who  # the latest token (a token exchange's subject)
        caps = params.get("capabilities")
        self._conversations += 1
        conversation = _Conversation(
            user, self._conversations, version, caps if isinstance(caps, dict) else {}, client_info(params)
        )
        user.conversations[conversation.number] = conversation
        return conversation, initialize_result(version)

    def forget_if_idle(self, user: _User) -> None:
        """Forget ``user`` once no conversation, call or parked 2026-07-28-era request of theirs is
        left and no link of theirs is open or opening, so the gateway's memory is bounded by the users it serves, not the users it
        served (docs/serve.md, "Upstreams and the agent session of a user"). Their agent session
        is the store's and stays; what the gateway learnt for them (the URIs listed) goes."""
        if user.conversations or user.starting or user.calls or len(user.parked):
            return  # (a 2026-07-28-era flight outlives its conversation, and its retry finds it here)
        if any(not link.closed.is_set() for link in user.links.values()):
            return
        if self.users.get(user.who.key) is user:
            del self.users[user.who.key]

    def links_of(self, key: str) -> dict[str, Link]:
        """The live links of the user ``key`` (tests, the status of a user)."""
        user = self.users.get(key)
        return {} if user is None else {n: link for n, link in user.links.items() if link.alive}

    async def _open_link(self, user: _User, upstream: Upstream, capabilities: Mapping[str, Any], version: str) -> Link:
        policy = user.policy
        shared = None
        clients: dict[int, tuple[str, str | None]] = {}  # the link's request id -> its client, while in flight
        # approvals share the session too: a retry's approval is taken once across the user's links
        if self.store_for is not None and (shares_state(policy) or _asks_approval(policy)):
            shared = (self.store_for(), user.key)
        eras: dict[Any, Mapping[str, Any]] = {}
        watch: Watch | None = self.metrics.link(upstream.name) if self.metrics is not None else None
        if self.tracing is not None:
            watch = self.tracing.link(upstream.name, watch)
        options = SessionOptions(
            label=upstream.name,
            event_source="assay://serve/" + quote(upstream.name, safe=""),
            decision_sinks=tuple(s for s in (Sink.DECISION_LOG, Sink.DECISION_LOG_NEW) if s in self.sinks),
            audit=Sink.AUDIT_LOG in self.sinks,
            max_frame_bytes=self.max_frame_bytes,
            hide_denied_tools=True,
            shared_session_key=user.who.key,
            announce_exit=False,
            subject=user.who.subject,
            approval_signing_key=self.approval_key,
            request_era=lambda frame: eras.get(frame.get("id")),
            approver=self.config.approvals.kind if self.config.approvals is not None else None,
            approver_timeout=self.config.approvals.timeout_s if self.config.approvals is not None else None,
            client_of=lambda request_id: clients.get(request_id) if request_id.__class__ is int else None,
            on_decision=watch.decided if watch is not None else None,
        )
        session = WrapSession(policy, options, clock=trio.current_time, shared=shared)
        auth = None
        if upstream.url is not None:
            try:
                auth = auth_for_upstream(
                    upstream, user.who, base_dir=self.config.base_dir, environ=self.environ, cache=self.tokens
                )
            except UpstreamCredError as exc:
                if shared is not None:
                    await shared[0].aclose()
                raise LinkError(f"upstream {upstream.name}: {exc}") from None
        link = Link(
            upstream,
            session,
            capabilities=capabilities,
            version=version,
            on_message=user.from_link,
            sinks=self.sinks,
            warn=self.warn,
            base_dir=self.config.base_dir,
            environ=self.environ,
            max_frame_bytes=self.max_frame_bytes,
            auth=auth,
            eras=eras,
            approver=self.approver,
            clients=clients,
            watch=watch,
        )

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await link.run(task_status)
            except LinkError as exc:
                if not link.initialize_result:
                    raise  # before started: nursery.start raises it to the caller
                self.warn(f"[assay] {exc}")
            finally:
                if shared is not None:
                    with trio.CancelScope(shield=True):
                        await shared[0].aclose()
                if user.links.get(upstream.name) is link:
                    del user.links[upstream.name]
                self.forget_if_idle(user)

        try:
            await self.nursery.start(run)
        except BaseExceptionGroup as group:  # a LinkError of the start, however trio wraps it
            found = group.subgroup(LinkError)
            if found is None:
                raise
            first: BaseException = found
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
        return link

    def close_links(self) -> None:
        for user in self.users.values():
            for link in user.links.values():
                link.alive = False
                link.close()


@asynccontextmanager
async def open_gateway(
    config: ServeConfig,
    policy: Policy,
    *,
    store_for: Callable[[], Store] | None = None,
    sinks: dict[Sink, RecordSink] | None = None,
    warn: Callable[[str], None],
    environ: Mapping[str, str] | None = None,
    approval_key: bytes | None = None,
    approver: Approver | None = None,
    metrics: Metrics | None = None,
    tracing: Tracing | None = None,
) -> AsyncIterator[ServeGateway]:
    """A gateway whose links run in a nursery of their own; at the end every link is closed
    (wrap's lifecycle stops each upstream) and waited for."""
    async with trio.open_nursery() as nursery:
        gateway = ServeGateway(
            config,
            policy,
            nursery,
            store_for=store_for,
            sinks=sinks,
            warn=warn,
            environ=environ,
            approval_key=approval_key,
            approver=approver,
            metrics=metrics,
            tracing=tracing,
        )
        try:
            yield gateway
        finally:
            gateway.close_links()
            with trio.CancelScope(shield=True):
                await gateway.tokens.aclose()
