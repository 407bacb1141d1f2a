"""The OAuth flows over the sans-IO pieces (the shell; docs/auth.md).

Discovery (the protected-resource metadata, then the metadata of the issuer it names), a
client's credentials from a registration and the sources a grant names, one token request,
dynamic registration, the browser's authorization-code flow with PKCE, and the grants that need
no person: refresh, client credentials, and the enterprise grant (an identity provider's ID
token exchanged for an ID-JAG, then the JWT bearer grant). Each raises :class:`FlowError` (one
line) when it cannot go on; a server's refusal of a grant is a :class:`GrantError`.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio

from assay.auth import clientauth, grants
from assay.auth.callback import Callback
from assay.auth.discovery import (
    DiscoveryError,
    Resource,
    Server,
    as_urls,
    check_resource,
    check_server,
    issuers_match,
    prm_urls,
)
from assay.auth.grants import Tokens
from assay.auth.record import CLIENT_CREDENTIALS, ID_JAG_GRANT
from assay.auth.sources import read_key, read_source
from assay.auth.web import Web, WebError

__all__ = [
    "LOGIN_TIMEOUT",
    "Context",
    "FlowError",
    "browser_login",
    "credentials",
    "find_resource",
    "find_server",
    "locate",
    "machine_tokens",
    "refresh",
    "token",
]

LOGIN_TIMEOUT = 300.0  # seconds a person gets to answer in the browser


class FlowError(Exception):
    """A flow that cannot go on; ``str()`` is one line."""


@dataclass
class Context:
    """What the flows need from outside: the HTTP client, the environment, the clock and
    entropy, and where a line for the person goes."""

    web: Web
    environ: Mapping[str, str]
    say: Callable[[str], None] = lambda _line: None
    platform: str = sys.platform
    no_browser: bool = False
    timeout: float = LOGIN_TIMEOUT
    now: Callable[[], float] = time.time
    entropy: Callable[[int], bytes] = os.urandom


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def find_resource(ctx: Context, url: str, hint: str | None) -> Resource | None:
    """The server's protected-resource metadata (the challenge's ``resource_metadata`` first,
    then the well-known URLs); None when it publishes none. Asks the resource server only."""
    for where in prm_urls(url, hint):
        status, doc = await ctx.web.get_json(where)
        if status == 429 or status >= 500:
            raise FlowError(f"the protected-resource metadata at {where} answered HTTP {status}")
        if status == 200 and doc is not None:
            try:
                return check_resource(doc, url, where)
            except DiscoveryError as exc:
                raise FlowError(str(exc)) from None
    return None


async def find_server(ctx: Context, issuer: str) -> Server:
    """The checked metadata of ``issuer``, from its own well-known URLs."""
    for where in as_urls(issuer):
        status, doc = await ctx.web.get_json(where)
        if status >= 500 or status == 429:
            raise FlowError(f"the authorization-server metadata at {where} answered HTTP {status}")
        if status == 200 and doc is not None:
            try:
                return check_server(doc, issuer, where)
            except DiscoveryError as exc:
                raise FlowError(str(exc)) from None
    raise FlowError(f"no authorization-server metadata for {issuer}")


async def locate(ctx: Context, url: str, hint: str | None, pinned: str | None) -> tuple[Resource | None, Server]:
    """The resource's metadata and the authorization server a new login goes to: ``pinned``
    (``--issuer``: it must be one the resource names), else the first the resource names, else
    (a server without protected-resource metadata) the server's own origin."""
    resource = await find_resource(ctx, url, hint)
    if resource is not None:
        named = resource.authorization_servers
        if pinned is not None and not any(issuers_match(pinned, n) for n in named):
            raise FlowError(
                f"{url} names {', '.join(named)[:300]} as its authorization server, not {pinned} (--issuer)"
            )
        issuer = pinned or named[0]
    else:
        issuer = pinned or _origin(url)
    return resource, await find_server(ctx, issuer)


