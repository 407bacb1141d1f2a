"""Identity of `assay mcp serve`: the trio shell (docs/serve.md, "Identity").

:func:`open_identity` makes the :data:`~assay.gateway.contract.Authenticate` the HTTP front
calls for every request, from the config's ``oauth``, ``api_keys`` and ``no_auth``:

- a bearer token of three dot-separated parts is a JWT and goes to OAuth
  (:mod:`assay.auth.resource`, keys from :class:`KeySource`); any other goes to the API keys
  (:mod:`assay.auth.apikeys`); with only one of the two configured, every token goes to it;
- ``no_auth``: every request is the user ``anonymous`` (loopback listeners only).

:class:`KeySource` fetches the issuer's key set with httpx2 (assay's proxy and TLS rules, no
redirects, a whole-fetch deadline, at most :data:`~assay.auth.jwks.MAX_BYTES`; ``https`` except
``http`` on a loopback host) when the gateway starts and when :class:`~assay.auth.jwks.KeySetCache`
says so; one fetch at a time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import trio

from assay._version import __version__
from assay.auth.apikeys import KeyTable, parse_api_keys
from assay.auth.jwks import MAX_BYTES, JwksError, KeySetCache, PublicKey
from assay.auth.resource import (
    Challenger,
    TokenVerifier,
    bearer_token,
    looks_like_jwt,
    metadata_url,
    oauth_problems,
    resource_metadata,
)
from assay.gateway.config import ConfigError, ServeConfig
from assay.gateway.configfile import is_loopback, split_listen
from assay.gateway.contract import AuthFailure, Identity
from assay.inputs import SMALL_FILE_BYTES, InputFileError, read_input_file
from assay.shells.upstream_http.client import http_client

__all__ = ["ANONYMOUS", "FETCH_DEADLINE", "Fetch", "Identifier", "KeySource", "fetch_over_http", "open_identity"]

ANONYMOUS = Identity(key="anonymous", subject="anonymous")
FETCH_DEADLINE = 10.0

#: Fetches the key set: (the body, the ``Cache-Control`` header or None); raises JwksError.
Fetch = Callable[[], Awaitable[tuple[bytes, str | None]]]


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def fetch_over_http(url: str, *, environ: Mapping[str, str] | None = None, deadline: float = FETCH_DEADLINE) -> Fetch:
    """A :data:`Fetch` of ``url`` with httpx2 (a new connection pool per fetch: they are rare)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not (
        parts.scheme == "https"
        or (parts.scheme == "http" and (host in ("localhost", "::1") or host.startswith("127.")))
    ):
        raise ValueError(f"the key set URL must be https (http only on a loopback host): {_host(url)}")
    env = dict(os.environ if environ is None else environ)

    async def fetch() -> tuple[bytes, str | None]:
        client = http_client(
            env,
            headers={"User-Agent": f"assay/{__version__}", "Accept": "application/json, application/jwk-set+json"},
            timeout=httpx2.Timeout(deadline),
        )
        try:
            with trio.move_on_after(deadline):
                async with client.stream("GET", url) as resp:
                    if resp.status_code != 200:
                        raise JwksError(f"the key set at {_host(url)} answered HTTP {resp.status_code}")
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_BYTES:
                            raise JwksError(f"the key set at {_host(url)} is over {MAX_BYTES} bytes")
                        chunks.append(chunk)
                    return b"".join(chunks), resp.headers.get("cache-control")
            raise JwksError(f"no key set from {_host(url)} within {deadline:g} s")
        except httpx2.TimeoutException:
            raise JwksError(f"no key set from {_host(url)} within {deadline:g} s") from None
        except (httpx2.TransportError, httpx2.InvalidURL) as exc:
            raise JwksError(f"cannot reach {_host(url)} for the key set ({type(exc).__name__})") from None
        finally:
            with trio.CancelScope(shield=True):
                await client.aclose()

    return fetch


