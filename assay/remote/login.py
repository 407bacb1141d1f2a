"""`assay mcp auth login` (docs/auth.md, "Logging in").

The login finds out what the server needs the way a client would: it connects with the MCP
SDK's streamable HTTP client, with the SDK's OAuth provider as the httpx2 auth, initializes and
lists the tools. The provider's flow starts at the first 401; the browser step is a loopback
redirect server (:class:`Callback`: 127.0.0.1, a random port, ``/callback``, the ``state``
checked, one answer and it closes) and ``webbrowser.open``. Nothing is written until the tools
were listed with the new token, so a failed login leaves the previous one in place.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import trio

from assay.remote.tokens import FileTokenStorage, TokenFileError, normalize_url

__all__ = ["Callback", "LoginError", "LoginOptions", "login", "read_secret"]

SECRET_CAP = 64 * 1024
_PAGE = ("<!doctype html><meta charset=utf-8><title>assay</title>"
         "<p>{text}</p><p>You can close this window.</p>")


class LoginError(Exception):
    """The login did not work; ``str()`` is one line (exit 2)."""


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
    no_browser: bool = False
    timeout: float = 300.0


def read_secret(grant: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The client secret or private key ``grant`` names (a file, or a variable), read now.
    Raises ValueError with one line; the value itself is never in a message."""
    if grant.get("secret_env"):
        name = str(grant["secret_env"])
        value = environ.get(name, "")
        if not value.strip():
            raise ValueError(f"the variable {name} (the client secret) is not set")
        return value.strip()
    path = grant.get("private_key") or grant.get("secret_file")
    if not path:
        raise ValueError("no client secret given (--client-secret-file, --client-secret-env or --private-key)")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(str(path), flags)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = os.read(fd, SECRET_CAP + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > SECRET_CAP:
        raise ValueError(f"{path} is larger than {SECRET_CAP} bytes")
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    if not text:
        raise ValueError(f"{path} is empty")
    return text


class Callback:
    """The loopback redirect server: answers ``GET /callback`` whose ``state`` is the one the
    authorization URL carried, with a small page, once. Anything else gets a 404 (or a 400 for
    a wrong or replayed ``state``) and the wait goes on. It listens until the login ends."""

    def __init__(self) -> None:
        self.port = 0
        self.expected_state: str | None = None
        self.query: dict[str, str] | None = None
        self.done = trio.Event()
        self._listener: trio.SocketListener | None = None

    async def open(self) -> str:
        sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
        await sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        self.port = sock.getsockname()[1]
        self._listener = trio.SocketListener(sock)
        return f"http://127.0.0.1:{self.port}/callback"

    def expect(self, state: str) -> None:
        """A new authorization round (a login can have two: a step-up): wait for ``state``."""
        self.expected_state = state
        self.query = None
        self.done = trio.Event()

    async def serve(self) -> None:
        """Answer requests until cancelled (the login ends)."""
        assert self._listener is not None
        try:
            while True:
                stream = await self._listener.accept()
                with trio.move_on_after(10):
                    await self._answer(stream)
                await stream.aclose()
        finally:
            await self._listener.aclose()

    async def _answer(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 16384:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        target = urlsplit(parts[1]) if len(parts) == 3 else None
        if target is None or parts[0] != "GET" or target.path != "/callback":
            await self._reply(stream, 404, "Not found.")
            return
        query = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items()}
        if self.expected_state is None or query.get("state") != self.expected_state:
            await self._reply(stream, 400, "This answer does not belong to the login in progress.")
            return
        ok = "code" in query and "error" not in query
        await self._reply(stream, 200, "assay is logged in." if ok else "The authorization was refused.")
        self.query = query
        self.expected_state = None  # each round's answer is taken once
        self.done.set()

    @staticmethod
    async def _reply(stream: trio.SocketStream, status: int, text: str) -> None:
        body = _PAGE.format(text=text).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n")
        try:
            await stream.send_all(head.encode() + body)
        except trio.BrokenResourceError:
            pass


class _Browser:
    """The provider's redirect and callback handlers over a :class:`Callback`."""

    def __init__(self, callback: Callback, opts: LoginOptions, err: TextIO) -> None:
        self.callback = callback
        self.opts = opts
        self.err = err
        self.failure: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        self.callback.expect(state)
        opened = False
        if not self.opts.no_browser:
            opened = await trio.to_thread.run_sync(_open_browser, authorization_url, abandon_on_cancel=True)
        if not opened:
            self.err.write(f"assay: open this URL in a browser to authorize (waiting up to {self.opts.timeout:g} s):\n"
                           f"{authorization_url}\n")
        else:
            self.err.write(f"assay: waiting for the browser (up to {self.opts.timeout:g} s)\n")
        self.err.flush()

    async def answer(self) -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        with trio.move_on_after(self.opts.timeout):
            await self.callback.done.wait()
        query = self.callback.query
        if query is None:
            self.failure = f"no answer from the browser within {self.opts.timeout:g} s"
            raise LoginError(self.failure)
        if "error" in query or not query.get("code"):
            why = " ".join(query.get("error", "no code").split())[:100]
            self.failure = f"the authorization server refused the login ({why})"
            raise LoginError(self.failure)
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def _open_browser(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except Exception:
        return False


def _grant(opts: LoginOptions) -> dict[str, Any]:
    if opts.grant == "client-credentials":
        if not opts.client_id:
            raise LoginError("--grant client-credentials needs --client-id")
        grant: dict[str, Any] = {"kind": "client_credentials", "client_id": opts.client_id}
        given = [k for k in ("client_secret_file", "client_secret_env", "private_key") if getattr(opts, k)]
        if len(given) != 1:
            raise LoginError("--grant client-credentials needs exactly one of --client-secret-file, "
                             "--client-secret-env, --private-key")
        if opts.client_secret_file:
            grant["secret_file"] = os.path.abspath(opts.client_secret_file)
        if opts.client_secret_env:
            grant["secret_env"] = opts.client_secret_env
        if opts.private_key:
            grant["private_key"] = os.path.abspath(opts.private_key)
        for key in ("scope", "issuer"):
            if getattr(opts, key):
                grant[key] = getattr(opts, key)
        return grant
    if opts.private_key:
        raise LoginError("--private-key goes with --grant client-credentials")
    if opts.client_secret_file and opts.client_secret_env:
        raise LoginError("give one of --client-secret-file and --client-secret-env")
    if (opts.client_secret_file or opts.client_secret_env) and not opts.client_id:
        raise LoginError("a client secret needs --client-id")
    grant = {"kind": "authorization_code"}
    if opts.client_metadata_url:
        grant["client_metadata_url"] = opts.client_metadata_url
    return grant


def _guard(provider: Any) -> list[BaseException]:
    """Record the exceptions the provider's flow raises (the transport turns them into a
    generic failure; the login reports the cause)."""
    seen: list[BaseException] = []
    flow = provider._auth_flow

    async def guarded(request: Any) -> AsyncGenerator[Any, Any]:
        inner = flow(request)
        try:
            outgoing = await inner.__anext__()
            while True:
                response = yield outgoing
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        except Exception as exc:
            seen.append(exc)
            raise
        finally:
            await inner.aclose()

    provider._auth_flow = guarded
    return seen


def _provider(opts: LoginOptions, grant: dict[str, Any], storage: FileTokenStorage, redirect: str,
              browser: _Browser, environ: Mapping[str, str]) -> Any:
    from mcp.shared.auth import OAuthClientMetadata

    from assay.remote.oauth import CLIENT_NAME, build_client_credentials, scoped_provider_class

    _ScopedProvider = scoped_provider_class()

    secret: str | None = None
    if grant["kind"] == "client_credentials" or opts.client_secret_file or opts.client_secret_env:
        source = grant if grant["kind"] == "client_credentials" else {
            "secret_file": opts.client_secret_file, "secret_env": opts.client_secret_env}
        try:
            secret = read_secret(source, environ)
        except ValueError as exc:
            raise LoginError(str(exc)) from None
    if grant["kind"] == "client_credentials":
        assert secret is not None
        return build_client_credentials(opts.url, storage, grant, secret, wrap=False)
    method = "client_secret_post" if secret else "none"
    if opts.client_id:
        info = {"client_id": opts.client_id, "redirect_uris": [redirect], "token_endpoint_auth_method": method,
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}
        if secret:
            info["client_secret"] = secret
        storage.record["client_info"] = info
    metadata = OAuthClientMetadata.model_validate({
        "client_name": CLIENT_NAME, "redirect_uris": [redirect], "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"], "token_endpoint_auth_method": method, "scope": opts.scope,
    })
    try:
        provider = _ScopedProvider(opts.url, metadata, storage, browser.redirect, browser.answer,
                                   client_metadata_url=opts.client_metadata_url)
        provider.asked = opts.scope
    except ValueError as exc:
        raise LoginError(" ".join(str(exc).split())[:200]) from None
    storage.bind(provider.context)
    return provider


async def login(opts: LoginOptions, *, state: str, environ: Mapping[str, str], err: TextIO = sys.stderr) -> str:
    """Log in to ``opts.url``; returns the line to print. Raises LoginError (one line)."""
    import httpx2

    from assay.remote.oauth import quiet_sdk_logs

    quiet_sdk_logs()
    try:
        key = normalize_url(opts.url)
    except ValueError as exc:
        raise LoginError(str(exc)) from None
    grant = _grant(opts)
    storage = FileTokenStorage(state, key, None, commit=False)
    storage.record["grant"] = grant
    callback = Callback()
    redirect = await callback.open()
    browser = _Browser(callback, opts, err)
    provider = _provider(opts, grant, storage, redirect, browser, environ)
    seen = _guard(provider)
    tools = -1
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(callback.serve)
        try:
            with trio.fail_after(opts.timeout + 120):
                tools = await _list_tools(opts.url, httpx2.AsyncClient(auth=provider, timeout=30.0))
        except Exception as exc:
            failure = exc
        except BaseExceptionGroup as group:
            failure = group
        nursery.cancel_scope.cancel()
    if browser.failure:
        raise LoginError(browser.failure)
    if seen:
        raise LoginError(f"the authorization did not work: {_describe(seen[0])}")
    if failure is not None:
        raise LoginError(f"cannot use {opts.url}: {_describe(failure)}")
    if storage.tokens_set == 0:
        return f"{opts.url} answered without authorization ({tools} tools listed); nothing stored"
    try:
        path = storage.save()
    except TokenFileError as exc:
        raise LoginError(str(exc)) from None
    scope = (storage.record.get("tokens") or {}).get("scope") or "-"
    return f"logged in to {opts.url} (scope: {scope}; {tools} tools listed); stored in {path}"


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, trio.TooSlowError):
        return "no answer in time"
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _list_tools(url: str, client: Any) -> int:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                return len(listed.tools)
