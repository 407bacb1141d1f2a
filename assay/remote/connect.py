"""Open a remote server for wrap: the HTTP client, the start probe, the nursery of its tasks
(docs/remote.md, "Start", "TLS").

:func:`run_remote` builds the ``httpx2`` client (TLS verified
with the system's store or ``--ca-file``; no redirects followed; a connect timeout, no read
timeout: a tool may take its time), checks that the server answers before wrap reads anything
from the client, and runs the relay with the :class:`~assay.remote.http.HttpServer` as its
child. A server that cannot be reached, a TLS failure, a 401 with no login, or a legacy
stream that names no endpoint is a :class:`RemoteStartError`: one line, exit 2.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2
import trio

from assay.remote.http import HttpServer
from assay.remote.target import Target, shown_url

__all__ = ["CONNECT_TIMEOUT", "RemoteStartError", "run_remote"]

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0
WRITE_TIMEOUT = 30.0


class RemoteStartError(Exception):
    """The remote server cannot be used: one line, exit 2."""


def _verify(target: Target) -> ssl.SSLContext | bool:
    """What TLS is verified against. A plain http:// target never uses TLS (redirects are not
    followed), so it builds no context (that costs tens of milliseconds of every start)."""
    if not target.url.lower().startswith("https:"):
        return False
    if target.ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=target.ca_file)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise RemoteStartError(f"--ca-file {target.ca_file}: cannot read certificates ({exc.__class__.__name__})") from None


def _reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words, without anything the server sent."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate not trusted ({cause.verify_message})"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed ({cause.reason or type(cause).__name__})"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, httpx2.ConnectError):
        text = str(exc).splitlines()[0] if str(exc) else ""
        return f"cannot connect ({text[:160]})" if text else "cannot connect"
    return type(exc).__name__


async def run_remote(
    target: Target,
    body: Callable[[HttpServer], Awaitable[T]],
    *,
    cap: int,
    warn: Callable[[str], None],
    auth: Any = None,
    needs_login: tuple[type[BaseException], ...] = (),
) -> T:
    """Probe the server, then ``await body(server)`` with the server's tasks running; the
    tasks end with it. An exception of the probe or the body comes out as itself."""
    client = httpx2.AsyncClient(
        auth=auth,
        verify=_verify(target),
        headers=list(target.headers),
        timeout=httpx2.Timeout(connect=CONNECT_TIMEOUT, read=None, write=WRITE_TIMEOUT, pool=None),
        limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
        follow_redirects=False,
    )
    server = HttpServer(target, client, cap=cap, warn=warn, needs_login=needs_login)
    error: Exception | None = None
    result: T | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(server.host)
        try:
            try:
                await _probe(server, needs_login)
            except Exception:
                server.goodbye = False
                raise
            result = await body(server)
        except Exception as exc:  # raised again below, not inside the nursery's group
            error = exc
        finally:
            with trio.CancelScope(shield=True):
                await server.stop(term_grace=0)
            nursery.cancel_scope.cancel()
    if error is not None:
        raise error
    return result  # type: ignore[return-value]


async def _probe(server: HttpServer, needs_login: tuple[type[BaseException], ...]) -> None:
    """The server answers (any HTTP status but a 401 wrap has no login for), before the client
    is read; with ``--transport sse`` the event stream is opened and names its endpoint."""
    target = server.target
    where = shown_url(target.url)
    if target.transport == "sse":
        if not await server.open_legacy():
            raise RemoteStartError(f"cannot use {where}: {server.failure or 'its event stream named no endpoint'}")
        return
    try:
        async with server.client.stream("GET", target.url, headers={"Accept": "text/event-stream"}) as resp:
            status = resp.status_code
    except needs_login as exc:
        raise RemoteStartError(str(exc)) from None
    except httpx2.TransportError as exc:
        raise RemoteStartError(f"cannot reach {where}: {_reason(exc)}") from None
    if status == 401:
        raise RemoteStartError(
            f"{where} needs authorization (HTTP 401): run `assay mcp auth login {target.url}` first"
        )

