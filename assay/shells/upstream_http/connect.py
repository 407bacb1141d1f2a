"""Open a remote server for wrap: the HTTP client, the start probe, the nursery of its tasks
(docs/remote.md, "Start", "Proxies", "TLS").

:func:`run_remote` builds the HTTP client (:func:`assay.shells.upstream_http.client.http_client`: TLS
verified with the system's store or ``--ca-file``, proxies only for hosts that are not
loopback, no redirects followed, a connect timeout and no read timeout: a tool may take its
time), checks that the server answers before wrap reads anything from the client, and runs the
relay with the :class:`~assay.shells.upstream_http.http.HttpServer` as its child.

The probe has a deadline, ``--connect-timeout``: the connection and the head of the server's
first answer (with ``--transport sse``, its stream's ``endpoint`` event) must come within it. A
server that cannot be reached, does not answer in time, fails TLS, wants a login wrap does not
have, or a proxy variable wrap cannot use, is a :class:`RemoteStartError`: one line, exit 2.
When the client's input ends during the probe, the probe is dropped and the run goes on to its
end as for any client that closed its input.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx2
import trio

from assay.shells.upstream_http import legacy
from assay.shells.upstream_http.client import http_client
from assay.shells.upstream_http.http import HttpServer
from assay.shells.upstream_http.proxies import ProxyError, proxy_for
from assay.shells.upstream_http.target import Target, shown_url
from assay.wrap.options import DEFAULT_CONNECT_TIMEOUT

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "RemoteStartError", "run_remote"]

T = TypeVar("T")

WRITE_TIMEOUT = 30.0


class RemoteStartError(Exception):
    """The remote server cannot be used: one line, exit 2."""


def _verify(target: Target) -> ssl.SSLContext | None:
    """The TLS context an ``https://`` target is verified with (``--ca-file``'s, else the
    system's store); None for plain ``http://``, which builds none unless a request needs it."""
    if not target.url.lower().startswith("https:"):
        return None
    try:
        if target.ca_file is not None:
            return ssl.create_default_context(cafile=target.ca_file)
        return httpx2.create_ssl_context(verify=True, trust_env=True)
    except (OSError, ssl.SSLError, ValueError) as exc:
        what = f"--ca-file {target.ca_file}" if target.ca_file is not None else "the system's certificate store"
        raise RemoteStartError(f"{what}: cannot read certificates ({exc.__class__.__name__})") from None


def _reason(exc: BaseException, timeout: float) -> str:
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
        return f"no connection within {timeout:g} s"
    if isinstance(exc, httpx2.ProxyError):
        text = str(exc).splitlines()[0] if str(exc) else ""
        return f"proxy failed ({text[:160]})" if text else "proxy failed"
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
    environ: Mapping[str, str],
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    auth: Any = None,
    needs_login: tuple[type[BaseException], ...] = (),
    input_ended: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """Probe the server, then ``await body(server)`` with the server's tasks running; the
    tasks end with it. An exception of the probe or the body comes out as itself.
    ``input_ended`` returns when the client's input has ended (see the module docstring)."""
    try:
        proxy_for(target.url, environ)
    except ProxyError as exc:
        raise RemoteStartError(f"cannot reach {shown_url(target.url)}: {exc}") from None
    client = http_client(
        environ,
        verify=_verify(target),
        auth=auth,
        headers=list(target.headers),
        timeout=httpx2.Timeout(connect=connect_timeout, read=None, write=WRITE_TIMEOUT, pool=None),
        limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
    )
    server = HttpServer(target, client, cap=cap, warn=warn, needs_login=needs_login, connect_timeout=connect_timeout)
    error: Exception | None = None
    result: T | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(server.host)
        try:
            try:
                await _probe_unless_gone(server, needs_login, input_ended)
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


async def _probe_unless_gone(
    server: HttpServer, needs_login: tuple[type[BaseException], ...], input_ended: Callable[[], Awaitable[None]] | None
) -> None:
    """The probe, dropped when the client's input ends first."""
    if input_ended is None:
        await _probe(server, needs_login)
        return
    failed: RemoteStartError | None = None
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await input_ended()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            await _probe(server, needs_login)
        except RemoteStartError as exc:  # raised below, not inside the nursery's group
            failed = exc
        nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed


async def _probe(server: HttpServer, needs_login: tuple[type[BaseException], ...]) -> None:
    """The server answers (any HTTP status but a 401 wrap has no login for) within the
    deadline, before the client is read; with ``--transport sse`` the event stream is opened
    and names its endpoint."""
    target = server.target
    where = shown_url(target.url)
    timeout = server.connect_timeout
    if target.transport == "sse":
        if not await legacy.open_legacy(server):
            why = server.failure or f"its event stream named no endpoint within {timeout:g} s"
            raise RemoteStartError(f"cannot use {where}: {why}")
        return
    # The deadline is the request's own (connect, then the head of the answer), not a cancel
    # scope around it: a login the server asks for (--login auto) runs inside this request, and
    # the time a person takes in the browser is not the server's (docs/remote.md, "Start").
    deadline = httpx2.Timeout(connect=timeout, read=timeout, write=timeout, pool=timeout)
    try:
        async with server.client.stream(
            "GET", target.url, headers={"Accept": "text/event-stream"}, timeout=deadline
        ) as resp:
            status = resp.status_code
    except needs_login as exc:
        raise RemoteStartError(str(exc)) from None
    except (httpx2.ReadTimeout, httpx2.WriteTimeout, httpx2.PoolTimeout):
        raise RemoteStartError(f"cannot reach {where}: no answer within {timeout:g} s") from None
    except httpx2.TransportError as exc:
        raise RemoteStartError(f"cannot reach {where}: {_reason(exc, timeout)}") from None
    if status == 401:
        raise RemoteStartError(f"{where} needs authorization (HTTP 401): run `assay mcp auth login {target.url}` first")
