"""The ``httpx2.Auth`` of an upstream of ``assay mcp serve`` (the shell; docs/serve.md,
"Credentials to upstreams").

:func:`auth_for_upstream` gives the auth the upstream's HTTP client (the upstream_http shell's
``run_remote(..., auth=...)``) sends each request with: a static header from a secret, or a
bearer token from a token endpoint: the gateway's own (the client-credentials grant; one token
for every user) or the user's (the token exchange of RFC 8693; one per user), each kept in an
:class:`UpstreamTokens` until shortly before it expires. A 401 from the upstream drops the
token, and the request is sent once more with a fresh one; a second 401 is an
:class:`~assay.auth.upstream_creds.UpstreamCredError` (one line), as is a token endpoint that
cannot be reached, answers late or refuses. The user's own bearer token goes to the token
endpoint as the subject token only, never to the upstream.

Token requests go out on a client of their own (no upstream header reaches a token endpoint),
capped (:data:`TOKEN_CAP` bytes of answer) and bounded in time (:data:`TOKEN_TIMEOUT`). Secrets
are read when first needed, off the trio thread: a static header's once per auth, a client
secret at each token request (a rotated secret is picked up).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass

import httpx2
import trio

from assay._version import __version__
from assay.auth.upstream_creds import (
    CacheKey,
    Issued,
    TokenCache,
    TokenRequest,
    UpstreamCredError,
    client_credentials_request,
    read_token_response,
    token_exchange_request,
)
from assay.gateway.config import ClientCredentials, Secret, StaticHeader, TokenExchange, Upstream
from assay.gateway.contract import Identity
from assay.inputs import InputFileError, read_input_file
from assay.shells.upstream_http.client import http_client
from assay.terminal import printable

__all__ = ["SECRET_CAP", "TOKEN_CAP", "TOKEN_TIMEOUT", "UpstreamTokens", "auth_for_upstream", "read_secret"]

#: the largest secret file read
SECRET_CAP = 64 * 1024
#: the longest token endpoint answer read
TOKEN_CAP = 64 * 1024
#: a token request's whole time: connection, request, answer
TOKEN_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
#: a 401 of an upstream whose Content-Length says more is not retried
REFUSAL_CAP = 64 * 1024


def read_secret(secret: Secret, base_dir: str, environ: Mapping[str, str]) -> str:
    """The value of ``secret``: its environment variable's, or its file's (relative to
    ``base_dir``; read capped, a regular file only; one trailing newline stripped). A secret
    that is missing or empty raises :class:`UpstreamCredError`, one line naming the source,
    never the value."""
    if secret.env is not None:
        value = environ.get(secret.env)
        if value is None:
            raise UpstreamCredError(f"the environment variable {secret.env} is not set")
        if not value:
            raise UpstreamCredError(f"the environment variable {secret.env} is empty")
        return value
    if secret.file is None:
        raise UpstreamCredError("a secret names neither a file nor an environment variable")
    path = os.path.join(base_dir, secret.file)
    try:
        data = read_input_file(path, limit=SECRET_CAP, what="secret file")
    except InputFileError as exc:
        raise UpstreamCredError(printable(str(exc))) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UpstreamCredError(f"secret file {printable(path)}: not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise UpstreamCredError(f"secret file {printable(path)}: empty")
    return text


def _source(secret: Secret) -> str:
    return f"the environment variable {secret.env}" if secret.env is not None else f"the file {secret.file}"


async def _read(secret: Secret, base_dir: str, environ: Mapping[str, str]) -> str:
    """:func:`read_secret` off the trio thread (a file read)."""
    if secret.env is not None:
        return read_secret(secret, base_dir, environ)
    return await trio.to_thread.run_sync(read_secret, secret, base_dir, environ)


@dataclass
class _Flight:
    lock: trio.Lock
    waiting: int = 0


class UpstreamTokens:
    """The tokens the gateway holds for its upstreams (one for the whole gateway): a
    :class:`~assay.auth.upstream_creds.TokenCache` on ``now`` (a monotonic clock), one token
    request at a time per cache key, and the HTTP client of the token requests (its proxies
    read from ``environ``). Close it with :meth:`aclose` (or ``async with``)."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str],
        now: Callable[[], float] = time.monotonic,
        max_entries: int = 4096,
        max_bytes: int = 8 * 1024 * 1024,
        timeout: float = TOKEN_TIMEOUT,
    ) -> None:
        self.cache = TokenCache(now=now, max_entries=max_entries, max_bytes=max_bytes)
        self.timeout = timeout
        self.requests = 0  # token requests sent (for tests and stats)
        self._flights: dict[CacheKey, _Flight] = {}
        self._client = http_client(
            environ,
            headers={"User-Agent": f"assay/{__version__}"},
            timeout=httpx2.Timeout(connect=CONNECT_TIMEOUT, read=timeout, write=timeout, pool=timeout),
        )

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._client.aclose()

    async def __aenter__(self) -> UpstreamTokens:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def token(self, key: CacheKey, fetch: Callable[[], Awaitable[Issued]]) -> str:
        """The token kept for ``key``, else one ``fetch`` gets (and it is kept); tasks that
        want the same key wait for one fetch."""
        got = self.cache.get(key)
        if got is not None:
            return got
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = _Flight(trio.Lock())
        flight.waiting += 1
        try:
            async with flight.lock:
                got = self.cache.get(key)
                if got is not None:
                    return got
                issued = await fetch()
                self.cache.put(key, issued.access_token, issued.lifetime)
                return issued.access_token
        finally:
            flight.waiting -= 1
            if flight.waiting == 0:
                del self._flights[key]

    async def post(self, request: TokenRequest, what: str) -> tuple[int, bytes | None]:
        """(status, the answer's body, or None when longer than :data:`TOKEN_CAP`)."""
        self.requests += 1
        where = _origin(request.url)
        with trio.move_on_after(self.timeout):
            try:
                async with self._client.stream("POST", request.url, data=request.form, headers=request.headers) as resp:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > TOKEN_CAP:
                            return resp.status_code, None
                        chunks.append(chunk)
                    return resp.status_code, b"".join(chunks)
            except httpx2.TimeoutException:
                pass
            except httpx2.TransportError as exc:
                raise UpstreamCredError(
                    f"{what}: cannot reach the token endpoint {where} ({type(exc).__name__})"
                ) from None
            except httpx2.InvalidURL:
                raise UpstreamCredError(f"{what}: not a URL assay can reach: {where}") from None
        raise UpstreamCredError(f"{what}: no answer from the token endpoint {where} within {self.timeout:g} s")


