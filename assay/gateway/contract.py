"""What the HTTP front of `assay mcp serve` and the gateway behind it ask of each other
(docs/serve.md, "How a request flows").

The front (:mod:`assay.shells.serve`) speaks HTTP and both protocol eras to the user's client;
it authenticates the request into an :class:`Identity` and hands JSON-RPC messages, already
decoded and checked, to a :class:`Gateway`. The gateway (:mod:`assay.serve`) routes them to the
upstream servers through the guard, each user's calls judged in that user's agent session.

Messages are plain decoded JSON-RPC objects (``dict``); ids are the client's own. The front
never sees an upstream; the gateway never sees HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "AuthFailure",
    "Authenticate",
    "Conversation",
    "Emit",
    "Gateway",
    "GatewayError",
    "Identity",
    "request_headers",
]

#: Sends one message to the client (a server request or notification; on the stream of the POST
#: that caused it, or on the GET stream).
Emit = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Identity:
    """Who a request comes from, as authentication established it (docs/serve.md, "Identity")."""

    #: the agent session's key: ``user:<iss>#<sub>`` for a token, ``key:<id>`` for an API key,
    #: ``anonymous`` when authentication is off (loopback only)
    key: str
    #: what records show as the subject: the token's ``sub`` or the API key's id
    subject: str
    issuer: str | None = None
    #: the token's claims (an API key's configured claims); policy ``when: claims`` reads them
    claims: Mapping[str, Any] = field(default_factory=dict)
    scopes: frozenset[str] = frozenset()
    #: the raw bearer token, for token exchange to an upstream only; never sent upstream as is
    token: str | None = field(default=None, repr=False, compare=False)


class AuthFailure(Exception):
    """A request that authentication refuses: the front answers ``status`` (401; 403 for a
    missing scope; 503 while the issuer's key set cannot be had) with this ``WWW-Authenticate`` header and a body naming nothing secret."""

    def __init__(self, status: int, www_authenticate: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.www_authenticate = www_authenticate
        self.reason = reason


#: Establishes who a request comes from, given its ``Authorization`` header's value (None when
#: absent); raises :class:`AuthFailure`. The front calls it for every request to /mcp.
Authenticate = Callable[[str | None], Awaitable[Identity]]


class GatewayError(Exception):
    """A request the gateway cannot serve: ``code`` is the JSON-RPC error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Conversation(Protocol):
    """One MCP session of one user: a 2025-era ``Mcp-Session-Id``, or one 2026-era request.

    Methods may be called concurrently (several POSTs of one session in flight)."""

    async def request(self, message: dict[str, Any], related: Emit) -> dict[str, Any]:
        """A client request (it has an ``id``): returns its response (``result`` or ``error``,
        the client's ``id``). Server requests and notifications caused by it (progress,
        sampling, elicitation, log messages) go to ``related`` before the response."""
        ...

    async def notify(self, message: dict[str, Any]) -> None:
        """A client notification, or the client's response to a server request."""
        ...

    async def listen(self, emit: Emit) -> None:
        """The GET stream: messages not tied to a request (list changes, ...), until cancelled."""
        ...

    async def aclose(self) -> None:
        """The session ends (DELETE, expiry, shutdown): pending requests are answered with an
        error and the user's upstreams are released."""
        ...


#: The HTTP headers (lower-case names) of the request the current task serves. The front sets it,
#: in the task that hands the request to the gateway, only for a gateway whose ``wants_headers``
#: attribute is true (the traces read ``traceparent`` and ``Mcp-Session-Id``: docs/serve.md,
#: "Traces"); otherwise it is never set and costs nothing.
request_headers: ContextVar[Mapping[str, str]] = ContextVar("request_headers")


class Gateway(Protocol):
    """What the front calls to open a conversation for a user."""

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[Conversation, dict[str, Any]]:
        """The client's ``initialize`` request (2025 era; for a 2026-era request, a synthesized
        one carrying its ``_meta`` version, client info and capabilities): returns the
        conversation and the ``initialize`` result to answer with."""
        ...
