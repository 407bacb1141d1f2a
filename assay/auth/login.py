"""`assay mcp auth login` (docs/auth.md, "Logging in", "Machine to machine", "Enterprise-managed
authorization").

The login finds out what the server needs the way a client would: it lists the server's tools
(:mod:`assay.auth.listing`) with an auth whose first refusal starts the flow the options ask
for: the browser (authorization code with PKCE: a client registered beforehand, a client
metadata document, or dynamic registration, reusing the registration a login of the same
authorization server stored), client credentials, or the enterprise grant. Nothing is written
until the tools were listed with the new token, so a failed login leaves the previous one in
place.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx2
import trio

from assay.auth import flows
from assay.auth.challenge import Refusal, refusal
from assay.auth.discovery import DiscoveryError, canonical_resource, endpoint_ok, select_scope, union_scopes
from assay.auth.grants import GrantError, Tokens
from assay.auth.lines import NeedsLogin
from assay.auth.listing import ListingError, list_tools
from assay.auth.record import AUTHORIZATION_CODE, CLIENT_CREDENTIALS, ID_JAG_GRANT, RecordError, Stored, read
from assay.auth.sources import read_key, read_value
from assay.auth.web import Web, WebError
from assay.shells.upstream_http import tokens as store
from assay.shells.upstream_http.client import http_client
from assay.terminal import printable

__all__ = ["LoginError", "LoginOptions", "login"]

_KINDS = {"authorization-code": AUTHORIZATION_CODE, "client-credentials": CLIENT_CREDENTIALS, "id-jag": ID_JAG_GRANT}
_FAILURES = (flows.FlowError, GrantError, WebError, DiscoveryError, ListingError, NeedsLogin)


class LoginError(Exception):
    """The login did not work; ``str()`` is one line (exit 2), printable whatever a server sent.
    ``usage``: the command line was at fault (a bad URL or option, a secret it names that cannot
    be read), nothing was sent; else the work failed (docs/auth.md, "Exit codes")."""

    def __init__(self, text: str, *, usage: bool = False) -> None:
        super().__init__(printable(text))
        self.usage = usage


@dataclass
class LoginOptions:
    url: str
    scope: str | None = None
    client_id: str | None = None
    client_secret_file: str | None = None
    client_secret_env: str | None = None
    client_metadata_url: str | None = None
    grant: str = "authorization-code"
    private_key: str | None = None
    issuer: str | None = None
    id_token_file: str | None = None
    id_token_env: str | None = None
    idp_issuer: str | None = None
    idp_client_id: str | None = None
    idp_client_secret_file: str | None = None
    idp_client_secret_env: str | None = None
    no_browser: bool = False
    timeout: float = flows.LOGIN_TIMEOUT


def _abs(path: str | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def grant_of(opts: LoginOptions) -> dict[str, Any]:
    """The grant the options ask for, as a record keeps it (sources, never values); a usage
    error is a LoginError."""
    kind = _KINDS.get(opts.grant)
    if kind is None:
        raise LoginError(f"--grant must be one of {', '.join(_KINDS)}", usage=True)
    secrets_given = [f for f in ("client_secret_file", "client_secret_env", "private_key") if getattr(opts, f)]
    if len(secrets_given) > 1:
        raise LoginError("give one of --client-secret-file, --client-secret-env and --private-key", usage=True)
    if secrets_given and not opts.client_id:
        raise LoginError("a client secret or key needs --client-id", usage=True)
    if kind == CLIENT_CREDENTIALS and not (opts.client_id and secrets_given):
        raise LoginError(
            "--grant client-credentials needs --client-id and one of --client-secret-file, "
            "--client-secret-env, --private-key",
            usage=True,
        )
    enterprise = (
        "id_token_file",
        "id_token_env",
        "idp_issuer",
        "idp_client_id",
        "idp_client_secret_file",
        "idp_client_secret_env",
    )
    if kind != ID_JAG_GRANT and any(getattr(opts, f) for f in enterprise):
        raise LoginError("--id-token-*, --idp-* go with --grant id-jag", usage=True)
    if kind == ID_JAG_GRANT:
        if bool(opts.id_token_file) == bool(opts.id_token_env):
            raise LoginError("--grant id-jag needs one of --id-token-file and --id-token-env", usage=True)
        if not (opts.idp_issuer and opts.idp_client_id and opts.client_id):
            raise LoginError("--grant id-jag needs --idp-issuer, --idp-client-id and --client-id", usage=True)
        if opts.idp_client_secret_file and opts.idp_client_secret_env:
            raise LoginError("give one of --idp-client-secret-file and --idp-client-secret-env", usage=True)
    for flag, value in (("--issuer", opts.issuer), ("--idp-issuer", opts.idp_issuer)):
        if value is not None and not endpoint_ok(value):
            raise LoginError(f"{flag} must be an https URL (http only to this machine)", usage=True)
    if opts.client_metadata_url:
        parts = urlsplit(opts.client_metadata_url)
        if parts.scheme != "https" or parts.path in ("", "/") or kind != AUTHORIZATION_CODE:
            raise LoginError(
                "--client-metadata-url must be an https URL with a path (authorization-code only)", usage=True
            )
    values = {
        "kind": kind,
        "client_id": opts.client_id,
        "secret_file": _abs(opts.client_secret_file),
        "secret_env": opts.client_secret_env,
        "private_key": _abs(opts.private_key),
        "scope": opts.scope,
        "issuer": opts.issuer,
        "client_metadata_url": opts.client_metadata_url,
        "id_token_file": _abs(opts.id_token_file),
        "id_token_env": opts.id_token_env,
        "idp_issuer": opts.idp_issuer,
        "idp_client_id": opts.idp_client_id,
        "idp_secret_file": _abs(opts.idp_client_secret_file),
        "idp_secret_env": opts.idp_client_secret_env,
    }
    return {k: v for k, v in values.items() if v}


def _preflight(grant: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """Read what the grant names now (a usage error before anything is sent); the secret of a
    pre-registered authorization-code client, which its record keeps for refreshes."""
    try:
        if grant.get("private_key"):
            read_key(str(grant["private_key"]))
        secret = None
        if grant.get("secret_file") or grant.get("secret_env"):
            secret = read_value(
                path=grant.get("secret_file"),
                variable=grant.get("secret_env"),
                environ=environ,
                what="the client secret",
            )
        if grant.get("kind") == ID_JAG_GRANT:
            read_value(
                path=grant.get("id_token_file"),
                variable=grant.get("id_token_env"),
                environ=environ,
                what="the ID token",
            )
    except ValueError as exc:
        raise LoginError(str(exc), usage=True) from None
    return secret if grant.get("kind") == AUTHORIZATION_CODE else None


class _Login(httpx2.Auth):
    """The listing's auth: the first refusal runs the login; a refusal after it is a failure."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.token: str | None = None

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.token is not None:
            request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        first = refusal(response.status_code, response.headers.get_list("www-authenticate"))
        if first is None:
            return
        if self.token is not None and not first.step_up:
            raise LoginError(f"the server refused the new token (HTTP {response.status_code})")
        self.token = await self.run(first)
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if refusal(response.status_code, response.headers.get_list("www-authenticate")) is not None:
            raise LoginError(f"the server refused the new token (HTTP {response.status_code})")