class KeySource:
    """The issuer's keys as requests need them: the cache's decisions, performed."""

    def __init__(
        self, fetch: Fetch, *, cache: KeySetCache | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.fetch = fetch
        self.cache = cache or KeySetCache()
        self.clock = clock
        self._lock = trio.Lock()

    async def _fetch(self) -> None:
        self.cache.started(self.clock())
        try:
            body, cache_control = await self.fetch()
            self.cache.fetched(body, cache_control, self.clock())
        except JwksError as exc:
            self.cache.failed(str(exc))

    async def start(self) -> str | None:
        """The first fetch; the failure's line, if it failed (requests retry, rate-limited)."""
        async with self._lock:
            await self._fetch()
        return self.cache.failure

    async def keys(self, kid: str | None) -> tuple[PublicKey, ...]:
        """The keys for a token's ``kid``: the set fetched again first when its time is up, and
        once more (rate-limited) when it lacks the ``kid``."""
        if self.cache.due(self.clock()):
            if self._lock.locked() and self.cache.loaded:
                pass  # another request is refreshing: go on with the keys held
            else:
                async with self._lock:
                    if self.cache.due(self.clock()):
                        await self._fetch()
        found = self.cache.keys(kid)
        if found or kid is None:
            return found
        async with self._lock:
            found = self.cache.keys(kid)  # fetched while this one waited
            if found or not self.cache.may_refetch(self.clock()):
                return found
            await self._fetch()
        return self.cache.keys(kid)


@dataclass
class Identifier:
    """The :data:`~assay.gateway.contract.Authenticate` of a config (call it)."""

    challenger: Challenger
    verifier: TokenVerifier | None = None
    source: KeySource | None = None
    api_keys: KeyTable | None = None
    no_auth: bool = False
    clock: Callable[[], float] = time.time
    #: the protected-resource metadata document (None without OAuth)
    metadata: dict[str, Any] | None = None
    #: tokens that passed every check, until their exp (see :meth:`_oauth`)
    verified: VerifiedTokens | None = None

    async def __call__(self, authorization: str | None) -> Identity:
        if self.no_auth:
            return ANONYMOUS
        token = bearer_token(authorization, self.challenger)
        if self.verifier is not None and (self.api_keys is None or looks_like_jwt(token)):
            return await self._oauth(token)
        assert self.api_keys is not None
        key = self.api_keys.find(token)
        if key is None:
            raise self.challenger.invalid("the API key is not known")
        return key.identity()

    async def _oauth(self, token: str) -> Identity:
        assert self.verifier is not None and self.source is not None
        now = self.clock()
        if self.verified is not None:
            known = self.verified.get(token, now, self.verifier.oauth.leeway_s)
            if known is not None:
                return known
        header = self.verifier.header(token)
        keys = await self.source.keys(header.kid)
        if not keys and not self.source.cache.loaded:
            raise AuthFailure(
                503, self.challenger.unauthenticated("").www_authenticate, "the issuer's keys are not available"
            )
        identity = self.verifier.verify(token, header, keys, now)
        if self.verified is not None:
            self.verified.put(token, identity)
        return identity

    def describe(self) -> str:
        """The start line's identity part."""
        if self.no_auth:
            return "no authentication: every request is the user anonymous (loopback only)"
        parts = []
        if self.verifier is not None:
            parts.append(f"OAuth (issuer {self.verifier.oauth.issuer})")
        if self.api_keys is not None:
            parts.append(f"API keys ({len(self.api_keys)})")
        return "identity: " + " and ".join(parts)


class VerifiedTokens:
    """Tokens that passed every check, so a client sending the same token with every request
    pays for one signature check (docs/serve.md, "OAuth 2.1"): each is served again only while
    its ``exp`` (and ``nbf``), with the leeway, still hold at the request's time; the rest of what
    was checked (signature, issuer, audience, subject, scopes) does not change with time. Bounded
    in entries and in the bytes of the tokens kept; the oldest go first."""

    def __init__(self, max_entries: int = 4096, max_bytes: int = 4 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._kept: dict[str, tuple[Identity, float, float]] = {}
        self._bytes = 0

    def get(self, token: str, now: float, leeway: float) -> Identity | None:
        kept = self._kept.get(token)
        if kept is None:
            return None
        identity, exp, nbf = kept
        if now >= exp + leeway or now < nbf - leeway:
            self._drop(token)
            return None
        return identity

    def put(self, token: str, identity: Identity) -> None:
        claims = identity.claims
        exp, nbf = claims.get("exp"), claims.get("nbf", float("-inf"))
        if not isinstance(exp, (int, float)) or not isinstance(nbf, (int, float)) or len(token) > self.max_bytes:
            return
        self._drop(token)
        while self._kept and (len(self._kept) >= self.max_entries or self._bytes + len(token) > self.max_bytes):
            self._drop(next(iter(self._kept)))
        self._kept[token] = (identity, float(exp), float(nbf))
        self._bytes += len(token)

    def _drop(self, token: str) -> None:
        if self._kept.pop(token, None) is not None:
            self._bytes -= len(token)

    def __len__(self) -> int:
        return len(self._kept)


def _listen_host(listen: str) -> str:
    try:
        return split_listen(listen)[0]
    except ValueError:
        return listen


async def open_identity(
    config: ServeConfig,
    *,
    fetch: Fetch | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    cache: KeySetCache | None = None,
    warn: Callable[[str], None] | None = None,
) -> Identifier:
    """The identity of a config, its key set fetched once (a failed fetch is ``warn``-ed and
    retried by requests) and its API key file read. Problems: :class:`ConfigError`."""
    if config.no_auth:
        if config.oauth is not None or config.api_keys is not None:
            raise ConfigError(["identity.none: cannot go with oauth or api_keys"])
        host = _listen_host(config.listen)
        if not is_loopback(host):
            raise ConfigError([f"identity.none: no authentication is only allowed on a loopback address, not {host}"])
        return Identifier(Challenger(), no_auth=True, clock=clock)
    if config.oauth is None and config.api_keys is None:
        raise ConfigError(["identity: needs oauth, api_keys, or none: true (loopback only)"])
    problems: list[str] = []
    api_keys: KeyTable | None = None
    if config.api_keys is not None:
        path = os.path.join(config.base_dir, config.api_keys.file)
        try:
            api_keys = parse_api_keys(read_input_file(path, limit=SMALL_FILE_BYTES, what="API key file"), path)
        except InputFileError as exc:
            problems.append(f"identity.api_keys: {exc}")
        except ConfigError as exc:
            problems.extend(exc.problems)
    if config.oauth is None:
        if problems:
            raise ConfigError(problems)
        return Identifier(Challenger(), api_keys=api_keys, clock=clock)
    oauth = config.oauth
    problems.extend(oauth_problems(oauth))
    if problems:
        raise ConfigError(problems)
    challenger = Challenger(metadata_url(oauth.audience), oauth.scopes)
    source = KeySource(fetch or fetch_over_http(oauth.jwks_url, environ=environ), cache=cache, clock=clock)
    failure = await source.start()
    if failure is not None and warn is not None:
        warn(f"assay: {failure}; requests with a token are refused until the key set is fetched")
    return Identifier(
        challenger,
        verifier=TokenVerifier(oauth, challenger),
        source=source,
        api_keys=api_keys,
        clock=clock,
        metadata=resource_metadata(oauth),
        verified=VerifiedTokens(),
    )
