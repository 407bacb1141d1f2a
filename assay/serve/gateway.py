"""The gateway behind ``assay mcp serve``'s HTTP front: one agent session per user across the
upstreams (docs/serve.md, "Upstreams and the agent session of a user").

:class:`ServeGateway` is the contract's :class:`~assay.gateway.contract.Gateway`. Per user
(:attr:`Identity.key`) and upstream it keeps one guarded :class:`~assay.serve.link.Link` (wrap's
session and relay, the user's policy, the upstream's name as the label), all of a user's links
sharing one agent session in the store (``SessionKey(kind="user")``), so flow rules, rates,
totals and taint span the user's upstreams and conversations, and a second user never shares a
link, a process or a session. The routing itself is :mod:`assay.gateway.router` (sans-IO); a
user's conversations and links, and the messages between them, are :mod:`assay.serve.users`;
this module opens the links and keeps the users.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import trio

from assay.gateway.config import ServeConfig, Upstream
from assay.gateway.contract import GatewayError, Identity
from assay.gateway.router import (
    INVALID_PARAMS,
    Names,
    client_info,
    initialize_result,
    negotiate,
)
from assay.policy.model import Policy
from assay.policy.shared import shares_state
from assay.policy.storeapi import Store
from assay.policy.users import for_user
from assay.auth.upstream_auth import UpstreamTokens, auth_for_upstream
from assay.auth.upstream_creds import UpstreamCredError
from assay.serve.link import Link, LinkError
from assay.serve.observe import Metrics, Watch
from assay.serve.users import MAX_PAGES, REQUEST_CANCELLED, Conversation, User
from assay.serve.otlplogs import RecordLogs
from assay.serve.traces import Tracing
from assay.session.effects import Sink
from assay.session.session import SessionOptions, WrapSession
from assay.shells.stdio.pipes import RecordSink
from assay.shells.stdio.relay import Approver

__all__ = ["MAX_PAGES", "REQUEST_CANCELLED", "ServeGateway", "open_gateway"]  # the first two: users.py's

#: what a link's frame adds to the body it carries (the link's own id for the client's)
FRAME_SLACK = 64 * 1024


def _asks_approval(policy: Policy) -> bool:
    tools = policy.tools
    return tools.approval_required is not None or tools.approval_required_classes is not None


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
        record_logs: RecordLogs | None = None,
    ) -> None:
        self.config = config
        # docs/serve.md, "Health and metrics": kept only with the config's admin_listen
        self.metrics = metrics
        self.tracing = tracing  # docs/serve.md, "Traces": kept only with the config's otel
        # docs/serve.md, "Records as OTLP logs": kept only with the config's otel.logs
        self.record_logs = record_logs
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
        # a message the front took (up to limits.max_body) fits one frame of a link: the guard
        # would refuse a longer one, unanswered (docs/serve.md, "How a request flows")
        self.max_frame_bytes = max(max_frame_bytes, config.limits.max_body_bytes + FRAME_SLACK)
        self.upstreams: dict[str, Upstream] = {up.name: up for up in config.upstreams}
        self.names = Names(tuple(self.upstreams), config.separator)
        self.users: dict[str, User] = {}
        self._conversations = 0
        # tokens for url upstreams (client credentials, per-user token exchange), kept per key
        # until shortly before they expire (docs/serve.md, "Credentials to upstreams")
        self.tokens = UpstreamTokens(environ=self.environ)

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[Conversation, dict[str, Any]]:
        params = initialize.get("params")
        if not isinstance(params, dict):
            raise GatewayError(INVALID_PARAMS, "initialize needs params")
        version = negotiate(params.get("protocolVersion"))
        user = self.users.get(who.key)
        if user is None:
            user = self.users[who.key] = User(self, who, for_user(self.policy, who.claims))
        else:
            user.who = who  # the latest token (a token exchange's subject)
        caps = params.get("capabilities")
        self._conversations += 1
        conversation = Conversation(
            user, self._conversations, version, caps if isinstance(caps, dict) else {}, client_info(params)
        )
        user.conversations[conversation.number] = conversation
        return conversation, initialize_result(version)

    def forget_if_idle(self, user: User) -> None:
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

    async def open_link(self, user: User, upstream: Upstream, capabilities: Mapping[str, Any], version: str) -> Link:
        policy = user.policy
        shared = None
        clients: dict[int, tuple[str, str | None]] = {}  # the link's request id -> its client, while in flight
        client_ids: dict[int, Any] = {}  # the link's request id -> the id the client sent, while in flight
        # approvals share the session too: a retry's approval is taken once across the user's links
        if self.store_for is not None and (shares_state(policy) or _asks_approval(policy)):
            shared = (self.store_for(), user.key)
        eras: dict[Any, Mapping[str, Any]] = {}
        watch: Watch | None = self.metrics.link(upstream.name) if self.metrics is not None else None
        if self.tracing is not None:
            watch = self.tracing.link(upstream.name, watch)
        sinks = self.sinks
        if self.record_logs is not None:  # the link's decision events become log records too
            logs = self.record_logs.link(watch, sinks, client_ids)
            watch = logs
            sinks = {**sinks, Sink.DECISION_LOG: logs}
        links: list[Link] = []  # the link, once made (the session's on_unread answers its requests)
        options = SessionOptions(
            label=upstream.name,
            event_source="assay://serve/" + quote(upstream.name, safe=""),
            decision_sinks=tuple(s for s in (Sink.DECISION_LOG, Sink.DECISION_LOG_NEW) if s in sinks),
            audit=Sink.AUDIT_LOG in sinks,
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
            client_id_of=lambda request_id: (
                client_ids.get(request_id, request_id) if request_id.__class__ is int else request_id
            ),
            on_decision=watch.decided if watch is not None else None,
            on_unread=lambda line, reason: links[0].unread(line, reason) if links else None,
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
            sinks=sinks,
            warn=self.warn,
            base_dir=self.config.base_dir,
            environ=self.environ,
            max_frame_bytes=self.max_frame_bytes,
            auth=auth,
            eras=eras,
            approver=self.approver,
            clients=clients,
            watch=watch,
            client_ids=client_ids,
        )
        links.append(link)

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
    record_logs: RecordLogs | None = None,
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
            record_logs=record_logs,
        )
        try:
            yield gateway
        finally:
            gateway.close_links()
            with trio.CancelScope(shield=True):
                await gateway.tokens.aclose()