def credentials(
    client: Mapping[str, Any], grant: Mapping[str, Any], environ: Mapping[str, str]
) -> clientauth.Credentials:
    """The client's credentials: its registration (id, a secret a server issued or one stored
    at login) and what the grant names (a key file, a secret's file or variable)."""
    client_id = client.get("client_id") or grant.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise FlowError("the login has no client id")
    try:
        signer = read_key(str(grant["private_key"])) if grant.get("private_key") else None
        secret = client.get("client_secret")
        if secret is None and (grant.get("secret_file") or grant.get("secret_env")):
            secret = read_source(grant, "secret", environ, "the client secret")
    except ValueError as exc:
        raise FlowError(str(exc)) from None
    # the method a registration fixed: a dynamic one's (and, in a record written before
    # "registered" was kept, the one it recorded); a client given or a document: chosen per server
    method = client.get("token_endpoint_auth_method") if client.get("registered") in ("dynamic", None) else None
    if method is not None and not isinstance(method, str):
        raise FlowError("the login's client registration names no usable authentication method")
    return clientauth.Credentials(client_id, secret if isinstance(secret, str) else None, signer, method)


async def token(
    ctx: Context,
    server: Server,
    creds: clientauth.Credentials,
    form: dict[str, str],
    *,
    what: str,
    asked_scope: str | None,
    issued_type: str | None = None,
) -> Tokens:
    """One token request to ``server`` (and nowhere else), authenticated as ``creds``."""
    jti = base64.urlsafe_b64encode(ctx.entropy(18)).decode("ascii")
    try:
        body, headers = clientauth.authenticate(creds, server, form, now=ctx.now(), jti=jti)
    except clientauth.ClientAuthError as exc:
        raise FlowError(str(exc)) from None
    try:
        status, answer = await ctx.web.post_form(server.token_endpoint, body, headers)
    except WebError as exc:
        raise FlowError(str(exc)) from None
    return grants.read_tokens(status, answer, what=what, asked_scope=asked_scope, issued_type=issued_type)


def _with(form: dict[str, str], **extra: str | None) -> dict[str, str]:
    return {**form, **{k: v for k, v in extra.items() if v}}


async def refresh(
    ctx: Context, server: Server, creds: clientauth.Credentials, refresh_token: str, resource: str, scope: str | None
) -> Tokens:
    """The refresh grant; the new tokens keep the refresh token when the server sends none."""
    tokens = await token(
        ctx,
        server,
        creds,
        _with({"grant_type": "refresh_token", "refresh_token": refresh_token}, resource=resource),
        what="the refresh",
        asked_scope=scope,
    )
    if tokens.refresh_token is None:
        tokens = Tokens(tokens.access_token, tokens.token_type, refresh_token, tokens.scope, tokens.expires_in)
    return tokens


async def machine_tokens(
    ctx: Context,
    server: Server,
    creds: clientauth.Credentials,
    grant: Mapping[str, Any],
    resource: str,
    scope: str | None,
) -> Tokens:
    """A token without a person: the client-credentials grant, or the enterprise grant."""
    if grant.get("kind") == CLIENT_CREDENTIALS:
        return await token(
            ctx,
            server,
            creds,
            _with({"grant_type": "client_credentials"}, resource=resource, scope=scope),
            what="the client-credentials grant",
            asked_scope=scope,
        )
    if grant.get("kind") != ID_JAG_GRANT:
        raise FlowError("this login needs a browser")
    if server.grant_types is not None and grants.JWT_BEARER not in server.grant_types:
        raise FlowError(f"the authorization server {server.issuer} does not take the JWT bearer grant")
    try:
        id_token = read_source(grant, "id_token", ctx.environ, "the ID token")
        idp_creds = clientauth.Credentials(
            str(grant.get("idp_client_id") or ""),
            read_source(grant, "idp_secret", ctx.environ, "the identity provider's client secret")
            if grant.get("idp_secret_file") or grant.get("idp_secret_env")
            else None,
        )
    except ValueError as exc:
        raise FlowError(str(exc)) from None
    if not idp_creds.client_id:
        raise FlowError("the enterprise login has no client id at the identity provider")
    idp = await find_server(ctx, str(grant.get("idp_issuer") or ""))
    exchange = _with(
        {
            "grant_type": grants.TOKEN_EXCHANGE,
            "requested_token_type": grants.ID_JAG,
            "subject_token": id_token,
            "subject_token_type": grants.ID_TOKEN,
            "audience": server.issuer,
        },
        resource=resource,
        scope=scope,
    )
    jag = await token(
        ctx,
        idp,
        idp_creds,
        exchange,
        what="the exchange of the ID token for an ID-JAG",
        asked_scope=scope,
        issued_type=grants.ID_JAG,
    )
    return await token(
        ctx,
        server,
        creds,
        _with({"grant_type": grants.JWT_BEARER, "assertion": jag.access_token}, resource=resource, scope=scope),
        what="the JWT bearer grant",
        asked_scope=scope,
    )