def _origin(url: str) -> str:
    try:
        parts = httpx2.URL(url)
        return printable(f"{parts.scheme}://{parts.netloc.decode('ascii', 'replace')}")
    except (httpx2.InvalidURL, ValueError, TypeError):
        return "<invalid URL>"


class _StaticAuth(httpx2.Auth):
    """Sets one header, its value a secret read on the first request."""

    def __init__(self, name: str, cred: StaticHeader, base_dir: str, environ: Mapping[str, str]) -> None:
        self.name = name
        self.cred = cred
        self.base_dir = base_dir
        self.environ = environ
        self._value: str | None = None

    async def _header(self) -> str:
        if self._value is None:
            try:
                value = self.cred.prefix + await _read(self.cred.value, self.base_dir, self.environ)
            except UpstreamCredError as exc:
                raise UpstreamCredError(f"upstream {self.name}: {exc}") from None
            if not all(c == "\t" or 0x20 <= ord(c) < 0x7F for c in value):
                raise UpstreamCredError(
                    f"upstream {self.name}: the header {self.cred.header} from {_source(self.cred.value)} "
                    "holds characters a header cannot carry"
                )
            self._value = value
        return self._value

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers[self.cred.header] = await self._header()
        response = yield request
        if response.status_code == 401:
            raise UpstreamCredError(
                f"upstream {self.name} refused its credential (HTTP 401 with the header {self.cred.header})"
            )


def _no_long_refusal(response: httpx2.Response, name: str) -> None:
    """A 401 that says its body is longer than :data:`REFUSAL_CAP` is not retried."""
    length = response.headers.get("content-length")
    if length is not None and not (length.isascii() and length.isdigit() and int(length) <= REFUSAL_CAP):
        raise UpstreamCredError(f"upstream {name} refused the token (HTTP 401, with a body over {REFUSAL_CAP} bytes)")


class _TokenAuth(httpx2.Auth):
    """A bearer token kept under ``key``; on a 401 a fresh one, once."""

    def __init__(
        self, name: str, tokens: UpstreamTokens, key: CacheKey, fetch: Callable[[], Awaitable[Issued]]
    ) -> None:
        self.name = name
        self.tokens = tokens
        self.key = key
        self.fetch = fetch

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.tokens.token(self.key, self.fetch)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        self.tokens.cache.drop(self.key, token)
        _no_long_refusal(response, self.name)  # httpx2 reads a refusal's body whole before a retry
        token = await self.tokens.token(self.key, self.fetch)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            self.tokens.cache.drop(self.key, token)
            raise UpstreamCredError(f"upstream {self.name} refused a fresh token too (HTTP 401)")


def auth_for_upstream(
    upstream: Upstream,
    identity: Identity,
    *,
    base_dir: str,
    environ: Mapping[str, str],
    cache: UpstreamTokens,
) -> httpx2.Auth | None:
    """The auth of ``upstream``'s HTTP client for requests made for ``identity`` (None: the
    upstream has no credential). Raises :class:`UpstreamCredError` when ``upstream`` exchanges
    the user's token and ``identity`` has none (an API key, no authentication)."""
    cred = upstream.credential
    name = printable(upstream.name)
    if cred is None:
        return None
    if isinstance(cred, StaticHeader):
        return _StaticAuth(name, cred, base_dir, environ)
    if isinstance(cred, ClientCredentials):
        cc = cred

        async def client_credentials() -> Issued:
            what = f"the client-credentials grant for upstream {name}"
            secret = await _secret_of(cc.client_secret, what, base_dir, environ)
            status, body = await cache.post(client_credentials_request(cc, secret), what)
            return read_token_response(status, body, what=what, exchange=False, hide=(secret,))

        return _TokenAuth(name, cache, ("", upstream.name, cc.audience or ""), client_credentials)
    if isinstance(cred, TokenExchange):
        te = cred
        subject = identity.token
        if not subject:
            raise UpstreamCredError(
                f"upstream {name} exchanges the user's token, and {printable(identity.subject[:200])} "
                "signed in without one (an API key or no authentication)"
            )

        async def token_exchange() -> Issued:
            what = f"the token exchange for upstream {name}"
            secret = await _secret_of(te.client_secret, what, base_dir, environ)
            status, body = await cache.post(token_exchange_request(te, secret, subject), what)
            return read_token_response(status, body, what=what, exchange=True, hide=(secret, subject))

        return _TokenAuth(name, cache, (identity.key, upstream.name, te.audience), token_exchange)
    raise TypeError(f"not a credential: {type(cred).__name__}")


async def _secret_of(secret: Secret, what: str, base_dir: str, environ: Mapping[str, str]) -> str:
    try:
        return await _read(secret, base_dir, environ)
    except UpstreamCredError as exc:
        raise UpstreamCredError(f"{what}: the client secret: {exc}") from None
