"""A server's stored login as wrap uses it (the shell; docs/auth.md, "What wrap does with a
login", "Logging in from wrap", "The authorization server a login belongs to").

:class:`Authorizer` holds the record of one server URL. It gives the access token of each
request, renews one that expires (refresh, or the grant that needs no person), and answers a
refusal (a 401, or a 403 ``insufficient_scope``): never with a credential for another server
(the resource's metadata must still name the issuer the login belongs to, checked before
anything is sent), by a login through the browser when one may be opened (``--login auto``),
else with :class:`~assay.auth.lines.NeedsLogin`. One renewal or login at a time: a trio lock in
the process, a lock file per URL across processes (the other wraps of the server then take
what the first stored), and a lock file for the browser (one login window at a time).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import trio

from assay.auth import flows, locks
from assay.auth.challenge import Refusal
from assay.auth.discovery import DiscoveryError, Resource, canonical_resource, select_scope, union_scopes
from assay.auth.grants import GrantError, Tokens
from assay.auth.lines import NeedsLogin, login_command, static_refused, unadvertised
from assay.auth.record import AUTHORIZATION_CODE, ID_JAG_GRANT, IssuerChanged, RecordError, Stored, check_binding, read
from assay.auth.sources import read_source
from assay.auth.web import Web, WebError
from assay.shells.upstream_http import tokens as store

__all__ = ["Authorizer"]

LOCK_WAIT = flows.LOGIN_TIMEOUT + 30.0
_FAILURES = (flows.FlowError, GrantError, WebError, DiscoveryError)


class Authorizer:
    def __init__(
        self,
        url: str,
        state: str,
        environ: Mapping[str, str],
        *,
        interactive: bool = False,
        static: Sequence[tuple[str, str | None]] = (),
        ca_file: str | None = None,
        say: Callable[[str], None] = lambda _line: None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.shown = url
        self.url = store.normalize_url(url)
        self.state = state
        self.environ = environ
        self.interactive = interactive
        self.static = tuple(static)
        self.static_authorization = any(name.lower() == "authorization" for name, _ in self.static)
        self.ca_file = ca_file
        self.say = say
        self.now = now
        self.lock = trio.Lock()
        self.changed: tuple[str, str] | None = None  # (the issuer left behind, the line)
        self.stored = self._load()
        if self.stored is not None and self.stored.kind != AUTHORIZATION_CODE:
            self._check_sources(self.stored)

    def _check_sources(self, stored: Stored) -> None:
        """A login without a person needs its secret, key or ID token whenever it renews: one
        that cannot be read now is said at once (docs/auth.md, "Machine to machine")."""
        try:
            flows.credentials(stored.client, stored.grant, self.environ)
            if stored.kind == ID_JAG_GRANT:
                read_source(stored.grant, "id_token", self.environ, "the ID token")
        except (flows.FlowError, ValueError) as exc:
            raise NeedsLogin(f"{exc}; run: {self._command()}") from None

    # -- the record -------------------------------------------------------------------------

    def _load(self) -> Stored | None:
        try:
            record = store.load(self.state, self.url)
        except store.TokenFileError as exc:
            raise NeedsLogin(f"{exc}; then run: {login_command(self.shown)}") from None
        if record is None or record.get("tokens") is None:
            return None
        try:
            return read(record, self.url)
        except RecordError as exc:
            path = store.record_path(self.state, self.url)
            raise NeedsLogin(
                f"the token file {path} cannot be used: {exc}; remove it and run: {login_command(self.shown)}"
            ) from None

    def _save(self, stored: Stored) -> None:
        try:
            store.save(self.state, stored.as_record(), now=self.now)
        except store.TokenFileError as exc:
            self.say(f"[assay] {self.shown}: the new token is kept for this run only: {exc}")
        self.stored = stored

    def _take(self, tokens: Tokens, stored: Stored) -> None:
        stored.tokens = tokens.as_record()
        stored.expires_at = None if tokens.expires_in is None else self.now() + tokens.expires_in
        self._save(stored)

    def _command(self, scope: str | None = None) -> str:
        stored = self.stored
        return login_command(self.shown, scope=scope, grant=stored.grant if stored else None)

    def _context(self, web: Web) -> flows.Context:
        return flows.Context(web, self.environ, say=lambda line: self.say(f"[assay] {self.shown}: {line}"))

    # -- what each request gets ---------------------------------------------------------------

    async def token(self) -> str | None:
        """The access token to send, renewed first when it expires; None without a login (and
        once the server's authorization server changed: its tokens are no longer sent)."""
        if self.static_authorization or self.stored is None or self.changed is not None:
            return None
        found = self.stored.token(self.now())
        if found is not None:
            return found
        async with self.lock:
            if self.stored is not None and self.stored.token(self.now()) is None:
                await self._renew(expired=True)
            return None if self.stored is None else self.stored.access_token

    async def answer(self, refusal: Refusal, used: str | None) -> str:
        """The token to send again after ``refusal`` of a request that carried ``used``; raises
        :class:`NeedsLogin` when only a person can go on (and may not be asked here)."""
        async with self.lock:
            if self.changed is not None:
                self._after_change()
            stored = self.stored
            if (
                stored is not None
                and not refusal.step_up
                and stored.access_token != used
                and stored.token(self.now()) is not None
            ):
                return str(stored.access_token)  # renewed meanwhile by another request
            if self.static_authorization or stored is None:
                resource = await self._resource(refusal)
                await self._unlogged(refusal, resource)
            elif refusal.step_up:
                await self._step_up(refusal)
            else:
                await self._check_issuer(refusal)
                await self._renew(expired=False)
            assert self.stored is not None and self.stored.access_token is not None
            return self.stored.access_token

    # -- the cases ------------------------------------------------------------------------------

    async def _resource(self, refusal: Refusal) -> Resource | None:
        async with Web(ca_file=self.ca_file) as web:
            try:
                return await flows.find_resource(self._context(web), self.url, refusal.resource_metadata)
            except _FAILURES as exc:
                raise NeedsLogin(f"authorization for {self.shown} cannot be worked out: {exc}") from None

    async def _unlogged(self, refusal: Refusal, resource: Resource | None) -> None:
        """A refusal with no stored login, or of a request with static credentials."""
        if self.static:
            raise NeedsLogin(static_refused(self.shown, self.static, oauth=resource is not None))
        if resource is None:
            raise NeedsLogin(unadvertised(self.shown))
        if not self.interactive:
            raise NeedsLogin(f"{self.shown} needs authorization and no login is stored; run: {self._command()}")
        await self._locked(lambda: self._login(refusal, resource))

    async def _check_issuer(self, refusal: Refusal) -> None:
        """The server's metadata must still name the issuer of the stored login: an issuer
        change is refused before anything is sent to any authorization server. Metadata that
        cannot be had (none, a server error, a document for another resource) changes nothing:
        the login is renewed at its own issuer, the one place its credentials may go."""
        assert self.stored is not None
        async with Web(ca_file=self.ca_file) as web:
            try:
                resource = await flows.find_resource(self._context(web), self.url, refusal.resource_metadata)
            except _FAILURES:
                resource = None
        if resource is None:
            return
        try:
            check_binding(self.stored, resource)
        except IssuerChanged as exc:
            self.changed = (
                self.stored.issuer,
                f"the authorization server of {self.shown} has changed ({exc}); "
                f"the stored login was not used; run: {self._command()}",
            )
            raise NeedsLogin(self.changed[1]) from None

    def _after_change(self) -> None:
        """After an issuer change only a new login (``auth login``, stored for another issuer)
        goes on; until then every refusal gets the change's line, and nothing is sent."""
        assert self.changed is not None
        fresh = self._load()
        if fresh is None or fresh.issuer == self.changed[0]:
            raise NeedsLogin(self.changed[1])
        self.stored, self.changed = fresh, None

    async def _step_up(self, refusal: Refusal) -> None:
        assert self.stored is not None
        scope = union_scopes(union_scopes(self.stored.grant.get("scope"), self.stored.scope), refusal.scope)
        if self.stored.kind != AUTHORIZATION_CODE:
            await self._locked(lambda: self._machine(scope), wanted=scope)
        elif self.interactive:
            await self._locked(lambda: self._login(refusal, None, scope=scope), wanted=scope)
        else:
            raise NeedsLogin(
                f"{self.shown} asks for more scope than the stored login holds; run: {self._command(scope)}"
            )

    async def _renew(self, *, expired: bool) -> None:
        assert self.stored is not None
        if self.stored.kind != AUTHORIZATION_CODE:
            await self._locked(lambda: self._machine(None))
        else:
            await self._locked(lambda: self._refresh(expired))

    # -- under the server's lock file -----------------------------------------------------------

    def _directory(self) -> str:
        try:
            return store.ensure_dir(self.state)
        except store.TokenFileError as exc:
            raise NeedsLogin(str(exc)) from None

    async def _locked(self, work: Callable[[], Awaitable[None]], *, wanted: str | None = None) -> None:
        """``work()`` under the server's lock file, unless another wrap of the server stored a
        usable token (with the scope ``wanted``) meanwhile: that one is taken instead."""
        before = None if self.stored is None else self.stored.access_token
        self._directory()
        path = store.record_path(self.state, self.url)[: -len(".json")] + ".lock"
        try:
            async with locks.held(path, wait=LOCK_WAIT, what=f"renewing the login for {self.url}"):
                fresh = self._load()
                if fresh is None and before is not None:  # logged out meanwhile (auth logout): not undone
                    self.stored = None
                    raise NeedsLogin(f"the stored login for {self.shown} was removed; run: {login_command(self.shown)}")
                if fresh is not None:
                    self.stored = fresh
                    held = set((fresh.scope or "").split())
                    if (
                        fresh.access_token != before
                        and fresh.token(self.now()) is not None
                        and set((wanted or "").split()) <= held
                    ):
                        return
                await work()
        except locks.LockTimeout as exc:
            raise NeedsLogin(f"{exc}; try again, or run: {self._command()}") from None

    async def _machine(self, scope: str | None) -> None:
        stored = self.stored
        assert stored is not None
        scope = scope or stored.grant.get("scope") or stored.scope
        async with Web(ca_file=self.ca_file) as web:
            try:
                creds = flows.credentials(stored.client, stored.grant, self.environ)
                tokens = await flows.machine_tokens(
                    self._context(web), stored.server, creds, stored.grant, stored.resource, scope
                )
            except _FAILURES as exc:
                raise NeedsLogin(
                    f"a new token for {self.shown} could not be had ({exc}); run: {self._command(scope)}"
                ) from None
        self._take(tokens, stored)

    async def _refresh(self, expired: bool) -> None:
        stored = self.stored
        assert stored is not None
        why = "has expired" if expired else "is no longer accepted"
        tokens: Tokens | None = None
        if stored.refresh_token is not None:
            async with Web(ca_file=self.ca_file) as web:
                try:
                    creds = flows.credentials(stored.client, stored.grant, self.environ)
                    tokens = await flows.refresh(
                        self._context(web), stored.server, creds, stored.refresh_token, stored.resource, stored.scope
                    )
                except GrantError as exc:
                    if not self.interactive:
                        raise NeedsLogin(
                            f"the stored login for {self.shown} {why} and its refresh was refused "
                            f"({exc.reason}); run: {self._command()}"
                        ) from None
                except _FAILURES as exc:
                    raise NeedsLogin(
                        f"the stored login for {self.shown} {why} and its refresh did not work "
                        f"({exc}); run: {self._command()}"
                    ) from None
        if tokens is not None:
            self._take(tokens, stored)
        elif self.interactive:
            await self._login(None, None, scope=stored.scope)
        else:
            raise NeedsLogin(f"the stored login for {self.shown} {why}; run: {self._command()}")

    # -- a login through the browser ----------------------------------------------------------

    async def _login(self, refusal: Refusal | None, resource: Resource | None, *, scope: str | None = None) -> None:
        """Log in through the browser (wrap's ``--login auto``; the server's lock file held): to
        the stored login's issuer with its client, or (no login) to the server the resource
        names. One browser login at a time across the wraps of the state directory."""
        try:
            async with locks.held(
                f"{self._directory()}/browser.lock", wait=LOCK_WAIT, what=f"logging in to {self.url}"
            ):
                self.say(f"[assay] logging in to {self.shown}: a person is needed in the browser")
                async with Web(ca_file=self.ca_file) as web:
                    await self._browser(self._context(web), refusal, resource, scope)
        except locks.LockTimeout as exc:
            raise NeedsLogin(f"{exc}; try again, or run: {self._command()}") from None
        except _FAILURES as exc:
            raise NeedsLogin(f"the login to {self.shown} did not work ({exc}); run: {self._command(scope)}") from None

    async def _browser(
        self, ctx: flows.Context, refusal: Refusal | None, resource: Resource | None, scope: str | None
    ) -> None:
        stored = self.stored
        if stored is not None:  # a new login of the stored one: its issuer, its client
            server, target, client, grant = stored.server, stored.resource, dict(stored.client) or None, stored.grant
            doc = stored.resource_doc
            scope = select_scope(scope, None, server)  # offline_access as the server lists it
        else:
            if resource is None:
                resource, server = await flows.locate(
                    ctx, self.url, refusal.resource_metadata if refusal else None, None
                )
            else:
                server = await flows.find_server(ctx, resource.authorization_servers[0])
            target = resource.resource if resource is not None else canonical_resource(self.url)
            client, grant, doc = None, {"kind": AUTHORIZATION_CODE}, resource.doc if resource is not None else None
            scope = select_scope(refusal.scope if refusal else None, resource, server)
        tokens, client = await flows.browser_login(ctx, server, target, scope, client, grant)
        fresh = Stored(
            url=self.url,
            issuer=server.issuer,
            server=server,
            resource=target,
            grant=dict(grant),
            client=client,
            resource_doc=doc,
        )
        self._take(tokens, fresh)