async def login(opts: LoginOptions, *, state: str, environ: Mapping[str, str], err: TextIO = sys.stderr) -> str:
    """Log in to ``opts.url``; returns the line to print. Raises LoginError (one line)."""
    try:
        key = store.normalize_url(opts.url)
    except ValueError as exc:
        raise LoginError(str(exc), usage=True) from None
    grant = grant_of(opts)
    secret = _preflight(grant, environ)
    try:
        previous = store.load(state, key)
        earlier = read(previous, key) if previous is not None else None
    except (store.TokenFileError, RecordError):
        earlier = None  # replaced by this login
    done: list[Stored] = []

    def say(line: str) -> None:
        err.write(f"assay: {line}\n")
        err.flush()

    async def run(first: Refusal) -> str:
        async with Web(environ=environ) as web:
            ctx = flows.Context(web, environ, say=say, no_browser=opts.no_browser, timeout=opts.timeout)
            resource, server = await flows.locate(ctx, opts.url, first.resource_metadata, opts.issuer)
            target = resource.resource if resource is not None else canonical_resource(opts.url)
            scope = select_scope(
                first.scope, resource, server, asked=opts.scope, refresh=grant["kind"] == AUTHORIZATION_CODE
            )
            if done:  # a step-up in the same login: keep what was granted
                scope = union_scopes(done[-1].scope, scope)
            client: dict[str, Any] | None = None
            if opts.client_id:
                client = {"client_id": opts.client_id, "registered": "pre"}
                if secret is not None:
                    client["client_secret"] = secret
            elif (
                earlier is not None
                and earlier.issuer == server.issuer
                and earlier.client.get("registered") == "dynamic"
            ):
                client = dict(earlier.client)  # the registration stored for this server
            tokens: Tokens
            if grant["kind"] == AUTHORIZATION_CODE:
                tokens, client = await flows.browser_login(ctx, server, target, scope, client, grant)
            else:
                assert client is not None
                creds = flows.credentials(client, grant, environ)
                tokens = await flows.machine_tokens(ctx, server, creds, grant, target, scope)
            stored = Stored(
                url=key,
                issuer=server.issuer,
                server=server,
                resource=target,
                grant=grant,
                client=client,
                resource_doc=resource.doc if resource is not None else None,
            )
            stored.tokens = tokens.as_record()
            stored.expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
            done.append(stored)
            return tokens.access_token

    tools = -1
    try:
        with trio.fail_after(opts.timeout + 120):
            async with http_client(environ, auth=_Login(run), timeout=30.0) as client:
                tools = await list_tools(client, opts.url)
    except LoginError:
        raise
    except _FAILURES as exc:
        flow = done or isinstance(exc, (flows.FlowError, GrantError))
        raise LoginError(
            f"the authorization did not work: {exc}" if flow else f"cannot use {opts.url}: {exc}"
        ) from None
    except trio.TooSlowError:
        raise LoginError(f"cannot use {opts.url}: no answer in time") from None
    except httpx2.TransportError as exc:
        raise LoginError(f"cannot use {opts.url}: cannot connect ({type(exc).__name__})") from None
    if not done:
        return f"{opts.url} answered without authorization ({tools} tools listed); nothing stored"
    stored = done[-1]
    try:
        path = store.save(state, stored.as_record())
    except store.TokenFileError as exc:
        raise LoginError(str(exc)) from None
    return f"logged in to {opts.url} (scope: {stored.scope or '-'}; {tools} tools listed); stored in {path}"
