"""OAuth for remote MCP servers, as wrap uses it (docs/auth.md, "What wrap does with a login").

Built on the MCP Python SDK's OAuth client (``mcp.client.auth``): it does the protected-resource
and authorization-server discovery, the resource indicator, scope selection, registration,
PKCE, the ``iss`` check, refresh and the ``insufficient_scope`` step-up. This module gives it
assay's token store and, for wrap, replaces the one step that needs a person (the browser) by
:class:`NeedsLogin`, whose text is the one line naming the command to run. Everything here is
imported only by the ``--url`` and ``auth`` paths.
"""

from __future__ import annotations

import logging
import shlex
import warnings
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from assay.remote.tokens import FileTokenStorage, TokenFileError, load, normalize_url

if TYPE_CHECKING:
    import httpx2

__all__ = ["NeedsLogin", "auth_for_wrap", "login_command", "quiet_sdk_logs"]

CLIENT_NAME = "assay"


class NeedsLogin(Exception):
    """Wrap cannot go on without `assay mcp auth login ...`; ``str()`` is the one line to print
    (docs/auth.md, "What wrap does with a login")."""


def login_command(url: str, *, scope: str | None = None, grant: Mapping[str, Any] | None = None) -> str:
    """The `assay mcp auth login` command line that would log in again to ``url``."""
    words = ["assay", "mcp", "auth", "login", url]
    if scope:
        words += ["--scope", scope]
    grant = grant or {}
    if grant.get("kind") == "client_credentials":
        words += ["--grant", "client-credentials", "--client-id", str(grant.get("client_id", ""))]
        for key, flag in (("secret_file", "--client-secret-file"), ("secret_env", "--client-secret-env"),
                          ("private_key", "--private-key")):
            if grant.get(key):
                words += [flag, str(grant[key])]
    return " ".join(shlex.quote(w) for w in words)


def quiet_sdk_logs() -> None:
    """The SDK logs its flow errors with a traceback (and a warning on a refused refresh); the
    one line assay prints says it instead, so those loggers write nowhere."""
    for name in ("mcp.client.auth", "mcp.client.auth.oauth2"):
        logger = logging.getLogger(name)
        logger.propagate = False
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def _one(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _no_login(url: str) -> httpx2.Auth:
    """The auth wrap gets when nothing is stored: requests go out as they are, and a 401 (or a
    403 ``insufficient_scope``) raises :class:`NeedsLogin` instead of being relayed."""
    import httpx2

    class NoLogin(httpx2.Auth):
        async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            response = yield request
            if response.status_code == 401 or (
                response.status_code == 403 and "insufficient_scope" in response.headers.get("www-authenticate", "")
            ):
                raise NeedsLogin(f"{url} needs authorization and no login is stored; run: {login_command(url)}")

    return NoLogin()


def scoped_provider_class() -> type[Any]:
    """The SDK's authorization-code provider, asking for ``asked`` (the login's ``--scope``) as
    well as what the server's challenge selects (docs/auth.md, "Scopes and step-up")."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.utils import union_scopes

    class ScopedProvider(OAuthClientProvider):
        asked: str | None = None

        async def _perform_authorization(self) -> httpx2.Request:
            self.context.client_metadata.scope = union_scopes(self.asked, self.context.client_metadata.scope)
            return await super()._perform_authorization()

    return ScopedProvider


def _wrap_provider_class(base: type[Any]) -> type[Any]:
    """``base`` (an SDK provider class) made for wrap: stored expiry and metadata restored,
    refresh once on a 401, and every step that would need a person raises NeedsLogin."""

    class WrapProvider(base):
        _answered = 0
        _refreshing = False
        _refresh_tried = False
        _refresh_refused = False

        def _setup(self, storage: FileTokenStorage, grant: Mapping[str, Any]) -> None:
            import anyio

            self._one_flow = anyio.Lock()
            self._store = storage
            self._grant = dict(grant)
            storage.bind(self.context)
            storage.on_register = self._refuse_register

        def _refuse_register(self) -> None:
            raise self._needs(f"the authorization server of {self._store.url} has changed")

        def _needs(self, why: str, scope: str | None = None) -> NeedsLogin:
            url = self._store.url
            return NeedsLogin(f"{why}; run: {login_command(url, scope=scope, grant=self._grant)}")

        async def _initialize(self) -> None:
            await super()._initialize()
            expires_at = self._store.record.get("expires_at")
            self.context.token_expiry_time = None if expires_at is None else float(expires_at) - 30.0
            oauth_metadata, resource_metadata = self._store.metadata()
            if self.context.oauth_metadata is None:
                self.context.oauth_metadata = oauth_metadata
            if self.context.protected_resource_metadata is None and resource_metadata is not None:
                self.context.protected_resource_metadata = resource_metadata
                servers = [str(s) for s in resource_metadata.authorization_servers]
                if servers and self.context.auth_server_url is None:
                    self.context.auth_server_url = self._select_authorization_server(servers)

        async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
            ok: bool = await super()._handle_refresh_response(response)
            if not ok and self._grant.get("kind") != "client_credentials":
                self._refresh_refused = True
            return ok

        async def _perform_authorization(self) -> httpx2.Request:
            url = self._store.url
            if self._answered == 403:
                raise self._needs(f"{url} asks for more scope than the stored login holds",
                                  scope=self.context.client_metadata.scope)
            if self._grant.get("kind") == "client_credentials":
                request: httpx2.Request = await super()._perform_authorization()
                return request
            if self._refresh_refused:
                raise self._needs(f"the stored login for {url} has expired and its refresh was refused")
            if not self._refresh_tried and self.context.can_refresh_token():
                self._refresh_tried = True
                self._refreshing = True
                refresh: httpx2.Request = await self._refresh_token()
                return refresh
            raise self._needs(f"the stored login for {url} is no longer accepted")

        async def _handle_token_response(self, response: httpx2.Response) -> None:
            if self._refreshing:
                self._refreshing = False
                if not await self._handle_refresh_response(response):
                    raise self._needs(f"the stored login for {self._store.url} was refused and its refresh too")
                return
            await super()._handle_token_response(response)

        def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            return self._guarded(request)

        async def _guarded(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            # The usual case, without the SDK's lock (which it holds until the answer's headers
            # come, so that a slow JSON answer would hold up every other request): a valid
            # token is added and the request goes. Only a 401, a step-up or a token to refresh
            # takes the SDK's flow, one flow at a time.
            if self._initialized and self.context.is_token_valid():
                self._add_auth_header(request)
                response = yield request
                if response.status_code != 401 and not (
                    response.status_code == 403 and "insufficient_scope" in response.headers.get("www-authenticate", "")
                ):
                    return
            async with self._one_flow:
                inner = self._sdk_flow(request)
                try:
                    step = await inner.__anext__()
                    while True:
                        response = yield step
                        step = await inner.asend(response)
                except StopAsyncIteration:
                    return
                finally:
                    await inner.aclose()

        async def _sdk_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            self._answered = 0
            self._refresh_tried = False
            self._refresh_refused = False
            flow = super()._auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    if outgoing is request and not self._answered:
                        self._answered = response.status_code
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except (NeedsLogin, TokenFileError):
                raise
            except Exception as exc:  # the SDK's flow errors, metadata that does not validate
                raise self._needs(f"authorization for {self._store.url} failed ({_one(exc)})") from None
            finally:
                await flow.aclose()

    return WrapProvider


def build_client_credentials(url: str, storage: FileTokenStorage, grant: Mapping[str, Any], secret: str,
                             *, wrap: bool) -> Any:
    """The SDK's client-credentials provider (a secret, or ``private_key_jwt`` with a key file)
    for ``grant``, a record's ``grant`` member (docs/auth.md, "Machine to machine")."""
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )

    client_id = str(grant["client_id"])
    scope = grant.get("scope") or None
    issuer = grant.get("issuer") or None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an issuer left out is documented (docs/auth.md)
        if grant.get("private_key"):
            params = SignedJWTParameters(issuer=client_id, subject=client_id, signing_key=secret,
                                         signing_algorithm=str(grant.get("algorithm") or "RS256"))
            base: type[Any] = PrivateKeyJWTOAuthProvider
            cls = _wrap_provider_class(base) if wrap else base
            provider = cls(url, storage, client_id, params.create_assertion_provider(), scope=scope, issuer=issuer)
        else:
            base = ClientCredentialsOAuthProvider
            cls = _wrap_provider_class(base) if wrap else base
            provider = cls(url, storage, client_id, secret, token_endpoint_auth_method="client_secret_post",
                           scope=scope, issuer=issuer)
    if wrap:
        provider._setup(storage, grant)
    else:
        storage.bind(provider.context)
    return provider