def _port(client: Mapping[str, Any]) -> int:
    for uri in client.get("redirect_uris") or ():
        try:
            parts = urlsplit(str(uri))
            if parts.hostname == "127.0.0.1" and parts.path == "/callback" and parts.port:
                return parts.port
        except ValueError:
            continue
    return 0


async def _register(ctx: Context, server: Server, redirect: str, scope: str | None) -> dict[str, Any]:
    if server.registration_endpoint is None:
        raise FlowError(
            f"the authorization server {server.issuer} offers no registration; give a client "
            "registered beforehand (assay mcp auth login --client-id ID)"
        )
    body = grants.registration_body(redirect_uris=[redirect], scope=scope, method=clientauth.NONE)
    try:
        status, answer = await ctx.web.post_json(server.registration_endpoint, body)
    except WebError as exc:
        raise FlowError(str(exc)) from None
    doc = grants.read_json(answer)
    if status not in (200, 201) or not isinstance(doc, dict) or not isinstance(doc.get("client_id"), str):
        raise FlowError(f"the registration at {server.issuer} did not work (HTTP {status})")
    method = doc.get("token_endpoint_auth_method")
    if method is None:  # the registration's default
        method = clientauth.BASIC if doc.get("client_secret") else clientauth.NONE
    if method not in (clientauth.NONE, clientauth.BASIC, clientauth.POST) or (
        method != clientauth.NONE and not isinstance(doc.get("client_secret"), str)
    ):
        raise FlowError(f"the registration at {server.issuer} gave a client assay cannot use ({method})")
    client = {
        "client_id": doc["client_id"],
        "token_endpoint_auth_method": method,
        "redirect_uris": [redirect],
        "registered": "dynamic",
    }
    if method != clientauth.NONE:
        client["client_secret"] = doc["client_secret"]
    return client


async def browser_login(
    ctx: Context,
    server: Server,
    resource: str,
    scope: str | None,
    client: dict[str, Any] | None,
    grant: Mapping[str, Any],
) -> tuple[Tokens, dict[str, Any]]:
    """The authorization-code flow with PKCE through a browser: (the tokens, the client used).
    ``client`` is the registration to use (one given or stored), or None: the client then uses
    its metadata document where the grant names one and the server takes them, else registers."""
    callback = Callback()
    try:
        redirect = await callback.open(_port(client) if client else 0)
    except OSError as exc:
        raise FlowError(f"cannot listen on 127.0.0.1 for the browser's answer ({exc.strerror or exc})") from None
    if (
        client is not None
        and client.get("registered") in ("dynamic", None)
        and client.get("redirect_uris")
        and redirect not in client["redirect_uris"]
    ):
        client = None  # its port is taken: a new registration
    if client is None and grant.get("client_metadata_url") and server.metadata_documents:
        client = {"client_id": str(grant["client_metadata_url"]), "registered": "document"}
    elif client is None:
        client = await _register(ctx, server, redirect, scope)
    creds = credentials(client, grant, ctx.environ)
    state = base64.urlsafe_b64encode(ctx.entropy(24)).decode("ascii").rstrip("=")
    pkce = grants.Pkce.from_entropy(ctx.entropy(48))
    url = grants.authorization_url(
        server, client_id=creds.client_id, redirect_uri=redirect, scope=scope, state=state, pkce=pkce, resource=resource
    )
    callback.expect(state)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(callback.serve)
        opened = False
        if not ctx.no_browser:
            from assay.auth.browser import open_url

            opened = await open_url(url, ctx.environ, ctx.platform)
        if opened:
            ctx.say(f"waiting for the browser (up to {ctx.timeout:g} s)")
        else:
            ctx.say(f"open this URL in a browser to authorize (waiting up to {ctx.timeout:g} s):\n{url}")
        with trio.move_on_after(ctx.timeout):
            await callback.done.wait()
        nursery.cancel_scope.cancel()
    if callback.query is None:
        raise FlowError(f"no answer from the browser within {ctx.timeout:g} s")
    code = grants.check_callback(callback.query, server)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect,
        "code_verifier": pkce.verifier,
        "resource": resource,
    }
    tokens = await token(ctx, server, creds, form, what="the authorization code", asked_scope=scope)
    return tokens, client
