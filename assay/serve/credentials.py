"""The credentials a remote upstream is reached with (docs/serve.md, "Upstreams and the agent
session of a user"): the gateway's own OAuth client credentials, or a token exchanged (RFC 8693)
for the user's token, each asked of the token endpoint when a link opens and kept until shortly
before it expires; sent as ``Authorization: Bearer`` on every request to the upstream (a 401
asks for a fresh one once). The user's own token is sent to the token endpoint only, never
upstream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping

import httpx2
import trio

from assay.auth.clientauth import basic_header
from assay.auth.grants import GrantError, Tokens, read_tokens
from assay.gateway.config import ClientCredentials, TokenExchange

__all__ = ["ACCESS_TOKEN_TYPE", "TOKEN_EXCHANGE", "BearerAuth", "GetToken", "TokenCache", "TokenError", "subject_token"]

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: a token is asked again this long before it expires
MARGIN_S = 30.0
#: how long a token without ``expires_in`` is kept
DEFAULT_LIFETIME_S = 300.0
TIMEOUT_S = 10.0


class TokenError(Exception):
    """No token from the token endpoint (one line, nothing secret)."""


GetToken = Callable[[bool], Awaitable[str]]


class BearerAuth(httpx2.Auth):
    """``Authorization: Bearer <token>`` on every request; after a 401, once more with a fresh
    token. ``get(fresh)`` gives the token."""

    def __init__(self, get: GetToken) -> None:
        self.get = get

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = "Bearer " + await self._token(False, request)
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = "Bearer " + await self._token(True, request)
            yield request

    async def _token(self, fresh: bool, request: httpx2.Request) -> str:
        try:
            return await self.get(fresh)
        except TokenError as exc:
            raise httpx2.ConnectError(str(exc), request=request) from None


class TokenCache:
    """The tokens the gateway holds, by key (the upstream; for a token exchange, also the user)."""

    def __init__(self, environ: Mapping[str, str], clock: Callable[[], float] = trio.current_time) -> None:
        self.environ = environ
        self.clock = clock
        self._tokens: dict[tuple[str, ...], tuple[str, float]] = {}
        self._locks: dict[tuple[str, ...], trio.Lock] = {}

    def getter(
        self, key: tuple[str, ...], credential: ClientCredentials | TokenExchange, secret: str, subject: str | None
    ) -> GetToken:
        async def get(fresh: bool) -> str:
            lock = self._locks.setdefault(key, trio.Lock())
            async with lock:
                held = self._tokens.get(key)
                if held is not None and not fresh and held[1] > self.clock():
                    return held[0]
                tokens = await self._ask(credential, secret, subject)
                lifetime = DEFAULT_LIFETIME_S if tokens.expires_in is None else float(tokens.expires_in)
                self._tokens[key] = (tokens.access_token, self.clock() + max(0.0, lifetime - MARGIN_S))
                return tokens.access_token

        return get

    async def _ask(self, credential: ClientCredentials | TokenExchange, secret: str, subject: str | None) -> Tokens:
        form: dict[str, str]
        issued: str | None = None
        if isinstance(credential, TokenExchange):
            if not subject:
                raise TokenError("token exchange needs the user's token, and this user has none")
            form = {
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": subject,
                "subject_token_type": ACCESS_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE,
                "audience": credential.audience,
            }
            what, issued = "the token exchange", ACCESS_TOKEN_TYPE
        else:
            form = {"grant_type": "client_credentials"}
            if credential.audience:
                form["audience"] = credential.audience
            what = "the client credentials grant"
        if credential.scope:
            form["scope"] = credential.scope
        from assay.shells.upstream_http.client import http_client

        headers = {"Authorization": basic_header(credential.client_id, secret), "Accept": "application/json"}
        try:
            async with http_client(self.environ, timeout=TIMEOUT_S) as client:
                response = await client.post(credential.token_url, data=form, headers=headers)
        except httpx2.HTTPError as exc:
            raise TokenError(f"the token endpoint cannot be reached ({type(exc).__name__})") from None
        try:
            return read_tokens(
                response.status_code, response.content, what=what, asked_scope=credential.scope, issued_type=issued
            )
        except GrantError as exc:
            raise TokenError(str(exc)) from None


def subject_token(token: str | None) -> str | None:
    """The user's token as a token exchange sends it: without an ``Authorization`` scheme."""
    if token is None:
        return None
    scheme, _, rest = token.partition(" ")
    return rest.strip() if rest and scheme.lower() == "bearer" else token