def auth_for_wrap(url: str, *, state_dir: str | None, environ: Mapping[str, str]) -> httpx2.Auth | None:
    """The auth wrap gives its ``httpx2.AsyncClient`` for ``url`` (docs/auth.md, "What wrap does
    with a login"). With a stored login: the SDK provider over the stored record, which adds the
    bearer token, refreshes it before it expires and once on a 401, saves what it refreshes, and
    raises :class:`NeedsLogin` where only a browser could go on. With none: a pass-through auth
    that raises :class:`NeedsLogin` on a 401, so the start probe gives the one line. It never
    returns None. A token file that cannot be used raises NeedsLogin too, naming the file."""
    from assay.sessions.paths import state_dir as resolve

    quiet_sdk_logs()
    try:
        key = normalize_url(url)
    except ValueError as exc:
        raise NeedsLogin(str(exc)) from None
    state = resolve(state_dir, environ)
    try:
        record = load(state, key)
    except TokenFileError as exc:
        raise NeedsLogin(f"{exc}; then run: {login_command(url)}") from None
    if record is None or record.get("tokens") is None:
        return _no_login(url)
    storage = FileTokenStorage(state, key, record)
    grant = record.get("grant") or {"kind": "authorization_code"}
    if grant.get("kind") == "client_credentials":
        from assay.remote.login import read_secret

        try:
            secret = read_secret(grant, environ)
        except ValueError as exc:
            raise NeedsLogin(f"{exc}; run: {login_command(url, grant=grant)}") from None
        provider: httpx2.Auth = build_client_credentials(url, storage, grant, secret, wrap=True)
        return provider
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    info = record.get("client_info") or {}
    redirects = info.get("redirect_uris") or ["http://127.0.0.1/callback"]
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME, redirect_uris=redirects, grant_types=["authorization_code", "refresh_token"],
        response_types=["code"], scope=(record["tokens"].get("scope") or None),
    )
    cls = _wrap_provider_class(OAuthClientProvider)
    client_metadata_url = grant.get("client_metadata_url") or None
    wrapped = cls(url, metadata, storage, _refuse_redirect, _refuse_callback, client_metadata_url=client_metadata_url)
    wrapped._setup(storage, grant)
    result: httpx2.Auth = wrapped
    return result


async def _refuse_redirect(authorization_url: str) -> None:
    raise NeedsLogin("a browser step is needed")  # replaced by _perform_authorization's line


async def _refuse_callback() -> Any:
    raise NeedsLogin("a browser step is needed")

